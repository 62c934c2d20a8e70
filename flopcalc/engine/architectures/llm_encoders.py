"""LLM and BERT text encoders of the newer diffusion pipelines (transformers 5):

* ``Gemma2Model`` (``models/gemma2/modeling_gemma2.py``): SANA, Lumina-Image-2.0;
* ``GemmaModel`` (``models/gemma/modeling_gemma.py``): Lumina-Next;
* ``Qwen2_5_VLForConditionalGeneration`` (``models/qwen2_5_vl/modeling_qwen2_5_vl.py``): Qwen-Image;
* ``Qwen2_5_VLTextModel`` (same file, line 745): HunyuanVideo 1.5's text encoder, the language model alone
  (the conversion script keeps ``.language_model`` of Qwen2.5-VL-7B-Instruct: no vision tower, no ``lm_head``);
* ``BertModel`` (``models/bert/modeling_bert.py``): HunyuanDiT's first text encoder.

Each pipeline runs the whole module on the padded prompt (``seq_len`` tokens, the mask never
saves work). The decoder models stack ``num_hidden_layers`` :func:`~flopcalc.formulas.decoder_layer.decoder_layer`
blocks between the token embedding and a final RMSNorm. Qwen-Image calls
``text_encoder(input_ids=..., attention_mask=..., output_hidden_states=True)`` and keeps
``hidden_states[-1]``, but ``Qwen2_5_VLForConditionalGeneration.forward`` still applies ``lm_head``
to every token (``logits_to_keep=0`` keeps all): that vocabulary projection runs and counts. Its
vision tower (``model.visual``) is built and holds parameters; a text-only prompt never runs it, the
Qwen-Image-Edit pipelines run it on their condition images (:mod:`flopcalc.formulas.qwen2_5_vision`), whose
merged tokens replace the ``<|image_pad|>`` placeholders in the language model's sequence.
``BertModel`` is built with its pooler (``add_pooling_layer=True``, the ``from_pretrained``
default), which runs on the first token even though HunyuanDiT only reads ``[0]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYERS, ListOf, NULL, POSITIONS, RATIO, SIZE, Config, Nested, boolean, count_int, declare_keys,
    nested_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.formulas import ops
from flopcalc.formulas.qwen2_5_vision import vision_tower
from flopcalc.formulas.decoder_layer import (
    lm_head,
    bert_cross_attention_params,
    bert_embeddings,
    bert_layer,
    bert_pooler,
    decoder_layer,
    rotary_embedding,
)
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules, rotary_buffers

#: ``GemmaConfig`` defaults (transformers configuration_gemma.py).
GEMMA_DEFAULTS = {
    "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "attention_bias": False,
}
#: ``Gemma2Config`` defaults (transformers configuration_gemma2.py).
GEMMA2_DEFAULTS = {
    "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "attention_bias": False,
    "attn_logit_softcapping": 50.0,
}
#: ``Qwen2_5_VLConfig`` defaults (configuration_qwen2_5_vl.py); the sub-configs' below.
QWEN2_5_VL_DEFAULTS = {"tie_word_embeddings": False, "text_config": None, "vision_config": None}
#: ``Qwen2_5_VLTextConfig`` defaults.
QWEN2_5_VL_TEXT_DEFAULTS = {
    "vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8, "tie_word_embeddings": False,
}
#: ``Qwen2_5_VLVisionConfig`` defaults (``num_hidden_layers``/``num_attention_heads`` alias ``depth``/``num_heads``).
QWEN2_5_VL_VISION_DEFAULTS = {
    "depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16, "in_channels": 3, "patch_size": 14,
    "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584, "window_size": 112,
    "fullatt_block_indexes": (7, 15, 23, 31),
}
#: ``BertConfig`` defaults (transformers configuration_bert.py).
BERT_DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2, "is_decoder": False,
    "add_cross_attention": False,
}


# --------------------------------------------------------------------------- Gemma, Gemma-2

#: Kaplan's shape of Gemma and Gemma-2: queries of ``num_attention_heads · head_dim``.
GEMMA_KAPLAN = KaplanShape(
    lambda c: (count_int(c, "num_hidden_layers"), positive_int(c, "num_attention_heads") * positive_int(c, "head_dim")),
    embeddings=("embed_tokens",))



#: ``Qwen2_5_VLTextConfig`` keys (top level too: a config without ``text_config`` is read from there).
QWEN2_5_VL_TEXT_KEYS = {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL, "tie_word_embeddings": FLAG,
    "max_position_embeddings": POSITIONS,
}
#: ``Qwen2_5_VLVisionConfig`` keys.
QWEN2_5_VL_VISION_KEYS = {
    "depth": LAYERS, "num_hidden_layers": LAYERS, "hidden_size": SIZE, "intermediate_size": SIZE,
    "in_channels": SIZE, "patch_size": SIZE, "temporal_patch_size": SIZE, "spatial_merge_size": SIZE,
    "out_hidden_size": SIZE, "num_heads": SIZE, "num_attention_heads": SIZE, "window_size": SIZE,
    "fullatt_block_indexes": ListOf(LAYERS, lo=0),
}
#: Every config key ``GemmaModel`` and ``Gemma2Model`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys(("GemmaModel", "Gemma2Model"), {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL, "head_dim": SIZE, "attention_bias": FLAG,
    "attn_logit_softcapping": RATIO | NULL, "max_position_embeddings": POSITIONS, "tie_word_embeddings": FLAG,
})

#: Every config key ``BertModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("BertModel", {
    "vocab_size": SIZE, "hidden_size": SIZE, "num_hidden_layers": LAYERS, "num_attention_heads": SIZE,
    "intermediate_size": SIZE, "max_position_embeddings": POSITIONS, "type_vocab_size": SIZE,
    "is_decoder": FLAG, "add_cross_attention": FLAG,
})

#: Every config key ``Qwen2_5_VLForConditionalGeneration`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("Qwen2_5_VLForConditionalGeneration", {
    **QWEN2_5_VL_TEXT_KEYS,
    "text_config": Nested(QWEN2_5_VL_TEXT_KEYS) | NULL, "vision_config": Nested(QWEN2_5_VL_VISION_KEYS) | NULL,
})

#: Every config key ``Qwen2_5_VLTextModel`` reads (a ``Qwen2_5_VLTextConfig``: the text keys at the top level).
declare_keys("Qwen2_5_VLTextModel", QWEN2_5_VL_TEXT_KEYS)


@register("Gemma2Model", role="text_encoder", defaults=GEMMA2_DEFAULTS,
          source="transformers/models/gemma2/modeling_gemma2.py", kaplan=GEMMA_KAPLAN)
def gemma2_model(config: Config, shape: RunShape) -> Node:
    """``Gemma2Model``: four RMSNorms per layer, soft-capped attention logits (when
    ``attn_logit_softcapping`` is set); sliding-window layers cost the dense attention."""
    return decoder_model(config, shape.seq_len, sandwich_norms=True,
                         softcap=config.get("attn_logit_softcapping") is not None, formula="gemma2_model")


@register("GemmaModel", role="text_encoder", defaults=GEMMA_DEFAULTS,
          source="transformers/models/gemma/modeling_gemma.py", kaplan=GEMMA_KAPLAN)
def gemma_model(config: Config, shape: RunShape) -> Node:
    """``GemmaModel``: two RMSNorms per layer."""
    return decoder_model(config, shape.seq_len, formula="gemma_model")


def decoder_model(config: Config, n: Any, *, formula: str, sandwich_norms: bool = False, softcap: bool = False,
                  qk_norm: bool = False) -> Node:
    """A Gemma-style decoder model (``GemmaModel``, ``Gemma2Model``, ``Qwen3Model``): ``embed_tokens``
    (a lookup; Gemma scales it), the layers, ``norm``, ``rotary_emb``; every projection has
    ``attention_bias``; the head width is ``head_dim`` (not hidden/heads); ``qk_norm``: Qwen3's
    per-head q/k RMSNorms."""
    d = positive_int(config, "hidden_size")
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "head_dim")
    bias = boolean(config, "attention_bias")
    layer = decoder_layer(tokens=n, dim=d, heads=heads, kv_heads=_kv_heads(config, heads), head_dim=head_dim,
                          d_ff=positive_int(config, "intermediate_size"), qkv_bias=bias, out_bias=bias,
                          sandwich_norms=sandwich_norms, softcap=softcap, qk_norm=qk_norm)
    return Node("text_encoder", children=(
        Node("embed_tokens", ops.embedding(positive_int(config, "vocab_size"), d)),
        module_list("layers", [layer] * count_int(config, "num_hidden_layers")),
        Node("norm", ops.rms_norm(n, d)),
        rotary_embedding("rotary_emb", n, head_dim),
    ), formula=formula)


def _kv_heads(config: Config, heads: int) -> int:
    """``num_key_value_heads`` (``None`` means one per query head), which must divide the heads."""
    kv = config.get("num_key_value_heads")
    kv = heads if kv is None else positive_int(config, "num_key_value_heads")
    if heads % kv:
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} is not a multiple of "
                          f"num_key_value_heads {kv}")
    return kv


# --------------------------------------------------------------------------- Qwen2.5-VL


def _qwen2_5_vl_kaplan_layers(config: Config) -> tuple[int, int]:
    text = _sub_config(config, "text_config", QWEN2_5_VL_TEXT_DEFAULTS, fallback_to_top=True)
    return count_int(text, "num_hidden_layers"), positive_int(text, "hidden_size")


@register("Qwen2_5_VLForConditionalGeneration", role="text_encoder", defaults=QWEN2_5_VL_DEFAULTS,
          source="transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py",
          kaplan=KaplanShape(_qwen2_5_vl_kaplan_layers, embeddings=("embed_tokens", "lm_head", "visual")),
          nominal=RunShape(seq_len=8))  # text only: height/width would be condition images
def qwen2_5_vl_text_path(config: Config, shape: RunShape) -> Node:
    """The forward a pipeline makes: ``model.language_model`` (decoder layers with q/k/v biases,
    bias-free ``o_proj``, head width hidden/heads, mRoPE) and ``lm_head`` over all ``seq_len`` tokens;
    ``lm_head`` shares the token embedding when ``tie_word_embeddings`` (top level, or the text
    config's) is set. A text-only prompt leaves ``model.visual`` idle (parameters only). With condition
    images (``shape.frames`` images of ``shape.height × shape.width`` pixels, as the processor's
    ``smart_resize`` left them: one ``image_grid_thw`` row ``(1, H/p, W/p)`` each), ``model.visual`` runs
    on them first (``get_image_features``, modeling_qwen2_5_vl.py:1060-1075) and its merged tokens are
    part of the ``seq_len`` the language model and ``lm_head`` run on (``masked_scatter`` into the
    placeholders, :1200-1211)."""
    n = shape.seq_len
    text = _sub_config(config, "text_config", QWEN2_5_VL_TEXT_DEFAULTS, fallback_to_top=True)
    d, vocab = positive_int(text, "hidden_size"), positive_int(text, "vocab_size")
    language_model = Node("language_model", children=_qwen2_5_vl_language_model(text, n))
    head = lm_head(n, d, vocab, tied=bool(config.get("tie_word_embeddings") or text.get("tie_word_embeddings")))
    vision = _sub_config(config, "vision_config", QWEN2_5_VL_VISION_DEFAULTS, fallback_to_top=False)
    return Node("text_encoder", children=(
        Node("model", children=(_qwen2_5_vl_vision_tower(vision, _image_grids(config, vision, shape)),
                                language_model)),
        head,
    ), formula="qwen2_5_vl_text")


def _qwen2_5_vl_language_model(text: Config, n: Any) -> tuple[Node, ...]:
    """``Qwen2_5_VLTextModel``'s modules (modeling_qwen2_5_vl.py:753-765) on ``n`` tokens: ``embed_tokens`` (a
    lookup), ``num_hidden_layers`` decoder layers (q/k/v biases, bias-free ``o_proj``, head width
    hidden/heads), the final ``norm`` and the mRoPE tables (three position rows)."""
    d = positive_int(text, "hidden_size")
    heads = positive_int(text, "num_attention_heads")
    if d % heads:
        raise ConfigError(f"{text.component}/config.json: hidden_size {d} is not a multiple of "
                          f"num_attention_heads {heads}")
    head_dim = d // heads
    layer = decoder_layer(tokens=n, dim=d, heads=heads, kv_heads=_kv_heads(text, heads), head_dim=head_dim,
                          d_ff=positive_int(text, "intermediate_size"), qkv_bias=True, out_bias=False)
    return (
        Node("embed_tokens", ops.embedding(positive_int(text, "vocab_size"), d)),
        module_list("layers", [layer] * count_int(text, "num_hidden_layers")),
        Node("norm", ops.rms_norm(n, d)),
        rotary_embedding("rotary_emb", n, head_dim, axes=3),
    )


@register("Qwen2_5_VLTextModel", role="text_encoder", defaults=QWEN2_5_VL_TEXT_DEFAULTS,
          source="transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py",
          kaplan=KaplanShape(lambda c: (count_int(c, "num_hidden_layers"), positive_int(c, "hidden_size")),
                             embeddings=("embed_tokens",)))
def qwen2_5_vl_text_model(config: Config, shape: RunShape) -> Node:
    """``Qwen2_5_VLTextModel.forward`` (modeling_qwen2_5_vl.py:774): the language model of
    ``Qwen2_5_VLForConditionalGeneration`` alone, on all ``seq_len`` tokens. HunyuanVideo 1.5 keeps
    ``hidden_states[-3]``, but every layer and the final norm run (``output_hidden_states`` only
    collects them); there is no ``lm_head``."""
    return Node("text_encoder", children=_qwen2_5_vl_language_model(config, shape.seq_len),
                formula="qwen2_5_vl_text_model")


def _sub_config(config: Config, key: str, defaults: Mapping[str, Any], *, fallback_to_top: bool) -> Config:
    """A nested config (``text_config``/``vision_config``) with its class defaults. Without it,
    ``Qwen2_5_VLConfig`` builds the text config from the top-level keys and the vision config from
    the defaults."""
    values = config.get(key)
    if values is None:
        if fallback_to_top:
            return Config(config.component, config.values, defaults, config.declared)
        values = {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be an object, got {values!r}")
    return Config(config.component, values, defaults, nested_keys((config.declared or {}).get(key)))


def _aliased(config: Config, key: str, alias: str) -> int:
    """``key`` or, as the vision config's ``attribute_map`` allows, ``alias``."""
    if key not in config.values and alias in config.values:
        return count_int(config, alias)
    return count_int(config, key)


def _image_grids(config: Config, vision: Config, shape: RunShape) -> list[tuple[int, int, int]]:
    """``image_grid_thw``: one ``(1, H/p, W/p)`` row per condition image (an image is one temporal
    patch: the processor repeats it ``temporal_patch_size`` times); none for a text-only prompt."""
    if shape.height is None:
        return []
    patch = positive_int(vision, "patch_size")
    factor = patch * positive_int(vision, "spatial_merge_size")
    if isinstance(shape.height, int) and (shape.height % factor or shape.width % factor):
        raise ConfigError(f"{config.component}: a condition image of {shape.height}×{shape.width} pixels does not "
                          f"split into {factor}-pixel merged patches (the processor's smart_resize makes it so)")
    return [(1, ops.exact_div(shape.height, patch), ops.exact_div(shape.width, patch))] * (shape.frames or 1)


def _qwen2_5_vl_vision_tower(vision: Config, grids: list[tuple[int, int, int]]) -> Node:
    """``Qwen2_5_VisionTransformerPretrainedModel`` (:func:`flopcalc.formulas.qwen2_5_vision.vision_tower`)
    on ``grids``; no grid: parameters only."""
    full = vision["fullatt_block_indexes"]
    if not isinstance(full, (list, tuple)):
        raise ConfigError(f"{vision.component}/config.json: vision_config.fullatt_block_indexes must be a list")
    return vision_tower(
        grids=grids, in_channels=positive_int(vision, "in_channels"), dim=positive_int(vision, "hidden_size"),
        heads=_aliased_size(vision, "num_heads", "num_attention_heads"),
        d_ff=positive_int(vision, "intermediate_size"), depth=_aliased(vision, "depth", "num_hidden_layers"),
        patch=positive_int(vision, "patch_size"), temporal_patch=positive_int(vision, "temporal_patch_size"),
        merge=positive_int(vision, "spatial_merge_size"), window_size=positive_int(vision, "window_size"),
        full_attention=frozenset(full), out_dim=positive_int(vision, "out_hidden_size"))


def _aliased_size(config: Config, key: str, alias: str) -> int:
    """``key`` or, as the vision config's ``attribute_map`` allows, ``alias`` (a positive size)."""
    if key not in config.values and alias in config.values:
        return positive_int(config, alias)
    return positive_int(config, key)


# --------------------------------------------------------------------------- BERT


@register("BertModel", role="text_encoder", defaults=BERT_DEFAULTS, source="transformers/models/bert/modeling_bert.py",
          kaplan=KaplanShape(lambda c: (count_int(c, "num_hidden_layers"), positive_int(c, "hidden_size")),
                             embeddings=("embeddings",)))
def bert_model(config: Config, shape: RunShape) -> Node:
    """``BertModel`` as ``from_pretrained`` builds it: embeddings, encoder, pooler."""
    return bert_model_tree(config, shape.seq_len, pooler=True)


def bert_model_tree(config: Config, n: Any, *, pooler: bool) -> Node:
    """``BertModel(config, add_pooling_layer=pooler)``: ``embeddings`` (absolute positions: at most
    ``max_position_embeddings`` tokens), ``encoder.layer`` × ``num_hidden_layers`` (a decoder with
    ``add_cross_attention`` also holds the unused cross-attention's parameters), ``pooler``."""
    d = positive_int(config, "hidden_size")
    heads = positive_int(config, "num_attention_heads")
    if d % heads:
        raise ConfigError(f"{config.component}/config.json: hidden_size {d} is not a multiple of "
                          f"num_attention_heads {heads}")
    positions = positive_int(config, "max_position_embeddings")
    if isinstance(n, int) and n > positions:
        raise FlopcalcError(f"{config.component}: BertModel has {positions} position embeddings and cannot encode "
                            f"{n} tokens; use a max_sequence_length of at most {positions}.")
    layer = bert_layer(tokens=n, dim=d, heads=heads, d_ff=positive_int(config, "intermediate_size"))
    if config["add_cross_attention"]:
        if not config["is_decoder"]:
            raise ConfigError(f"{config.component}/config.json: add_cross_attention needs is_decoder (as BertLayer)")
        layer = Node(layer.name, children=(*layer.children, Node("crossattention", bert_cross_attention_params(d))),
                     formula=layer.formula)
    children = [
        bert_embeddings("embeddings", n, d, vocab=positive_int(config, "vocab_size"), positions=positions,
                        token_types=positive_int(config, "type_vocab_size")),
        Node("encoder", children=(module_list("layer", [layer] * count_int(config, "num_hidden_layers")),)),
    ]
    if pooler:
        children.append(bert_pooler("pooler", d))
    return Node("text_encoder", children=tuple(children), formula="bert_model")


def _gemma_buffers(config: Config) -> tuple[Buffer, ...]:
    """GemmaTextScaledWordEmbedding's float32 scalar ``embed_scale`` and the rotary tables of head_dim."""
    return (Buffer("embed_tokens.embed_scale", 1, "float32"),
            *rotary_buffers("rotary_emb", positive_int(config, "head_dim")))


def _qwen2_5_vl_buffers(config: Config) -> tuple[Buffer, ...]:
    """The vision tower's rotary tables (VisionRotaryEmbedding of half the vision head width) and the language
    model's (head width hidden/heads)."""
    vision = _sub_config(config, "vision_config", QWEN2_5_VL_VISION_DEFAULTS, fallback_to_top=False)
    text = _sub_config(config, "text_config", QWEN2_5_VL_TEXT_DEFAULTS, fallback_to_top=True)
    vision_head = positive_int(vision, "hidden_size") // positive_int(vision, "num_heads")
    text_head = positive_int(text, "hidden_size") // positive_int(text, "num_attention_heads")
    return (*rotary_buffers("model.visual.rotary_pos_emb", vision_head // 2),
            *rotary_buffers("model.language_model.rotary_emb", text_head))


def _bert_buffers(config: Config) -> tuple[Buffer, ...]:
    """BertEmbeddings: non-persistent int64 ``position_ids`` and ``token_type_ids`` (1, max_position_embeddings)."""
    positions = positive_int(config, "max_position_embeddings")
    return (Buffer("embeddings.position_ids", positions, "int64"),
            Buffer("embeddings.token_type_ids", positions, "int64"))


loading_rules("Gemma2Model", buffers=_gemma_buffers, source="transformers/models/gemma2/modeling_gemma2.py")
loading_rules("GemmaModel", buffers=_gemma_buffers, source="transformers/models/gemma/modeling_gemma.py")
# lm_head: the output embeddings (and the last parameter), kept out of a quantizer by get_keys_to_not_convert
loading_rules("Qwen2_5_VLForConditionalGeneration", buffers=_qwen2_5_vl_buffers, not_quantized=("lm_head",),
              source="transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py")
loading_rules("Qwen2_5_VLTextModel", source="transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py:765",
              buffers=lambda c: rotary_buffers("rotary_emb", positive_int(c, "hidden_size")
                                               // positive_int(c, "num_attention_heads")))
loading_rules("BertModel", buffers=_bert_buffers, source="transformers/models/bert/modeling_bert.py")
