"""Shared pieces of the live tests, which re-measure the real modules: importing this module
skips the importing test module when torch, diffusers, transformers or thop are missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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

__all__ = ["REPO", "SEED", "assert_matches_measurement", "measure", "write_config"]


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
