"""Qwen3-VL text encoders (transformers ``models/qwen3_vl/modeling_qwen3_vl.py``): ``Qwen3VLModel`` (Krea 2) and
``Qwen3VLForConditionalGeneration`` (NucleusMoE-Image, JoyImage-Edit, BRIA FIBO 2), run on text prompts.

``model.language_model`` (``Qwen3VLTextModel``) is a Qwen3 decoder: per layer an RMS-normed grouped-query
self-attention with per-head ``q_norm`` / ``k_norm`` RMSNorms (head width ``head_dim``, biases when
``attention_bias``) and an RMS-normed SiLU-gated MLP, then a final ``norm``; its multimodal rotary table (mRoPE:
three position rows interleaved over the head) is elementwise. Block formulas:
:func:`flopcalc.engine.architectures.llm_encoders.decoder_model`. A text prompt never runs ``visual``
(``Qwen3VLVisionModel``: a ``Conv3d`` patch embedding, a learned position table, ``depth`` ViT blocks, the
2×2-merging ``merger`` and one ``deepstack_merger_list`` entry per ``deepstack_visual_indexes``): parameters only,
and no deepstack features are added. ``Qwen3VLForConditionalGeneration`` applies ``lm_head`` to every position
(``logits_to_keep=0``), its weight the token embedding's when the top-level ``tie_word_embeddings`` is set.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.llm_encoders import decoder_model
from flopcalc.engine.config import (
    FLAG, LAYERS, ListOf, NULL, SIZE, Config, Int, Nested, boolean, count_int, declare_keys, nested_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules, rotary_buffers
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import lm_head

SOURCE = "transformers/models/qwen3_vl/modeling_qwen3_vl.py"

#: ``Qwen3VLConfig`` defaults (configuration_qwen3_vl.py): the sub-configs are built from their own defaults.
DEFAULTS = {"text_config": None, "vision_config": None, "tie_word_embeddings": False}
#: ``Qwen3VLTextConfig`` defaults.
TEXT_DEFAULTS = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "attention_bias": False,
}
#: ``Qwen3VLVisionConfig`` defaults.
VISION_DEFAULTS = {
    "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3, "patch_size": 16,
    "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584, "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [8, 16, 24],
}

_TEXT_KEYS = {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL, "head_dim": SIZE, "attention_bias": FLAG,
}
_VISION_KEYS = {
    "depth": LAYERS, "hidden_size": SIZE, "intermediate_size": SIZE, "num_heads": SIZE, "in_channels": SIZE,
    "patch_size": SIZE, "spatial_merge_size": SIZE, "temporal_patch_size": SIZE, "out_hidden_size": SIZE,
    "num_position_embeddings": SIZE, "deepstack_visual_indexes": ListOf(Int(0, 1024), lo=0, hi=1024),
}
declare_keys(("Qwen3VLModel", "Qwen3VLForConditionalGeneration"), {
    "text_config": Nested(_TEXT_KEYS) | NULL, "vision_config": Nested(_VISION_KEYS) | NULL,
    "tie_word_embeddings": FLAG,
})


def _sub(config: Config, key: str, defaults: Mapping[str, Any]) -> Config:
    values = config[key]
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be an object, got {values!r}")
    return Config(config.component, values, defaults, nested_keys((config.declared or {}).get(key)))


def text_config(config: Config) -> Config:
    return _sub(config, "text_config", TEXT_DEFAULTS)


def vision_config(config: Config) -> Config:
    vision = _sub(config, "vision_config", VISION_DEFAULTS)
    c, heads = positive_int(vision, "hidden_size"), positive_int(vision, "num_heads")
    if c % heads:
        raise ConfigError(f"{config.component}/config.json: vision_config hidden_size {c} must divide by num_heads "
                          f"{heads}")
    return vision


def visual_parameters(vision: Config, runs: bool = False) -> Node:
    """``Qwen3VLVisionModel`` as a text prompt leaves it (parameters only): ``patch_embed.proj`` (a
    ``temporal_patch_size × p × p`` ``Conv3d`` with bias), ``pos_embed`` (``num_position_embeddings × C``),
    ``depth`` blocks (two LayerNorms, ``attn.qkv`` C → 3C and ``attn.proj``, ``mlp.linear_fc1`` / ``linear_fc2``,
    all with biases), ``merger`` (LayerNorm over C, then C·m² → C·m² → ``out_hidden_size``) and one
    ``deepstack_merger_list`` entry per ``deepstack_visual_indexes`` (LayerNorm over C·m², same linears)."""
    c, f = positive_int(vision, "hidden_size"), positive_int(vision, "intermediate_size")
    p, tp, m = (positive_int(vision, k) for k in ("patch_size", "temporal_patch_size", "spatial_merge_size"))
    out, merged = positive_int(vision, "out_hidden_size"), c * m * m
    block = Node("block", ops.layer_norm(0, c) * 2 + ops.linear(0, c, 3 * c) + ops.linear(0, c, c)
                 + ops.linear(0, c, f) + ops.linear(0, f, c), formula="not run")

    def merger(name: str, norm_width: int) -> Node:
        return Node(name, ops.layer_norm(0, norm_width) + ops.linear(0, merged, merged) + ops.linear(0, merged, out),
                    formula="not run")

    deepstack = len(vision["deepstack_visual_indexes"])
    return Node("visual", children=(
        Node("patch_embed", children=(Node("proj", ops.conv(positive_int(vision, "in_channels"), c, tp * p * p, 0)),)),
        Node("pos_embed", ops.embedding(positive_int(vision, "num_position_embeddings"), c)),
        module_list("blocks", [block] * count_int(vision, "depth")),
        merger("merger", c),
        module_list("deepstack_merger_list", [merger("merger", merged)] * deepstack),
    ), formula="not run")


def _kaplan_layers(config: Config) -> tuple[int, int]:
    text = text_config(config)
    return count_int(text, "num_hidden_layers"), positive_int(text, "num_attention_heads") * positive_int(text, "head_dim")


def _model(config: Config, n: Any) -> Node:
    """``Qwen3VLModel`` on ``n`` text tokens: ``visual`` (parameters only) and ``language_model``."""
    language_model = replace(decoder_model(text_config(config), n, qk_norm=True, formula="qwen3_vl_text_model"),
                             name="language_model")
    return Node("text_encoder", children=(visual_parameters(vision_config(config)), language_model),
                formula="qwen3_vl_model")


@register("Qwen3VLModel", role="text_encoder", defaults=DEFAULTS, source=SOURCE,
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "visual")))
def qwen3_vl_model(config: Config, shape: RunShape) -> Node:
    """``Qwen3VLModel`` on a text prompt of ``seq_len`` tokens (no ``lm_head``)."""
    return _model(config, shape.seq_len)


@register("Qwen3VLForConditionalGeneration", role="text_encoder", defaults=DEFAULTS, source=SOURCE,
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "visual", "lm_head")))
def qwen3_vl_for_conditional_generation(config: Config, shape: RunShape) -> Node:
    """``model`` (a :func:`qwen3_vl_model`) and ``lm_head`` (d → vocabulary, bias-free) on every token."""
    n = shape.seq_len
    text = text_config(config)
    d, vocab = positive_int(text, "hidden_size"), positive_int(text, "vocab_size")
    head = lm_head(n, d, vocab, tied=boolean(config, "tie_word_embeddings"))
    return Node("text_encoder", children=(replace(_model(config, n), name="model"), head),
                formula="qwen3_vl_for_conditional_generation")


def _buffers(prefix: str):
    """Non-persistent float32 rotary tables: the vision tower's ``rotary_pos_emb`` (over half a vision head) and the
    language model's ``rotary_emb`` (over ``head_dim``)."""
    def buffers(config: Config) -> tuple[Buffer, ...]:
        vision = vision_config(config)
        vision_head = positive_int(vision, "hidden_size") // positive_int(vision, "num_heads")
        return (*rotary_buffers(f"{prefix}visual.rotary_pos_emb", vision_head // 2),
                *rotary_buffers(f"{prefix}language_model.rotary_emb", positive_int(text_config(config), "head_dim")))
    return buffers


loading_rules("Qwen3VLModel", buffers=_buffers(""), source=SOURCE)
# lm_head holds the last parameter: transformers' get_keys_to_not_convert keeps it out of a quantizer
loading_rules("Qwen3VLForConditionalGeneration", buffers=_buffers("model."), not_quantized=("lm_head",), source=SOURCE)
