"""UMT5 encoder: ``UMT5EncoderModel`` (transformers ``models/umt5/modeling_umt5.py``), Wan's text encoder.

The T5 v1.1 encoder layout (``flopcalc/engine/architectures/t5.py``; the shared assembler in
``formulas/t5_encoder.py``) with one difference that matters
here: every ``UMT5Attention`` of the encoder is built with ``has_relative_attention_bias=True``
(``UMT5LayerSelfAttention``), so each of the ``num_layers`` blocks holds its own
``relative_attention_bias`` table (``nn.Embedding(relative_attention_num_buckets, num_heads)``), where
T5 keeps one in the first block. The bias is looked up and added to the scores (no matmul); the
attention is unscaled (``scaling = 1``), which changes no count.

Per block (``UMT5Block``): ``layer.0`` = RMS norm (``UMT5LayerNorm``) + self-attention with bias-free
q/k/v/o of width ``num_heads·d_kv``; ``layer.1`` = RMS norm + MLP, gated (``wi_0``, ``wi_1``, ``wo``)
for ``gated-*`` ``feed_forward_proj`` (the UMT5 default, ``gated-gelu``). ``UMT5Config`` forces
``tie_word_embeddings``, so ``shared`` is ``encoder.embed_tokens`` (counted once).
"""

from __future__ import annotations

from flopcalc.engine.architectures.t5 import KAPLAN, T5_KEYS, encoder_settings  # the same block stack as T5
from flopcalc.engine.config import Config, declare_keys
from flopcalc.engine.cost import Node
from flopcalc.formulas.t5_encoder import t5_family_encoder
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import loading_rules

#: ``UMT5Config`` defaults (transformers configuration_umt5.py).
DEFAULTS = {
    "vocab_size": 250112,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 1024,
    "num_layers": 8,
    "num_heads": 6,
    "relative_attention_num_buckets": 32,
    "feed_forward_proj": "gated-gelu",
}


#: The keys the T5 encoder reads (the same block stack), as :func:`flopcalc.engine.config.declare_keys` validates them.
declare_keys("UMT5EncoderModel", T5_KEYS)


@register("UMT5EncoderModel", role="text_encoder", defaults=DEFAULTS,
          source="transformers/models/umt5/modeling_umt5.py", kaplan=KAPLAN)
def umt5_encoder(config: Config, shape: RunShape) -> Node:
    """Relative position bias in every block."""
    return t5_family_encoder(shape.seq_len, **encoder_settings(config), bias_in_every_block=True,
                             formula="umt5_encoder")


# modeling_umt5.py:520: _keep_in_fp32_modules = ["wo"], applied when loading in float16 (modeling_utils.py:3842)
loading_rules("UMT5EncoderModel", keep_in_fp32=("wo",), keep_in_fp32_dtypes=("fp16",),
              source="transformers/models/umt5/modeling_umt5.py:520")
