"""validation/TRAINING_MEMORY_RECONCILED.md is what validation/reconcile_training_memory.py generates from
validation/training_memory_published.yaml and flopcalc: regenerate and compare, and check that every published
"fits in N GB" claim is flopcalc's verdict too or carries the reason it is not."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

import flopcalc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "validation"))

import reconcile_training_memory as rtm  # noqa: E402


@functools.cache
def _data():
    return rtm.load()


@functools.cache
def _rows():
    return tuple(rtm.measure(entry) for entry in _data()["rows"])


def test_report_is_current():
    committed = (REPO / "validation" / "TRAINING_MEMORY_RECONCILED.md").read_text(encoding="utf-8")
    assert rtm.render(list(_rows()), _data()) == committed


def test_every_fits_claim_is_flopcalcs_verdict_or_explained():
    claims = [row for row in _rows() if row.entry["published"]["kind"] == "fits"]
    assert claims
    for row in claims:
        assert row.entry["flopcalc"].get("gpu"), f"{row.entry['id']}: a fits claim needs the card it names"
        if row.main.fits is not True:
            assert row.entry.get("if_inconsistent", "").strip(), (
                f"{row.entry['id']}: flopcalc says fits={row.main.fits}; the YAML must say why")


def test_rows_that_call_themselves_consistent_are():
    for row in _rows():
        if row.entry["explanation"].lstrip().startswith("Consistent"):
            assert row.check == "consistent", row.entry["id"]


def test_every_row_cites_a_source_and_a_quote_and_a_bundled_card():
    from flopcalc.engine.cards import card_keys

    cards = set(card_keys())
    for entry in [*_data()["rows"], *_data()["not_representable"]]:
        assert entry["source"].startswith("https://"), entry["id"]
        assert entry["quote"].strip() and entry["repo_path"].strip(), entry["id"]
        assert entry["card"] in cards, entry["id"]


def test_not_representable_rows_are_refused_by_flopcalc():
    """The reasons given are flopcalc's own refusals: HiDream's training is not validated, Wan has no default
    LoRA targets."""
    with pytest.raises(flopcalc.FlopcalcError):
        flopcalc.train("hidream-i1-full", trainable="lora:8", gradient_checkpointing=True)
    with pytest.raises(flopcalc.FlopcalcError):
        flopcalc.train("wan2.1-t2v-14b", trainable="lora:16")


def test_bad_rows_are_refused(tmp_path):
    good = (REPO / "validation" / "training_memory_published.yaml").read_text(encoding="utf-8")
    bad_kind = tmp_path / "kind.yaml"
    bad_kind.write_text(good.replace("kind: measured", "kind: guessed", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="kind"):
        rtm.load(bad_kind)
    bad_compare = tmp_path / "compare.yaml"
    bad_compare.write_text(good.replace("compare_to: peak", "compare_to: reserved", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="compare_to"):
        rtm.load(bad_compare)


def test_docs_quote_the_reports_summary():
    summary = next(line for line in (REPO / "validation" / "TRAINING_MEMORY_RECONCILED.md")
                   .read_text(encoding="utf-8").splitlines() if line.startswith("Over the "))
    assert summary in (REPO / "docs" / "training.md").read_text(encoding="utf-8"), (
        "docs/training.md must quote the summary line of validation/TRAINING_MEMORY_RECONCILED.md")
