"""ERNIE-Image (diffusers ``pipelines/ernie_image/pipeline_ernie_image.py``, ``ErnieImagePipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    RunShape,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.omnigen import DEFAULT_PROMPT_TOKENS  # declares the prompt_tokens option
from flopcalc.engine.pipelines.vae import vae_runs

#: ``ErnieImagePipeline.__call__`` defaults.
SIZE, STEPS, GUIDANCE = 1024, 50, 4.0
#: ``self.vae_scale_factor = 2 ** len(vae.config.block_out_channels)`` (16 for the 4-level VAE, 16 without one): the
#: latent the transformer sees is already 2×2-patchified.
PATCHIFY = 2

PE_NOTE = ("the prompt enhancer (pe, use_pe on by default when the pipeline has one: a Ministral3ForCausalLM "
           "generating the revised prompt) is not counted: its length is the generated text's")


@register_pipeline("ErnieImagePipeline", denoisers=("ErnieImageTransformer2DModel",), options=("prompt_tokens",))
def ernie_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``ErnieImagePipeline.__call__``: 1024², 50 steps, ``guidance_scale`` 4.0. Guidance (``> 1``) doubles the
    transformer's batch (negative rows, then prompt rows, in one forward: two passes).

    ``encode_prompt`` runs the text encoder (``Mistral3Model``; ``hidden_states[-2]`` kept, every layer runs) on each
    prompt's own tokens, unpadded (``padding=False``): ``prompt_tokens`` (default 128, an assumption: flopcalc has no
    tokenizer). Under guidance each negative prompt (``""`` by default: its one BOS token; a given one: taken as
    long as the prompt) is encoded too. ``_pad_text`` pads every row to the longest, so the transformer sees
    ``prompt_tokens`` text tokens per row, after the image's patches. The latent is ``H/16 × W/16`` with the
    VAE's 2×2 patches folded into channels; the VAE decodes it unpatchified (``H/8 × W/8``). Sides divide by 16."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to ErnieImagePipeline: its __call__ takes no strength (it "
                          "generates from noise)")
    f = vae_scale_factor(components)  # the VAE's own ×8
    multiple = f * PATCHIFY if "vae" in components else 16
    s = replace(s, height=s.height or SIZE, width=s.width or SIZE, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, multiple, "ERNIE-Image height and width (vae_scale_factor)")
    tokens = DEFAULT_PROMPT_TOKENS if s.prompt_tokens is None else s.prompt_tokens
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    images = s.batch_size * s.num_images_per_prompt
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {tokens} tokens per prompt" + (" (--prompt-tokens)" if s.prompt_tokens else
                 " (assumed: flopcalc has no tokenizer; set --prompt-tokens to the tokenized prompt's length, BOS "
                 "included)"))
    if "pe" in components:
        notes.append(PE_NOTE)
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in ErnieImagePipeline)")
    runs: list[ComponentRun] = []
    if "text_encoder" in components:
        cls = component_class(components, "text_encoder") or "?"
        runs.append(ComponentRun("text_encoder", cls, "forward", "text_encoder", RunShape(seq_len=tokens),
                                 s.batch_size, f"{s.batch_size} prompt(s)"))
        if cfg:
            negative = tokens if s.negative_prompt else 1
            runs.append(ComponentRun("text_encoder", cls, "forward", "text_encoder", RunShape(seq_len=negative),
                                     s.batch_size, f"{s.batch_size} negative prompt(s)" +
                                     ("" if s.negative_prompt else " (\"\": its BOS token)")))
    if "transformer" in components:
        grid = f * PATCHIFY if "vae" in components else 16
        runs.append(ComponentRun("transformer", component_class(components, "transformer") or "?", "forward",
                                 "denoiser", RunShape(latent_height=s.height // grid, latent_width=s.width // grid,
                                                      text_len=tokens),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    runs += vae_runs(components, s, images, s.height // f, s.width // f)
    return Plan("ErnieImagePipeline", s, passes, tuple(runs), tuple(notes))
