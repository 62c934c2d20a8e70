"""Energy, latency and CO2e of a generation on a named GPU, predicted from flopcalc's exact counts.

Modules: :mod:`features` (per-item op-class work of a report), :mod:`laws` (the laws and their
fits), :mod:`nnls`, :mod:`records` (measurement CSVs), :mod:`fit` (calibration with
leave-one-model-out errors), :mod:`predict` (the prediction, :func:`energy`), :mod:`render`,
:mod:`plot`.
"""

from __future__ import annotations

from flopcalc.energy_laws.predict import EnergyResult, energy, predict

__all__ = ["EnergyResult", "energy", "predict"]
