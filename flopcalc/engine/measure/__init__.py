"""Measuring a component flopcalc has no formula for (``flopcalc estimate --measure``).

:mod:`flopcalc.engine.measure.harness` (torch, diffusers, transformers: the ``[measure]`` extra) builds a
real module from its config on the meta device and counts it with
``torch.utils.flop_counter.FlopCounterMode``, with the input builders of
``flopcalc/engine/measure/inputs/`` — the harness and builders the validation fixtures are measured with
(``validation/measure.py`` is the same module). :mod:`flopcalc.engine.measure.component` turns one planned
run into a report row. Importing this package imports neither torch nor anything heavy.
"""
