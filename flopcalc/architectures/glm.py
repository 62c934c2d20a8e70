"""GLM-4 text encoder: ``GlmModel`` (transformers ``models/glm/modeling_glm.py``), CogView4's text encoder.

``embed_tokens`` (a lookup), ``num_hidden_layers`` :func:`~flopcalc.formulas.decoder_layer.decoder_layer`
layers (``GlmDecoderLayer``: RMSNorm, grouped-query attention with q/k/v biases when
``attention_bias`` and a bias-free ``o_proj``, RMSNorm, a gated MLP whose gate and up projections are
one fused bias-free ``gate_up_proj``: the same MACs and parameters as two), the final ``norm`` and
``rotary_emb`` (partial rotary: ``int(head_dim · partial_rotary_factor)`` of each head rotates).
CogView4 calls it with ``output_hidden_states=True`` and keeps ``hidden_states[-2]``; the whole model runs.
"""

from __future__ import annotations

from flopcalc.architectures.llm_encoders import _kv_heads
from flopcalc.config import Config, count_int, positive_int
from flopcalc.cost import Node, module_list
from flopcalc.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import decoder_layer, rotary_embedding
from flopcalc.registry import KaplanShape, RunShape, register
from flopcalc.weights import loading_rules, rotary_buffers

#: ``GlmConfig`` defaults (transformers configuration_glm.py).
DEFAULTS = {
    "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "attention_bias": True,
    "partial_rotary_factor": 0.5,
}


@register("GlmModel", role="text_encoder", defaults=DEFAULTS, source="transformers/models/glm/modeling_glm.py",
          kaplan=KaplanShape(lambda c: (count_int(c, "num_hidden_layers"),
                                        positive_int(c, "num_attention_heads") * positive_int(c, "head_dim")),
                             embeddings=("embed_tokens",)))
def glm_model(config: Config, shape: RunShape) -> Node:
    n = shape.seq_len
    d = positive_int(config, "hidden_size")
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "head_dim")
    factor = config["partial_rotary_factor"]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ConfigError(f"{config.component}/config.json: 'partial_rotary_factor' must be in (0, 1], got {factor!r}")
    layer = decoder_layer(tokens=n, dim=d, heads=heads, kv_heads=_kv_heads(config, heads), head_dim=head_dim,
                          d_ff=positive_int(config, "intermediate_size"), qkv_bias=bool(config["attention_bias"]),
                          out_bias=False)
    return Node("text_encoder", children=(
        Node("embed_tokens", ops.embedding(positive_int(config, "vocab_size"), d)),
        module_list("layers", [layer] * count_int(config, "num_hidden_layers")),
        Node("norm", ops.rms_norm(n, d)),
        rotary_embedding("rotary_emb", n, int(head_dim * factor)),
    ), formula="glm_model")


# modeling_glm.py GlmRotaryEmbedding: float32 inv_freq / original_inv_freq over the rotated part of each head
loading_rules("GlmModel", buffers=lambda c: rotary_buffers(
    "rotary_emb", int(positive_int(c, "head_dim") * c["partial_rotary_factor"])),
    source="transformers/models/glm/modeling_glm.py")
