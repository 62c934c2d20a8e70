"""HiDream-I1 pipeline (diffusers ``pipelines/hidream_image/pipeline_hidream_image.py``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``HiDreamImagePipeline.__init__``: ``default_sample_size = 128`` (latent pixels), so 1024² with the VAE's 8.
DEFAULT_SAMPLE_SIZE = 128
#: ``__call__`` defaults (pipeline_hidream_image.py:684, 686, 705), HiDream-I1-Full's settings.
DEFAULT_STEPS, DEFAULT_GUIDANCE, DEFAULT_MAX_SEQUENCE_LENGTH = 50, 5.0, 128
#: ``_get_clip_prompt_embeds`` pads the CLIP prompts to ``min(max_sequence_length, 218)`` tokens (:256).
CLIP_TOKENS = 218
CLIP_ENCODERS = ("text_encoder", "text_encoder_2")
NO_LAW = ("HiDreamImagePipeline rescales every size to the area of (default_sample_size · vae_scale_factor)², "
          "floored to multiples of 2·vae_scale_factor, by a square root in floating point, and the transformer pads "
          "a non-square latent to max_resolution's patches: there is no closed-form law in H and W")
#: ``HiDreamImagePipeline`` has no image-to-image call.
NO_STRENGTH = ("--strength does not apply to HiDreamImagePipeline: its __call__ takes no image or strength "
               "(text-to-image only)")


def run_size(height: int, width: int, f: int) -> tuple[int, int]:
    """The size ``__call__`` generates for a requested ``height × width`` (pipeline_hidream_image.py:810-817):
    scaled by ``sqrt(S_max / (w·h))`` to the area ``S_max = (128·f)²``, each side floored to a multiple of
    ``2f``, in the pipeline's own floating point."""
    division = f * 2
    scale = math.sqrt((DEFAULT_SAMPLE_SIZE * f) ** 2 / (width * height))
    return int(height * scale // division * division), int(width * scale // division * division)


def _clip_tokens(components: Mapping[str, Any], tokens: int) -> None:
    """The CLIP encoders' position tables must hold the tokens the pipeline feeds them, or the call fails."""
    for name in CLIP_ENCODERS:
        cfg = components.get(name)
        if cfg is not None and cfg["max_position_embeddings"] < tokens:
            raise ConfigError(
                f"{name}/config.json: max_position_embeddings {cfg['max_position_embeddings']} is below the {tokens} "
                f"tokens HiDreamImagePipeline feeds it (min(max_sequence_length, {CLIP_TOKENS})), where the real "
                f"pipeline fails: use HiDream's own (long-context) CLIP config, or --max-sequence-length "
                f"{cfg['max_position_embeddings']} or less")


@register_pipeline("HiDreamImagePipeline", denoisers=("HiDreamImageTransformer2DModel",),
                   options=("max_sequence_length",))
def hidream_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``HiDreamImagePipeline.__call__`` (pipeline_hidream_image.py:676-991) with its defaults, which are
    HiDream-I1-Full's: 50 steps, ``guidance_scale`` 5.0, ``max_sequence_length`` 128, 1024².

    Size (:810-817): the requested size (default ``128 · vae_scale_factor`` a side) is rescaled to the
    area of 1024², aspect kept, sides floored to multiples of 16 (:func:`run_size`); ``prepare_latents``
    makes the ``H/8 × W/8`` latent. The transformer pads a non-square latent to ``max_seq`` patches.

    Text (``encode_prompt``, :320-517): once per prompt, and under classifier-free guidance
    (``guidance_scale > 1``, :659-660) once more for the negative prompt ("" by default) — CLIP-L
    (``text_encoder``) and CLIP-G (``text_encoder_2``) on ``min(max_sequence_length, 218)`` tokens (their
    pooled, projected outputs feed ``pooled_embeds``), T5 (``text_encoder_3``) and Llama-3.1
    (``text_encoder_4``, ``LlamaForCausalLM``: every layer's hidden state is kept, and ``lm_head`` runs on
    every token, ``logits_to_keep=0``) on ``max_sequence_length`` tokens (``min`` with the tokenizers'
    ``model_max_length``, which the configs do not hold: taken as not binding). ``text_encoder_4`` is not
    in the Hub repo (the user passes it): absent here, it is named and not counted.

    Denoising (:923-971): every step runs the transformer once on a doubled batch under CFG (two passes),
    on ``max_sequence_length`` T5 and as many Llama tokens. Then one VAE decode per image (:980-982)."""
    if s.strength is not None:
        raise OptionError(NO_STRENGTH)
    if s.symbolic:
        raise FlopcalcError(NO_LAW)
    f = vae_scale_factor(components)
    requested = (s.height or DEFAULT_SAMPLE_SIZE * f, s.width or DEFAULT_SAMPLE_SIZE * f)
    height, width = run_size(*requested, f)
    if height <= 0 or width <= 0:
        raise FlopcalcError(f"HiDreamImagePipeline rescales {requested[0]}×{requested[1]} to {height}×{width}: "
                            f"an aspect ratio this extreme leaves no pixels on one side")
    s = replace(s, height=height, width=width, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or DEFAULT_MAX_SEQUENCE_LENGTH)
    tokens = s.max_sequence_length
    clip = min(tokens, CLIP_TOKENS)
    _clip_tokens(components, clip)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, [*CLIP_ENCODERS, "text_encoder_3", "text_encoder_4", "transformer", "vae"]))
    if (height, width) != requested:
        notes.append(f"HiDreamImagePipeline rescales the requested {requested[0]}×{requested[1]} to the area of "
                     f"{DEFAULT_SAMPLE_SIZE * f}² (sides floored to multiples of {2 * f}): it generates {height}×{width}")
    if height != width and "transformer" in components:
        notes.append("a non-square latent is padded to the transformer's max_resolution patches (max_seq), "
                     "on which every layer runs")
    runs = text_runs(components, [(CLIP_ENCODERS[0], clip), (CLIP_ENCODERS[1], clip), ("text_encoder_3", tokens),
                                  ("text_encoder_4", tokens)],
                     s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += [replace(r, shape=replace(r.shape, text_len_2=tokens))
             for r in denoiser_run(components, "transformer", s, f, tokens, passes)]
    runs += image_runs(components, s, f)
    return Plan("HiDreamImagePipeline", s, passes, tuple(runs), tuple(notes))
