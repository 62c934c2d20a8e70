"""JoyImage-Edit (diffusers ``pipelines/joyimage``: ``JoyImageEditPipeline``, ``JoyImageEditPlusPipeline``), their
text-only calls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
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
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import vae_runs

#: ``JoyImageEditPipeline.__init__``: ``text_token_max_length`` 2048 (registered: in ``model_index.json``), the
#: template's 34 system-prompt tokens dropped after encoding (``prompt_template_encode_start_idx``,
#: pipeline_joyimage_edit.py:121, :168-171).
TEXT_TOKEN_MAX_LENGTH, TEMPLATE_TOKENS = 2048, 34
#: ``__call__`` defaults (:608, :611).
STEPS, GUIDANCE = 40, 4.0
#: ``JoyImageEditImageProcessor(basesize=1024)``'s buckets (image_processor.py:25-54): ``(height, width)`` pairs;
#: ``get_default_height_width`` picks the one whose aspect is nearest the size asked for (1024² by default).
BUCKETS = (
    (512, 1792), (512, 1856), (512, 1920), (512, 1984), (512, 2048), (576, 1600), (576, 1664), (576, 1728), (576, 1792),
    (640, 1472), (640, 1536), (640, 1600), (704, 1344), (704, 1408), (704, 1472), (768, 1216), (768, 1280), (768, 1344),
    (832, 1152), (832, 1216), (896, 1088), (896, 1152), (960, 1024), (960, 1088), (1024, 960), (1024, 1024),
    (1088, 896), (1088, 960), (1152, 832), (1152, 896), (1216, 768), (1216, 832), (1280, 768), (1344, 704), (1344, 768),
    (1408, 704), (1472, 640), (1472, 704), (1536, 640), (1600, 576), (1600, 640), (1664, 576), (1728, 576), (1792, 512),
    (1792, 576), (1856, 512), (1920, 512), (1984, 512), (2048, 512),
)
BASESIZE = 1024


def best_bucket(height: int, width: int) -> tuple[int, int]:
    """``find_best_bucket`` (image_processor.py:57-63): the bucket of nearest aspect ratio (the first on a tie)."""
    ratio = height / width
    return min(BUCKETS, key=lambda hw: abs(hw[0] / hw[1] - ratio))


def _check_components(components: Mapping[str, Any], plus: bool = False) -> None:
    transformer, encoder, vae = components.get("transformer"), components.get("text_encoder"), components.get("vae")
    if not plus and transformer is not None and transformer["patch_size"][0] != 1:
        raise ConfigError("transformer/config.json: JoyImageEditPipeline passes one latent frame as a multi-item input, "
                          f"which needs patch_size[0] 1, got {transformer['patch_size'][0]}")
    if encoder is not None and transformer is not None:
        from flopcalc.engine.architectures.qwen3_vl import text_config

        if text_config(encoder)["hidden_size"] != transformer["text_dim"]:
            raise ConfigError(f"the text encoder's hidden_size {text_config(encoder)['hidden_size']} must equal the "
                              f"transformer's text_dim {transformer['text_dim']}")
    if vae is not None and transformer is not None and vae["z_dim"] != transformer["in_channels"]:
        raise ConfigError(f"JoyImageEditPipeline samples in_channels = {transformer['in_channels']} latent channels but "
                          f"the VAE's z_dim is {vae['z_dim']}")


@register_pipeline("JoyImageEditPipeline", denoisers=("JoyImageEditTransformer3DModel",),
                   options=("max_sequence_length",), guidance="separate")
def joyimage_edit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``JoyImageEditPipeline.__call__`` without ``image`` (the text-only branch, ``num_items`` 1): the size asked for
    (1024² by default) mapped to the bucket of nearest aspect (``get_default_height_width``), 40 steps,
    ``guidance_scale`` 4.0; guidance (``> 1``) encodes the negative prompt (``""`` by default) on its own and runs the
    transformer a second time per step (:827-833).

    ``_get_qwen_prompt_embeds`` runs ``Qwen3VLForConditionalGeneration`` (the whole forward, ``lm_head`` on every
    position; the last decoder layer's output is hooked) on the template and the prompt, truncated at
    ``text_token_max_length + 34`` tokens, then drops the 34 system-prompt tokens: flopcalc counts
    ``max_sequence_length`` tokens after them (default ``text_token_max_length``, 2048: the upper bound; set it to the
    prompt's token count), ``+ 34`` for the encoder, for the prompt and the negative prompt alike. The transformer runs
    on the ``(H/16)(W/16)`` patch tokens of one ``H/8 × W/8`` latent frame; the Wan VAE decodes it. Editing
    (``image=``) runs Qwen3-VL's vision tower on the image: not planned."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to JoyImageEditPipeline: its __call__ takes no strength (flopcalc "
                          "plans its text-only call; editing takes image=, not planned)")
    if s.symbolic:
        raise FlopcalcError("JoyImageEditPipeline maps the size to the bucket of nearest aspect ratio: no closed-form "
                            "law; use the numeric estimate")
    _check_components(components)
    index = index or {}
    cap = index.get("text_token_max_length", TEXT_TOKEN_MAX_LENGTH)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ConfigError(f"model_index.json: text_token_max_length must be a positive integer, got {cap!r}")
    f = vae_scale_factor(components)
    asked = (s.height or BASESIZE, s.width or BASESIZE)
    height, width = best_bucket(*asked)
    length = s.max_sequence_length or cap
    if length > cap:
        raise FlopcalcError(f"JoyImageEditPipeline truncates the prompt at text_token_max_length = {cap} tokens, got "
                            f"max_sequence_length {length}")
    s = replace(s, height=height, width=width, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale, max_sequence_length=length)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    images = s.batch_size * s.num_images_per_prompt
    lat_h, lat_w = height // f, width // f
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if (height, width) != asked:
        notes.append(f"{asked[0]}×{asked[1]} is mapped to the bucket {height}×{width} (the nearest aspect ratio), the "
                     "size of the image made")
    notes.append(f"text: {length} tokens per prompt{' and negative prompt' if cfg else ''} after the 34 template tokens "
                 "(the upper bound; set max_sequence_length to the prompt's token count)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in JoyImageEditPipeline)")
    runs = text_runs(components, [("text_encoder", length + TEMPLATE_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    if "transformer" in components:
        runs.append(ComponentRun("transformer", component_class(components, "transformer") or "?", "forward",
                                 "denoiser", RunShape(latent_height=lat_h, latent_width=lat_w, text_len=length),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    runs += vae_runs(components, s, images, lat_h, lat_w)
    return Plan("JoyImageEditPipeline", s, passes, tuple(runs), tuple(notes))


# --------------------------------------------------------------------------- JoyImage-Edit Plus

#: ``JoyImageEditPlusPipeline.__call__`` defaults (pipeline_joyimage_edit_plus.py:449, :452, :467): 30 steps,
#: ``guidance_scale`` 4.0, ``max_sequence_length`` 4096 (the transformer keeps the last 4096 text tokens).
PLUS_STEPS, PLUS_MAX_SEQUENCE_LENGTH = 30, 4096


@register_pipeline("JoyImageEditPlusPipeline", denoisers=("JoyImageEditPlusTransformer3DModel",),
                   options=("max_sequence_length",))
def joyimage_edit_plus_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``JoyImageEditPlusPipeline.__call__`` without ``images`` (the text-only call): ``height × width`` as given (1024²
    by default; no bucket without a reference image, :556-561), 30 steps, ``guidance_scale`` 4.0. Guidance (``> 1``)
    encodes the negative prompt (``" "`` by default) on its own, pads both to the longer and batches them: one
    transformer forward of ``2B`` rows per step (:681-699). The pipeline takes no ``num_images_per_prompt``.

    ``encode_prompt_multiple_images`` runs ``Qwen3VLForConditionalGeneration`` (whole forward, ``lm_head`` on every
    position) on the template and the prompt, unpadded and untruncated, then drops the 34 system-prompt tokens and keeps
    the last ``max_sequence_length`` (4096): flopcalc counts ``max_sequence_length`` tokens after the template's 34
    (default 4096: the upper bound; set it to the prompt's token count), ``+ 34`` for the encoder, for the prompt and
    the negative prompt alike. The transformer runs on the ``(H/16)(W/16)`` patches of one ``H/8 × W/8`` latent frame
    (``prepare_latents`` reshapes the latent into whole patches: sides divisible by 16); the Wan VAE decodes each image.
    Editing (``images=``) runs Qwen3-VL's vision tower: not planned."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to JoyImageEditPlusPipeline: its __call__ takes no strength "
                          "(flopcalc plans its text-only call; editing takes images=, not planned)")
    if s.num_images_per_prompt != 1:
        raise OptionError("--num-images-per-prompt does not apply to JoyImageEditPlusPipeline: its __call__ takes no "
                          "num_images_per_prompt (one image per prompt)")
    _check_components(components, plus=True)
    f = vae_scale_factor(components)
    patch = components["transformer"]["patch_size"] if "transformer" in components else (1, 2, 2)
    length = s.max_sequence_length or PLUS_MAX_SEQUENCE_LENGTH
    if length > PLUS_MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"JoyImageEditPlusPipeline keeps the last {PLUS_MAX_SEQUENCE_LENGTH} text tokens "
                            f"(max_sequence_length), got max_sequence_length {length}")
    s = replace(s, height=s.height or BASESIZE, width=s.width or BASESIZE, steps=s.steps or PLUS_STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale, max_sequence_length=length)
    check_divisible(s.height, s.width, f, "JoyImage-Edit Plus height and width (check_inputs: vae_scale_factor_spatial)")
    if s.height % (f * patch[1]) or s.width % (f * patch[2]):
        raise ResolutionError(f"JoyImage-Edit Plus: prepare_latents reshapes the H/{f} × W/{f} latent into whole "
                              f"{patch[1]}×{patch[2]} patches, so height must be a multiple of {f * patch[1]} and width "
                              f"of {f * patch[2]}, got {s.height}×{s.width}")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    lat_h, lat_w = s.height // f, s.width // f
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {length} tokens per prompt{' and negative prompt' if cfg else ''} after the 34 template tokens "
                 "(the upper bound; set max_sequence_length to the prompt's token count)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in JoyImageEditPlusPipeline)")
    runs = text_runs(components, [("text_encoder", length + TEMPLATE_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    if "transformer" in components:
        runs.append(ComponentRun("transformer", component_class(components, "transformer") or "?", "forward",
                                 "denoiser", RunShape(latent_height=lat_h, latent_width=lat_w, text_len=length),
                                 s.steps * passes * s.batch_size,
                                 f"{s.steps} steps × {passes} pass(es) × {s.batch_size} image(s)"))
    runs += vae_runs(components, s, s.batch_size, lat_h, lat_w)
    return Plan("JoyImageEditPlusPipeline", s, passes, tuple(runs), tuple(notes))
