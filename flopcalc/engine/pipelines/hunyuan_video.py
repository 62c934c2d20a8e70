"""HunyuanVideo text-to-video (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.architectures import autoencoder_kl_hunyuan_video as hv_vae
from flopcalc.engine.architectures.autoencoder_kl_hunyuan_video import (
    HunyuanVideoVaeShape,
    temporal_factor,
)
from flopcalc.engine.errors import FlopcalcError
from flopcalc.formulas.tiling import Slices, whole
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)

#: ``HunyuanVideoPipeline.__call__`` defaults.
DEFAULT_HEIGHT, DEFAULT_WIDTH, DEFAULT_FRAMES = 720, 1280, 129
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 6.0
DEFAULT_MAX_SEQUENCE_LENGTH = 256
#: ``DEFAULT_PROMPT_TEMPLATE["crop_start"]``: the Llama prompt is padded to max_sequence_length +
#: crop_start tokens, and the first crop_start hidden states (the system template) are dropped.
CROP_START = 95
#: ``_get_clip_prompt_embeds``: CLIP runs on 77 tokens for its pooled output.
CLIP_TOKENS = 77
#: ``check_inputs``: height and width must be divisible by 16.
SIZE_MULTIPLE = 16
#: ``vae_scale_factor_temporal`` without a VAE.
DEFAULT_TEMPORAL = 4


def latent_frame_count(num_frames: int, temporal: int) -> int:
    """``prepare_latents``: ``(num_frames - 1) // vae_scale_factor_temporal + 1`` latent frames
    (33 for 129)."""
    return (num_frames - 1) // temporal + 1


#: ``Settings.vae_tiling`` → (use_framewise_*, use_tiling) of the VAE.
VAE_MODES = {None: (True, False), False: (False, False), True: (True, True)}


def _vae_run(kind: str, cls: str, vae: Mapping[str, Any], s: Settings, runs: int, why: str,
             **shape: Any) -> ComponentRun:
    """One VAE call (``decode`` or ``encode``) in the mode ``s.vae_tiling`` asks for: the run shape
    says the mode and carries the call's split (``decode_split`` / ``encode_split``: chunks × tiles,
    taken at this plan's sizes, so a symbolic law gets the one-pass or the chunked branch exactly)."""
    framewise, tiling = VAE_MODES[s.vae_tiling]
    if tiling and s.symbolic:
        raise FlopcalcError("the spatially tiled HunyuanVideo VAE (vae_tiling=True) has no closed-form law (its tile "
                            "count steps with the size); state the law for the default (no --vae-tiling)")
    if kind == "decode":
        split = hv_vae.decode_split(vae, shape["latent_frames"], shape["latent_height"], shape["latent_width"],
                                    framewise, tiling)
    else:
        split = hv_vae.encode_split(vae, shape["frames"], shape["height"], shape["width"], framewise, tiling)
    role = "vae_decoder" if kind == "decode" else "vae_encoder"
    return ComponentRun("vae", cls, kind, role,
                        HunyuanVideoVaeShape(framewise=framewise, tiling=tiling, split=split, **shape), runs, why)


def _chunk_words(chunks: Slices) -> str:
    """``11 chunk(s) (10 × 5 + 1 × 3)``."""
    return f"{sum(n for _, n in chunks)} chunk(s) (" + " + ".join(f"{n} × {size}" for size, n in chunks) + ")"


def _vae_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, f: int,
              latent_frames: int) -> tuple[list[ComponentRun], list[str]]:
    """Decode each video once (and, with ``strength``, encode each input video once) in the mode
    ``s.vae_tiling`` asks for; the note says how."""
    if "vae" not in components:
        return [], []
    cls = component_class(components, "vae") or "?"
    vae = components["vae"]
    videos = s.batch_size * s.num_images_per_prompt
    decode = _vae_run("decode", cls, vae, s, videos, f"{videos} video(s)",
                      latent_height=s.height // f, latent_width=s.width // f, latent_frames=latent_frames)
    runs = [decode]
    framewise, tiling = VAE_MODES[s.vae_tiling]
    chunks = decode.shape.split.frames
    if framewise and chunks != whole(latent_frames):
        how = f"decoded in {_chunk_words(chunks)} of latent frames, overlapping, each decoded in full"
    elif framewise:
        how = f"decoded in one pass ({latent_frames} latent frame(s) fit one chunk)"
    else:
        how = f"decoded untiled: one pass over all {latent_frames} latent frames"
    if tiling:
        how += ("; tiled (vae.enable_tiling(), not the pipeline's default): overlapping 256-pixel tiles every 192 "
                "pixels when a side exceeds 256, overlaps counted in full")
    elif s.vae_tiling is None:
        how += "; not spatially tiled (the pipeline's default: use_framewise_decoding on, use_tiling off)"
    else:
        how += " (--no-vae-tiling; the pipeline's default decodes in temporal chunks)"
    if s.strength is not None:
        runs.insert(0, _vae_run("encode", cls, vae, s, s.batch_size, f"{s.batch_size} input video(s)",
                                height=s.height, width=s.width, frames=s.num_frames))
    return runs, [f"VAE: {how}"]


def with_defaults(s: Settings, guidance_scale: float) -> Settings:
    """The HunyuanVideo pipelines' ``__call__`` defaults (720×1280, 129 frames, 50 steps, ``true_cfg_scale`` 1.0,
    ``max_sequence_length`` 256; ``guidance_scale`` the pipeline's), checked as ``check_inputs`` does (height
    and width divisible by 16)."""
    s = replace(
        s,
        height=s.height or DEFAULT_HEIGHT,
        width=s.width or DEFAULT_WIDTH,
        num_frames=s.num_frames or DEFAULT_FRAMES,
        steps=s.steps or DEFAULT_STEPS,
        guidance_scale=guidance_scale if s.guidance_scale is None else s.guidance_scale,
        true_cfg_scale=1.0 if s.true_cfg_scale is None else s.true_cfg_scale,
        max_sequence_length=s.max_sequence_length or DEFAULT_MAX_SEQUENCE_LENGTH,
    )
    check_divisible(s.height, s.width, SIZE_MULTIPLE, "HunyuanVideo height and width")
    return s


def true_cfg_passes(components: Mapping[str, Mapping[str, Any]], s: Settings,
                    name: str) -> tuple[bool, int, list[str]]:
    """``do_true_cfg = true_cfg_scale > 1 and has_neg_prompt``: whether true CFG runs, the transformer passes per
    step, and the notes (missing components, an option without effect)."""
    true_cfg = s.true_cfg_scale > 1 and s.negative_prompt
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    if s.true_cfg_scale > 1 and not s.negative_prompt:
        notes.append(f"true_cfg_scale > 1 has no effect without a negative prompt (as in {name}): one pass")
    elif s.negative_prompt and not true_cfg:
        notes.append(f"the negative prompt is ignored with true_cfg_scale <= 1 (as in {name})")
    return true_cfg, cfg_passes(s, true_cfg), notes


@register_pipeline("HunyuanVideoPipeline", guidance="separate", denoisers=("HunyuanVideoTransformer3DModel",),
                   options=("true_cfg_scale", "max_sequence_length", "num_frames", "vae_tiling"))
def hunyuan_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanVideoPipeline.__call__``: 720×1280, 129 frames (33 latent frames), 50 steps,
    ``guidance_scale`` 6.0 as an embedding (guidance-distilled: one transformer pass per step), true
    CFG (a second forward on the negative prompt, which is then encoded by both encoders) only when
    ``true_cfg_scale > 1`` and a negative prompt is given. Text: Llama on ``max_sequence_length``
    (256) + 95 template tokens (padded to that length; the transformer sees the last 256), CLIP on
    77 tokens for its pooled output, once per prompt. Height and width must divide by 16 (the
    pipeline's check). The VAE decodes once per video as ``Settings.vae_tiling`` says (default: as
    the pipeline, see the plan's note)."""
    f = vae_scale_factor(components)
    t = temporal_factor(components["vae"]) if "vae" in components else DEFAULT_TEMPORAL
    s = with_defaults(s, DEFAULT_GUIDANCE)
    true_cfg, passes, notes = true_cfg_passes(components, s, "HunyuanVideoPipeline")
    transformer = components.get("transformer")
    if transformer is not None and transformer.get("guidance_embeds") is False:
        notes.append("guidance_scale is ignored: the transformer is not guidance-distilled (guidance_embeds false)")
    if s.strength is not None:
        notes.append("HunyuanVideoPipeline has no video-to-video mode: strength is estimated as the image-to-image "
                     "pipelines run it (the input video VAE-encoded once, the last strength of the schedule)")
    latent_frames = latent_frame_count(s.num_frames, t)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length + CROP_START),
                                  ("text_encoder_2", CLIP_TOKENS)],
                     s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if true_cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes, latent_frames=latent_frames)
    vae, vae_notes = _vae_runs(components, s, f, latent_frames)
    return Plan("HunyuanVideoPipeline", s, passes, tuple(runs + vae), tuple(notes + vae_notes))
