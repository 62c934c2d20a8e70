"""T5 encoder: ``T5EncoderModel`` (transformers ``models/t5/modeling_t5.py``).

``num_layers`` ``T5Block``s, each an RMS-normed (``T5LayerNorm``) self-attention with bias-free
projections of width ``num_heads·d_kv`` and an RMS-normed MLP, gated for ``gated-*``
``feed_forward_proj`` (T5 v1.1, FLAN). The relative position bias is an embedding lookup in the
first block. ``shared`` (the token embedding) is tied to ``encoder.embed_tokens``. Block formulas
(shared with UMT5): ``formulas/t5_encoder.py``.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import LAYERS, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.formulas.t5_encoder import t5_family_encoder
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.engine.loading import loading_rules

#: ``T5Config`` defaults (transformers configuration_t5.py).
DEFAULTS = {
    "vocab_size": 32128,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "feed_forward_proj": "relu",
}


#: Every config key the T5-family encoders (``T5EncoderModel``, ``UMT5EncoderModel``) read (assemblers and
#: pipeline plans), as :func:`flopcalc.engine.config.declare_keys` validates it.
T5_KEYS = {
    "vocab_size": SIZE, "d_model": SIZE, "d_kv": SIZE, "d_ff": SIZE, "num_layers": LAYERS, "num_heads": SIZE,
    "relative_attention_num_buckets": SIZE, "feed_forward_proj": TEXT,
}
declare_keys("T5EncoderModel", T5_KEYS)


def encoder_settings(config: Config) -> dict[str, Any]:
    """The config values the T5-family encoder reads (``formulas/t5_encoder.py``)."""
    return {  # in the order the assemblers have always read them (the first bad value is named)
        "d_model": positive_int(config, "d_model"), "num_heads": positive_int(config, "num_heads"),
        "feed_forward_proj": config["feed_forward_proj"], "d_kv": positive_int(config, "d_kv"),
        "buckets": positive_int(config, "relative_attention_num_buckets"), "d_ff": positive_int(config, "d_ff"),
        "num_layers": count_int(config, "num_layers"), "vocab_size": positive_int(config, "vocab_size"),
    }


#: Kaplan's shape: ``num_layers`` blocks, attention of width ``num_heads·d_kv``; ``shared`` is the embedding.
KAPLAN = KaplanShape(lambda c: (count_int(c, "num_layers"), positive_int(c, "num_heads") * positive_int(c, "d_kv")),
                     embeddings=("shared",))


@register("T5EncoderModel", role="text_encoder", defaults=DEFAULTS, source="transformers/models/t5/modeling_t5.py",
          kaplan=KAPLAN)
def t5_encoder(config: Config, shape: RunShape) -> Node:
    """Relative position bias in the first block only."""
    return t5_family_encoder(shape.seq_len, **encoder_settings(config), bias_in_every_block=False, formula="t5_encoder")


# modeling_t5.py:537: _keep_in_fp32_modules = ["wo"], applied when loading in float16 (modeling_utils.py:3842)
loading_rules("T5EncoderModel", keep_in_fp32=("wo",), keep_in_fp32_dtypes=("fp16",),
              source="transformers/models/t5/modeling_t5.py:537")
