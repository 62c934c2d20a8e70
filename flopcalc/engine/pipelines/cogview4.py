"""CogView4 (diffusers ``pipelines/cogview4/pipeline_cogview4.py``, ``CogView4Pipeline``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.config import positive_int
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``CogView4Pipeline.__call__`` defaults.
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 50, 5.0, 1024
#: The default size without a transformer (diffusers reads ``transformer.config.sample_size``; flopcalc falls
#: back on ``CogView4Transformer2DModel``'s default, 128 latent pixels: 1024²).
DEFAULT_SAMPLE_SIZE = 128
#: ``check_inputs``: height and width divisible by 16; ``_get_glm_embeds`` pads the tokens to a multiple of 16.
SIZE_MULTIPLE = TOKEN_MULTIPLE = 16


@register_pipeline("CogView4Pipeline", guidance="separate", denoisers=("CogView4Transformer2DModel",), options=("max_sequence_length",))
def cogview4_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                      index: Mapping[str, Any] | None = None) -> Plan:
    """``CogView4Pipeline.__call__``: ``height = width = transformer.sample_size × vae_scale_factor``
    (128 × 8 = 1024), 50 steps, ``guidance_scale`` 5.0; sides divide by 16 (and the latent by the
    patch size). CFG (``guidance_scale > 1``) runs the transformer twice per step, conditional then
    unconditional, as two batch-1 forwards.

    ``_get_glm_embeds`` tokenizes the prompt with ``padding="longest"`` (its own length, truncated at
    ``max_sequence_length`` = 1024), left-pads it to a multiple of 16 and keeps
    ``text_encoder(ids, output_hidden_states=True).hidden_states[-2]`` (the whole GLM-4 runs, no
    attention mask); the negative prompt ("" unless given) is encoded the same way. The text length
    therefore depends on the prompt: flopcalc counts ``max_sequence_length`` tokens for the prompt and
    the negative prompt alike (by default 1024, the upper bound); give the prompt's padded token count
    with ``max_sequence_length``."""
    f = vae_scale_factor(components)
    transformer = components.get("transformer")
    if s.height is None or s.width is None:
        sample = DEFAULT_SAMPLE_SIZE if transformer is None else positive_int(transformer, "sample_size")
        s = replace(s, height=s.height or sample * f, width=s.width or sample * f)
    s = replace(s, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    patch = 1 if transformer is None else positive_int(transformer, "patch_size")
    multiple = math.lcm(SIZE_MULTIPLE, f * patch)  # the latent must also divide by the patch size
    check_divisible(s.height, s.width, multiple, "CogView4 height and width")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    text_len = s.max_sequence_length
    runs = text_runs(components, [("text_encoder", text_len)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, text_len, passes)
    runs += image_runs(components, s, f)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    negative = " and the negative prompt" if cfg else ""
    notes.append(f"text: {text_len} GLM tokens for the prompt{negative} (the pipeline pads each to its own length, "
                 f"a multiple of {TOKEN_MULTIPLE}, at most max_sequence_length; the default negative prompt \"\", "
                 f"its special tokens only, pads to {TOKEN_MULTIPLE}): an upper bound, set the prompt's padded length "
                 "with max_sequence_length")
    if s.strength is not None:
        notes.append("diffusers 0.42.1 has no CogView4 image-to-image pipeline: estimated as the text-to-image "
                     "pipeline with the input image VAE-encoded and the last `strength` of the schedule run")
    return Plan("CogView4Pipeline", s, passes, tuple(runs), tuple(notes))


@register_pipeline("CogView4ControlPipeline", options=("max_sequence_length",), guidance="separate")
def cogview4_control_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``CogView4ControlPipeline.__call__`` (``pipeline_cogview4_control.py:436-739``): CogView4Pipeline's plan
    (1024² from ``transformer.sample_size``, 50 steps, ``guidance_scale`` 5.0, GLM-4 on at most
    ``max_sequence_length`` 1024 tokens, CFG as a second forward) with a control image: ``prepare_image``
    (lines 601-609) repeats it to every generated image before ``vae.encode`` (line 614), so the encoder runs
    once per image at the output size, and its latent joins the noise latent on channels
    (``torch.cat([latents, control_image], dim=1)``, line 673): the transformer's ``in_channels`` holds both
    (``latent_channels = in_channels // 2``, line 599), as ``examples/cogview4-control`` trains it. No
    ``strength``: every step runs."""
    from flopcalc.engine.errors import OptionError
    from flopcalc.engine.pipelines.flux_conditioned import encode_run, with_encodes

    if s.strength is not None and s.strength < 1:
        raise OptionError("--strength does not apply to CogView4ControlPipeline: its __call__ takes no strength "
                          "(every step runs), only 1 means that")
    transformer, vae = components.get("transformer"), components.get("vae")
    if transformer is not None and vae is not None:
        channels, latent = positive_int(transformer, "in_channels"), positive_int(vae, "latent_channels")
        if channels != 2 * latent:
            raise ConfigError(f"transformer/config.json: CogView4ControlPipeline concatenates the latent and the "
                              f"control image's latent ({latent} channels each, the VAE's latent_channels): "
                              f"in_channels must be {2 * latent}, got {channels}")
    base = cogview4_pipeline(components, replace(s, strength=None), index=index)
    st = base.settings
    images = st.batch_size * st.num_images_per_prompt
    encodes = encode_run(components, st, images, f"{images} control image(s) (repeated per image, then encoded)")
    notes = [n for n in base.notes if "image-to-image" not in n]
    return with_encodes(replace(base, notes=tuple(notes)), "CogView4ControlPipeline", encodes, [])
