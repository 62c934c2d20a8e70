"""SANA 1.5 (``SanaPipeline`` with the SANA 1.5 transformers): what differs from SANA 1.0, counted.

The SANA 1.5 transformers (diffusers ``scripts/convert_sana_to_diffusers.py`` ``SanaMS1.5_*``) are the
SANA 1.0 geometry plus ``qk_norm: rms_norm_across_heads``: ``Attention`` then builds ``norm_q`` and
``norm_k`` as ``RMSNorm(heads × head_dim)`` in ``attn1`` and ``attn2`` (``attention_processor.py``), applied
by ``SanaLinearAttnProcessor2_0`` / ``SanaAttnProcessor2_0`` to the whole projections. No matmul is added
(FlopCounterMode counts none for a norm), 4·D parameters per block and their elementwise work are; the 4.8B
model is the same block at 60 layers. ``sample_size`` 32 selects the 1024px bins. No torch needed.
"""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call


@pytest.mark.parametrize("card, layers", [("sana-1.5-1.6b", 20), ("sana-1.5-4.8b", 60)])
def test_defaults_1024_20_steps_cfg(card, layers):
    r = flopcalc.estimate(card)
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 20, 4.5, 300)
    assert r.passes == 2 and r.pipeline == "SanaPipeline"
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 40, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 32, "latent_width": 32, "text_len": 300}
    assert sum(b.count for b in r.component("transformer").tree.find("transformer_blocks").children) == layers


def test_768x1344_is_a_1024px_bin():
    r = flopcalc.estimate("sana-1.5-1.6b", height=768, width=1344)
    assert (r.settings.height, r.settings.width) == (768, 1344)
    r = flopcalc.estimate("sana-1.5-1.6b", height=512, width=512)  # "1.0" of ASPECT_RATIO_1024_BIN
    assert (r.settings.height, r.settings.width) == (1024, 1024)


@pytest.mark.parametrize("card", ["sana-1.5-1.6b", "sana-1.5-4.8b"])
def test_difference_from_sana_1_0_is_the_qk_norms(card):
    """The same config without ``qk_norm`` (SANA 1.0): equal matmul MACs, 4·D fewer parameters per
    block (norm_q, norm_k of attn1 and attn2, D = 70·32), and the norms' elementwise work gone."""
    cfg = Card(card).config("transformer")
    assert cfg["qk_norm"] == "rms_norm_across_heads"
    s = Settings(height=1024, width=1024)
    new = estimate_configs(None, {"transformer": cfg}, s).component("transformer")
    old = estimate_configs(None, {"transformer": dict(cfg, qk_norm=None)}, s).component("transformer")
    dim, layers, n, t = 70 * 32, cfg["num_layers"], 32 * 32, 300
    assert new.macs_per_run == old.macs_per_run
    assert new.params - old.params == layers * 4 * dim
    norms = new.tree.find("transformer_blocks.0.attn1").per_item.elementwise \
        - old.tree.find("transformer_blocks.0.attn1").per_item.elementwise
    assert norms > 0
    assert new.tree.find("transformer_blocks.0.attn2").per_item.params \
        - old.tree.find("transformer_blocks.0.attn2").per_item.params == 2 * dim
    assert (n, t) == (new.shape["latent_height"] * new.shape["latent_width"], new.shape["text_len"])


def test_4_8b_is_three_times_the_blocks_of_1_6b():
    small, big = (flopcalc.estimate(c).component("transformer") for c in ("sana-1.5-1.6b", "sana-1.5-4.8b"))
    block = small.tree.find("transformer_blocks.0").per_item.macs("torch")
    assert big.macs_per_run - small.macs_per_run == 40 * block
