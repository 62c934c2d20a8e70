"""``LlavaForConditionalGeneration`` (transformers ``models/llava/modeling_llava.py``): HunyuanVideo-I2V's text
encoder (``HunyuanVideoImageToVideoPipeline``), run on the templated prompt with one image.

``forward`` (:311-367): ``model.get_image_features`` runs ``vision_tower`` (a ``CLIPVisionModel``: embeddings,
``pre_layrnorm``, every encoder layer, ``post_layernorm`` on the class token, :156) on the image, keeps the
hidden states of ``vision_feature_layer`` (the class token dropped under the ``default`` strategy, :164-173) and
runs ``multi_modal_projector`` (``linear_1``, GELU, ``linear_2``, :175) on them; the projected features replace
the ``<image>`` placeholders (``masked_scatter``, :257); ``language_model`` (a ``LlamaModel``) runs on all
``seq_len`` tokens and ``lm_head`` on every one (``logits_to_keep=0``, :366-367). The vision tower and the
language model reuse :mod:`flopcalc.engine.architectures.clip` and :mod:`flopcalc.engine.architectures.llama`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.architectures.clip import VISION_DEFAULTS, clip_vision_model_with_projection, vision_tokens
from flopcalc.engine.architectures.llama import DEFAULTS as LLAMA_DEFAULTS
from flopcalc.engine.architectures.llama import llama_model
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, POSITIONS, SIZE, Choice, Config, Int, ListOf, Nested, boolean, declare_keys, nested_keys,
    positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import lm_head
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules, rotary_buffers

SOURCE = "transformers/models/llava/modeling_llava.py"
#: ``LlavaConfig`` top-level defaults (configuration_llava.py:72-78).
DEFAULTS = {
    "vision_config": None,
    "text_config": None,
    "vision_feature_select_strategy": "default",
    "vision_feature_layer": -2,
    "multimodal_projector_bias": True,
    "tie_word_embeddings": False,
}
#: ``sub_configs_defaults["vision_config"]`` (configuration_llava.py:52-65): the CLIP vision tower LlavaConfig
#: builds when the config has no ``vision_config``.
DEFAULT_VISION = {"intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14, "image_size": 336,
                  "num_hidden_layers": 24, "num_attention_heads": 16, "projection_dim": 768}
STRATEGIES = ("default", "full")

#: The ``CLIPVisionConfig`` keys the vision tower reads.
VISION_KEYS = {
    "hidden_size": SIZE, "intermediate_size": SIZE, "projection_dim": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_channels": SIZE, "image_size": SIZE, "patch_size": SIZE,
}
#: The ``LlamaConfig`` keys the language model reads.
TEXT_KEYS = {
    "hidden_size": SIZE, "intermediate_size": SIZE, "num_attention_heads": SIZE,
    "num_key_value_heads": SIZE | NULL, "head_dim": SIZE | NULL, "num_hidden_layers": LAYERS,
    "vocab_size": SIZE, "attention_bias": FLAG, "mlp_bias": FLAG, "tie_word_embeddings": FLAG,
    "max_position_embeddings": POSITIONS,
}
FEATURE_LAYER = Int(-1024, 1024)
#: Every config key ``LlavaForConditionalGeneration`` reads (assembler and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("LlavaForConditionalGeneration", {
    "vision_config": Nested(VISION_KEYS) | NULL, "text_config": Nested(TEXT_KEYS) | NULL,
    "vision_feature_select_strategy": Choice(*STRATEGIES), "vision_feature_layer": FEATURE_LAYER | ListOf(FEATURE_LAYER),
    "multimodal_projector_bias": FLAG, "tie_word_embeddings": FLAG,
})


def _sub_config(config: Config, key: str, defaults: Mapping[str, Any], absent: Mapping[str, Any]) -> Config:
    """``text_config`` / ``vision_config`` with its class defaults; a missing one is LlavaConfig's default
    (``absent``)."""
    values = config[key]
    if values is None:
        values = absent
    elif not isinstance(values, Mapping):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be an object, got {values!r}")
    return Config(config.component, values, defaults, nested_keys((config.declared or {}).get(key)))


def vision_config(config: Config) -> Config:
    """The vision tower's ``CLIPVisionConfig``."""
    return _sub_config(config, "vision_config", VISION_DEFAULTS, DEFAULT_VISION)


def text_config(config: Config) -> Config:
    """The language model's ``LlamaConfig``."""
    return _sub_config(config, "text_config", LLAMA_DEFAULTS, {})


def image_features(config: Config) -> int:
    """Projected features per image: the vision tokens ``(image_size // patch_size)² + 1``, less the class token
    under the ``default`` strategy (:166-167)."""
    strategy = config["vision_feature_select_strategy"]
    if strategy not in STRATEGIES:
        raise ConfigError(f"{config.component}/config.json: vision_feature_select_strategy {strategy!r} is not one "
                          f"of {', '.join(STRATEGIES)}")
    return vision_tokens(vision_config(config)) - (strategy == "default")


@register("LlavaForConditionalGeneration", role="text_encoder", defaults=DEFAULTS, source=SOURCE,
          nominal=RunShape(seq_len=8))
def llava_for_conditional_generation(config: Config, shape: RunShape) -> Node:
    """One image and ``seq_len`` tokens: ``model.vision_tower`` (the CLIP vision formula on ``(image_size /
    patch_size)² + 1`` tokens, all its layers), ``model.multi_modal_projector`` (``vision hidden × layers kept →
    text hidden → text hidden`` on :func:`image_features` tokens), ``model.language_model`` (the Llama formula on
    ``seq_len``), ``lm_head`` (``seq_len × hidden × vocab``; its weight is the embedding's when
    ``tie_word_embeddings``)."""
    n = shape.seq_len
    vision, text = vision_config(config), text_config(config)
    clip = clip_vision_model_with_projection(vision, shape)
    tower = next(c for c in clip.children if c.name == "vision_model")
    layers = config["vision_feature_layer"]
    kept = len(layers) if isinstance(layers, list) else 1
    d_text = positive_int(text, "hidden_size")
    bias = boolean(config, "multimodal_projector_bias")
    tokens = image_features(config)
    projector = Node("multi_modal_projector", children=(
        Node("linear_1", ops.linear(tokens, positive_int(vision, "hidden_size") * kept, d_text, bias=bias)),
        Node("linear_2", ops.linear(tokens, d_text, d_text, bias=bias)),
    ))
    language = llama_model(text, RunShape(seq_len=n))
    tied = boolean(config, "tie_word_embeddings") or bool(text.get("tie_word_embeddings"))
    head = lm_head(n, d_text, positive_int(text, "vocab_size"), tied=tied)
    return Node("text_encoder", children=(
        Node("model", children=(replace(tower, name="vision_tower"), projector,
                                replace(language, name="language_model"))),
        head,
    ), formula="llava")


def _buffers(config: Config) -> tuple[Buffer, ...]:
    """The vision embeddings' int64 ``position_ids`` and the language model's rotary tables."""
    text = text_config(config)
    heads = positive_int(text, "num_attention_heads")
    head_dim = text["head_dim"] or positive_int(text, "hidden_size") // heads
    return (Buffer("model.vision_tower.embeddings.position_ids", vision_tokens(vision_config(config)), "int64"),
            *rotary_buffers("model.language_model.rotary_emb", head_dim))


# lm_head: the output embeddings (and the last parameter), kept out of a quantizer by get_keys_to_not_convert
loading_rules("LlavaForConditionalGeneration", buffers=_buffers, not_quantized=("lm_head",), source=SOURCE)
