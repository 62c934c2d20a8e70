"""Measured fixtures against flopcalc's estimate, for a family's own test file to run on its cases alone.

``fixtures_of`` / ``assert_fixture_exact``: every measured fixture of some cases, as ``tests/test_fixtures.py`` checks
them all (the same comparison: torch total and every measured module path exact, parameters exact, thop exact).

``fixtures`` / ``assert_fixture`` / ``fixture_component``: one fixture against flopcalc's estimate of the same run,
the torch total and every recorded module path exact, parameters (total and per top-level module) exact, thop exact.
The run is estimated on the fixture's own folder (the pipeline folder above it when there is one, or ``model`` /
``index`` given), at the fixture's size and frame count, resolution binning off, or at the settings and components
a test passes (a family option, another index). No torch needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import test_fixtures as shared

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "validation" / "fixtures"


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


def fixtures(case: str) -> list[Path]:
    return sorted((FIXTURES / case).glob("*.json"))


def fixture_component(fixture: dict, settings: Settings | None = None, *, index: dict | None = None,
                      components: dict | None = None, name: str | None = None, convention: str = "torch"):
    """The component run of ``fixture`` as flopcalc plans it: under ``index`` (default: the pipeline folder's
    ``model_index.json``) with ``components`` (default: the folder's configs), at ``settings`` (default: the
    fixture's height, width and frames, binning off)."""
    s = fixture["settings"]
    config_dir = REPO / fixture["config_dir"]
    folder = config_dir.parent if (config_dir.parent / "model_index.json").exists() else config_dir
    source = resolve(str(folder))
    if settings is None:
        settings = Settings(height=s.get("height"), width=s.get("width"), num_frames=s.get("num_frames"),
                            resolution_binning=False)
    comps = dict(source.components) if components is None else components
    report = estimate_configs(dict(source.model_index or {}) if index is None else index, comps, settings,
                              convention=convention)
    name = name or fixture["component"]
    built = fixture.get("built_class", fixture["class_name"])
    (comp,) = [c for c in report.components if c.component == name and c.call == fixture["call"]
               and c.class_name == built]
    return comp


def assert_fixture(path: Path, settings: Settings | None = None, **kwargs: Any) -> None:
    fixture = json.loads(path.read_text())
    comp = fixture_component(fixture, settings, **kwargs)
    assert 2 * comp.macs_per_run == fixture["torch"]["flops"], path.name
    # a call made of rows of several shapes (pieces, e.g. a batched call whose first row runs once-per-call work):
    # each module's work summed over the pieces, its parameters read from the first
    pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
    for module_path, flops in fixture["torch"]["by_module"].items():
        total = sum(p.count * (n.per_item.macs("torch") if (n := (p if module_path == "Global" else
                                                                   p.find(module_path))) else 0) for p in pieces)
        assert 2 * total == flops, f"{path.name}: {module_path}"
    assert comp.params == fixture["params"], path.name
    if sum(fixture["params_by_module"].values()) <= fixture["params"]:  # no tied weights
        for module_path, params in fixture["params_by_module"].items():
            node = pieces[0].find(module_path)
            if node is not None:
                assert node.total.params == params, f"{path.name}: {module_path}"
    if "macs" in fixture.get("thop", {}):
        thop = fixture_component(fixture, settings, convention="thop", **kwargs)
        assert thop.tree.total.macs("thop") == fixture["thop"]["macs"], path.name
