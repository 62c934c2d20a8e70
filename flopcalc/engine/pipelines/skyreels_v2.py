"""SkyReels V2 text-to-video (diffusers ``pipelines/skyreels_v2/pipeline_skyreels_v2.py``,
``SkyReelsV2Pipeline``) and its diffusion-forcing sibling (``pipeline_skyreels_v2_diffusion_forcing.py``,
``SkyReelsV2DiffusionForcingPipeline``): the Wan 2.1 recipe (UMT5, the Wan VAE, reused from
:mod:`flopcalc.engine.pipelines.wan`) at SkyReels' defaults, and the diffusion-forcing loop's forwards counted
from its own timestep matrix (:func:`forcing_windows`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
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
)
from flopcalc.engine.pipelines.wan import _vae_runs, round_num_frames
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, INDEX, pipeline_option

pipeline_option("ar_step", kind=INDEX, bound=(10_000, "steps"),
                help="SkyReels V2 diffusion forcing: timesteps each causal block lags (0)",
                refusal="it has no diffusion-forcing schedule")
pipeline_option("causal_block_size", kind=COUNT, bound=(4096, "latent frames"),
                help="SkyReels V2 diffusion forcing: latent frames per block", refusal="it has no diffusion-forcing schedule")
pipeline_option("overlap_history", kind=COUNT, bound=(4096, "frames"),
                help="SkyReels V2 diffusion forcing: long-video overlap frames",
                refusal="it generates no long video in overlapping windows")
pipeline_option("base_num_frames", kind=COUNT, bound=(4096, "frames"),
                help="SkyReels V2 diffusion forcing: long-video window (97)",
                refusal="it generates no long video in overlapping windows", examples=("121",))

#: ``SkyReelsV2Pipeline.__call__`` defaults (pipeline_skyreels_v2.py:380-398); the diffusion-forcing
#: pipeline's are the same (pipeline_skyreels_v2_diffusion_forcing.py:600-625).
HEIGHT, WIDTH, NUM_FRAMES, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 544, 960, 97, 50, 6.0, 512
#: ``check_inputs``: height and width must divide by 16 (pipeline_skyreels_v2.py:289).
SIZE_MULTIPLE = 16
#: ``SkyReelsV2DiffusionForcingPipeline.__call__``: ``base_num_frames`` 97, ``ar_step`` 0,
#: ``causal_block_size`` None (the transformer's ``num_frame_per_block``), ``overlap_history`` None.
BASE_NUM_FRAMES, AR_STEP = 97, 0


def vae_factors(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """``(vae_scale_factor_spatial, vae_scale_factor_temporal)`` as every SkyReels V2 pipeline's ``__init__`` sets
    them (pipeline_skyreels_v2.py:150-151): ``2 ** len(vae.temperal_downsample)`` and
    ``2 ** sum(vae.temperal_downsample)``, or 8 and 4 without a VAE (not the config's ``scale_factor_*``, which
    Wan reads)."""
    vae = components.get("vae")
    if vae is None:
        return 8, 4
    downsample = list(vae["temperal_downsample"])
    return 2 ** len(downsample), 2 ** sum(bool(d) for d in downsample)


def skyreels_settings(components: Mapping[str, Mapping[str, Any]], s: Settings, pipeline: str,
                      guidance: float = GUIDANCE) -> tuple[Settings, int, int, list[str]]:
    """The ``__call__`` defaults and checks every SkyReels V2 pipeline shares: 544×960, 97 frames, 50 steps,
    ``guidance_scale`` 6.0 (``guidance``: the image-to-video pipelines' 5.0), 512 UMT5 tokens; ``check_inputs`` raises unless height and width divide by 16
    (no flooring to the patch, unlike Wan); ``num_frames`` rounded to ``num_frames // 4 · 4 + 1`` with a
    warning (pipeline_skyreels_v2.py:483-488). Returns the resolved settings, the VAE's spatial and temporal
    factors and the notes."""
    f, t = vae_factors(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or NUM_FRAMES,
                steps=s.steps or STEPS, guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    expected = ["text_encoder", "transformer", "vae"] + (["image_encoder"] if "image_encoder" in components else [])
    notes = list(missing_notes(components, expected))
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{pipeline} height and width")
    frames = round_num_frames(s.num_frames, t)
    if frames != s.num_frames:
        notes.append(f"num_frames {s.num_frames} is rounded to {frames} (num_frames − 1 must divide by {t}), as "
                     f"{pipeline} does with a warning")
    s = replace(s, num_frames=frames)
    if s.negative_prompt and s.guidance_scale <= 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    return s, f, t, notes


def _refuse_sample_info(components: Mapping[str, Mapping[str, Any]], pipeline: str) -> None:
    transformer = components.get("transformer")
    if transformer is not None and transformer["inject_sample_info"]:
        raise ConfigError(f"the transformer has inject_sample_info (an fps embedding, SkyReels V2 DF 1.3B): "
                          f"{pipeline} passes it no fps and diffusers fails; it is run by "
                          "SkyReelsV2DiffusionForcingPipeline")


def _refuse_text_transformer(components: Mapping[str, Mapping[str, Any]], pipeline: str) -> None:
    transformer = components.get("transformer")
    if transformer is not None and transformer["image_dim"] is None:
        raise ConfigError(f"the transformer has no image_dim: a text-to-video checkpoint, whose forward {pipeline} "
                          "would pass CLIP image embeddings it cannot take; estimate SkyReelsV2Pipeline's folder")


def _refuse_image_transformer(components: Mapping[str, Mapping[str, Any]], pipeline: str) -> None:
    transformer = components.get("transformer")
    if transformer is not None and transformer["image_dim"] is not None:
        raise ConfigError(f"the transformer has an image_dim (CLIP image tokens, an image-to-video checkpoint): "
                          f"{pipeline} passes no image embeddings; estimate that checkpoint's own folder")


def _refuse_strength(s: Settings, pipeline: str, why: str) -> None:
    """``strength`` is a common option; a SkyReels V2 pipeline's ``__call__`` takes none."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {pipeline}: {why}")


def encode_once(components: Mapping[str, Mapping[str, Any]], s: Settings, frames: Any, why: str,
                note: str) -> tuple[list[ComponentRun], list[str]]:
    """``vae.encode`` of one conditioning input of ``frames`` frames at the output size (batch 1: the pipelines
    encode it once and repeat its latent over the batch), split as ``--vae-tiling`` says; and its note. Nothing
    without a VAE."""
    from flopcalc.engine.pipelines.wan import _encode_runs

    if "vae" not in components:
        return [], []
    runs = _encode_runs(component_class(components, "vae") or "?", components["vae"],
                        replace(s, batch_size=1, num_frames=frames), bool(s.vae_tiling))
    return [replace(r, why=why) for r in runs], [note]


def _text_runs(components, s: Settings, passes: int) -> list[ComponentRun]:
    return text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))


@register_pipeline("SkyReelsV2Pipeline", guidance="separate", denoisers=("SkyReelsV2Transformer3DModel",),
                   when=lambda cfg: cfg.get("image_dim") is None and not cfg.get("inject_sample_info"),
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def skyreels_v2_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``SkyReelsV2Pipeline.__call__`` (pipeline_skyreels_v2.py:380-617): 544×960, 97 frames (25 latent frames),
    50 steps, ``guidance_scale`` 6.0, 512 UMT5 tokens per prompt (padding counted in full). Under guidance
    (``guidance_scale > 1``) the negative prompt ("" by default) is encoded too and the transformer runs twice per
    step (two forwards, lines 554 and 564), on one timestep each. ``vae.decode`` once per video, untiled, frame by
    frame with the causal cache (line 606), as :mod:`flopcalc.engine.pipelines.wan` counts it."""
    _refuse_strength(s, "SkyReelsV2Pipeline", "it generates from noise (no input video)")
    _refuse_sample_info(components, "SkyReelsV2Pipeline")
    _refuse_image_transformer(components, "SkyReelsV2Pipeline")
    s, f, t, notes = skyreels_settings(components, s, "SkyReelsV2Pipeline")
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent_frames = (s.num_frames - 1) // t + 1
    runs = _text_runs(components, s, passes)
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes, latent_frames=latent_frames)
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan("SkyReelsV2Pipeline", s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


#: ``SkyReelsV2ImageToVideoPipeline.__call__`` (pipeline_skyreels_v2_i2v.py:490): ``guidance_scale`` 5.0.
I2V_GUIDANCE = 5.0


@register_pipeline("SkyReelsV2ImageToVideoPipeline", guidance="separate", denoisers=("SkyReelsV2Transformer3DModel",),
                   when=lambda cfg: cfg.get("image_dim") is not None,
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def skyreels_v2_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                        index: Mapping[str, Any] | None = None) -> Plan:
    """``SkyReelsV2ImageToVideoPipeline.__call__`` (pipeline_skyreels_v2_i2v.py:480-750): the ``SkyReelsV2Pipeline``
    defaults but ``guidance_scale`` 5.0, and the image, as Wan 2.1 I2V (:mod:`flopcalc.engine.pipelines.wan_i2v`, whose
    pieces are reused):

    * ``encode_image`` (line 661): the CLIP vision ``image_encoder`` once on the image, its ``hidden_states[-2]``
      (``(image_size / patch)² + 1`` tokens) into the transformer's ``image_embedder`` and every ``attn2``'s added
      k/v (the context split at a hard-coded 512 text tokens: no law in the text length);
    * ``prepare_latents`` (line 450): the image followed by ``num_frames − 1`` zero frames VAE-encoded once
      (repeated over the batch), its latent and 4 mask channels concatenated to the noise (the 36 input channels);
    * the transformer twice per step under guidance (lines 700, 711), one timestep each; ``vae.decode`` once per
      video (line 740)."""
    from flopcalc.engine.pipelines.wan_i2v import _image_encoder_runs

    name = "SkyReelsV2ImageToVideoPipeline"
    _refuse_strength(s, name, "the image conditions the video (VAE-encoded once, with zeros for the frames after "
                              "it) and every step runs")
    _refuse_text_transformer(components, name)
    s, f, t, notes = skyreels_settings(components, s, name, I2V_GUIDANCE)
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent_frames = (s.num_frames - 1) // t + 1
    runs = _text_runs(components, s, passes)
    image_runs, image_tokens = _image_encoder_runs(components, s)
    runs += image_runs
    encode, encode_notes = encode_once(
        components, s, s.num_frames, f"1 conditioning video: the image + {s.num_frames - 1} zero frame(s)",
        f"the image is VAE-encoded once with {s.num_frames - 1} zero frames after it, and its latent repeated over "
        "the batch")
    runs += encode
    notes += encode_notes
    denoise = denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes, latent_frames=latent_frames)
    runs += [replace(r, shape=replace(r.shape, image_tokens=image_tokens)) for r in denoise]
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan(name, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


# --------------------------------------------------------------------------- diffusion forcing


def timestep_matrix_rows(num_blocks: Any, steps: Any, ar_step: int, pre_ready_blocks: int = 0) -> Any:
    """Rows of ``generate_timestep_matrix`` (pipeline_skyreels_v2_diffusion_forcing.py:418-572), one denoising
    forward each: ``S + (n − k − 1) · min(a, S)`` for ``n`` blocks of which the first ``k`` start finished.

    Derivation: with ``D = S + 1`` (``num_iterations``), a row advances block 0 (and any block whose
    predecessor stood at ``≥ S``) by one and sets every other block to its predecessor's new value minus ``a``
    (before clamping to ``[0, D]``); so at row ``r`` the ``j``-th unfinished block stands at ``r − j·a``, and a
    block whose predecessor finishes takes over one step later at ``S − a`` (``a ≤ S``) or from 0 (``a > S``:
    the blocks then run one after another). The rows end when the last block reaches ``S``:
    ``r = S + (n − k − 1) · min(a, S)``. Synchronous (``a`` = 0): ``S`` rows. The tests check it against
    diffusers' own function."""
    return steps + (num_blocks - pre_ready_blocks - 1) * min(ar_step, int(steps))


@dataclass(frozen=True)
class ForcingWindow:
    """One ``prepare_latents`` iteration of the diffusion-forcing loop: ``forwards`` transformer calls (per
    guidance pass), each on ``frames`` latent frames (the valid interval, ``[0, num_blocks · causal_block_size)``),
    after which ``kept`` latent frames are appended to the video."""

    frames: Any
    forwards: Any
    kept: Any


def forcing_windows(latent_frames: Any, steps: Any, *, ar_step: int, causal_block_size: int,
                    base_latent_frames: int | None, overlap_latent_frames: int | None, first_prefix: int = 0,
                    matrix_base: str = "window") -> list[ForcingWindow]:
    """The iterations of the diffusion-forcing loop (``SkyReelsV2DiffusionForcingPipeline.__call__``, lines
    791-950; the image-to-video sibling's, pipeline_skyreels_v2_diffusion_forcing_i2v.py:820-985).

    Short video (``overlap_latent_frames`` None): one iteration on all ``L = latent_frames``. Long video
    (``overlap_history`` set and ``num_frames > base_num_frames``): ``n_iter = 1 + (L − B − 1) // (B − O) + 1``
    iterations; the first on ``min(L, B)`` frames, iteration ``k`` on ``min(L − (k(B − O) + O) + O, B)`` frames whose
    first ``O − O mod c`` are the prefix (already denoised: their blocks start finished) and keeps the frames
    after the first ``O``. The first iteration's prefix is ``first_prefix`` frames (image-to-video: the image's
    one latent frame). Each iteration's ``generate_timestep_matrix`` has ``n = frames // c`` blocks, of which
    ``prefix // c`` start finished, and rows :func:`timestep_matrix_rows`; its valid interval is
    ``[0, b · c)`` for ``b`` the blocks of the window it is given (``matrix_base``: ``"window"``, the iteration's
    own frames, as the text-to-video pipeline passes, so ``b = n``: each forward runs on the ``n · c`` frames of
    the whole blocks; ``"base"``, ``B`` (or ``L``), as the image-to-video one does: where ``b > n`` its update loop
    indexes past the ``n · c`` mask and diffusers fails, refused here)."""
    c = causal_block_size
    if overlap_latent_frames is None:
        plan = [(latent_frames, first_prefix, latent_frames)]
        matrix_frames = latent_frames
    else:
        big, o = base_latent_frames, overlap_latent_frames
        n_iter = 1 + (latent_frames - big - 1) // (big - o) + 1
        if n_iter < 1:
            raise OptionError(f"{latent_frames} latent frame(s) to generate give no long-video iteration with a base of "
                              f"{big} and an overlap of {o} (1 + (L − B − 1) // (B − O) + 1 < 1): diffusers returns "
                              "nothing to decode; raise num_frames")
        first = min(latent_frames, big)  # prepare_latents: min(L − O + O, B)
        plan = [(first, first_prefix, first)]
        plan += [(f, o - o % c, f - o) for f in (min(latent_frames - (k * (big - o) + o) + o, big)
                                                  for k in range(1, n_iter))]
        matrix_frames = big
    windows = []
    for frames, prefix, kept in plan:
        blocks = frames if c == 1 else frames // c  # c == 1 keeps a law in F at the defaults
        ready = prefix // c
        if blocks <= ready:
            raise OptionError(f"a diffusion-forcing window of {frames} latent frame(s) holds no causal block of {c} "
                              f"frame(s) after its {prefix} prefix frame(s): diffusers fails on it (an empty timestep "
                              "matrix); raise num_frames, or choose base_num_frames, overlap_history or "
                              "causal_block_size so that every window holds one")
        given = blocks if matrix_base == "window" else matrix_frames // c
        width = blocks * c if c > 1 else frames
        if given > blocks:  # numeric only: a law is refused for long videos
            raise OptionError(f"a diffusion-forcing window of {frames} latent frame(s) is shorter than the base window "
                              f"of {given * c}: the image-to-video pipeline's valid interval then runs past its update "
                              "mask and diffusers fails (IndexError); choose num_frames, base_num_frames and "
                              "overlap_history so that the last window is a whole base window")
        windows.append(ForcingWindow(width, timestep_matrix_rows(blocks, steps, ar_step, ready), kept))
    return windows


def _forcing_options(components: Mapping[str, Mapping[str, Any]], s: Settings, t: int, requested_frames: int,
                     pipeline: str) -> tuple[int, int, int | None, int | None]:
    """``ar_step``, ``causal_block_size`` (None: the transformer's ``num_frame_per_block``), and for a long video
    the base and overlap in latent frames (``(n − 1) // 4 + 1`` each), as ``__call__`` resolves them."""
    ar_step = AR_STEP if s.ar_step is None else s.ar_step
    transformer = components.get("transformer")
    block = s.causal_block_size
    if block is None:
        block = 1 if transformer is None else transformer["num_frame_per_block"]
    base = BASE_NUM_FRAMES if s.base_num_frames is None else s.base_num_frames
    if s.overlap_history is None and requested_frames > base:  # check_inputs, before the frames are rounded
        raise OptionError(f"{pipeline}: num_frames {requested_frames} exceeds base_num_frames {base}, and diffusers then "
                          "requires overlap_history (check_inputs: 17 or 37 recommended); give --overlap-history")
    if s.overlap_history is None or s.num_frames <= base:
        return ar_step, block, None, None
    base_latent, overlap_latent = (base - 1) // t + 1, (s.overlap_history - 1) // t + 1
    if overlap_latent >= base_latent:
        raise OptionError(f"overlap_history {s.overlap_history} ({overlap_latent} latent frames) must be shorter than "
                          f"base_num_frames {base} ({base_latent} latent frames): each long-video iteration has to add "
                          "frames")
    return ar_step, block, base_latent, overlap_latent


def _refuse_forcing_law(s: Settings, ar_step: int, block: int, long_video: bool) -> None:
    if s.symbolic and (ar_step != 0 or block != 1 or long_video):
        raise FlopcalcError("the asynchronous or long-video diffusion-forcing schedule (ar_step, causal_block_size, "
                            "overlap_history) has no closed-form law in S and F: use the numeric estimate")


@register_pipeline("SkyReelsV2DiffusionForcingPipeline", guidance="separate", denoisers=("SkyReelsV2Transformer3DModel",),
                   when=lambda cfg: cfg.get("image_dim") is None and bool(cfg.get("inject_sample_info")),
                   options=("max_sequence_length", "num_frames", "vae_tiling", "ar_step", "causal_block_size",
                            "overlap_history", "base_num_frames"))
def skyreels_v2_diffusion_forcing_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                           index: Mapping[str, Any] | None = None) -> Plan:
    """``SkyReelsV2DiffusionForcingPipeline.__call__`` (pipeline_skyreels_v2_diffusion_forcing.py:600-979): the
    ``SkyReelsV2Pipeline`` defaults (544×960, 97 frames, 50 steps, ``guidance_scale`` 6.0, 512 tokens), and
    ``base_num_frames`` 97, ``ar_step`` 0, ``causal_block_size`` None (the transformer's ``num_frame_per_block``,
    1), ``overlap_history`` None.

    * Each forward passes ``enable_diffusion_forcing=True`` and a ``(batch, f)`` timestep, one per latent frame of
      the window: the transformer's time embedder and ``time_proj`` run on ``f`` rows; ``fps`` feeds
      ``fps_projection`` where the transformer has ``inject_sample_info``.
    * The forwards are the rows of ``generate_timestep_matrix`` (:func:`timestep_matrix_rows`), each with the
      guidance passes (two separate forwards under guidance). At the defaults (synchronous, one frame per
      block, a short video): ``steps`` forwards on all 25 latent frames, like ``SkyReelsV2Pipeline``.
      ``ar_step > 0`` staggers the blocks of ``causal_block_size`` frames: more rows, each still on the whole
      window (the valid interval always spans every block: the pipeline passes the window's own frame count as
      ``base_num_latent_frames``).
    * Long video (``overlap_history`` given, ``num_frames > base_num_frames``): :func:`forcing_windows`.
    * ``vae.decode`` once per video on the accumulated latent, as :mod:`flopcalc.engine.pipelines.wan` counts it."""
    return _forcing_plan(components, s, "SkyReelsV2DiffusionForcingPipeline", GUIDANCE)


def _forcing_plan(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str, guidance: float,
                  image: bool = False) -> Plan:
    """The diffusion-forcing plan both pipelines share; ``image``: the image-to-video one (the image VAE-encoded
    once into the first latent frame, the prefix of the first window; the matrix given the base window)."""
    _refuse_strength(s, name, "it generates from noise (no input video)" if not image else
                     "the image is the first latent frame and every step runs")
    _refuse_image_transformer(components, name)
    requested = s.num_frames or NUM_FRAMES
    s, f, t, notes = skyreels_settings(components, s, name, guidance)
    ar_step, block, base_latent, overlap_latent = _forcing_options(components, s, t, requested, name)
    _refuse_forcing_law(s, ar_step, block, overlap_latent is not None)
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent_frames = (s.num_frames - 1) // t + 1
    windows = forcing_windows(latent_frames, s.steps, ar_step=ar_step, causal_block_size=block,
                              base_latent_frames=base_latent, overlap_latent_frames=overlap_latent,
                              first_prefix=1 if image else 0, matrix_base="base" if image else "window")
    runs = _text_runs(components, s, passes)
    if image:
        encode, encode_notes = encode_once(
            components, s, 1, "the image (1 frame), once", "the image is VAE-encoded once (one latent frame, repeated "
            "over the batch): the first latent frame, a finished prefix in the first window; no last_image")
        runs += encode
        notes += encode_notes
    runs += forcing_runs(components, s, f, passes, windows)
    decoded = sum(w.kept for w in windows) if len(windows) > 1 else latent_frames
    notes.append(_forcing_note(windows, ar_step, block, passes))
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, decoded, bool(s.vae_tiling))
    return Plan(name, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


#: ``SkyReelsV2DiffusionForcingImageToVideoPipeline.__call__`` (pipeline_skyreels_v2_diffusion_forcing_i2v.py:655):
#: ``guidance_scale`` 5.0.
DF_I2V_GUIDANCE = 5.0


@register_pipeline("SkyReelsV2DiffusionForcingImageToVideoPipeline", guidance="separate",
                   options=("max_sequence_length", "num_frames", "vae_tiling", "ar_step", "causal_block_size",
                            "overlap_history", "base_num_frames"))
def skyreels_v2_diffusion_forcing_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                                          index: Mapping[str, Any] | None = None) -> Plan:
    """``SkyReelsV2DiffusionForcingImageToVideoPipeline.__call__`` (pipeline_skyreels_v2_diffusion_forcing_i2v.py:
    645-1061): the diffusion-forcing defaults but ``guidance_scale`` 5.0, a diffusion-forcing (text-to-video)
    transformer, no CLIP image encoder; the image is preprocessed to the output size and VAE-encoded once
    (``prepare_latents``, line 560: one frame, one latent frame), written into the first latent frame: the first
    window's prefix (``num_pre_ready`` 1: a finished block only when ``causal_block_size`` is 1). The timestep
    matrix is given ``base_num_latent_frames`` rather than the window's own frames (line 283), which changes
    nothing where the windows are whole blocks and makes diffusers fail where they are not (refused).
    ``last_image`` (an input, not an option) is not modelled."""
    return _forcing_plan(components, s, "SkyReelsV2DiffusionForcingImageToVideoPipeline", DF_I2V_GUIDANCE, image=True)


#: ``SkyReelsV2DiffusionForcingVideoToVideoPipeline.__call__`` (pipeline_skyreels_v2_diffusion_forcing_v2v.py:
#: 689-712): ``num_frames`` 120 new frames (rounded to 121), ``guidance_scale`` 6.0.
V2V_NUM_FRAMES = 120


@register_pipeline("SkyReelsV2DiffusionForcingVideoToVideoPipeline", guidance="separate",
                   options=("max_sequence_length", "num_frames", "vae_tiling", "ar_step", "causal_block_size",
                            "overlap_history", "base_num_frames"))
def skyreels_v2_diffusion_forcing_video_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                                          index: Mapping[str, Any] | None = None) -> Plan:
    """``SkyReelsV2DiffusionForcingVideoToVideoPipeline.__call__`` (pipeline_skyreels_v2_diffusion_forcing_v2v.py:
    689-1068): extends an input video by ``num_frames`` (120 → 121) frames, always in long-video windows, so
    ``overlap_history`` is required (diffusers computes ``(overlap_history − 1) // 4`` unconditionally):

    * ``prepare_latents`` (first iteration, line 455): the input video's last ``overlap_history`` frames (at the
      output size) VAE-encoded once (one input video), ``(overlap_history − 1) // 4 + 1`` latent frames, truncated
      to whole causal blocks: the first window's prefix; later windows take theirs from the generated latent;
    * windows as :func:`forcing_windows` (the first on ``min(L, B)`` frames, each matrix given its own window);
    * ``vae.decode`` once per video on the accumulated latent (its first window's prefix included); the decoded
      frames are concatenated to the input video (no MACs)."""
    name = "SkyReelsV2DiffusionForcingVideoToVideoPipeline"
    _refuse_strength(s, name, "it extends the input video (its last overlap_history frames VAE-encoded) and every "
                              "step runs")
    _refuse_image_transformer(components, name)
    if s.overlap_history is None:
        raise OptionError(f"{name} needs --overlap-history: diffusers computes (overlap_history − 1) // 4 "
                          "unconditionally and fails without it (17 or 37 recommended)")
    if s.symbolic:
        raise FlopcalcError("the video-to-video diffusion-forcing windows have no closed-form law in S and F: use "
                            "the numeric estimate")
    s = replace(s, num_frames=s.num_frames or V2V_NUM_FRAMES)
    s, f, t, notes = skyreels_settings(components, s, name)
    ar_step, block, _, _ = _forcing_options(components, s, t, s.num_frames, name)
    base = BASE_NUM_FRAMES if s.base_num_frames is None else s.base_num_frames
    base_latent, overlap_latent = (base - 1) // t + 1, (s.overlap_history - 1) // t + 1
    if overlap_latent >= base_latent:
        raise OptionError(f"overlap_history {s.overlap_history} ({overlap_latent} latent frames) must be shorter than "
                          f"base_num_frames {base} ({base_latent} latent frames): each window has to add frames")
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent_frames = (s.num_frames - 1) // t + 1
    windows = forcing_windows(latent_frames, s.steps, ar_step=ar_step, causal_block_size=block,
                              base_latent_frames=base_latent, overlap_latent_frames=overlap_latent,
                              first_prefix=overlap_latent - overlap_latent % block)
    runs = _text_runs(components, s, passes)
    encode, encode_notes = encode_once(
        components, s, s.overlap_history, f"the input video's last {s.overlap_history} frame(s), once",
        f"the input video's last {s.overlap_history} frames (at least that many are assumed) are VAE-encoded once: "
        "the first window's prefix")
    runs += encode
    notes += encode_notes
    runs += forcing_runs(components, s, f, passes, windows)
    notes.append(_forcing_note(windows, ar_step, block, passes))
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, sum(w.kept for w in windows), bool(s.vae_tiling))
    return Plan(name, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


def forcing_runs(components, s: Settings, f: int, passes: int, windows: list[ForcingWindow]) -> list[ComponentRun]:
    """The transformer's forwards, one run per distinct window (frames), each with one timestep per frame."""
    if "transformer" not in components:
        return []
    videos = s.batch_size * s.num_images_per_prompt
    by_frames: dict[Any, int] = {}
    for w in windows:
        by_frames[w.frames] = by_frames.get(w.frames, 0) + w.forwards
    cls = component_class(components, "transformer") or "?"
    return [ComponentRun("transformer", cls, "forward", "denoiser",
                         RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=s.max_sequence_length,
                                  latent_frames=frames, timestep_tokens=frames),
                         forwards * passes * videos,
                         f"{forwards} forward(s) on {frames} latent frame(s) × {passes} pass(es) × {videos} video(s)")
            for frames, forwards in by_frames.items()]


def _forcing_note(windows: list[ForcingWindow], ar_step: int, block: int, passes: int) -> str:
    mode = "synchronous" if ar_step == 0 else f"asynchronous (ar_step {ar_step})"
    parts = ", ".join(f"{w.forwards} forward(s) on {w.frames} latent frame(s)" for w in windows)
    return (f"diffusion forcing, {mode}, causal blocks of {block} frame(s), {len(windows)} iteration(s): {parts}; "
            f"× {passes} guidance pass(es); one timestep per latent frame (the time embedder runs on each)")
