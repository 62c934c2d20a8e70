"""Qwen2-VL as a text encoder: ``Qwen2VLForConditionalGeneration`` (transformers ``models/qwen2_vl/modeling_qwen2_vl.py``),
EasyAnimate's (the pipelines call it on the padded chat prompt with ``output_hidden_states=True`` and keep
``hidden_states[-2]``; ``forward`` still applies ``lm_head`` to every token).

Its language model is Qwen2's decoder, the same modules as Qwen2.5-VL's text model
(:func:`flopcalc.engine.architectures.llm_encoders._qwen2_5_vl_language_model`: q/k/v biases, bias-free ``o_proj``,
SwiGLU MLP, mRoPE); a text-only prompt leaves the vision tower (``Qwen2VisionTransformerPretrainedModel``: a
``Conv3d`` patch embedding without bias, ``depth`` pre-LayerNorm blocks of packed ``qkv`` and a QuickGELU MLP of
``mlp_ratio``, and the ``PatchMerger``) idle: parameters only. A config without ``text_config`` keeps the text keys at
the top level (transformers builds the text config from them).
"""

from __future__ import annotations


from flopcalc.engine.architectures.llm_encoders import (
    QWEN2_5_VL_TEXT_DEFAULTS, QWEN2_5_VL_TEXT_KEYS, _qwen2_5_vl_language_model, _sub_config,
)
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, Config, Nested, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import loading_rules, rotary_buffers
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import lm_head

CLASS = "Qwen2VLForConditionalGeneration"
SOURCE = "transformers/models/qwen2_vl/modeling_qwen2_vl.py"
#: ``Qwen2VLConfig`` defaults beyond the text model's.
DEFAULTS = {"tie_word_embeddings": False, "text_config": None, "vision_config": None}
#: ``Qwen2VLVisionConfig`` defaults (configuration_qwen2_vl.py).
VISION_DEFAULTS = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4, "num_heads": 16,
                   "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
VISION_KEYS = {"depth": LAYERS, "embed_dim": SIZE, "hidden_size": SIZE, "mlp_ratio": RATIO, "num_heads": SIZE,
               "in_channels": SIZE, "in_chans": SIZE, "patch_size": SIZE, "spatial_merge_size": SIZE,
               "temporal_patch_size": SIZE}

declare_keys(CLASS, {
    **QWEN2_5_VL_TEXT_KEYS, "tie_word_embeddings": FLAG,
    "text_config": Nested(QWEN2_5_VL_TEXT_KEYS) | NULL, "vision_config": Nested(VISION_KEYS) | NULL,
})


def _text(config: Config) -> Config:
    return _sub_config(config, "text_config", QWEN2_5_VL_TEXT_DEFAULTS, fallback_to_top=True)


def _kaplan_layers(config: Config) -> tuple[int, int]:
    text = _text(config)
    return count_int(text, "num_hidden_layers"), positive_int(text, "hidden_size")


def _vision_tower(vision: Config) -> Node:
    """``Qwen2VisionTransformerPretrainedModel``'s parameters (no image: no work)."""
    e = positive_int(vision, "embed_dim")
    channels = positive_int(vision, "in_chans") if "in_chans" in vision.values else positive_int(vision, "in_channels")
    p, tp = positive_int(vision, "patch_size"), positive_int(vision, "temporal_patch_size")
    hidden = int(e * float(vision["mlp_ratio"]))
    merged = e * positive_int(vision, "spatial_merge_size") ** 2
    block = Node("block", children=(
        Node("norm1", ops.layer_norm(0, e)), Node("norm2", ops.layer_norm(0, e)),
        Node("attn", children=(Node("qkv", ops.linear(0, e, 3 * e)), Node("proj", ops.linear(0, e, e)))),
        Node("mlp", children=(Node("fc1", ops.linear(0, e, hidden)), Node("fc2", ops.linear(0, hidden, e)))),
    ))
    return Node("visual", children=(
        Node("patch_embed", children=(Node("proj", ops.conv(channels, e, tp * p * p, 0, bias=False)),)),
        module_list("blocks", [block] * count_int(vision, "depth")),
        Node("merger", children=(
            Node("ln_q", ops.layer_norm(0, e)),
            Node("mlp", children=(Node("0", ops.linear(0, merged, merged)),
                                  Node("2", ops.linear(0, merged, positive_int(vision, "hidden_size"))))),
        )),
    ))


@register(CLASS, role="text_encoder", defaults=DEFAULTS, source=SOURCE, nominal=RunShape(seq_len=8),
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "lm_head", "visual")))
def qwen2_vl_text_path(config: Config, shape: RunShape) -> Node:
    """``model.language_model`` and ``lm_head`` on the ``seq_len`` prompt tokens; the vision tower idle. Images are
    not modelled (EasyAnimate passes text only)."""
    if shape.height is not None:
        raise ConfigError(f"{config.component}: Qwen2VLForConditionalGeneration with condition images is not modelled "
                          "(the EasyAnimate pipelines encode text only)")
    n = shape.seq_len
    text = _text(config)
    d, vocab = positive_int(text, "hidden_size"), positive_int(text, "vocab_size")
    head = lm_head(n, d, vocab, tied=bool(config.get("tie_word_embeddings") or text.get("tie_word_embeddings")))
    vision = _sub_config(config, "vision_config", VISION_DEFAULTS, fallback_to_top=False)
    return Node("text_encoder", children=(
        Node("model", children=(_vision_tower(vision), Node("language_model",
                                                            children=_qwen2_5_vl_language_model(text, n)))),
        head,
    ), formula="qwen2_vl_text")


def _buffers(config: Config):
    """The vision tower's rotary tables (half its head width) and the language model's (head width hidden/heads)."""
    vision = _sub_config(config, "vision_config", VISION_DEFAULTS, fallback_to_top=False)
    text = _text(config)
    vision_head = positive_int(vision, "embed_dim") // positive_int(vision, "num_heads")
    text_head = positive_int(text, "hidden_size") // positive_int(text, "num_attention_heads")
    return (*rotary_buffers("model.visual.rotary_pos_emb", vision_head // 2),
            *rotary_buffers("model.language_model.rotary_emb", text_head))


# lm_head: the output embeddings (and the last parameter), kept out of a quantizer by get_keys_to_not_convert
loading_rules(CLASS, buffers=_buffers, not_quantized=("lm_head",), source=SOURCE)
