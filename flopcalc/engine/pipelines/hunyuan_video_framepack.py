"""FramePack image-to-video (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video_framepack.py``,
``HunyuanVideoFramepackPipeline``): HunyuanVideo's text encoders and VAE, a SigLIP image encoder and the FramePack
transformer, generating the video in sections of ``latent_window_size`` latent frames, each conditioned on the
image and a packed history of what was generated (:mod:`flopcalc.engine.architectures.hunyuan_video_framepack`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from flopcalc.engine.architectures.autoencoder_kl_hunyuan_video import temporal_factor
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.hunyuan_video import (
    CLIP_TOKENS,
    CROP_START,
    DEFAULT_TEMPORAL,
    _vae_run,
    true_cfg_passes,
    with_defaults,
)
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, NAMES, pipeline_option

NAME = "HunyuanVideoFramepackPipeline"
#: ``__call__`` defaults beyond HunyuanVideo's (pipeline_hunyuan_video_framepack.py:588-622): guidance 6.0 (an
#: embedding), ``latent_window_size`` 9, ``sampling_type`` inverted anti-drifting.
GUIDANCE, WINDOW = 6.0, 9
SAMPLING = ("inverted_anti_drifting", "vanilla")

pipeline_option("latent_window_size", kind=COUNT, bound=(1024, "latent frames"),
                help="FramePack and Helios: latent frames generated per section / chunk (latent_window_size, "
                     "num_latent_frames_per_chunk; default 9)",
                refusal="it generates no FramePack sections or Helios chunks", examples=("5", "9"))
pipeline_option("sampling_type", kind=NAMES,
                help="FramePack: inverted_anti_drifting (default) or vanilla section order",
                refusal="it has no FramePack sampling order", examples=("vanilla", "inverted_anti_drifting"))


def sections(num_frames: int, window: int, temporal: int) -> int:
    """``num_latent_sections = max(1, (F + w_f − 1) // w_f)`` with ``w_f = (window − 1)·t + 1`` (:848-850)."""
    window_frames = (window - 1) * temporal + 1
    return max(1, (num_frames + window_frames - 1) // window_frames)


def decoded_frames(count: int, window: int, sampling: str) -> list[int]:
    """The latent frames ``vae.decode`` gets after each section (:1000-1052): the whole history after the first,
    then the newest ``2·window`` (inverted: ``2·window + 1`` in the last section, which also prepends the image's
    latent), or fewer while the history is shorter. Vanilla's history starts with the image's latent."""
    total, out = (0 if sampling == SAMPLING[0] else 1), []
    for k in range(count):
        last = k == count - 1
        total += window + (1 if last and sampling == SAMPLING[0] else 0)
        if k == 0:
            out.append(total)
        else:
            out.append(min(total, 2 * window + (1 if last and sampling == SAMPLING[0] else 0)))
    return out


def _sampling(s: Settings) -> str:
    value = s.sampling_type
    if value is None:
        return SAMPLING[0]
    if len(value) != 1 or value[0] not in SAMPLING:
        raise OptionError(f"--sampling-type is one of {', '.join(SAMPLING)}, got {', '.join(value)}")
    return value[0]


@register_pipeline(NAME, guidance="separate", denoisers=("HunyuanVideoFramepackTransformer3DModel",),
                   options=("true_cfg_scale", "max_sequence_length", "num_frames", "vae_tiling", "latent_window_size",
                            "sampling_type"))
def hunyuan_video_framepack_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                     index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanVideoFramepackPipeline.__call__`` (pipeline_hunyuan_video_framepack.py:588-1076): 720×1280, 129
    frames, 50 steps per section, ``guidance_scale`` 6.0 as an embedding (one pass; true CFG, a second forward on
    the negative prompt, only when ``true_cfg_scale > 1`` and a negative prompt is given), 256 Llama tokens (+ 95
    template tokens, cropped) and 77 CLIP tokens per prompt.

    * The image: SigLIP (``image_encoder``) once on the processor's ``image_size²`` (:822-823), its tokens into
      every transformer call; VAE-encoded once as one frame (``prepare_image_latents``, :556-560).
    * Sections: ``max(1, ⌈F / ((window − 1)·4 + 1)⌉)`` (129 frames, window 9: 4), each ``steps`` transformer
      calls on a ``window``-frame latent with the packed history (2 clean frames, 2 at 2×, 16 at 4×), then a
      ``vae.decode`` of the history so far (the whole first, then the newest ``2·window`` (+1) latent frames,
      :1030-1052), decoded as the VAE's defaults say (framewise chunks, untiled; ``--vae-tiling`` tiles).
    * One prompt and one video: the image latent is not repeated over a batch (the real call fails otherwise).

    The section count and the decoded lengths step with ``num_frames``: no closed-form law."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions every section and every step "
                          "runs")
    if s.batch_size != 1 or s.num_images_per_prompt != 1:
        raise OptionError(f"{NAME} runs one prompt and one video: its image latent is not repeated over a batch "
                          "(torch.cat with the history fails in diffusers otherwise)")
    if s.symbolic:
        raise FlopcalcError(f"{NAME} generates ⌈F / ((window − 1)·4 + 1)⌉ sections and decodes a history whose "
                            "length steps with them: no closed-form law in F; use the numeric estimate")
    f = vae_scale_factor(components)
    t = temporal_factor(components["vae"]) if "vae" in components else DEFAULT_TEMPORAL
    s = with_defaults(s, GUIDANCE)
    true_cfg, passes, notes = true_cfg_passes(components, s, NAME)
    if "image_encoder" not in components:
        notes.append("image_encoder is absent from this pipeline and was not counted")
    sampling, window = _sampling(s), s.latent_window_size or WINDOW
    count = sections(s.num_frames, window, t)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length + CROP_START),
                                  ("text_encoder_2", CLIP_TOKENS)],
                     passes, "1 prompt" + (" + negative" if true_cfg else ""))
    image_tokens = None
    encoder = components.get("image_encoder")
    if encoder is not None:
        from flopcalc.engine.architectures.siglip import siglip_patches

        size, image_tokens = encoder["image_size"], siglip_patches(encoder)
        # seq_len: its patch tokens, as HunyuanVideo 1.5 I2V's plan gives the same SigLIP (its activation fit's n)
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(seq_len=image_tokens, height=size, width=size), 1,
                                 "1 input image (encode_image)"))
    vae = components.get("vae")
    cls = component_class(components, "vae") or "?"
    if vae is not None:
        runs.append(_vae_run("encode", cls, vae, s, 1, "1 input image (prepare_image_latents)", height=s.height,
                             width=s.width, frames=1))
    transformer = components.get("transformer")
    if transformer is not None:
        if image_tokens is None:
            raise FlopcalcError(f"the FramePack transformer projects the image encoder's tokens but {NAME} has no "
                                "image_encoder config to say how many: give the pipeline folder with "
                                "image_encoder/config.json")
        forwards = count * s.steps * passes
        runs.append(ComponentRun("transformer", "HunyuanVideoFramepackTransformer3DModel", "forward", "denoiser",
                                 RunShape(latent_height=s.height // f, latent_width=s.width // f,
                                          text_len=s.max_sequence_length, latent_frames=window,
                                          image_tokens=image_tokens),
                                 forwards, f"{count} section(s) × {s.steps} steps × {passes} pass(es)"))
    notes.append(f"{count} section(s) of {window} latent frames ({sampling} sampling), each with the image's and a "
                 "packed history's tokens (2 clean frames, 2 at 2×, 16 at 4× compression)")
    if vae is not None:
        lengths = Counter(decoded_frames(count, window, sampling))
        for frames, n in sorted(lengths.items(), reverse=True):
            runs.append(_vae_run("decode", cls, vae, s, n, f"{n} section(s) decoding {frames} latent frames",
                                 latent_height=s.height // f, latent_width=s.width // f, latent_frames=frames))
        notes.append("VAE: after each section the history is decoded (" +
                     ", ".join(str(x) for x in decoded_frames(count, window, sampling)) +
                     " latent frames), in the VAE's temporal chunks" + (", tiled" if s.vae_tiling else ""))
    return Plan(NAME, s, passes, tuple(runs), tuple(notes))
