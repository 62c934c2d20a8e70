"""Symbolic FLOP laws: exact agreement with the numeric estimate at random valid settings (every
bundled card, both conventions), the questions asked of a law, sweeps and comparisons."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flopcalc
from flopcalc.engine.cards import list_cards
from flopcalc.engine.errors import FlopcalcError

sympy = pytest.importorskip("sympy")
from flopcalc.flops.symbolic import symbolic_estimate  # noqa: E402
from flopcalc.flops.symbolic_report import crossover, ratio, report_dict, shares  # noqa: E402
from flopcalc.flops.sweep import parse_values, run_sweep  # noqa: E402

#: Cards with a law; a card whose card.yaml says ``no_law: <why>`` has none (e.g. two experts whose step
#: split comes from floating-point timesteps) and must be refused, which test_cards_without_a_law checks.
CARDS = [c.name for c in list_cards() if not c.data.get("no_law")]
NO_LAW = [c.name for c in list_cards() if c.data.get("no_law")]


@lru_cache(maxsize=None)
def law(card: str, convention: str):
    return symbolic_estimate(card, convention=convention)


@pytest.mark.parametrize("convention", ["torch", "thop"])
@pytest.mark.parametrize("card", CARDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_law_equals_numeric_estimate(card, convention, data):
    f = law(card, convention)
    rep = f.representative()
    point = {
        "H": 64 * data.draw(st.integers(4, 32), label="H/64"),
        "W": 64 * data.draw(st.integers(4, 32), label="W/64"),
        "S": data.draw(st.integers(2, 60), label="steps"),  # Mochi's schedule needs 2 (diffusers divides by steps // 2)
        "B": data.draw(st.integers(1, 3), label="batch"),
    }
    kwargs = dict(height=point["H"], width=point["W"], steps=point["S"], batch_size=point["B"])
    if "L" in rep:
        point["L"] = data.draw(st.integers(1, rep["L"]), label="text tokens")
        kwargs["max_sequence_length"] = point["L"]
    exact = flopcalc.estimate(card, convention=convention, resolution_binning=False, **kwargs)
    assert f.at(**{**rep, **point}) == exact.flops


@pytest.mark.parametrize("card", NO_LAW)
def test_cards_without_a_law_are_refused(card):
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(card)
    assert flopcalc.estimate(card).flops > 0


def test_law_structure_flux():
    f = law("flux-dev", "torch")
    assert f.symbols == ("H", "W", "S", "P", "B", "L")
    transformer = next(c for c in f.components if c.component == "transformer")
    S, P, B = sympy.symbols("S P B", positive=True, integer=True)
    assert transformer.runs == S * P * B
    H, W = sympy.symbols("H W", positive=True, integer=True)
    attn = sympy.Poly(sympy.expand(transformer.per_run.attention), H, W)
    assert attn.total_degree() == 4  # (HW)²: attention over the image tokens


def test_ratio_is_exact():
    f = law("sd3-medium", "torch")
    a, b, q = ratio(f, "1024x1024:512x512")
    hi = flopcalc.estimate("sd3-medium", height=1024, width=1024).flops
    lo = flopcalc.estimate("sd3-medium", height=512, width=512).flops
    assert q == sympy.Rational(hi, lo)
    _, _, q_steps = ratio(f, "steps=50:steps=25")
    assert q_steps == sympy.Rational(flopcalc.estimate("sd3-medium", steps=50).flops,
                                     flopcalc.estimate("sd3-medium", steps=25).flops)
    with pytest.raises(FlopcalcError):
        ratio(f, "big:small")


def test_crossover_is_where_attention_equals_linear():
    f = law("flux-dev", "torch")
    (t,) = [c for c in crossover(f) if c.component == "transformer"]
    side = round(t.side / 16) * 16
    below = flopcalc.estimate("flux-dev", height=side - 64, width=side - 64).component("transformer").per_run
    above = flopcalc.estimate("flux-dev", height=side + 64, width=side + 64).component("transformer").per_run
    assert below.attention < below.linear and above.attention > above.linear


def test_shares_sum_to_one_and_attention_grows():
    rows = shares(law("sd1.5", "torch"), [256, 1024, 4096])
    for _, sh in rows:
        assert abs(sum(sh.values()) - 1) < 1e-12
    assert rows[0][1]["unet"] < rows[-1][1]["unet"]


def test_json_has_strings_and_coefficients():
    d = report_dict(law("sd3-medium", "thop"))
    assert d["convention"] == "thop" and "H" in d["symbols"]
    total = sympy.sympify(d["total_flops"]["srepr"])
    assert total == law("sd3-medium", "thop").flops
    names = {n: sympy.Symbol(n, positive=True, integer=True) for n in d["symbols"]}
    rebuilt = sum(sympy.Rational(t["coefficient"]) * sympy.parse_expr(t["monomial"], local_dict=names)
                  for t in d["total_flops"]["terms"])
    assert sympy.expand(rebuilt - total) == 0


def test_sweep_matches_exact_points():
    f = law("sdxl-base", "torch")
    sw = run_sweep(f, {"H": [512, 1024], "W": [768, 1024], "S": [20, 50]})
    assert len(sw) == 8
    for i in range(len(sw)):
        h, w, s = (int(sw.grid[k][i]) for k in ("H", "W", "S"))
        exact = flopcalc.estimate("sdxl-base", height=h, width=w, steps=s).flops
        assert abs(sw.total[i] - exact) <= 1e-12 * exact
    assert parse_values("256,512:1024:256", "height") == [256, 512, 768, 1024]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flopcalc", *args], capture_output=True, text=True, timeout=120)


def test_cli_symbolic_sweep_compare():
    res = _cli("symbolic", "sd3-medium", "--ratio", "1024x1024:512x512", "--crossover", "--shares", "512,1024")
    assert res.returncode == 0, res.stderr
    assert "attention" in res.stdout and "ratio 1024x1024:512x512" in res.stdout and "total FLOPs" in res.stdout
    assert "\\frac" in _cli("symbolic", "flux-dev", "--format", "latex").stdout
    data = json.loads(_cli("symbolic", "sd1.5", "--format", "json", "--crossover").stdout)
    unet = next(c for c in data["crossover"] if c["component"] == "unet")
    assert 512 < unet["side_pixels"] < 4096
    csv = _cli("sweep", "sd1.5", "--height", "512:1024:256", "--width", "512", "--steps", "10,50").stdout.splitlines()
    assert csv[0].startswith("H,W,S") and len(csv) == 1 + 3 * 2
    bad = _cli("sweep", "sd1.5", "--height", "520")
    assert bad.returncode == 2 and "H=520" in bad.stderr and "Traceback" not in bad.stderr
    cmp = json.loads(_cli("compare", "flux-dev", "sd3-medium", "--height", "768", "--width", "1344",
                          "--format", "json").stdout)
    assert [m["flops"] for m in cmp["models"]] == [flopcalc.estimate(m, height=768, width=1344).flops
                                                   for m in ("flux-dev", "sd3-medium")]
