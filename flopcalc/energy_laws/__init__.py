"""Energy, latency and CO2e of a generation on a named GPU, predicted from flopcalc's exact counts.

Modules: :mod:`features` (per-item op-class work of a report), :mod:`laws` (the laws and their
fits), :mod:`nnls`, :mod:`records` (measurement CSVs), :mod:`fit` (calibration with
leave-one-model-out errors), :mod:`predict` (the prediction, :func:`energy`), :mod:`render`,
:mod:`plot`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["EnergyResult", "energy"]  # predict(): flopcalc.energy_laws.predict.predict

if TYPE_CHECKING:
    from flopcalc.energy_laws.predict import EnergyResult, energy


def __getattr__(name: str) -> Any:
    """Lazy: the CLI reads ``records.COLUMNS`` for its help text without importing numpy."""
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("flopcalc.energy_laws.predict"), name)
    raise AttributeError(f"module 'flopcalc.energy_laws' has no attribute {name!r}")
