"""CogVideoX text-to-video (diffusers ``pipelines/cogvideo/pipeline_cogvideox.py``,
``CogVideoXPipeline.__call__``).

What one generation runs, at the pipeline's defaults:

* size: ``transformer.sample_height/width × vae_scale_factor_spatial`` (60 × 8 = 480 by 90 × 8 =
  720 for every released checkpoint); ``num_frames`` defaults to ``transformer.sample_frames``
  (49). ``vae_scale_factor_spatial = 2 ** (len(vae.block_out_channels) − 1)`` (8) and
  ``vae_scale_factor_temporal = vae.temporal_compression_ratio`` (4), or 8 and 4 without a VAE.
* latents: ``(num_frames − 1) // 4 + 1`` frames (49 → 13) of ``H/8 × W/8``; CogVideoX 1.5
  (``patch_size_t``) pads the latent frames up to a multiple of ``patch_size_t`` for the
  transformer and decodes only the unpadded ones. ``check_inputs`` wants sizes divisible by 8;
  the transformer's ``p × p`` patches need ``H/8`` and ``W/8`` divisible by ``patch_size`` (16
  pixels). The pipeline floors ``(num_frames − 1) / 4`` silently; flopcalc asks for a frame count
  of the form ``4k + 1`` (the lengths CogVideoX generates) and names the nearest ones.
* 50 steps, ``guidance_scale`` 6.0: classifier-free guidance on a doubled batch (2 passes); the
  negative prompt (default ``""``) is encoded too.
* text: T5 (``T5EncoderModel``) on ``max_sequence_length`` = 226 tokens (padded), once per prompt
  and once per negative prompt. A transformer with a positional table (CogVideoX-2b: sincos,
  ``use_rotary_positional_embeddings`` false) covers exactly ``max_text_seq_length`` (226) text
  positions, so it runs only at that length; rotary models (5b, 1.5) take any length.
* ``num_videos_per_prompt``: the ``__call__`` overwrites it with 1.
* VAE: ``decode`` once per video, in frame batches (``_decode``), untiled: the pipeline never calls
  ``enable_tiling()`` and ``use_tiling`` starts False. ``vae_tiling=True`` plans ``tiled_decode``:
  one run per tile shape, every overlapping tile decoded in full. A ``strength`` plans a
  video-to-video style encode of ``num_frames`` frames as well (``vae.encode``, tiled alike), with
  the kept steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from flopcalc.engine.architectures import autoencoder_kl_cogvideox as cog_vae
from flopcalc.engine.architectures.cogvideox import DEFAULTS as TRANSFORMER_DEFAULTS
from flopcalc.engine.architectures.cogvideox import uses_positional_table
from flopcalc.engine.errors import FlopcalcError, ResolutionError
from flopcalc.formulas.cogvideox_vae import LATENT_FRAMES_BATCH, SAMPLE_FRAMES_BATCH
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    require_numeric_tiling,
    text_runs,
    tile_runs,
    vae_scale_factor,
    video_decode_runs,
)
from flopcalc.engine.registry import RunShape

#: ``CogVideoXPipeline.__call__`` defaults.
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 6.0
DEFAULT_TEXT_LEN = 226
#: ``vae_scale_factor_temporal`` without a VAE.
DEFAULT_TEMPORAL_FACTOR = 4


@dataclass(frozen=True)
class Variant:
    """What sets one CogVideoX pipeline's ``__call__`` apart from the text-to-video one.

    ``channel_inputs``: how many VAE latents the transformer's ``in_channels`` holds (1; 2 where the
    pipeline concatenates a conditioning latent on channels: ``in_channels // 2`` noise channels);
    ``conditioning``: what that latent (or, with ``strength``, the initial latent) is VAE-encoded from
    (``None``, ``"image"``: one frame per video, ``"video"``, ``"control video"``: ``num_frames`` frames
    per video); ``num_frames``: the ``__call__`` default (``None``: ``transformer.sample_frames``);
    ``passes_ofs``: the ``ofs`` tensor the transformer's ``ofs_embedding`` needs; ``pads_frames``: latent
    frames padded up to a multiple of ``patch_size_t`` (else refused, as ``ValueError``);
    ``default_strength``: the ``strength`` default (video-to-video)."""

    name: str
    channel_inputs: int = 1
    conditioning: str | None = None
    num_frames: int | None = None
    passes_ofs: bool = False
    pads_frames: bool = True
    default_strength: float | None = None


#: ``CogVideoXPipeline`` (pipeline_cogvideox.py:507): a ``strength`` plans a video-to-video style encode.
TEXT_TO_VIDEO = Variant("CogVideoXPipeline")


def _transformer(components: Mapping[str, Mapping[str, Any]], key: str) -> Any:
    """The transformer's ``key`` (its class default when left out); the class default without a transformer."""
    return config_value(components, "transformer", key, TRANSFORMER_DEFAULTS[key])


def temporal_factor(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``vae_scale_factor_temporal``: the VAE's ``temporal_compression_ratio``, or 4 without a VAE."""
    vae = components.get("vae")
    return DEFAULT_TEMPORAL_FACTOR if vae is None else cog_vae.temporal_ratio(vae)


def latent_frames(num_frames: int, temporal: int) -> int:
    """``prepare_latents``: ``(num_frames − 1) // vae_scale_factor_temporal + 1``."""
    return (num_frames - 1) // temporal + 1


def check_frames(num_frames: int, temporal: int) -> None:
    """Frame counts of the form ``temporal · k + 1`` (49 = 4·12 + 1); the error names the nearest."""
    if (num_frames - 1) % temporal:
        lo = (num_frames - 1) // temporal * temporal + 1
        raise ResolutionError(
            f"CogVideoX num_frames must be {temporal}·k + 1 (the VAE compresses {temporal} frames into one latent "
            f"frame after the first; the pipeline would silently drop the rest): num_frames {num_frames} → nearest "
            f"valid: {lo} or {lo + temporal}."
        )


def _check_transformer(components: Mapping[str, Mapping[str, Any]], latent_h: int, latent_w: int,
                       text_len: int, variant: Variant = None) -> None:
    """What the transformer cannot run under this pipeline: an ``ofs`` embedding where the pipeline passes
    no ``ofs`` (only the image-to-video pipeline does), input channels other than the pipeline concatenates
    (the VAE's latent, ``channel_inputs`` times), another text length than its positional table covers, a
    learned table away from its sample size."""
    variant = variant or TEXT_TO_VIDEO
    cfg = components.get("transformer")
    if cfg is None:
        return
    if cfg.get("ofs_embed_dim") and not variant.passes_ofs:
        raise FlopcalcError(f"transformer: ofs_embed_dim is set: an image-to-video transformer (CogVideoX 1.5 I2V), "
                            f"which {variant.name} cannot run (it passes no ofs): use CogVideoXImageToVideoPipeline")
    vae = components.get("vae")
    latent = config_value(components, "vae", "latent_channels", None)
    inputs = _transformer(components, "in_channels")
    if vae is not None and inputs != variant.channel_inputs * latent:
        what = "the latent" if variant.channel_inputs == 1 else f"the latent and its {variant.conditioning} latent"
        raise FlopcalcError(f"transformer: in_channels {inputs} ≠ {variant.channel_inputs} × the VAE's {latent} latent "
                            f"channels ({what}, concatenated on channels by {variant.name}): "
                            + ("an image-to-video or control transformer, which it cannot run"
                               if inputs > latent else "it cannot run this transformer"))
    if uses_positional_table(cfg) and _transformer(components, "patch_size_t") not in (None, 1):
        raise FlopcalcError("transformer: patch_size_t with a positional table (sincos or learned) cannot run: the "
                            "table covers every latent frame, the tokens only every patch_size_t-th")
    if uses_positional_table(cfg):
        limit = _transformer(components, "max_text_seq_length")
        if text_len != limit:
            raise FlopcalcError(
                f"transformer: its positional table covers max_text_seq_length={limit} text positions, so "
                f"{variant.name} fails for max_sequence_length {text_len}: use {limit}")
    if _transformer(components, "use_learned_positional_embeddings"):
        size = (_transformer(components, "sample_height"), _transformer(components, "sample_width"))
        if (latent_h, latent_w) != size:
            raise ResolutionError(f"transformer: learned positional embeddings only run at the {size[0]}×{size[1]} "
                                  f"latent grid of sample_height × sample_width, not {latent_h}×{latent_w}")


def _tiling_text(grid: Mapping[tuple[int, int], int], unit: str) -> str:
    return ", ".join(f"{n}× {h}×{w}" for (h, w), n in sorted(grid.items(), reverse=True)) + f" {unit}"


def encode_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, frames: Any, inputs: int,
                what: str) -> tuple[list[ComponentRun], str]:
    """``vae.encode`` of ``inputs`` ``frames``-frame videos at the run's size, one call each (the pipelines
    encode ``[self.vae.encode(x.unsqueeze(0)) for x in batch]``), tiled alike when ``vae_tiling``; and the
    note's words on it."""
    vae = components.get("vae")
    if vae is None:
        return [], ""
    cls = component_class(components, "vae") or "?"
    encode = cog_vae.encode_split(vae, s.height, s.width, bool(s.vae_tiling))
    runs = tile_runs("vae", cls, "encode", "vae_encoder", encode, inputs,
                     lambda th, tw: RunShape(height=th, width=tw, frames=frames),
                     lambda n, th, tw: f"{inputs} {what}" if encode.is_whole
                     else f"{n} tile(s) of {th}×{tw} px × {inputs} {what}")
    how = f"encode ({what}): " + (f"frame batches of {SAMPLE_FRAMES_BATCH}" if frames != 1 else "one frame each")
    if not encode.is_whole:
        how += f", {sum(encode.tiles().values())} tiles ({_tiling_text(encode.tiles(), 'px')})"
    return runs, how


def _vae_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, f: int, frames: int) -> tuple[list, str]:
    """The decode runs, and the note saying how the VAE runs: untiled one call per video; tiled one run
    per tile shape, every overlapping tile decoded in full through the frame-batched call
    (``tiled_decode``)."""
    vae = components.get("vae")
    if vae is None:
        return [], ""
    h, w = s.height // f, s.width // f
    out_frames = cog_vae.decoded_frames(vae, frames)
    tiled = bool(s.vae_tiling)
    if tiled:
        require_numeric_tiling(s)
    videos = s.batch_size * s.num_images_per_prompt
    split = cog_vae.decode_split(vae, h, w, tiled)
    grid, whole = split.tiles(), split.is_whole
    runs = video_decode_runs(components, split, videos, frames, out_frames)
    batches = max(frames // LATENT_FRAMES_BATCH, 1)
    first = min(LATENT_FRAMES_BATCH + frames % LATENT_FRAMES_BATCH, frames)
    how = (f"VAE: {frames} latent frames decoded in {batches} frame batch(es) (the first of {first}, the others of "
           f"{LATENT_FRAMES_BATCH}, conv cache between them) into {out_frames} frames, ")
    if not tiled:
        how += "untiled (the pipeline's default: it never calls vae.enable_tiling())"
    elif whole:
        how += "tiling asked for (vae.enable_tiling()) but the latent fits one tile: decoded untiled, as the VAE does"
    else:
        how += (f"tiled (vae.enable_tiling(), not the pipeline's default): {sum(grid.values())} overlapping tiles "
                f"({_tiling_text(grid, 'latent')}), each decoded in full")
    return runs, how


def _padded_frames(components: Mapping[str, Mapping[str, Any]], frames: Any, variant: Variant,
                   notes: list[str]) -> Any:
    """The latent frames the transformer sees: CogVideoX 1.5 (``patch_size_t``) pads them up to a multiple
    of ``patch_size_t`` (text- and image-to-video: ``additional_frames``, dropped before decoding) or
    refuses them (video-to-video, Fun-Control)."""
    p_t = _transformer(components, "patch_size_t")
    if not p_t or not frames % p_t:
        return frames
    if not variant.pads_frames:
        raise ResolutionError(f"{variant.name}: {frames} latent frames are not divisible by the transformer's "
                              f"patch_size_t {p_t} (the pipeline raises ValueError): give a num_frames whose "
                              f"(num_frames − 1) / 4 + 1 divides by {p_t}")
    padded = frames + (p_t - frames % p_t)
    notes.append(f"transformer: {frames} latent frames padded to {int(padded)} (a multiple of patch_size_t "
                 f"{p_t}); the padding is dropped before decoding")
    return padded


def cogvideox_plan(components: Mapping[str, Mapping[str, Any]], s: Settings, variant: Variant) -> Plan:
    """The plan every CogVideoX pipeline shares (see the module docstring), with ``variant``'s defaults,
    channel concatenation, ``ofs`` and frame padding, and its conditioning encode."""
    f = vae_scale_factor(components)
    temporal = temporal_factor(components)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.num_images_per_prompt != 1:
        notes.append(f"num_videos_per_prompt {s.num_images_per_prompt} is ignored: {variant.name}.__call__ "
                     "sets it to 1")
    s = replace(
        s,
        height=s.height or _transformer(components, "sample_height") * f,
        width=s.width or _transformer(components, "sample_width") * f,
        num_frames=s.num_frames or variant.num_frames or _transformer(components, "sample_frames"),
        steps=s.steps or DEFAULT_STEPS,
        guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
        max_sequence_length=s.max_sequence_length or DEFAULT_TEXT_LEN,
        num_images_per_prompt=1,
        vae_tiling=bool(s.vae_tiling),
        strength=variant.default_strength if s.strength is None else s.strength,
    )
    patch = _transformer(components, "patch_size") if "transformer" in components else 1
    check_divisible(s.height, s.width, f * patch,
                    f"CogVideoX height and width ({f}× VAE" + (f", {patch}×{patch} patches)" if patch > 1 else ")"))
    check_frames(s.num_frames, temporal)
    frames = latent_frames(s.num_frames, temporal)
    text_len = s.max_sequence_length
    if "transformer" in components and uses_positional_table(components["transformer"]):
        text_len = int(text_len)  # fixed by the positional table: no free text length in a law
    _check_transformer(components, s.height // f, s.width // f, text_len, variant)
    if s.symbolic and "transformer" in components and _transformer(components, "use_learned_positional_embeddings"):
        raise FlopcalcError("transformer: its learned positional table runs only at its sample size "
                            f"({_transformer(components, 'sample_height') * f}×"
                            f"{_transformer(components, 'sample_width') * f}), so there is no closed-form law in H "
                            "and W: use the numeric estimate")
    padded = _padded_frames(components, frames, variant, notes)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    runs = text_runs(components, [("text_encoder", text_len)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    conditioning = variant.conditioning or ("video" if s.strength is not None else None)
    if conditioning is not None:
        frames_in = 1 if conditioning == "image" else s.num_frames
        encodes, encoded = encode_runs(components, s, frames_in, s.batch_size, f"input {conditioning}(s)")
        runs += encodes
    runs += denoiser_run(components, "transformer", s, f, text_len, passes, latent_frames=padded,
                         kept_steps=denoising_steps_floored)  # CogVideoXVideoToVideoPipeline.get_timesteps
    vae_runs, how = _vae_runs(components, s, f, frames)
    runs += vae_runs
    if how:
        notes.append(how + (f"; {encoded}" if conditioning is not None and encoded else ""))
    return Plan(variant.name, s, passes, tuple(runs), tuple(notes))


def _text_to_video_transformer(cfg: Mapping[str, Any]) -> bool:
    """A bare transformer config runs under ``CogVideoXPipeline`` unless it takes a conditioning latent on
    channels (``in_channels`` ≠ ``out_channels``) or an ``ofs``: then under the image-to-video pipeline."""
    get = lambda key: cfg.get(key, TRANSFORMER_DEFAULTS[key])  # noqa: E731
    return get("in_channels") == get("out_channels") and not get("ofs_embed_dim")


@register_pipeline("CogVideoXPipeline", denoisers=("CogVideoXTransformer3DModel",), when=_text_to_video_transformer,
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def cogvideox_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``CogVideoXPipeline.__call__`` (pipeline_cogvideox.py:507): see the module docstring."""
    return cogvideox_plan(components, s, TEXT_TO_VIDEO)
