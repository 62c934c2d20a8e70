"""The per-block summary (``by_block_kind``) stops at every block kind the package declares, whichever modules a
process happened to import before: a fresh process estimating one card gives the summary a process that imported
every family module gives."""

from __future__ import annotations

import json
import subprocess
import sys

import flopcalc
from flopcalc.engine.discovery import index, load_everything


def _summaries(card: str) -> list:
    return [c["by_block_kind"] for c in flopcalc.estimate(card).to_dict()["components"]]


def test_a_fresh_process_summarises_as_one_that_imported_everything():
    card = "i2vgen-xl"  # its UNet names nodes of kinds declared by modules it does not import
    fresh = subprocess.run(
        [sys.executable, "-c", "import json, flopcalc; print(json.dumps([c['by_block_kind'] for c in "
                               f"flopcalc.estimate({card!r}).to_dict()['components']]))"],
        capture_output=True, text=True, check=True)
    load_everything()
    assert json.loads(fresh.stdout) == _summaries(card)


def test_the_index_holds_the_kinds_of_modules_not_imported():
    assert {"temporal_transformer_block", "feed_forward", "attention"} <= set(index().block_kinds)
    kinds = [row["formula"] for row in _summaries("i2vgen-xl")[3]]
    assert "temporal_transformer_block" in kinds
