"""The formulas as math: the closed forms the docstrings state equal what the code computes,
Kaplan's approximation against the exact count, the cost tree's bookkeeping, and the numeric
path's promise not to import sympy or the Hub client."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flopcalc.engine.cost import Cost, Node, module_list, total_of
from flopcalc.formulas import ops

sympy = pytest.importorskip("sympy")
from flopcalc.formulas.catalog import CATALOG, expression, render, stated_closed_form  # noqa: E402


@pytest.mark.parametrize("name", [n for n, e in CATALOG.items() if e.closed_form is not None])
def test_stated_closed_form_is_what_the_code_counts(name):
    assert sympy.expand(expression(name) - stated_closed_form(name)) == 0


def test_vae_decoder_is_quadratic_in_latent_area_with_attention_as_the_square_term():
    hw = sympy.Symbol("hw", positive=True)
    h_z, w_z = sympy.symbols("h_z w_z", positive=True, integer=True)
    poly = sympy.Poly(expression("vae_decoder").subs(h_z * w_z, hw).subs(w_z, hw / h_z), hw)
    assert poly.degree() == 2
    assert poly.coeff_monomial(hw**2) == 2 * 512  # QKᵀ and A·V over hw tokens of 512 channels, one head
    assert poly.coeff_monomial(1) == 0


def test_latex_rendering():
    out = render("single_stream_block", latex=True)
    assert "L^{2}" in out and "d_{h}" in out


def test_kaplan_falls_short_by_one_attention_matmul_and_counts_biases():
    from flopcalc.formulas.kaplan_transformer import kaplan_forward_flops
    from flopcalc.flops.kaplan import kaplan_rows

    rows = {r.component: r for r in kaplan_rows("sd3-medium")}
    t5 = rows["text_encoder_3"]
    # T5 has no biases and its norms are tiny: Kaplan misses exactly the A·V matmul (plus 2× norm gains).
    missing = 2 * t5.n_layer * t5.n_ctx * t5.n_ctx * t5.d_attn
    norm_gains = 2 * t5.n_ctx * 4096 * (2 * t5.n_layer + 1)
    assert t5.exact_flops - t5.kaplan_flops == missing - norm_gains - 2 * t5.n_ctx * 32 * 64
    for r in rows.values():
        assert r.kaplan_flops == kaplan_forward_flops(r.non_embedding_params, r.n_layer, r.n_ctx, r.d_attn)
        assert 0.9 < r.kaplan_flops / r.exact_flops < 1.0


def test_module_list_groups_identical_runs_and_find_answers_each_index():
    a = Node("block", ops.linear(10, 4, 4))
    b = Node("block", ops.linear(10, 4, 8))
    ml = module_list("blocks", [a, a, a, b, a])
    assert [(c.name, c.count) for c in ml.children] == [("0-2", 3), ("3", 1), ("4", 1)]
    assert ml.total == a.total * 4 + b.total
    assert ml.find("1").total == a.total and ml.find("3").total == b.total and ml.find("5") is None


def test_cost_conventions():
    c = Cost(linear=5, conv=7, attention=11, functional=3, thop_extra=13, elementwise=17, params=19)
    assert c.macs("torch") == 26 and c.macs("thop") == 25
    with pytest.raises(ValueError):
        c.macs("other")


def test_attention_counts_its_scores_and_every_field_adds_and_scales():
    a = ops.attention(7, 5, 3, 8)
    assert a.scores == 3 * 7 * 5 and a.attention == a.scores * 16 and a.elementwise == ops.SOFTMAX_OPS * a.scores
    c = Cost(linear=5, conv=7, attention=11, functional=3, thop_extra=13, elementwise=17, params=19, scores=23)
    assert (c + c).as_dict() == {k: 2 * v for k, v in c.as_dict().items()} == (c * 2).as_dict()
    assert total_of([c, c, c]) == c * 3


def test_numeric_path_imports_neither_sympy_nor_the_hub_client():
    code = ("import sys, flopcalc; flopcalc.estimate('flux-dev', height=512, width=512);"
            "from flopcalc.flops.report import render; render(flopcalc.estimate('sd3-medium'), 'json', per_block=True);"
            "print(sorted(m for m in ('sympy', 'huggingface_hub', 'torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
