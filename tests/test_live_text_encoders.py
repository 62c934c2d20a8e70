"""The LLM / BERT text encoders (``Gemma2Model``, ``GemmaModel``, ``Qwen2_5_VLForConditionalGeneration``,
``BertModel``) against the real transformers modules.

* The fixtures of the ``<card>-text`` cases, through the standalone text-encoder path (the card
  pipelines are other families' work; ``tests/test_fixtures.py`` checks the same fixtures through
  ``flopcalc.estimate(<card>)`` once they exist). No torch needed.
* Randomized configs of each class (layers, widths, heads, key/value heads, head width, MLP width,
  vocabulary, biases, soft-capping, sliding windows, tied heads, vision tower sizes, decoder BERT),
  re-measured live on meta at a random text length. The seed is printed; ``FLOPCALC_SEED=N`` replays it.
* A padding mask does not change the count (checked on tiny real-weight CPU copies), which is why
  the SDPA encoders are measured without one on meta.

Bar: ``torch`` convention exact (total and every measured module path), parameters exact,
``thop`` convention exact.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.pipelines import Settings

REPO = Path(__file__).resolve().parent.parent
CASES = ("sana-600m-512-text", "sana-1.6b-512-text", "lumina-image-2.0-text", "lumina-next-sft-text",
         "qwen-image-text", "hunyuandit-v1.2-text", "kandinsky-3-text")
FIXTURES = sorted(p for case in CASES for p in (REPO / "validation" / "fixtures" / case).glob("*.json"))

from conftest import SEED  # noqa: E402


def _estimate(cfg: dict, seq: int, name: str = "text_encoder"):
    report = estimate_configs(None, {name: cfg}, Settings(max_sequence_length=seq), convention="torch")
    (comp,) = report.components
    return comp


def _assert_matches(comp, fx: dict, where: str) -> None:
    """torch exact in total and per measured module path, params exact, thop exact."""
    from live_support import assert_matches_measurement

    assert_matches_measurement(comp, fx, where)


# --------------------------------------------------------------------------- fixtures (no torch)


def test_every_text_case_has_its_fixtures():
    names = {f"{p.parent.name}/{p.name}" for p in FIXTURES}
    assert {
        "sana-600m-512-text/text_encoder-L300.json", "lumina-image-2.0-text/text_encoder-L256.json",
        "lumina-next-sft-text/text_encoder-L256.json", "qwen-image-text/text_encoder-L546.json",
        "hunyuandit-v1.2-text/text_encoder-L77.json", "hunyuandit-v1.2-text/text_encoder_2-L256.json",
        "kandinsky-3-text/text_encoder-L128.json",
    } <= names


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_through_the_standalone_path(path):
    fx = json.loads(path.read_text())
    cfg = json.loads((REPO / fx["config_dir"] / "config.json").read_text())
    comp = _estimate(cfg, fx["settings"]["seq_len"], fx["component"])
    assert comp.class_name == fx["class_name"]
    _assert_matches(comp, fx, path.name)


# --------------------------------------------------------------------------- live


@pytest.fixture
def measure():
    for lib in ("torch", "transformers", "thop"):
        pytest.importorskip(lib)
    sys.path.insert(0, str(REPO / "validation"))
    import measure as harness

    return harness


def _check(measure, tmp_path: Path, name: str, cfg: dict, seq: int) -> None:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    fx = measure.measure_component(folder, settings={"seq_len": seq})
    _assert_matches(_estimate(cfg, seq), fx, f"seed {SEED}, {name} seq {seq}: {cfg}")


def _heads(rng: random.Random) -> tuple[int, int]:
    """(query heads, key/value heads) with kv dividing the heads."""
    heads = rng.choice([1, 2, 4, 6])
    return heads, rng.choice([k for k in range(1, heads + 1) if heads % k == 0])


@pytest.mark.live
def test_random_gemma2_and_gemma_configs(rng, tmp_path, measure):
    for i, arch in enumerate(["Gemma2Model", "GemmaModel"] * 2):
        heads, kv = _heads(rng)
        cfg = {
            "architectures": [arch],
            "model_type": "gemma2" if arch == "Gemma2Model" else "gemma",
            "hidden_size": heads * rng.choice([4, 6, 10]),  # the config validator wants heads | hidden
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "head_dim": rng.choice([4, 8, 12]),  # independent of hidden_size / heads
            "intermediate_size": rng.choice([20, 48]),
            "num_hidden_layers": rng.randint(1, 3),  # 0 layers: no FLOPs, which count_torch cannot report
            "vocab_size": rng.choice([64, 300]),
            "attention_bias": rng.random() < 0.5,
            "max_position_embeddings": 128,
        }
        if arch == "Gemma2Model":
            cfg.update(attn_logit_softcapping=rng.choice([None, 50.0]), sliding_window=rng.randint(2, 16),
                       query_pre_attn_scalar=rng.choice([8, 16]))
        _check(measure, tmp_path, f"gemma{i}", cfg, rng.randint(1, 64))


@pytest.mark.live
def test_random_qwen2_5_vl_text_paths(rng, tmp_path, measure):
    for i in range(3):
        heads, kv = _heads(rng)
        head_dim = rng.choice([8, 12, 16])
        half = head_dim // 2
        t = rng.randint(0, half)
        h = rng.randint(0, half - t)
        text = {
            "hidden_size": heads * head_dim,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "intermediate_size": rng.choice([20, 48]),
            "num_hidden_layers": rng.randint(1, 3),  # 0: the harness sees the vision attention but no matmul
            "vocab_size": rng.choice([100, 300]),
            "rope_scaling": {"rope_type": "default", "mrope_section": [t, h, half - t - h]},
            "use_sliding_window": rng.random() < 0.3,
            "sliding_window": 8,
            "max_window_layers": 1,
        }
        vision = {
            "depth": rng.randint(0, 2),
            "hidden_size": rng.choice([16, 32]),
            "num_heads": 2,
            "intermediate_size": rng.choice([24, 40]),
            "patch_size": rng.choice([2, 14]),
            "temporal_patch_size": rng.choice([1, 2]),
            "spatial_merge_size": rng.choice([1, 2]),
            "in_channels": rng.choice([1, 3]),
            "out_hidden_size": heads * head_dim,
        }
        cfg = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
               "tie_word_embeddings": rng.random() < 0.4, "vision_config": vision}
        if rng.random() < 0.5:
            cfg["text_config"] = {"model_type": "qwen2_5_vl_text", **text}
        else:  # legacy flat config: the text keys at the top level
            cfg.update(text)
        _check(measure, tmp_path, f"qwen{i}", cfg, rng.randint(1, 64))


@pytest.mark.live
def test_random_bert_configs(rng, tmp_path, measure):
    for i in range(4):
        heads = rng.randint(1, 4)
        decoder = rng.random() < 0.3
        cfg = {
            "architectures": ["BertModel"],
            "model_type": "bert",
            "hidden_size": heads * rng.choice([4, 8]),
            "num_attention_heads": heads,
            "intermediate_size": rng.choice([20, 64]),
            "num_hidden_layers": rng.randint(0, 3),
            "vocab_size": rng.choice([100, 500]),
            "max_position_embeddings": rng.choice([80, 512]),
            "type_vocab_size": rng.choice([1, 2]),
            "is_decoder": decoder,
            "add_cross_attention": decoder and rng.random() < 0.5,
            "hidden_act": rng.choice(["gelu", "relu"]),
        }
        _check(measure, tmp_path, f"bert{i}", cfg, rng.randint(1, 77))


@pytest.mark.live
def test_bert_without_pooler(rng, measure):
    """``BertModel(config, add_pooling_layer=False)``, which no config key selects (pipelines load
    the pooler), against :func:`bert_model_tree` with ``pooler=False``."""
    import torch
    from transformers import BertConfig, BertModel

    from flopcalc.engine.architectures.llm_encoders import BERT_DEFAULTS, bert_model_tree
    from flopcalc.engine.config import Config

    values = {"hidden_size": 24, "num_attention_heads": 3, "intermediate_size": 40,
              "num_hidden_layers": rng.randint(1, 3), "vocab_size": 90, "max_position_embeddings": 64}
    seq = rng.randint(1, 64)
    with torch.device("meta"):
        model = BertModel(BertConfig(**values), add_pooling_layer=False).eval()
    fx = measure.measure_model(model, {"input_ids": measure.TensorSpec((1, seq), torch.int64)})
    tree = bert_model_tree(Config("text_encoder", values, BERT_DEFAULTS), seq, pooler=False)
    where = f"seed {SEED}: {values} seq {seq}"
    assert 2 * tree.total.macs("torch") == fx["torch"]["flops"], where
    assert tree.total.params == fx["params"], where
    assert tree.total.macs("thop") == fx["thop"]["macs"], where


@pytest.mark.live
def test_a_padding_mask_does_not_change_the_count(rng, measure):
    """Tiny real-weight CPU copies of each class, counted with and without a padding mask (the
    pipelines pass one; on meta the SDPA encoders are measured without it)."""
    import torch
    from transformers import (
        BertConfig,
        BertModel,
        Gemma2Config,
        Gemma2Model,
        GemmaConfig,
        GemmaModel,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
    )

    small = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 48,
             "num_hidden_layers": 2, "vocab_size": 100}
    models = [
        GemmaModel(GemmaConfig(**small, head_dim=8)),
        Gemma2Model(Gemma2Config(**small, head_dim=8, sliding_window=4)),
        Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
            text_config={**small, "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1]}},
            vision_config={"depth": 1, "hidden_size": 16, "num_heads": 2, "out_hidden_size": 32})),
        BertModel(BertConfig(**{k: v for k, v in small.items() if k != "num_key_value_heads"})),
    ]
    seq = rng.randint(4, 40)
    ids = torch.randint(0, 100, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, rng.randint(1, seq - 1):] = 0  # right padding, as the tokenizers pad
    for model in models:
        model.eval()
        plain = measure.count_torch(model, {"input_ids": ids})["flops"]
        masked = measure.count_torch(model, {"input_ids": ids, "attention_mask": mask})["flops"]
        assert plain == masked, f"seed {SEED}: {type(model).__name__} seq {seq}"


# --------------------------------------------------------------------------- closed forms (no torch)


def test_closed_forms_in_the_docstring_are_what_the_code_counts():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.decoder_layer import bert_layer, decoder_layer

    n, d, h, hkv, dh, df = sp.symbols("n d h h_kv d_h d_f", positive=True, integer=True)
    for sandwich, softcap in ((False, False), (True, True)):
        layer = decoder_layer(tokens=n, dim=d, heads=h, kv_heads=hkv, head_dim=dh, d_ff=df,
                              sandwich_norms=sandwich, softcap=softcap)
        stated = n * d * dh * (2 * h + 2 * hkv) + 2 * h * n**2 * dh + 3 * n * d * df
        assert sp.expand(layer.total.macs("torch") - stated) == 0
    bert = bert_layer(tokens=n, dim=h * dh, heads=h, d_ff=df).total.macs("torch")
    assert sp.expand(bert - (4 * n * (h * dh) ** 2 + 2 * n**2 * h * dh + 2 * n * h * dh * df)) == 0
