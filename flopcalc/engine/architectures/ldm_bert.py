r"""``LDMBertModel`` (diffusers ``pipelines/latent_diffusion/pipeline_latent_diffusion.py:259-760``), the text encoder
of ``LDMTextToImagePipeline`` (CompVis/ldm-text2im-large-256): a BART-style pre-norm encoder.

On :math:`n` tokens of width :math:`d` (``d_model``): token and position embeddings (lookups), ``encoder_layers``
layers of ``self_attn_layer_norm``, ``self_attn`` (``q_proj``/``k_proj``/``v_proj`` without bias to
:math:`d_i = h\,d_h`, two ``torch.bmm`` for the scores and the values, ``out_proj`` with bias), ``final_layer_norm``
and the MLP ``fc1`` / ``fc2`` (``encoder_ffn_dim`` :math:`f`), then a last ``layer_norm``; ``to_logits`` is built but
not run by ``forward``:

.. math:: \mathrm{MACs} = L\,(4 n d\,d_i + 2 h n^2 d_h + 2 n d f)
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops

SOURCE = "diffusers/pipelines/latent_diffusion/pipeline_latent_diffusion.py"

#: ``LDMBertConfig.__init__`` keyword defaults (pipeline_latent_diffusion.py:264-283).
DEFAULTS = {
    "vocab_size": 30522,
    "max_position_embeddings": 77,
    "encoder_layers": 32,
    "encoder_ffn_dim": 5120,
    "encoder_attention_heads": 8,
    "head_dim": 64,
    "d_model": 1280,
}

declare_keys("LDMBertModel", {
    "vocab_size": SIZE, "max_position_embeddings": SIZE, "encoder_layers": LAYERS, "encoder_ffn_dim": SIZE,
    "encoder_attention_heads": SIZE, "head_dim": SIZE, "d_model": SIZE,
})


@register("LDMBertModel", role="text_encoder", defaults=DEFAULTS, source=SOURCE)
def ldm_bert(config: Config, shape: RunShape) -> Node:
    """``LDMBertModel.forward`` on ``seq_len`` tokens (the pipeline pads to 77, the position table's length)."""
    n = shape.seq_len
    d = positive_int(config, "d_model")
    heads, hd = positive_int(config, "encoder_attention_heads"), positive_int(config, "head_dim")
    f = positive_int(config, "encoder_ffn_dim")
    positions = positive_int(config, "max_position_embeddings")
    if isinstance(n, int) and n > positions:  # embed_positions has max_position_embeddings rows
        from flopcalc.engine.errors import ResolutionError

        raise ResolutionError(f"LDMBertModel reads at most max_position_embeddings={positions} tokens, got {n}")
    inner = heads * hd
    attn = Node("self_attn", ops.attention(n, n, heads, hd), children=(
        Node("k_proj", ops.linear(n, d, inner, bias=False)), Node("v_proj", ops.linear(n, d, inner, bias=False)),
        Node("q_proj", ops.linear(n, d, inner, bias=False)), Node("out_proj", ops.linear(n, inner, d))))
    layer = Node("layer", children=(
        attn, Node("self_attn_layer_norm", ops.layer_norm(n, d)),
        Node("fc1", ops.linear(n, d, f) + ops.activation(n * f)), Node("fc2", ops.linear(n, f, d)),
        Node("final_layer_norm", ops.layer_norm(n, d))), formula="ldm_bert_layer")
    vocab = positive_int(config, "vocab_size")
    encoder = Node("model", children=(
        Node("embed_tokens", ops.embedding(vocab, d)), Node("embed_positions", ops.embedding(positions, d)),
        module_list("layers", [layer] * count_int(config, "encoder_layers")), Node("layer_norm", ops.layer_norm(n, d))))
    return Node("ldm_bert", children=(encoder, Node("to_logits", ops.parameters(d * vocab + vocab))),
                formula="ldm_bert")
