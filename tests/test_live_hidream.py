"""Live re-measurement of the HiDream-I1 family: ``HiDreamImageTransformer2DModel`` (built on the meta device with
the harness's even MoE routing, whose exactness ``tests/test_hidream_moe.py`` proves) and ``LlamaForCausalLM``,
counted now: the card's transformer as ``HiDreamImagePipeline`` plans it at a random requested size (the pipeline
rescales it to the area of 1024²) and text length, the card's Llama at a random length, and randomized configs
(width, heads, rotary axes, dual / single block counts, routed and activated experts, none at all, patch size,
channels, caption and pooled widths, max_resolution, llama_layers) at random square and non-square latents (the
padded path) and T5 / Llama lengths; random Llama configs (widths, heads, key/value heads, head width, layers,
vocabulary, biases, tied embeddings).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path, down to the MoE's gate, experts and shared expert), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    assert_matches_measurement,
    check_plan,
    measure,
    random_size,
    write_config,
)
from flopcalc.engine.errors import ConfigError  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.hidream_image import run_size  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble, component_params  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/hidream-i1-full"
INDEX = json.loads((CARD / "model_index.json").read_text())
#: ``torch.by_module`` depth reaching ``double_stream_blocks.0.block.ff_i.experts`` (the routed experts' sum).
DEPTH = 5


class _Estimate:
    """The parts of a component estimate ``assert_matches_measurement`` reads, for a tree assembled directly."""

    def __init__(self, cfg: dict, shape: RunShape) -> None:
        self.tree = assemble(cfg, shape, component="x")
        self.macs_per_run = self.tree.total.macs("torch")
        self.params = component_params(cfg, component="x", assembled=self.tree)


# --------------------------------------------------------------------------- the card


def test_card_transformer_as_the_pipeline_runs_it(rng):
    """A random requested size becomes the pipeline's 1024²-area size; square and non-square (padded) alike."""
    h, w, t = random_size(rng, 16, 256, 2048), random_size(rng, 16, 256, 2048), rng.randint(1, 256)
    run_h, run_w = run_size(h, w, 8)
    check_plan(CARD / "transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": run_h, "width": run_w, "text_len": t, "text_len_2": t}, index=INDEX, thop=False,
               module_depth=DEPTH)


def test_card_llama_at_random_length(rng):
    seq = rng.randint(1, 300)
    check_plan(CARD / "text_encoder_4", "text_encoder_4", Settings(max_sequence_length=seq), {"seq_len": seq},
               index=INDEX, thop=False)


# --------------------------------------------------------------------------- randomized configs


def random_transformer(rng, *, sparse: bool = False, dual_min: int = 0) -> dict:
    """A random ``HiDreamImageTransformer2DModel`` config (also ``tests/test_hidream_moe.py``'s). ``sparse``: 2 to 4
    routed experts with fewer active per token (the real gate's split can then be uneven); ``dual_min``: the
    fewest dual-stream blocks (a non-square latent needs one)."""
    heads, axes = rng.randint(1, 3), rng.choice([[8, 4, 4], [4, 6, 6], [16, 8, 8]])
    dual, single = rng.randint(dual_min, 2), rng.randint(0, 2)
    if dual + single == 0:
        single = 1
    routed = rng.randint(2, 4) if sparse else rng.choice([0, 1, 2, 3, 4])
    active = rng.randint(1, routed - 1) if sparse else rng.randint(1, max(routed, 1))
    return {
        "_class_name": "HiDreamImageTransformer2DModel",
        "patch_size": rng.choice([1, 2]),
        "in_channels": rng.choice([4, 16]),
        "out_channels": rng.choice([None, 8]),
        "num_layers": dual,
        "num_single_layers": single,
        "attention_head_dim": sum(axes),
        "num_attention_heads": heads,
        "caption_channels": [rng.choice([8, 12]), rng.choice([10, 16])],
        "text_emb_dim": rng.choice([6, 20]),
        "num_routed_experts": routed,
        "num_activated_experts": active,
        "axes_dims_rope": axes,
        "max_resolution": [rng.choice([16, 24]), rng.choice([16, 24])],
        "llama_layers": [rng.randint(0, 3) for _ in range(dual + single)],
    }


def test_random_hidream_transformer_configs(rng, tmp_path):
    for i in range(5):
        cfg = random_transformer(rng)
        folder = write_config(tmp_path, f"transformer{i}", cfg)
        p = cfg["patch_size"]
        rows, cols = cfg["max_resolution"]
        side = 2 * rng.randint(1, min(rows, cols) // 2)  # latent pixels (the pipeline's latents are even)
        h, w = (side, side) if rng.random() < 0.5 or cfg["num_layers"] == 0 else (side, 2 * rng.randint(1, cols // 2))
        if h % p or w % p or (h != w and (h // p) * (w // p) > rows * cols // (p * p)):
            h = w = 2 * p
        t, l = rng.randint(1, 9), rng.randint(1, 9)
        where = f"seed {SEED}, latent {h}×{w}, text {t} + {l}: {cfg}"
        est = _Estimate(cfg, RunShape(latent_height=h, latent_width=w, text_len=t, text_len_2=l))
        fx = measure.measure_component(folder, settings={"height": 8 * h, "width": 8 * w, "text_len": t,
                                                         "text_len_2": l}, module_depth=DEPTH)
        assert_matches_measurement(est, fx, where)


def test_no_dual_stream_block_refuses_a_non_square_latent_as_the_model_fails(tmp_path):
    cfg = {**random_transformer(__import__("random").Random(SEED)), "num_layers": 0, "num_single_layers": 1,
           "llama_layers": [0], "max_resolution": [16, 16], "patch_size": 2}
    with pytest.raises(ConfigError, match="num_layers is 0"):
        assemble(cfg, RunShape(latent_height=8, latent_width=16, text_len=2, text_len_2=2), component="x")
    folder = write_config(tmp_path, "transformer", cfg)
    with pytest.raises(UnboundLocalError):  # transformer_hidream_image.py:907, as the assembler says
        measure.measure_component(folder, settings={"height": 64, "width": 128, "text_len": 2, "text_len_2": 2},
                                  with_thop=False)


def test_random_llama_for_causal_lm_configs(rng, tmp_path):
    for i in range(3):
        kv = rng.choice([1, 2])
        heads = kv * rng.choice([1, 2])
        head_dim = rng.choice([8, 16])
        cfg = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": rng.choice([16, 32]),
            "intermediate_size": rng.choice([24, 40]),
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "head_dim": head_dim,
            "num_hidden_layers": rng.randint(1, 2),
            "vocab_size": rng.choice([50, 97]),
            "attention_bias": rng.random() < 0.5,
            "mlp_bias": rng.random() < 0.5,
            "tie_word_embeddings": rng.random() < 0.5,
            "max_position_embeddings": 512,
        }
        folder = write_config(tmp_path, f"text_encoder{i}", cfg)
        seq = rng.randint(1, 40)
        est = _Estimate(cfg, RunShape(seq_len=seq))
        fx = measure.measure_component(folder, settings={"seq_len": seq})
        assert_matches_measurement(est, fx, f"seed {SEED}, {seq} tokens: {cfg}")
