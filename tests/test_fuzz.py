"""Mutation fuzz of real configs: every supported class, every kind of bad value, each case under a
time and a memory limit, must give a clean one-line :class:`FlopcalcError` or a valid report.

CI runs a fixed budget of cases (:data:`CI_CASES`) with a printed seed; replay a run with
``FLOPCALC_FUZZ_SEED=N``; run longer with ``python -m pytest tests/test_fuzz.py --fuzz-cases 20000``
(or ``FLOPCALC_FUZZ_CASES=20000``). The corpus, mutations and limits are in ``fuzz_support.py``.
"""

from __future__ import annotations

import os

import pytest

import fuzz_support as fs
from conftest import FUZZ_SEED
from flopcalc.engine.config import declared_keys
from flopcalc.engine.registry import registered

#: Cases CI runs: about 1 ms each, plus the worker's start-up.
CI_CASES = 3000


@pytest.fixture(scope="module")
def corpus() -> list[fs.Source]:
    return fs.corpus()


@pytest.fixture(scope="module")
def worker():
    w = fs.Worker()
    yield w
    w.close()


def _run_all(worker: fs.Worker, cases: list[dict], seed: int | str) -> None:
    failures = []
    for case in cases:
        verdict = worker.run(case)
        if not verdict["ok"]:
            failures.append(f"{fs.describe(case)}\n    → {verdict['why']}")
    assert not failures, (f"{len(failures)} of {len(cases)} fuzz cases failed (FLOPCALC_FUZZ_SEED={seed}):\n"
                          + "\n".join(failures[:30]))


def test_corpus_covers_every_supported_class(corpus):
    """Every registered class (aliases aside) has a real config in the corpus, whole and alone: its own
    ``_class_name`` / ``architectures``, or the class a pipeline's index loads it as (Z-Image's
    ``Qwen3Model`` from a ``Qwen3ForCausalLM`` config.json)."""
    from flopcalc.engine.config import class_name_of

    covered = {class_name_of(cfg) for s in corpus for cfg in s.components.values()}
    covered |= {entry[1] for s in corpus if s.model_index for name, entry in s.model_index.items()
                if name in s.components and isinstance(entry, list) and len(entry) == 2}
    missing = {a.class_name for a in registered()} - covered - {"DiTTransformer2DModel"}
    assert not missing, f"no real config of {sorted(missing)} in the fuzz corpus"
    assert sum(s.model_index is not None for s in corpus) >= 19  # every bundled card as a pipeline


def test_every_architecture_declares_its_keys():
    """The convention every family follows: ``declare_keys`` for each registered class."""
    undeclared = sorted({a.class_name for a in registered() if declared_keys(a.class_name) is None})
    assert not undeclared, f"{undeclared} declare no config keys (flopcalc.engine.config.declare_keys)"


def test_fuzz_configs(request, corpus, worker):
    n = request.config.getoption("--fuzz-cases") or int(os.environ.get("FLOPCALC_FUZZ_CASES", CI_CASES))
    print(f"\nconfig fuzz: {n} cases, FLOPCALC_FUZZ_SEED={FUZZ_SEED}")
    _run_all(worker, fs.make_cases(corpus, n, FUZZ_SEED), FUZZ_SEED)


#: The failures issue 11 reported, each once: (source, component, key path, value).
REPORTED = [
    ("card:sd3-medium", "transformer", ["patch_size"], 0),
    ("card:sd3.5-large", "transformer", ["qk_norm"], "rms"),
    ("card:sd1.5", "unet", ["out_channels"], [1, 2]),
    ("card:flux-dev", "transformer", ["out_channels"], [1, 2]),
    ("card:hunyuanvideo", "transformer", ["out_channels"], [1, 2]),
    ("card:sd1.5", "unet", ["downsample_padding"], "1"),
    ("card:sdxl-base", "vae", ["block_out_channels"], None),
    ("card:sd1.5", "unet", ["attention_head_dim"], 0),
    ("card:pixart-alpha-512", "transformer", ["activation_fn"], ["gelu"]),
    ("card:sd3-medium", "transformer", ["pos_embed_max_size"], "192"),
    ("card:sd3-medium", "transformer", ["num_layers"], 10**8),
    ("card:sd1.5", "vae", ["layers_per_block"], 10**30),
    ("card:sd1.5/text_encoder", "text_encoder", ["max_position_embeddings"], -1),
    ("card:sd1.5/vae", "vae", ["sample_size"], 0),
]


@pytest.mark.parametrize("source, component, path, value", REPORTED, ids=lambda v: str(v)[:20])
def test_reported_cases_are_clean(source, component, path, value, worker):
    case = {"source": source, "component": component, "path": path, "kind": "set", "value": value,
            "settings": {"vae_tiling": True}}
    verdict = worker.run(case)
    assert verdict["ok"], f"{fs.describe(case)} → {verdict['why']}"
    assert verdict["why"].startswith("FlopcalcError"), verdict["why"]
