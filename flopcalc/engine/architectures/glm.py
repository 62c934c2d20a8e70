"""GLM-4 text encoder: ``GlmModel`` (transformers ``models/glm/modeling_glm.py``), CogView4's text encoder.

``embed_tokens`` (a lookup), ``num_hidden_layers`` :func:`~flopcalc.formulas.decoder_layer.decoder_layer`
layers (``GlmDecoderLayer``: RMSNorm, grouped-query attention with q/k/v biases when
``attention_bias`` and a bias-free ``o_proj``, RMSNorm, a gated MLP whose gate and up projections are
one fused bias-free ``gate_up_proj``: the same MACs and parameters as two), the final ``norm`` and
``rotary_emb`` (partial rotary: ``int(head_dim · partial_rotary_factor)`` of each head rotates).
CogView4 calls it with ``output_hidden_states=True`` and keeps ``hidden_states[-2]``; the whole model runs.
"""

from __future__ import annotations

from flopcalc.engine.architectures.llm_encoders import _kv_heads
from flopcalc.engine.config import FLAG, LAYERS, NULL, RATIO, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import decoder_layer, rotary_embedding
from flopcalc.engine.loading import loading_rules, rotary_buffers
from flopcalc.engine.registry import KaplanShape, RunShape, register

#: ``GlmConfig`` defaults (transformers configuration_glm.py).
DEFAULTS = {
    "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "attention_bias": True,
    "partial_rotary_factor": 0.5,
}


#: Every config key ``GlmModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("GlmModel", {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL, "head_dim": SIZE, "attention_bias": FLAG,
    "partial_rotary_factor": RATIO,
})


@register("GlmModel", role="text_encoder", defaults=DEFAULTS, source="transformers/models/glm/modeling_glm.py",
          kaplan=KaplanShape(lambda c: (count_int(c, "num_hidden_layers"),
                                        positive_int(c, "num_attention_heads") * positive_int(c, "head_dim")),
                             embeddings=("embed_tokens",)))
def glm_model(config: Config, shape: RunShape) -> Node:
    n = shape.seq_len
    d = positive_int(config, "hidden_size")
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "head_dim")
    layer = decoder_layer(tokens=n, dim=d, heads=heads, kv_heads=_kv_heads(config, heads), head_dim=head_dim,
                          d_ff=positive_int(config, "intermediate_size"), qkv_bias=bool(config["attention_bias"]),
                          out_bias=False, fused_gate_up=True)
    return Node("text_encoder", children=(
        Node("embed_tokens", ops.embedding(positive_int(config, "vocab_size"), d)),
        module_list("layers", [layer] * count_int(config, "num_hidden_layers")),
        Node("norm", ops.rms_norm(n, d)),
        rotary_embedding("rotary_emb", n, _rotary_dim(config)),
    ), formula="glm_model")


def _rotary_dim(config: Config) -> int:
    """``int(head_dim · partial_rotary_factor)``: the channels of each head that rotate."""
    factor = config["partial_rotary_factor"]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ConfigError(f"{config.component}/config.json: 'partial_rotary_factor' must be in (0, 1], got {factor!r}")
    return int(positive_int(config, "head_dim") * factor)


# the rotary embedding's non-persistent float32 inv_freq and original_inv_freq (transformers/models/glm)
loading_rules("GlmModel", buffers=lambda c: rotary_buffers("rotary_emb", _rotary_dim(c)),
              source="transformers/models/glm/modeling_glm.py")
