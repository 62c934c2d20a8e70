"""Shared pieces of the pipeline tests of a bundled card: its configs as flopcalc reads them
(``flopcalc.engine.sources.resolve``) and its measured fixtures."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

from flopcalc.engine.sources import resolve

FIXTURES = Path(__file__).resolve().parent.parent / "validation" / "fixtures"


class Card:
    """A bundled card named ``name`` whose fixtures are in ``validation/fixtures/<name>``."""

    def __init__(self, name: str) -> None:
        self.name = name

    @cached_property
    def _source(self):
        return resolve(self.name)

    def index(self) -> dict:
        """``model_index.json``."""
        return dict(self._source.model_index)

    def config(self, component: str) -> dict:
        """One component's ``config.json``."""
        return dict(self._source.components[component])

    def components(self) -> dict:
        """Every component's config."""
        return {name: self.config(name) for name in self._source.components}

    def fixture(self, filename: str) -> dict:
        """A measured fixture of the card's case."""
        return json.loads((FIXTURES / self.name / filename).read_text())


def runs_by_call(report) -> dict[str, int]:
    """``{"<component>.<call>": runs}`` of a report (a call split over several rows: their runs summed)."""
    out: dict[str, int] = {}
    for c in report.components:
        key = f"{c.component}.{c.call}"
        out[key] = out.get(key, 0) + c.runs
    return out
