"""Every measured fixture of some cases against flopcalc's estimate, as ``tests/test_fixtures.py`` checks them all
(the same comparison: torch total and every measured module path exact, parameters exact, thop exact), for a family's
own test file to run on its cases alone."""

from __future__ import annotations

from pathlib import Path

import test_fixtures as shared

FIXTURES = Path(__file__).resolve().parent.parent / "validation" / "fixtures"


def fixtures_of(*cases: str) -> list[Path]:
    """The fixture files of ``cases`` (each must have some)."""
    out = []
    for case in cases:
        files = sorted((FIXTURES / case).glob("*.json"))
        assert files, f"no fixtures for {case}: run validation/build_fixtures.py --only {case}"
        out += files
    return out


def assert_fixture_exact(path: Path) -> None:
    fixture = shared._load(path)
    comp = shared._component(fixture)
    assert 2 * shared._call_macs(comp, fixture) == fixture["torch"]["flops"]
    for module_path, flops in fixture["torch"]["by_module"].items():
        macs = shared._call_macs(comp, fixture) if module_path == "Global" else shared._module_macs(comp, fixture,
                                                                                                  module_path)
        assert 2 * macs == flops, module_path
    assert comp.params == fixture["params"]
    if sum(fixture["params_by_module"].values()) <= fixture["params"]:  # no tied weights
        pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
        for module_path, params in fixture["params_by_module"].items():
            for piece in pieces:
                node = piece.find(module_path)
                if node is not None:
                    assert node.total.params == params, module_path
    assert shared._call_macs(shared._component(fixture, "thop"), fixture) == fixture["thop"]["macs"]
