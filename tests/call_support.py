"""Shared pieces of the pipeline tests that check a plan against a bundled card's fixtures and against the real
pipeline's ``__call__`` run on tiny random components on CPU: a recorder of what each component is called with,
and the fixture comparison (total, every measured module path, parameters) of one card.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "validation" / "fixtures"


class Recorder:
    """Counts the batch rows each hooked module or method is called with, and the shapes (after the batch
    dimension) of the tensor argument it is keyed by."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.shapes: dict[str, set] = {}

    def record(self, name: str, tensor: Any, extra: Any = ()) -> None:
        self.calls[name] += tensor.shape[0]
        self.shapes.setdefault(name, set()).add((*tuple(tensor.shape[1:]), *extra))

    def hook(self, module, name: str, key: str | int = 0, extra: Callable[[dict], tuple] | None = None) -> None:
        """Record ``module``'s forward calls by the argument ``key`` (a keyword name or a position)."""
        def pre(mod, args, kwargs):
            tensor = kwargs[key] if isinstance(key, str) and key in kwargs else args[key if isinstance(key, int) else 0]
            self.record(name, tensor, extra(kwargs) if extra else ())
        module.register_forward_pre_hook(pre, with_kwargs=True)

    def wrap(self, obj, method: str, name: str) -> None:
        """Record calls of ``obj.<method>`` (``vae.decode`` / ``vae.encode``) by their first tensor argument."""
        original = getattr(obj, method)

        def counted(x, *args, **kwargs):
            self.record(name, x)
            return original(x, *args, **kwargs)

        setattr(obj, method, counted)

    def planned_calls(self, report) -> dict[str, int]:
        """The report's runs keyed as :meth:`record` keys them (``component`` or ``component.call``)."""
        out: Counter = Counter()
        for c in report.components:
            out[c.component if c.call == "forward" else f"{c.component}.{c.call}"] += c.runs * _pieces(c)
        return dict(out)


def _pieces(comp) -> int:
    """Rows of one folded run: a run folded from several piece shapes counts each piece's own runs."""
    tree = comp.tree
    return sum(p.count for p in tree.children) if tree.formula == "pieces" else 1


def card_fixtures(card: str) -> list[Path]:
    return sorted((FIXTURES / card).glob("*.json"))


def assert_fixture(report, fixture: dict) -> None:
    """One measured fixture against the component of ``report`` that ran the measured call: total, every
    measured module path (depth 3), parameters (total and per top-level module) and thop's MACs."""
    built = fixture.get("built_class", fixture["class_name"])
    (comp,) = [c for c in report.components if c.class_name == built and c.call == fixture["call"]
               and (c.component == fixture["component"] or len(report.components) == 1)]
    for key in ("seq_len", "text_len"):
        if key in fixture["settings"]:
            assert comp.shape[key] == fixture["settings"][key]
    assert 2 * comp.macs_per_run == fixture["torch"]["flops"]
    for path, flops in fixture["torch"]["by_module"].items():
        node = comp.tree if path == "Global" else comp.tree.find(path)
        assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, path
    assert comp.params == fixture["params"]
    if sum(fixture["params_by_module"].values()) <= fixture["params"]:
        for path, params in fixture["params_by_module"].items():
            node = comp.tree.find(path)
            if node is not None:
                assert node.total.params == params, path
    if "macs" in fixture.get("thop", {}):
        assert comp.tree.total.macs("thop") == fixture["thop"]["macs"]


def read(path: Path) -> dict:
    return json.loads(path.read_text())
