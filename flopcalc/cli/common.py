"""What the commands' parsers share: argument types, the MODEL argument, and the run settings declared once
(:data:`RUN_OPTIONS`) for every command that plans a generation, family options included.

Nothing here imports more than argparse until a parser is built: ``flopcalc estimate …`` builds the parser of
``estimate`` alone.
"""

from __future__ import annotations

import argparse
import math

#: The four forms of the MODEL argument, said in every command's help.
MODEL_HELP = ("a bundled card (`flopcalc list`), a local diffusers folder (with model_index.json), one "
              "component's config.json (or its folder), or a Hugging Face Hub repo id org/name (only its configs "
              "are downloaded)")
#: The run settings every command takes (``flopcalc.estimate`` keywords), declared once. Each entry:
#: ``(flags, keyword arguments of add_argument)``; ``help`` says what it does and which pipelines apply it.
RUN_OPTIONS: dict[str, tuple[tuple[str, ...], dict]] = {}


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _declare(name: str, *flags: str, **kwargs) -> None:
    RUN_OPTIONS[name] = (flags, kwargs)


_declare("height", "--height", type=positive_int, help="image or video height in pixels (every pipeline; default: "
                                                          "the pipeline's)")
_declare("width", "--width", type=positive_int, help="image or video width in pixels (every pipeline; default: the "
                                                        "pipeline's)")
_declare("steps", "--steps", "--num-inference-steps", dest="steps", type=positive_int,
         help="denoising steps (every pipeline; default: the pipeline's)")
_declare("guidance_scale", "--guidance-scale", type=float,
         help="classifier-free guidance scale (every pipeline): above 1 a CFG pipeline runs a second denoiser pass "
              "per step; a guidance-distilled model (FLUX.1-dev) embeds it instead")
_declare("true_cfg_scale", "--true-cfg-scale", type=float,
         help="true classifier-free guidance (FLUX.1, Qwen-Image and the pipelines that take true_cfg_scale): a "
              "separate negative-prompt pass per step; needs --negative-prompt to take effect")
_declare("negative_prompt", "--negative-prompt", action="store_true",
         help="a negative prompt is given (every pipeline): encoded where the pipeline encodes it")
_declare("batch_size", "--batch-size", type=positive_int, default=1, help="prompts in one call (every pipeline)")
_declare("num_images_per_prompt", "--num-images-per-prompt", type=positive_int, default=1,
         help="images (videos) generated per prompt (every pipeline)")
_declare("max_sequence_length", "--max-sequence-length", type=positive_int,
         help="text tokens of the long text encoder (T5, an LLM), where the pipeline's __call__ takes "
              "max_sequence_length (FLUX 512, SD3 256, Wan 512, ...)")
_declare("strength", "--strength", type=float,
         help="image-to-image (pipelines with an input image): encode the input and run the last steps of the "
              "schedule (SD, SDXL, Kolors, CogVideoX, Wan: int(steps × strength); FLUX, SD3: "
              "steps − int(steps − steps × strength))")
_declare("num_frames", "--num-frames", type=positive_int,
         help="frames to generate (video pipelines; default: the pipeline's)")
_declare("vae_tiling", "--vae-tiling", dest="vae_tiling", action="store_true", default=None,
         help="decode (and encode) in tiles and temporal chunks, as vae.enable_tiling() does (the video VAEs and the "
              "image pipelines' AutoencoderKL)")
_declare("no_vae_tiling", "--no-vae-tiling", dest="vae_tiling", action="store_false",
         help="decode the whole latent in one call (default: as the pipeline does)")
_declare("resolution_binning", "--no-resolution-binning", dest="resolution_binning", action="store_false",
         help="use the size as given instead of snapping it to the pipeline's aspect-ratio bins or standard shapes "
              "(PixArt, SANA, HunyuanDiT; every other pipeline uses it as given anyway)")

#: The settings that choose a law's branch (``symbolic``, ``compare``, ``plot``, ``report``): the size and steps
#: only set representative values there.
BRANCH_OPTIONS = ("height", "width", "steps", "guidance_scale", "true_cfg_scale", "negative_prompt",
                  "max_sequence_length", "strength", "num_frames")
#: Everything a generation is planned with (``estimate``, ``energy``).
GENERATION_OPTIONS = ("height", "width", "steps", "guidance_scale", "true_cfg_scale", "negative_prompt", "batch_size",
                      "num_images_per_prompt", "max_sequence_length", "strength", "num_frames", "vae_tiling",
                      "no_vae_tiling", "resolution_binning")


def add_model(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        p.add_argument("models", nargs="+", metavar="MODEL", help=f"one or more models, each {MODEL_HELP}")
    else:
        p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--revision", help="Hub revision: a branch, tag or commit (Hub repo ids only)")


def add_run_options(p: argparse.ArgumentParser, names: tuple[str, ...], **helps: str) -> None:
    """The run settings ``names`` of :data:`RUN_OPTIONS` (``helps``: a command's own wording of one of them);
    ``--vae-tiling`` and ``--no-vae-tiling`` exclude each other."""
    tiling = None
    for name in names:
        flags, kwargs = RUN_OPTIONS[name]
        kwargs = {**kwargs, "help": helps.get(name, kwargs["help"])}
        if name in ("vae_tiling", "no_vae_tiling"):
            tiling = tiling or p.add_mutually_exclusive_group()
            tiling.add_argument(*flags, **kwargs)
        else:
            p.add_argument(*flags, **kwargs)


def run_settings(args: argparse.Namespace) -> dict:
    """The run settings set on the command line, as ``flopcalc.estimate`` keywords (family options included);
    unset ones (``None``, a flag left off) are left out."""
    out = {}
    for name, (_flags, kwargs) in RUN_OPTIONS.items():
        key = kwargs.get("dest", name)
        if key in out or not hasattr(args, key):
            continue
        unset = kwargs.get("default", {"store_true": False, "store_false": True}.get(kwargs.get("action"), None))
        value = getattr(args, key)
        if value is not None and (value != unset or unset is None):
            out[key] = value
    return {**out, **family_option_values(args)}


def add_family_options(p: argparse.ArgumentParser) -> None:
    """One flag per option a pipeline family declares (:mod:`flopcalc.engine.settings`, read from the discovery
    index: no family module is imported). A parser built with ``defer_family_options`` (the command line's first
    pass, :func:`flopcalc.cli.main._parse`) gets none: the index is not read unless an option may be one."""
    if getattr(p, "defer_family_options", False):
        p.set_defaults(_family_options=())
        return
    from flopcalc.engine.settings import NAMES, PAIRS, SCALE, known, pair

    def pair_argument(text: str) -> tuple[int, int]:
        try:
            return pair(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    group = p.add_argument_group("options of particular pipelines (any other pipeline refuses them)")
    for name, spec in sorted(known().items()):
        if spec.kind == NAMES:
            group.add_argument(spec.flag, dest=name, nargs="+", metavar=spec.metavar or "NAME", help=spec.help)
        elif spec.kind == PAIRS:
            group.add_argument(spec.flag, dest=name, action="append", type=pair_argument,
                               metavar=spec.metavar or "COUNT@INDEX", help=spec.help)
        else:
            group.add_argument(spec.flag, dest=name, type=float if spec.kind == SCALE else int, help=spec.help)
    p.set_defaults(_family_options=tuple(sorted(known())))


def family_option_values(args: argparse.Namespace) -> dict:
    """The family options set on the command line, by name."""
    return {name: getattr(args, name) for name in getattr(args, "_family_options", ())
            if getattr(args, name, None) is not None}


def add_format(p: argparse.ArgumentParser, choices: tuple[str, ...], default: str | None = None) -> None:
    default = default or choices[0]
    words = {"table": "aligned columns for people", "json": "one JSON document", "csv": "rows for a spreadsheet",
             "text": "the law as text", "latex": "the law as LaTeX", "markdown": "a Markdown table"}
    p.add_argument("--format", choices=choices, default=default,
                   help="; ".join(f"{c}: {words[c]}" for c in choices) + f" (default {default})")


def add_convention(p: argparse.ArgumentParser) -> None:
    p.add_argument("--convention", choices=("torch", "thop"), default="torch",
                   help="torch: what torch's FlopCounterMode counts, attention matmuls included (default); thop: "
                        "what thop 0.1.1 counts, as published diffusion tables do (no functional attention)")
