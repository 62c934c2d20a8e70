"""Activation peaks: the largest live activation memory of one forward (or VAE decode), an estimate.

Method: the peak of live floating activation elements of the real module was measured at batch 1 on the meta
device at five sizes, with the attention's math path (the N×N score matrix materialised) and with the fused
kernel (none), by ``validation/measure_activations.py`` (``validation/fixtures/activations``); and fitted per
component as ``c0 + c1·n + c2·n²`` in the latent positions ``n`` (height × width × frames of the latent) by
``validation/fit_activations.py``, which writes ``flopcalc/data/activation_fit.json`` with each fit's
leave-one-out error. An estimate is given only for configs measured (matched by content); at batch B it is
B × the batch-1 peak (activations scale with the batch), in the activation dtype's bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

_DATA = Path(__file__).parent / "data" / "activation_fit.json"
ATTENTION = ("fused", "math")


def config_key(config: Mapping[str, Any]) -> str:
    """A component config's identity: the sha256 of its keys not starting with ``_`` (16 hex digits)."""
    body = json.dumps({k: v for k, v in config.items() if not str(k).startswith("_")}, sort_keys=True, default=str)
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

    @property
    def extrapolated(self) -> bool:
        return not self.n_range[0] <= self.n <= self.n_range[1]

    def to_dict(self) -> dict[str, Any]:
        return {"attention": self.attention, "elements": self.elements, "loo_max_rel_error": self.loo_max_rel_error,
                "n": self.n, "fitted_n_range": list(self.n_range), "extrapolated": self.extrapolated,
                "measured_on": self.measured_on, "fitted_text_len": self.text_len}


def activation_peak(class_name: str, call: str, config: Mapping[str, Any], shape: Mapping[str, Any],
                    attention: str) -> ActivationPeak | None:
    """The fitted peak of ``class_name.call`` on the latent ``shape`` (a plan's RunShape fields), or None
    when this config was not measured."""
    entry = _fits().get(f"{class_name}.{call}:{config_key(config)}")
    if entry is None or attention not in entry:
        return None
    fit = entry[attention]
    n = shape["latent_height"] * shape["latent_width"] * (shape.get("latent_frames") or 1)
    c0, c1, c2 = fit["coef"]
    elements = max(0, round(c0 + c1 * n + c2 * n * n))
    return ActivationPeak(attention, elements, fit["loo_max_rel_error"], n, tuple(fit["n_range"]), entry["measured_on"],
                          entry["settings"].get("text_len"))
