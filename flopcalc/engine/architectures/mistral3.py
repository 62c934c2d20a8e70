"""Mistral-3 text encoder (transformers ``models/mistral3/modeling_mistral3.py``):
``Mistral3ForConditionalGeneration``, FLUX.2-dev's text encoder (Mistral-Small-3.x 24B).

``Flux2Pipeline._get_mistral_3_small_prompt_embeds`` calls the whole model on the padded prompt
(``input_ids``, ``attention_mask``, ``output_hidden_states=True``, ``use_cache=False``; no image) and
stacks ``hidden_states[10]``, ``[20]`` and ``[30]``; still every one of the ``num_hidden_layers``
layers runs, then the final ``norm``, and ``lm_head`` projects every position to the vocabulary
(``logits_to_keep=0`` keeps all): all of it counts. A text-only prompt never runs the Pixtral
``vision_tower`` nor the ``multi_modal_projector``: parameters only.

``model.language_model`` is a ``MistralModel``: decoder layers of grouped-query attention with a
head width ``head_dim`` (``hidden_size / heads`` when unset), no biases, a SiLU-gated MLP, two
RMSNorms (:func:`~flopcalc.engine.architectures.llm_encoders.decoder_model`). ``lm_head`` shares the token
embedding when the top-level ``tie_word_embeddings`` (``Mistral3Config``'s default: true) is set: FLUX.2-dev's
``config.json`` leaves it out (its ``text_config`` does not tie), so transformers 5 builds a tied ``lm_head``
(23.34B parameters, as measured); an untied one would add ``vocab_size × hidden_size`` (0.67B) parameters and
no work.
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.architectures.llm_encoders import decoder_model
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, Config, Int, ListOf, Nested, boolean, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import lm_head
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules, rotary_buffers

#: ``Mistral3Config`` defaults (configuration_mistral3.py).
DEFAULTS = {"text_config": None, "vision_config": None, "vision_feature_layer": -1,
            "multimodal_projector_bias": False, "spatial_merge_size": 2, "tie_word_embeddings": True}
#: ``Mistral3Config.sub_configs_defaults``: the text config built when none is given (Mistral-Small's).
TEXT_CONFIG_WHEN_ABSENT = {
    "head_dim": 128, "hidden_size": 5120, "intermediate_size": 32768, "num_attention_heads": 32,
    "num_hidden_layers": 40, "num_key_value_heads": 8, "vocab_size": 131072,
}
#: ``MistralConfig`` defaults (configuration_mistral.py) for keys a given ``text_config`` leaves out;
#: Mistral's projections have no biases (``attention_bias`` is not a Mistral option).
TEXT_DEFAULTS = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "attention_bias": False,
}
#: ``Mistral3Config.sub_configs_defaults``' vision config (Pixtral), used when none is given.
VISION_CONFIG_WHEN_ABSENT = {"intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14,
                             "num_hidden_layers": 24, "num_attention_heads": 16}
#: ``PixtralVisionConfig`` defaults (configuration_pixtral.py).
VISION_DEFAULTS = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_channels": 3,
                   "patch_size": 16, "num_attention_heads": 16}


def _sub(config: Config, key: str, absent: dict, defaults: dict) -> Config:
    values = config[key]
    if values is None:
        values = absent
    if not isinstance(values, dict):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be an object, got {values!r}")
    return Config(config.component, values, defaults)


def text_config(config: Config) -> Config:
    """The language model's config, ``head_dim`` resolved (``hidden_size // num_attention_heads`` when unset)."""
    text = _sub(config, "text_config", TEXT_CONFIG_WHEN_ABSENT, TEXT_DEFAULTS)
    if text["head_dim"] is None:
        head_dim = positive_int(text, "hidden_size") // positive_int(text, "num_attention_heads")
        text = Config(text.component, {**text.values, "head_dim": head_dim}, text.defaults)
    return text


def _kaplan_layers(config: Config) -> tuple[int, int]:
    text = text_config(config)
    return count_int(text, "num_hidden_layers"), positive_int(text, "num_attention_heads") * positive_int(text, "head_dim")


def _feature_layers(config: Config) -> int:
    """``Mistral3MultiModalProjector.num_feature_layers``: 1 for an int ``vision_feature_layer``, else its length."""
    layer = config["vision_feature_layer"]
    if isinstance(layer, int) and not isinstance(layer, bool):
        return 1
    if isinstance(layer, list) and layer and all(isinstance(v, int) and not isinstance(v, bool) for v in layer):
        return len(layer)
    raise ConfigError(f"{config.component}/config.json: 'vision_feature_layer' must be an integer or a list of "
                      f"integers, got {layer!r}")


def _vision_tower(vision: Config) -> Node:
    """``PixtralVisionModel``, parameters only: ``patch_conv`` (bias-free, patch × patch), ``ln_pre``,
    ``transformer.layers`` (two RMSNorms, bias-free q/k/v/o of width ``hidden_size``, a gated MLP)."""
    c, f = positive_int(vision, "hidden_size"), positive_int(vision, "intermediate_size")
    patch = positive_int(vision, "patch_size")
    unrun = ops.linear(0, c, c, bias=False) * 4 + ops.linear(0, c, f, bias=False) * 2 + ops.linear(0, f, c, bias=False)
    layer = Node("layer", ops.parameters(2 * c) + unrun, formula="not run")  # two norms, q/k/v/o, gate/up/down
    return Node("vision_tower", children=(
        Node("patch_conv", ops.parameters(positive_int(vision, "num_channels") * c * patch * patch)),
        Node("ln_pre", ops.parameters(c)),
        Node("transformer", children=(module_list("layers", [layer] * count_int(vision, "num_hidden_layers")),)),
    ), formula="not run")


def _projector(config: Config, vision: Config, text_width: int) -> Node:
    """``Mistral3MultiModalProjector``, parameters only: ``norm``, ``patch_merger.merging_layer``
    (c·m² → c), ``linear_1`` (c·feature layers → d) and ``linear_2`` (d → d), biases when
    ``multimodal_projector_bias``."""
    c = positive_int(vision, "hidden_size")
    merge = positive_int(config, "spatial_merge_size")
    bias = boolean(config, "multimodal_projector_bias")
    cost = (ops.parameters(c) + ops.linear(0, c * merge * merge, c, bias=False)
            + ops.linear(0, c * _feature_layers(config), text_width, bias=bias)
            + ops.linear(0, text_width, text_width, bias=bias))
    return Node("multi_modal_projector", cost, formula="not run")


#: Every config key the Mistral-3 text path reads, nested configs included, as
#: :func:`flopcalc.engine.config.declare_keys` validates them.
_TEXT_KEYS = {"head_dim": SIZE | NULL, "hidden_size": SIZE, "intermediate_size": SIZE, "num_attention_heads": SIZE,
              "num_hidden_layers": LAYERS, "num_key_value_heads": SIZE, "vocab_size": SIZE, "attention_bias": FLAG}
_VISION_KEYS = {"hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS, "num_channels": SIZE,
                "patch_size": SIZE, "num_attention_heads": SIZE}
declare_keys("Mistral3ForConditionalGeneration", {
    "text_config": Nested(_TEXT_KEYS) | NULL, "vision_config": Nested(_VISION_KEYS) | NULL,
    "vision_feature_layer": Int(-1024, 1024) | ListOf(Int(-1024, 1024)), "multimodal_projector_bias": FLAG,
    "spatial_merge_size": SIZE, "tie_word_embeddings": FLAG,
})

@register("Mistral3ForConditionalGeneration", role="text_encoder", defaults=DEFAULTS,
          source="transformers/models/mistral3/modeling_mistral3.py",
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "lm_head", "vision_tower",
                                                         "multi_modal_projector")))
def mistral3_text_path(config: Config, shape: RunShape) -> Node:
    """A text-only forward on ``seq_len`` tokens: ``model.language_model`` and ``lm_head``."""
    n = shape.seq_len
    text = text_config(config)
    d, vocab = positive_int(text, "hidden_size"), positive_int(text, "vocab_size")
    vision = _sub(config, "vision_config", VISION_CONFIG_WHEN_ABSENT, VISION_DEFAULTS)
    language_model = replace(decoder_model(text, n, formula="mistral_model"), name="language_model")
    head = lm_head(n, d, vocab, tied=boolean(config, "tie_word_embeddings"))
    return Node("text_encoder", children=(
        Node("model", children=(_vision_tower(vision), _projector(config, vision, d), language_model)),
        head,
    ), formula="mistral3_text")


def _mistral3_buffers(config: Config) -> tuple[Buffer, ...]:
    """Non-persistent float32 rotary tables: Pixtral's 2-D ``patch_positional_embedding`` (head width
    ``hidden_size / num_attention_heads``, modeling_pixtral.py) and the language model's ``rotary_emb``."""
    vision = _sub(config, "vision_config", VISION_CONFIG_WHEN_ABSENT, VISION_DEFAULTS)
    vision_head = positive_int(vision, "hidden_size") // positive_int(vision, "num_attention_heads")
    return (*rotary_buffers("model.vision_tower.patch_positional_embedding", vision_head),
            *rotary_buffers("model.language_model.rotary_emb", positive_int(text_config(config), "head_dim")))


# lm_head holds the last parameter: transformers' get_keys_to_not_convert keeps it out of a quantizer
loading_rules("Mistral3ForConditionalGeneration", buffers=_mistral3_buffers, not_quantized=("lm_head",),
              source="transformers/models/mistral3/modeling_mistral3.py")


# --------------------------------------------------------------------------- Mistral3Model (no lm_head)

declare_keys("Mistral3Model", {
    "text_config": Nested(_TEXT_KEYS) | NULL, "vision_config": Nested(_VISION_KEYS) | NULL,
    "vision_feature_layer": Int(-1024, 1024) | ListOf(Int(-1024, 1024)), "multimodal_projector_bias": FLAG,
    "spatial_merge_size": SIZE,
})


@register("Mistral3Model", role="text_encoder", defaults=DEFAULTS,
          source="transformers/models/mistral3/modeling_mistral3.py",
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "vision_tower", "multi_modal_projector")))
def mistral3_model(config: Config, shape: RunShape) -> Node:
    """``Mistral3Model`` (ERNIE-Image's text encoder: ``ErnieImagePipeline.encode_prompt`` keeps
    ``hidden_states[-2]``, every layer and the final norm still run) on ``seq_len`` text tokens: ``language_model``
    only; ``vision_tower`` and ``multi_modal_projector`` hold parameters and never run on a text prompt. No
    ``lm_head``. The language model may be a ``MistralModel`` or a ``Ministral3Model`` (``text_config.model_type``
    ``ministral3``): the same decoder layers."""
    text = text_config(config)
    d = positive_int(text, "hidden_size")
    vision = _sub(config, "vision_config", VISION_CONFIG_WHEN_ABSENT, VISION_DEFAULTS)
    language_model = replace(decoder_model(text, shape.seq_len, formula="mistral_model"), name="language_model")
    return Node("text_encoder", children=(_vision_tower(vision), _projector(config, vision, d), language_model),
                formula="mistral3_model")


def _mistral3_model_buffers(config: Config) -> tuple[Buffer, ...]:
    """As :func:`_mistral3_buffers`, without the ``model.`` prefix."""
    return tuple(Buffer(b.name.removeprefix("model."), b.numel, b.dtype) for b in _mistral3_buffers(config))


loading_rules("Mistral3Model", buffers=_mistral3_model_buffers, source="transformers/models/mistral3/modeling_mistral3.py")
