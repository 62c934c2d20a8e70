"""validation/training_reconciliation.md is what validation/reconcile_training.py generates from the cards and
flopcalc: regenerate and compare, and check the reconciliation's claims on the numbers themselves."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "validation"))

import reconcile_training as rt  # noqa: E402


def test_training_reconciliation_report_is_current():
    rows = [rt.measure(c) for c in rt.CASES]
    assert rt.render(rows) == (REPO / "validation" / "training_reconciliation.md").read_text(encoding="utf-8")


def test_the_token_counts_are_the_ones_the_attention_runs_on():
    """FLUX's attention is one full self-attention over D tokens per block: PaLM's 12·L·d·D² is then
    exactly 3 × flopcalc's forward attention; Wan adds its cross-attention's D × text scores on top."""
    for row in map(rt.measure, rt.CASES):
        if row.case.card.startswith("flux"):
            assert row.palm_attention == 3 * row.attention
        else:
            cfg = rt._config(row.case.card)
            blocks, width = rt._blocks_and_width(cfg)
            cross = 2 * blocks * 2 * row.tokens * row.case.text_tokens * width
            assert 3 * row.attention == row.palm_attention + 3 * cross


def test_nemo_flux_with_its_missing_terms_added_is_within_a_tenth_of_a_percent():
    cfg = rt._config("flux-dev")
    row = rt.measure(rt.Case("flux-dev", 1024, 1024, rt.NEMO_MODEL_CHANNELS + rt.NEMO_CONTEXT_DIM - 4096))
    assert row.tokens == rt.NEMO_MODEL_CHANNELS + rt.NEMO_CONTEXT_DIM
    assert row.nemo < row.exact
    assert abs(row.nemo + rt.nemo_missing(cfg) - row.exact) < 1e-3 * row.exact


def test_docs_table_is_the_scripts():
    table = [line for line in (REPO / "validation" / "training_reconciliation.md").read_text(encoding="utf-8")
             .splitlines() if line.startswith("| `")]
    docs = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    assert len(table) == len(rt.CASES)
    for line in table:
        assert line in docs, f"docs/training.md lacks {line!r}: copy it from validation/training_reconciliation.md"
