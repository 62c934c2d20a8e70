"""Shared test fixtures: the session seed of the live tests and a generator per test."""

from __future__ import annotations

import os
import random
import tempfile

import pytest

# The discovery index of the session (and of the CLI subprocesses it starts) lives in a folder of its
# own, not in the user's cache.
os.environ.setdefault("FLOPCALC_CACHE_DIR", tempfile.mkdtemp(prefix="flopcalc-test-cache-"))
#: A family's assembler may read only the config keys it declares (flopcalc.engine.config.declare_keys).
os.environ["FLOPCALC_STRICT_KEYS"] = "1"

#: One seed for every randomized live test of the session; ``FLOPCALC_SEED=N`` replays a run.
SEED = int(os.environ.get("FLOPCALC_SEED", random.SystemRandom().randrange(2**31)))


#: The seed of the config fuzz (tests/test_fuzz.py); ``FLOPCALC_FUZZ_SEED=N`` replays a run.
FUZZ_SEED = int(os.environ.get("FLOPCALC_FUZZ_SEED", random.SystemRandom().randrange(2**31)))


def pytest_addoption(parser) -> None:
    parser.addoption("--fuzz-cases", type=int, default=None,
                     help="config fuzz cases to run (default: FLOPCALC_FUZZ_CASES, else the CI budget)")


def pytest_report_header(config) -> list[str]:
    return [f"flopcalc live tests: FLOPCALC_SEED={SEED}", f"flopcalc config fuzz: FLOPCALC_FUZZ_SEED={FUZZ_SEED}"]


@pytest.fixture
def rng(request) -> random.Random:
    """A generator per test, derived from the session seed and the test's name."""
    return random.Random(f"{SEED}:{request.node.name}")
