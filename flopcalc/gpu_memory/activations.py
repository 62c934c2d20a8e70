"""Activation peaks: the largest live activation memory of one forward (or VAE decode or encode), an estimate.

Method: the peak of live floating activation elements of the real module was measured at batch 1 on the meta
device at five sizes, with the attention's math path (the N×N score matrix materialised) and with the fused
kernel (none), by ``validation/measure_activations.py`` (``validation/fixtures/activations``), with the peak of each
phase of the call (the module running, an attention module apart); and fitted per component in the latent positions
``n`` (height × width × frames of the latent; a text encoder's sequence length; a VAE encode's input pixels of one
frame, :func:`positions`; a call whose n its config fixes, as Kandinsky 2.2's prior or a CLIP image encoder at its
``image_size``, by its one measured peak) as the largest of quadratics ``c0 + c1·n + c2·n²`` (``phases``;
a tiled video decode whose every tile runs over all frames adds ``ct·t`` in the latent frames t):
one per phase, each fitted to that phase's peaks (the peak moves from one layer to another as n grows), or one
through the call's peaks where that does as well — by ``validation/fit_activations.py``, which writes
``flopcalc/data/activation_fit.json`` with each fit's leave-one-out error. An estimate is given only for configs measured (matched by the keys the architecture
reads, :func:`config_key`, and by the inputs the call is fed, :func:`form`); at batch B it is
B × the batch-1 peak (activations scale with the batch), in the activation dtype's bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

_DATA = Path(__file__).resolve().parents[1] / "data" / "activation_fit.json"
ATTENTION = ("fused", "math")


def config_key(config: Mapping[str, Any]) -> str:
    """A component config's identity for its fits: the sha256 (16 hex digits) of the keys its class declares (what
    the architecture reads, :func:`flopcalc.engine.config.declare_keys`), each as the config gives it or, where it
    leaves one out, as the class's default gives it (what the assemblers read, ``registry.config_of``), so that
    checkpoints of one architecture share a fit whatever else their config.json carries (versions, dtypes, names) and
    whether or not it spells out the defaults (Wan 2.1 T2V 1.3B's VAE config and Wan 2.2 A14B's, which writes
    ``is_residual: false``, ``patch_size: null``, ... out); all keys not starting with ``_`` (defaults included) for a
    class that declares none."""
    from flopcalc.engine.config import class_name_of, declared_keys
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.registry import config_of, lookup

    name = class_name_of(config)
    try:
        lookup(name)  # imports the family module, which declares the class's keys
    except FlopcalcError:
        pass
    keys = declared_keys(name)
    values = {**config_of(config, component="config").defaults, **config}
    body = json.dumps({k: v for k, v in values.items() if not str(k).startswith("_") and (keys is None or k in keys)},
                      sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def _fits() -> dict[str, Any]:
    with _DATA.open(encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(frozen=True)
class ActivationPeak:
    """The estimated activation peak of one call at batch 1, in elements, for one attention path."""

    attention: str
    elements: int
    loo_max_rel_error: float
    n: int
    n_range: tuple[int, int]
    measured_on: str
    text_len: int | None = None  # the text length the fit was measured at (None: no text input)
    num_frames: int | None = None  # the frames the fit was measured at (None: an image call)

    @property
    def extrapolated(self) -> bool:
        return not self.n_range[0] <= self.n <= self.n_range[1]

    def to_dict(self) -> dict[str, Any]:
        return {"attention": self.attention, "elements": self.elements, "loo_max_rel_error": self.loo_max_rel_error,
                "n": self.n, "fitted_n_range": list(self.n_range), "extrapolated": self.extrapolated,
                "measured_on": self.measured_on, "fitted_text_len": self.text_len,
                "fitted_num_frames": self.num_frames}


#: Calls that run their module on one latent frame at a time, the frames decoded so far held beside it: their peak is
#: one frame's working set (the held frames are a few percent of it), so their fit is in one latent frame's positions
#: (:func:`positions` with ``per_frame``). EasyAnimate's ``AutoencoderKLMagvit._decode`` decodes the first latent frame,
#: then one per decoder call (autoencoder_kl_magvit.py:865-889): measured at 512², 2.61e9 elements at 49 frames, 2.59e9
#: at 25 (validation/activation_manifest.yaml, case ``easyanimate-v5.1-7b-zh-control-vae``), where a law in all the
#: latent's positions would halve. Tiled, the same call holds every decoded tile until they are blended: what grows with
#: the size is then those tiles, in all the latent's positions (one tile's working set the constant), so a tiled decode
#: is fitted in all of them.
FRAME_BY_FRAME = frozenset({("AutoencoderKLMagvit", "decode")})


def per_frame(class_name: str | None, call: str, *, tiled: bool = False) -> bool:
    """Whether ``class_name.call``'s fit is in one latent frame's positions (:data:`FRAME_BY_FRAME`, untiled)."""
    return not tiled and (class_name, call) in FRAME_BY_FRAME


def positions(shape: Mapping[str, Any], *, per_frame: bool = False) -> Any:
    """The n a fit is in: latent positions (height × width × frames) of a denoiser or VAE call, a text encoder's
    sequence length (an image encoder's tokens where its plan gives them); with ``per_frame``, one latent frame's
    (height × width: :data:`FRAME_BY_FRAME`). A decode planned with ``frames`` and no ``latent_frames`` decodes that
    many latent frames (Stable Video Diffusion's temporal decoder: no temporal compression, every frame in one chunk).
    A call on pixels (a VAE encode, an image encoder's fixed input): the pixels of one frame, height × width; the
    frames it encodes are held fixed by its fit (``settings.num_frames``, a one-frame encode fitted apart,
    :func:`single_frame`): the video encoders measured encode in temporal chunks (Wan's causal cache: one frame, then
    four at a time), so their peak follows one frame's pixels, not the clip."""
    if "latent_height" in shape:
        area = shape["latent_height"] * shape["latent_width"]
        return area if per_frame else area * (shape.get("latent_frames") or shape.get("frames") or 1)
    if "seq_len" in shape:
        return shape["seq_len"]
    return shape["height"] * shape["width"]


def pixel_call(shape: Mapping[str, Any]) -> bool:
    """Whether a planned call runs on pixels (a VAE encode, an image encoder): no latent grid, no sequence length."""
    return "latent_height" not in shape and "seq_len" not in shape and "height" in shape


#: Run-shape fields that change what a denoiser is fed, not its size (``flopcalc.engine.registry.RunShape``): one config
#: run with and without one of them peaks differently (SkyReels V2 14B: one timestep per latent frame under the
#: diffusion-forcing pipeline holds per-token modulation tensors, 2.4 × the fused peak of the text-to-video call).
FORM_FIELDS = ("image_tokens", "timestep_tokens", "reference_tokens", "text_len_2", "ip_image_embed_dim")


def form(shape: Mapping[str, Any]) -> tuple[str, ...]:
    """The :data:`FORM_FIELDS` a run shape sets: the inputs beyond the latent and the text that the call is fed."""
    return tuple(f for f in FORM_FIELDS if shape.get(f) is not None)


def fit_key(class_name: str, call: str, config: Mapping[str, Any], *, tiled: bool = False,
            single_frame: bool = False, fed: tuple[str, ...] = (), tile: int | None = None) -> str:
    """The key of a fit: the class, the call (``decode:tiled`` for a decode in spatial tiles at the class's default
    tiles, ``decode:tiled@512px`` at tiles of another size, measured to check the tile-size law; ``:single-frame`` for
    a video module run on one latent frame, an image: no temporal chunks, a law of its own; ``forward[image_tokens]``
    for a call fed the inputs :func:`form` names) and the config."""
    inputs = f"[{','.join(fed)}]" if fed else ""
    tiles = (f":tiled@{tile}px" if tile else ":tiled") if tiled else ""
    return f"{class_name}.{call}{tiles}{':single-frame' if single_frame else ''}{inputs}:" \
           f"{config_key(config)}"


def single_frame(shape: Mapping[str, Any]) -> bool:
    """Whether a planned call runs a video module on one latent frame (Cosmos Predict2 text-to-image's Wan VAE), or
    a video VAE encodes one frame (an image-to-video pipeline's input image: Wan 2.2 Animate's, HunyuanVideo I2V's)."""
    return shape.get("latent_frames") == 1 or (pixel_call(shape) and shape.get("frames") == 1)


def fit_entry(class_name: str, call: str, config: Mapping[str, Any], shape: Mapping[str, Any], *,
              tiled: bool = False, tile: int | None = None) -> Mapping[str, Any] | None:
    """The fitted entry (both attention paths) of ``class_name.call`` run on ``shape``: the single-frame fit of a
    video module run on one latent frame where there is one, else the call's own; None when this config was not
    measured."""
    fed = form(shape)
    keys = [fit_key(class_name, call, config, tiled=tiled, single_frame=True, fed=fed, tile=tile)] \
        if single_frame(shape) else []
    keys.append(fit_key(class_name, call, config, tiled=tiled, fed=fed, tile=tile))  # else the multi-frame fit, with its note
    return next((_fits()[k] for k in keys if k in _fits()), None)


def latent_frames(shape: Mapping[str, Any]) -> int | None:
    """The latent frames a planned video call runs on (as :func:`positions` counts them); None for a text encoder."""
    if "latent_height" not in shape:
        return None
    return shape.get("latent_frames") or shape.get("frames") or 1


def peak_elements(fit: Mapping[str, Any], n: int, frames: int | None = None) -> int:
    """A fit's peak in elements at ``n`` latent positions: the largest of its phases' quadratics ``c0 + c1·n +
    c2·n²``, plus ``ct·t`` for a phase fitted in the latent ``frames`` t apart (``[c0, c1, c2, ct]``: a tiled decode
    whose every tile runs over all frames, ``validation/fit_activations.py``), rounded, never below 0."""
    if frames is None and any(len(c) > 3 for c in fit["phases"]):
        raise ValueError("this fit follows the latent frames apart: give them")
    return max(0, round(max(c[0] + c[1] * n + c[2] * n * n + (c[3] * frames if len(c) > 3 else 0.0)
                            for c in fit["phases"])))


def activation_peak(class_name: str, call: str, config: Mapping[str, Any], shape: Mapping[str, Any],
                    attention: str, *, tiled: bool = False, tile: int | None = None) -> ActivationPeak | None:
    """The fitted peak of ``class_name.call`` on the latent ``shape`` (a plan's RunShape fields; for a tiled
    decode, the whole latent's; ``tile``: a decode measured at tiles of that side, not the default), or None when
    this config was not measured."""
    entry = fit_entry(class_name, call, config, shape, tiled=tiled, tile=tile)
    if entry is None or attention not in entry:
        return None
    fit = entry[attention]
    n = positions(shape, per_frame=per_frame(class_name, call, tiled=tiled))
    return ActivationPeak(attention, peak_elements(fit, n, latent_frames(shape)), fit["loo_max_rel_error"], n,
                          tuple(fit["n_range"]),
                          entry["measured_on"], entry["settings"].get("text_len"), entry["settings"].get("num_frames"))
