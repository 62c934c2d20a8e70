r"""``PriorTransformer`` (diffusers ``models/transformers/prior_transformer.py``), the unCLIP / Kandinsky
2.x image prior: it denoises one CLIP image embedding conditioned on the text.

One forward (``PriorTransformer.forward``) on :math:`n = T + 4` tokens of width :math:`d = h\,d_h`
(the :math:`T` = ``num_embeddings`` text states projected by ``encoder_hidden_states_proj``, then the
projected text embedding, the time embedding, the noisy image embedding and the learned ``prd``
token; the positional table holds ``num_embeddings + additional_embeddings`` rows), ``num_layers``
``BasicTransformerBlock`` s (self-attention with biases, GELU MLP of width 4d) and
``proj_to_clip_embeddings`` on the ``prd`` token only:

.. math::

   \mathrm{MACs} = \underbrace{d\,t + t\,d}_{\text{time\_embedding}} + \underbrace{3 e d}_{\text{proj\_in,
   embedding\_proj}} + T e d + L\,(12 n d^2 + 2 n^2 d) + d\,c

with :math:`e` = ``embedding_dim`` (``embedding_proj_dim``), :math:`t` = ``time_embed_dim`` and
:math:`c` = ``clip_embed_dim``. The text mask and the causal mask change no dense count.
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, NULL, SIZE, Choice, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.cross_attention_block import cross_attention_block
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

SOURCE = "diffusers/models/transformers/prior_transformer.py"

#: ``PriorTransformer.__init__`` keyword defaults (prior_transformer.py).
DEFAULTS = {
    "num_attention_heads": 32,
    "attention_head_dim": 64,
    "num_layers": 20,
    "embedding_dim": 768,
    "num_embeddings": 77,
    "additional_embeddings": 4,
    "dropout": 0.0,
    "time_embed_act_fn": "silu",
    "norm_in_type": None,
    "embedding_proj_norm_type": None,
    "encoder_hid_proj_type": "linear",
    "added_emb_type": "prd",
    "time_embed_dim": None,
    "embedding_proj_dim": None,
    "clip_embed_dim": None,
}

declare_keys("PriorTransformer", {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "num_layers": LAYERS, "embedding_dim": SIZE,
    "num_embeddings": SIZE, "additional_embeddings": SIZE,
    "norm_in_type": Choice(None, "layer"), "embedding_proj_norm_type": Choice(None, "layer"),
    "encoder_hid_proj_type": Choice(None, "linear"), "added_emb_type": Choice(None, "prd"),
    "time_embed_dim": SIZE | NULL, "embedding_proj_dim": SIZE | NULL, "clip_embed_dim": SIZE | NULL,
})


def prior_tokens(config) -> int:
    """Tokens the blocks see: ``num_embeddings`` text states + ``additional_embeddings`` (the
    projected embedding, the time embedding, the image embedding and ``prd``; forward
    concatenates the four and the positional table has that many rows)."""
    return positive_int(config, "num_embeddings") + positive_int(config, "additional_embeddings")


@register("PriorTransformer", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def prior_transformer(config: Config, shape: RunShape) -> Node:
    """One ``PriorTransformer.forward`` on the ``num_embeddings`` text states the pipeline passes
    (``CLIPTextModelWithProjection.last_hidden_state``, 77 tokens)."""
    comp = config.component
    if config["encoder_hid_proj_type"] is None or config["added_emb_type"] is None:
        raise UnknownArchitectureError(f"{comp}: PriorTransformer without encoder_hidden_states_proj or the prd "
                                       "token is not supported (the Kandinsky and unCLIP priors have both).")
    if config["additional_embeddings"] != 4:
        raise UnknownArchitectureError(f"{comp}: PriorTransformer.forward concatenates 4 extra tokens; "
                                       f"additional_embeddings={config['additional_embeddings']} does not run.")
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    d = heads * head_dim
    e = positive_int(config, "embedding_dim")
    text = positive_int(config, "num_embeddings")
    proj_dim = config["embedding_proj_dim"] or e
    clip_dim = config["clip_embed_dim"] or e
    t_dim = config["time_embed_dim"] or d
    n = prior_tokens(config)
    block = cross_attention_block(dim=d, heads=heads, head_dim=head_dim, tokens=n, context_tokens=0,
                                  context_dim=None, activation="gelu", attention_bias=True)
    children = [Node("time_embedding", children=mlp_embedder("time_embedding", d, t_dim, d).children),
                Node("proj_in", ops.linear(1, e, d))]
    if config["embedding_proj_norm_type"] == "layer":
        children.append(Node("embedding_proj_norm", ops.layer_norm(1, proj_dim)))
    children += [Node("embedding_proj", ops.linear(1, proj_dim, d)),
                 Node("encoder_hidden_states_proj", ops.linear(text, e, d)),
                 Node("positional_embedding", ops.parameters(n * d)),
                 Node("prd_embedding", ops.parameters(d))]
    if config["norm_in_type"] == "layer":
        children.append(Node("norm_in", ops.layer_norm(n, d)))
    children += [module_list("transformer_blocks", [block] * positive_int(config, "num_layers")),
                 Node("norm_out", ops.layer_norm(n, d)),
                 Node("proj_to_clip_embeddings", ops.linear(1, d, clip_dim)),
                 Node("clip_mean", ops.parameters(clip_dim)),
                 Node("clip_std", ops.parameters(clip_dim))]
    return Node("prior", children=tuple(children), formula="prior_transformer")


# prior_transformer.py: the non-persistent float32 causal_attention_mask (1, n, n)
loading_rules("PriorTransformer", buffers=lambda c: (Buffer("causal_attention_mask", prior_tokens(c) ** 2, "float32"),),
              source=SOURCE)
