"""``flopcalc train`` for ``DiTTransformer2DModel`` (issue 24.3): the class-conditional DiT's backward derived
from its declared gradient graph equals FlopCounterMode's forward + backward on the real module
(``validation/fixtures/training/dit-xl-2-512-transformer``, checked exactly by the parametrized tests of
``test_training.py``); here: the command runs, its graph, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.engine.errors import FlopcalcError
from flopcalc.flops.estimate import estimate
from flopcalc.training.backward import backward, graph_of, lora_supported
from flopcalc.training.estimate import train

REPO = Path(__file__).resolve().parent.parent
DIT = str(REPO / "validation/configs/dit-xl-2-512-transformer")
FIXTURES = REPO / "validation/fixtures/training/dit-xl-2-512-transformer"


def test_train_counts_the_measured_forward_and_backward():
    fx = json.loads((FIXTURES / "transformer-full-512x512.json").read_text())
    report = train(DIT, height=512, width=512)
    assert report.flops_per_sample == fx["total_flops"]


def test_checkpointing_recomputes_every_block_and_not_the_output_conditioning():
    tree = estimate(DIT, height=256, width=256, steps=1).components[0].tree
    graph = graph_of("DiTTransformer2DModel")
    plain, ckpt = backward(tree, graph, checkpointing=False), backward(tree, graph, checkpointing=True)
    assert ckpt.recompute == tree.find("transformer_blocks").total.macs("torch")
    assert ckpt.macs - plain.macs == ckpt.recompute
    fx = json.loads((FIXTURES / "transformer-checkpointing-256x256.json").read_text())
    assert 2 * ckpt.macs == fx["backward"]["flops"]


def test_the_sinusoidal_timestep_input_gets_no_gradient():
    tree = estimate(DIT, height=256, width=256, steps=1).components[0].tree
    back = backward(tree, graph_of("DiTTransformer2DModel"), checkpointing=False)
    first = tree.find("transformer_blocks.0.norm1.emb.timestep_embedder.linear_1").total.macs("torch")
    out = tree.find("conditioning.timestep_embedder.linear_1").total.macs("torch")
    patches = tree.find("pos_embed.proj").total.macs("torch")
    assert back.no_input_grad == 28 * first + out + patches


def test_lora_is_refused_for_dit():
    assert "DiTTransformer2DModel" not in lora_supported()
    with pytest.raises(FlopcalcError):
        train(DIT, height=256, width=256, trainable="lora:4")
