"""The package's import graph: no circles, and no import from a lower layer up to a higher one.

Every ``import`` and ``from … import`` in ``flopcalc/``, ``formulas/`` (installed as ``flopcalc.formulas``)
and ``model_cards/`` is an edge, wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): a deferred import is still a dependency. Family modules are imported by name from the
discovery index (:mod:`flopcalc.engine.discovery`), as plugins; that is not an import statement and not an
edge. The layer order is the one ``docs/architecture.md`` gives.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Bottom to top; a module belongs to the layer of the longest prefix that names it. An import may go to the
#: same layer or a lower one.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("flopcalc.engine.version", "flopcalc.engine.errors", "flopcalc.engine.limits",
                    "flopcalc.engine.cost", "flopcalc.engine.gradients")),
    ("block formulas", ("flopcalc.formulas",)),
    ("engine", ("flopcalc.engine",)),
    ("architectures", ("flopcalc.engine.architectures",)),
    ("pipelines", ("flopcalc.engine.pipelines",)),
    ("measuring", ("flopcalc.engine.measure",)),
    ("hardware", ("flopcalc.hardware",)),
    ("rendering", ("flopcalc.render",)),
    ("flops", ("flopcalc.flops",)),
    ("memory", ("flopcalc.gpu_memory",)),
    ("energy", ("flopcalc.energy_laws",)),
    ("training", ("flopcalc.training",)),
    ("page", ("flopcalc.html", "flopcalc.site")),
    ("command line", ("flopcalc.cli",)),
    ("public API", ("flopcalc", "flopcalc.__main__")),
)
SOURCES = (("flopcalc", ROOT / "flopcalc"), ("flopcalc.formulas", ROOT / "formulas"),
           ("flopcalc.model_cards", ROOT / "model_cards"))


def _modules() -> dict[str, Path]:
    out = {}
    for package, folder in SOURCES:
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # `import a.b.c` depends on the module it names
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        edges[name] = found
    return edges


def _layer(module: str) -> tuple[int, str]:
    best = None
    for rank, (layer, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank, layer)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")
    return best[1], best[2]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


MODULES = _modules()
EDGES = _edges(MODULES)


def _where(module: str) -> str:
    return str(MODULES[module].relative_to(ROOT))


def test_the_graph_is_read():
    assert len(MODULES) > 200
    assert "flopcalc.engine.registry" in EDGES["flopcalc.engine.architectures.flux"]
    assert "flopcalc.engine.cost" in EDGES["flopcalc.formulas.ops"] or "flopcalc.engine.cost" in set().union(
        *(EDGES[m] for m in MODULES if m.startswith("flopcalc.formulas.")))


def test_no_import_circles():
    cycles = _cycles(EDGES)
    assert not cycles, "import circles:\n" + "\n".join(" ↔ ".join(_where(m) for m in c) for c in cycles)


def test_no_upward_imports():
    upward = []
    for module, targets in sorted(EDGES.items()):
        rank, layer = _layer(module)
        for target in sorted(targets):
            target_rank, target_layer = _layer(target)
            if target_rank > rank:
                upward.append(f"{_where(module)} ({layer}) imports {_where(target)} ({target_layer})")
    assert not upward, "imports from a lower layer up to a higher one:\n" + "\n".join(upward)


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("cycle_free", [{"a": {"b"}, "b": set()}])
def test_the_cycle_finder_finds_cycles(cycle_free):
    assert _cycles(cycle_free) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_upward_edge_is_seen():
    assert _layer("flopcalc.engine.registry")[0] < _layer("flopcalc.cli.main")[0]
    assert _layer("flopcalc.engine.errors")[0] < _layer("flopcalc.formulas.ops")[0] < _layer("flopcalc.engine.config")[0]
