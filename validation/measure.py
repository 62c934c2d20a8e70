"""``import measure`` for the validation scripts and tests: this name *is*
:mod:`flopcalc.engine.measure.harness` (the module object itself, not a copy).

The harness ships with flopcalc so that ``flopcalc estimate --measure`` builds a model's inputs with
the same builders the fixtures were measured with; its input builders are
``flopcalc/engine/measure/inputs/<family>.py`` (every module there is loaded). See validation/README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

_stray = sorted(p.name for p in Path(__file__).resolve().parent.glob("inputs_*.py"))
if _stray:
    raise ImportError(
        f"input builders now live in flopcalc/engine/measure/inputs/<family>.py: move {', '.join(_stray)} there "
        "and import from flopcalc.engine.measure.harness instead of measure"
    )

from flopcalc.engine.measure import harness  # noqa: E402

sys.modules[__name__] = harness
