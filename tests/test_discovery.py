"""flopcalc.engine.discovery: the lazy index of modules, cards and registrations, and its cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flopcalc.engine import discovery, registry
from flopcalc.engine.pipelines import base

REPO_ROOT = Path(__file__).resolve().parent.parent


def _fresh_index(monkeypatch, cache_dir: str) -> discovery.Index:
    monkeypatch.setenv("FLOPCALC_CACHE_DIR", cache_dir)
    discovery.reset()
    try:
        return discovery.index()
    finally:
        discovery.reset()


def test_index_matches_the_registries(monkeypatch, tmp_path):
    index = _fresh_index(monkeypatch, "")
    for arch in registry.registered():  # everything imported: the ground truth
        assert arch.module in index.architectures[arch.class_name], arch
    for alias, target in registry.aliases().items():
        assert index.architectures[alias] == index.architectures[target]
    assert index.pipelines == base.pipeline_modules()
    assert index.served == base.served_modules()
    assert index.denoisers == base.denoiser_modules()
    folders = sorted(p.name for p in (REPO_ROOT / "model_cards").iterdir() if (p / "card.yaml").is_file())
    assert sorted(index.cards) == folders
    assert all("data" in entry for entry in index.cards.values())


def test_cache_written_reused_and_rebuilt(monkeypatch, tmp_path):
    built = _fresh_index(monkeypatch, str(tmp_path))
    (cache,) = tmp_path.glob("index-*.json")
    stored = json.loads(cache.read_text())
    assert stored["index"] == built.as_dict()

    # a cache with this fingerprint is trusted as it is
    stored["index"]["pipelines"]["MadeUpPipeline"] = "flopcalc.engine.pipelines.flux"
    cache.write_text(json.dumps(stored))
    assert _fresh_index(monkeypatch, str(tmp_path)).pipelines["MadeUpPipeline"] == "flopcalc.engine.pipelines.flux"

    # another fingerprint (a module or card changed) or a corrupt file: rebuilt and rewritten
    stored["fingerprint"][1] = "0.0.0-other"
    cache.write_text(json.dumps(stored))
    assert "MadeUpPipeline" not in _fresh_index(monkeypatch, str(tmp_path)).pipelines
    cache.write_text("{not json")
    assert _fresh_index(monkeypatch, str(tmp_path)).as_dict() == built.as_dict()
    assert json.loads(cache.read_text())["index"] == built.as_dict()


def test_cache_off_or_unwritable(monkeypatch, tmp_path):
    reference = _fresh_index(monkeypatch, "").as_dict()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert _fresh_index(monkeypatch, str(blocker / "sub")).as_dict() == reference  # cannot mkdir under a file
    assert not list(tmp_path.glob("**/index-*.json"))


def test_default_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("FLOPCALC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert discovery.cache_file().parent == tmp_path / "flopcalc"
    monkeypatch.setenv("FLOPCALC_CACHE_DIR", "")
    assert discovery.cache_file() is None


def test_a_stale_index_costs_time_never_a_wrong_answer(monkeypatch, tmp_path):
    """An index that points nowhere: lookups fall back to importing everything."""
    _fresh_index(monkeypatch, str(tmp_path))
    (cache,) = tmp_path.glob("index-*.json")
    stored = json.loads(cache.read_text())
    stored["index"]["architectures"] = {}
    stored["index"]["pipelines"] = {}
    stored["index"]["denoisers"] = {}
    cache.write_text(json.dumps(stored))
    code = ("import flopcalc, sys; r = flopcalc.estimate('flux-dev'); print(r.flops); "
            "print(flopcalc.estimate('" + str(REPO_ROOT / "model_cards" / "sd1.5" / "unet" / "config.json") + "').flops)")
    env = {**os.environ, "FLOPCALC_CACHE_DIR": str(tmp_path)}
    stale = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    env["FLOPCALC_CACHE_DIR"] = ""
    fresh = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert stale.returncode == 0 and fresh.returncode == 0, stale.stderr + fresh.stderr
    assert stale.stdout == fresh.stdout


@pytest.mark.parametrize("model", ["flux-dev", "wan2.1-t2v-1.3b"])
@pytest.mark.parametrize("via", ["api", "cli"])
def test_one_question_imports_only_what_it_needs(tmp_path, model, via):
    """With a warm cache, estimating one card (API or CLI) imports its own plan and assemblers, no
    other family, and neither YAML, sympy, numpy nor huggingface_hub."""
    call = (f"import flopcalc; flopcalc.estimate({model!r})" if via == "api" else
            f"from flopcalc.cli.main import main; main(['estimate', {model!r}, '--format', 'json'])")
    code = (f"import sys; {call}; print('@@'); "
            "print('\\n'.join(sorted(m for m in sys.modules)))")
    env = {**os.environ, "FLOPCALC_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # the first run builds the cache, the second uses it
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    modules = set(proc.stdout.split("@@")[-1].split())
    families = {m.rsplit(".", 1)[1] for m in modules if m.startswith(("flopcalc.engine.architectures.", "flopcalc.engine.pipelines."))}
    all_families = {p.stem for p in (REPO_ROOT / "flopcalc" / "engine" / "architectures").glob("*.py")} | {
        p.stem for p in (REPO_ROOT / "flopcalc" / "engine" / "pipelines").glob("*.py")}
    assert len(families) < len(all_families) / 2, families
    assert not modules & {"yaml", "sympy", "numpy", "huggingface_hub"}
