"""Issue 22's bar for the activation fits: every fit's leave-one-out error within 15%, every fixture carrying the
phase peaks the per-phase laws are fitted to, and the two-run law following CogView4's fused peak from the text
tokens' feed-forward to the image tokens'."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FITS = REPO / "flopcalc" / "data" / "activation_fit.json"
FIXTURES = REPO / "validation" / "fixtures" / "activations"
#: Issue 22, item 6: the largest leave-one-out error any activation fit may have.
BAR = 0.15


def _errors() -> dict[str, float]:
    data = json.loads(FITS.read_text(encoding="utf-8"))
    return {f"{entry['measured_on']} {key} {attention}": entry[attention]["loo_max_rel_error"]
            for key, entry in data.items() for attention in ("fused", "math") if attention in entry}


def test_every_fit_is_within_the_bar():
    errors = _errors()
    assert len(errors) > 200  # every fit, both paths
    above = {k: round(v, 4) for k, v in errors.items() if v > BAR}
    assert not above


def test_every_fixture_records_its_phase_peaks():
    """A fixture without phase peaks can only be fitted by one curve (fit_activations.select); the measuring script
    writes them for every call (build_activation_fixtures.py re-measures an older fixture)."""
    missing = [str(p.relative_to(FIXTURES)) for p in sorted(FIXTURES.glob("*/*.json"))
               if not json.loads(p.read_text(encoding="utf-8")).get("phase_peaks")]
    assert not missing


def _points(case: str, stem: str, attention: str) -> list:
    sys.path.insert(0, str(REPO / "validation"))
    from fit_activations import Point

    points = []
    for path in (FIXTURES / case).glob(f"{stem}-{attention}-*.json"):
        fx = json.loads(path.read_text(encoding="utf-8"))
        n = (fx["settings"]["height"] // 8) * (fx["settings"]["width"] // 8)  # CogView4's VAE: 8× per side
        points.append(Point(n, fx["peak_elements"], fx["phase_peaks"]))
    return sorted(points, key=lambda p: p.n)


def test_two_runs_follow_the_peak_from_the_text_feed_forward_to_the_image_one():
    """CogView4's transformer, fused path: up to 512² the peak is held while the block's feed-forward runs on the 1024
    text tokens (the image tokens' tensors live beside it), above it while the same module runs on the image tokens:
    two lines of different slopes, one phase at the depths recorded (whole blocks). One quadratic through the sizes
    misses a left-out size by more than the bar (23.6%); the law chosen inside each fold, two runs where they beat the
    other forms by the margin, does not (5.2%: with 384² left out, two runs do not beat the phases' law by the margin on
    the other eight sizes, and that law is chosen; every other size is predicted exactly)."""
    sys.path.insert(0, str(REPO / "validation"))
    from fit_activations import _errors as fold_errors, law, loo_error

    points = _points("cogview4-6b", "transformer", "fused")
    assert len(points) >= 8
    assert max(fold_errors("curve", points)) > BAR
    assert loo_error(points) < 0.06
    assert law(points)["form"] == "segments" and len(law(points)["phases"]) == 2


def test_segments_need_two_sizes_in_each_run():
    """Fewer than four sizes leave no split with two in each run: the law is the one curve."""
    sys.path.insert(0, str(REPO / "validation"))
    from fit_activations import Point, fit_form

    points = [Point(n, 10 + 3 * n) for n in (1, 2, 3)]
    assert fit_form("segments", points) == fit_form("curve", points)
    two_lines = [Point(n, max(100 + n, 10 * n)) for n in (1, 5, 20, 40, 60)]
    law = fit_form("segments", two_lines)
    assert len(law) == 2 and all(abs(max(sum(c * p.n ** i for i, c in enumerate(piece)) for piece in law) - p.peak)
                                 < 1e-6 * p.peak for p in two_lines)
