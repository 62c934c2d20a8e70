"""Gemma 3 text encoder (transformers ``models/gemma3/modeling_gemma3.py``): ``Gemma3ForConditionalGeneration``,
LTX-2's text encoder (Gemma-3-12B).

``LTX2Pipeline._get_gemma_prompt_embeds`` calls the whole model on the left-padded prompt (``input_ids``,
``attention_mask``, ``output_hidden_states=True``; no image) and stacks all ``num_hidden_layers + 1`` hidden
states; every layer runs, then the final ``norm``, and ``lm_head`` projects every position to the vocabulary
(``logits_to_keep=0`` keeps all): all of it counts. A text-only prompt never runs the SigLIP ``vision_tower`` nor
the ``multi_modal_projector``: parameters only.

``model.language_model`` is a ``Gemma3TextModel``: ``embed_tokens`` (``Gemma3TextScaledWordEmbedding``, a lookup
scaled by √d), decoder layers of grouped-query attention with a head width ``head_dim`` (queries
``h·head_dim``, which need not be the hidden size), per-head ``q_norm`` / ``k_norm``, four RMSNorms
(``input_layernorm``, ``post_attention_layernorm``, ``pre_feedforward_layernorm``, ``post_feedforward_layernorm``),
a tanh-GELU gated MLP, no biases (:func:`~flopcalc.formulas.decoder_layer.decoder_layer` with sandwich norms and q/k
norms). Sliding-window layers (``layer_types``) mask the dense scores: no MAC is saved. ``lm_head`` shares the token
embedding when ``tie_word_embeddings`` (``Gemma3Config``'s default: true).
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.architectures.llm_encoders import decoder_model
from flopcalc.engine.architectures.siglip import DEFAULTS as SIGLIP_DEFAULTS
from flopcalc.engine.architectures.siglip import siglip_patches, siglip_vision_model
from flopcalc.engine.config import (
    FLAG, LAYERS, MAX_LAYERS, NULL, POSITIONS, RATIO, SIZE, Choice, Config, ListOf, Nested, boolean, count_int, declare_keys,
    positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import lm_head
from flopcalc.formulas.ltx2 import weights_only

SOURCE = "transformers/models/gemma3/modeling_gemma3.py"

#: ``Gemma3Config`` defaults (configuration_gemma3.py, transformers 5.23).
DEFAULTS = {"text_config": None, "vision_config": None, "mm_tokens_per_image": 256, "tie_word_embeddings": True,
            "dtype": None, "torch_dtype": None}
#: ``Gemma3TextConfig`` defaults for the keys read (the text config built when none is given).
TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "attention_bias": False,
    "attn_logit_softcapping": None, "max_position_embeddings": 131072, "tie_word_embeddings": True,
    "layer_types": None, "sliding_window_pattern": 6,
}

_TEXT_KEYS = {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL, "head_dim": SIZE, "attention_bias": FLAG,
    "attn_logit_softcapping": RATIO | NULL, "max_position_embeddings": POSITIONS, "tie_word_embeddings": FLAG,
    "layer_types": ListOf(Choice("full_attention", "sliding_attention"), hi=MAX_LAYERS) | NULL,
    "sliding_window_pattern": SIZE,
}
_VISION_KEYS = {
    "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS, "num_attention_heads": SIZE,
    "num_channels": SIZE, "image_size": SIZE, "patch_size": SIZE, "vision_use_head": FLAG,
    "model_type": Choice("siglip_vision_model"),
}
declare_keys("Gemma3ForConditionalGeneration", {
    "text_config": Nested(_TEXT_KEYS) | NULL, "vision_config": Nested(_VISION_KEYS) | NULL,
    "mm_tokens_per_image": SIZE, "tie_word_embeddings": FLAG,
    "dtype": Choice("float32", "bfloat16", "float16", None), "torch_dtype": Choice("float32", "bfloat16", "float16", None),
})


def _sub(config: Config, key: str, defaults: dict, keys: dict) -> Config:
    values = config[key]
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be an object, got {values!r}")
    return Config(config.component, values, defaults, keys)


def text_config(config: Config) -> Config:
    return _sub(config, "text_config", TEXT_DEFAULTS, _TEXT_KEYS)


def vision_config(config: Config) -> Config:
    return _sub(config, "vision_config", SIGLIP_DEFAULTS, _VISION_KEYS)


def _kaplan_layers(config: Config) -> tuple[int, int]:
    text = text_config(config)
    return count_int(text, "num_hidden_layers"), positive_int(text, "num_attention_heads") * positive_int(text, "head_dim")


def _projector(vision: Config, text_width: int) -> Node:
    """``Gemma3MultiModalProjector`` (modeling_gemma3.py:650), parameters only: ``mm_input_projection_weight``
    (vision width × text width, a bare parameter) and ``mm_soft_emb_norm`` (``Gemma3RMSNorm`` of the vision
    width)."""
    c = positive_int(vision, "hidden_size")
    return Node("multi_modal_projector", children=(
        Node("mm_input_projection_weight", ops.parameters(c * text_width)),
        Node("mm_soft_emb_norm", ops.parameters(c)),
    ), formula="not run")


@register("Gemma3ForConditionalGeneration", role="text_encoder", defaults=DEFAULTS, source=SOURCE,
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "lm_head", "vision_tower",
                                                         "multi_modal_projector")),
          nominal=RunShape(seq_len=8))
def gemma3_text_path(config: Config, shape: RunShape) -> Node:
    """A text-only forward on ``seq_len`` tokens: ``model.language_model`` and ``lm_head`` (the vision tower and
    the projector hold parameters only)."""
    n = shape.seq_len
    text = text_config(config)
    d, vocab = positive_int(text, "hidden_size"), positive_int(text, "vocab_size")
    vision = vision_config(config)
    language_model = replace(decoder_model(text, n, sandwich_norms=True, qk_norm=True,
                                           softcap=text["attn_logit_softcapping"] is not None,
                                           formula="gemma3_text_model"), name="language_model")
    tower = replace(weights_only(siglip_vision_model(vision, RunShape())), name="vision_tower", formula="not run")
    head = lm_head(n, d, vocab, tied=boolean(config, "tie_word_embeddings"))
    return Node("text_encoder", children=(
        Node("model", children=(tower, _projector(vision, d), language_model)),
        head,
    ), formula="gemma3_text")


def _buffers(config: Config) -> tuple[Buffer, ...]:
    """Non-persistent buffers: the vision embeddings' int64 ``position_ids`` (one per patch), the scaled word
    embedding's scalar ``embed_scale`` (created in the config's ``dtype``, float32 without one) and, per attention
    kind of ``layer_types`` (full and sliding), float32 ``inv_freq`` / ``original_inv_freq`` rotary tables of
    ``head_dim / 2`` frequencies (``Gemma3RotaryEmbedding``, modeling_gemma3.py:153-173)."""
    text = text_config(config)
    half = (positive_int(text, "head_dim") + 1) // 2
    scale_dtype = config["dtype"] or config["torch_dtype"] or "float32"
    prefix = "model.language_model.rotary_emb"
    return (Buffer("model.vision_tower.embeddings.position_ids", siglip_patches(vision_config(config)), "int64"),
            Buffer("model.language_model.embed_tokens.embed_scale", 1, scale_dtype),
            *(Buffer(f"{prefix}.{kind}_{name}", half, "float32") for kind in _attention_kinds(text)
              for name in ("inv_freq", "original_inv_freq")))


def _attention_kinds(text: Config) -> list[str]:
    """The attention kinds of the layers, sorted (``Gemma3RotaryEmbedding`` makes one table pair per kind):
    ``layer_types``, or ``Gemma3TextConfig``'s default pattern, every ``sliding_window_pattern``-th layer full."""
    kinds = text["layer_types"]
    if kinds is None:
        pattern = positive_int(text, "sliding_window_pattern")
        kinds = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                 for i in range(count_int(text, "num_hidden_layers"))]
    return sorted(set(kinds))


# lm_head (tied output embeddings, the last parameter) is kept out of a quantizer by get_keys_to_not_convert
loading_rules("Gemma3ForConditionalGeneration", buffers=_buffers, not_quantized=("lm_head",), source=SOURCE)
