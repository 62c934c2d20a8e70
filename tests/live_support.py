"""Shared pieces of the live tests, which re-measure the real modules: importing this module
skips the importing test module when torch, diffusers, transformers or thop are missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")
pytest.importorskip("thop")

from conftest import SEED  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "validation"))
import measure  # noqa: E402

print(f"\nflopcalc live tests: FLOPCALC_SEED={SEED}")

__all__ = ["REPO", "SEED", "assert_matches_measurement", "assert_runs_match", "check_plan", "measure", "random_size",
           "write_config"]


def write_config(tmp_path: Path, name: str, config: dict) -> Path:
    """A component folder holding ``config``, for the harness to build the real class from."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def assert_matches_measurement(comp, fx: dict, where: str, *, modules: bool = True, thop: bool = True) -> None:
    """A component estimate against a fresh measurement: the total, every measured module path,
    parameters (total and per top-level child), and thop's count."""
    assert 2 * comp.macs_per_run == fx["torch"]["flops"], where
    if modules:
        for path, flops in fx["torch"]["by_module"].items():
            node = comp.tree if path == "Global" else comp.tree.find(path)
            assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, f"{path}: {where}"
    assert comp.params == fx["params"], where
    if modules and sum(fx["params_by_module"].values()) <= fx["params"]:  # no tied weights
        for path, params in fx["params_by_module"].items():
            node = comp.tree.find(path)
            if node is not None:  # absent: the other call's modules (the encoder of a decode)
                assert node.total.params == params, f"{path}: {where}"
    if thop and "macs" in fx.get("thop", {}):
        assert comp.tree.total.macs("thop") == fx["thop"]["macs"], where


def assert_runs_match(runs: list[tuple[int, Any]], params: int, fx: dict, where: str) -> None:
    """A VAE call planned as ``(runs, tree)`` pieces (one piece untiled; one per tile shape, n tiles
    of it, when tiled) against the one measured call: total, every module path, thop (the trees hold
    both conventions), parameters of the whole model and per top-level module."""
    def total(path: str, convention: str = "torch") -> int:
        nodes = [(n, tree if path == "Global" else tree.find(path)) for n, tree in runs]
        return sum(n * node.per_item.macs(convention) for n, node in nodes if node is not None)

    assert 2 * total("Global") == fx["torch"]["flops"], where
    for path, flops in fx["torch"]["by_module"].items():
        assert 2 * total(path) == flops, f"{path}: {where}"
    assert params == fx["params"], where
    for path, count in fx["params_by_module"].items():
        for _, tree in runs:
            node = tree.find(path)
            assert node is None or node.total.params == count, f"{path}: {where}"
    assert total("Global", "thop") == fx["thop"]["macs"], where


def check_plan(config_dir: Path, name: str, settings, measure_settings: dict, *, index: dict | None = None,
               call: str = "forward", thop: bool = True, module_depth: int | None = None) -> None:
    """The component ``name`` (the config in ``config_dir``) as flopcalc plans it, under the pipeline
    of ``index`` (``model_index.json``) or alone, against a fresh measurement of the real module."""
    from flopcalc.flops.estimate import estimate_configs

    cfg = json.loads((config_dir / "config.json").read_text())
    report = estimate_configs(index, {name: cfg}, settings, convention="torch")
    comp = next(c for c in report.components if c.component == name and c.call == call)
    depth = {} if module_depth is None else {"module_depth": module_depth}
    fx = measure.measure_component(config_dir, settings=measure_settings, call=call, with_thop=thop, **depth)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {config_dir.name} {call} {measure_settings}: {cfg}",
                               thop=thop)


def random_size(rng, multiple: int, lo: int, hi: int) -> int:
    """A random multiple of ``multiple`` in ``[lo, hi]`` (at least one ``multiple``)."""
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)
