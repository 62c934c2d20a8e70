"""validation/reconciliation.md is what validation/reconcile.py generates from the published
table (../shared/seeds/000_*.txt), flopcalc and the fixtures: regenerate and compare."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SEEDS = REPO.parent / "shared" / "seeds"
sys.path.insert(0, str(REPO / "validation"))


@pytest.mark.skipif(not any(SEEDS.glob("000_*.txt")), reason="the published table (../shared/seeds) is not here")
def test_reconciliation_report_is_current():
    import reconcile

    rows = reconcile.read_published(SEEDS)
    assert [r.model for r in rows] == list(reconcile.CARDS)
    assert reconcile.render(rows) == (REPO / "validation" / "reconciliation.md").read_text()
