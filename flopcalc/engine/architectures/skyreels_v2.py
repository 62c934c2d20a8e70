"""SkyReels V2 video transformer: ``SkyReelsV2Transformer3DModel`` (diffusers
``models/transformers/transformer_skyreels_v2.py``), the Wan 2.1 transformer with three differences; the
rest is :func:`flopcalc.engine.architectures.wan.wan_transformer` and ``formulas/wan.py`` as they are.

* Diffusion forcing (``forward(enable_diffusion_forcing=True)``, lines 713-720): the timestep is
  ``(batch, f)``, one per latent frame of the window the pipeline passes, so ``time_embedder`` and
  ``time_proj`` run on ``f`` rows (``RunShape.timestep_tokens`` = the latent frames); the per-frame
  modulation is then repeated over each frame's tokens (no matmul).
* ``num_frame_per_block > 1`` (set by ``_set_ar_attention(causal_block_size)``, lines 686-699): a boolean
  block-causal mask on ``attn1``; SDPA still multiplies every query by every key (the mask is added to the
  scores), so the count is unchanged.
* ``inject_sample_info`` (lines 627-629, 710-718): ``fps_embedding`` (``nn.Embedding(2, d)``, a lookup) and
  ``fps_projection`` (``FeedForward(d, 6d, mult=1, activation_fn="linear-silu")``: ``net.0.proj`` d → d,
  SiLU, ``net.2`` d → 6d) on the one fps value of each sample (the ``.repeat`` over frames copies it).

.. math:: \\mathrm{MACs}_\\text{fps} = d^2 + 6 d^2 \\quad (\\text{per sample, with } \\texttt{inject\\_sample\\_info})
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, TEXT, Config, ListOf, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.formulas import ops
from flopcalc.engine.architectures.wan import wan_transformer
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``SkyReelsV2Transformer3DModel.__init__`` keyword defaults (transformer_skyreels_v2.py:571-591).
DEFAULTS = {
    "patch_size": [1, 2, 2],
    "num_attention_heads": 16,
    "attention_head_dim": 128,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": 4096,
    "freq_dim": 256,
    "ffn_dim": 8192,
    "num_layers": 32,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "image_dim": None,
    "added_kv_proj_dim": None,
    "rope_max_seq_len": 1024,
    "pos_embed_seq_len": None,
    "inject_sample_info": False,
    "num_frame_per_block": 1,
}
SOURCE = "diffusers/models/transformers/transformer_skyreels_v2.py"

declare_keys("SkyReelsV2Transformer3DModel", {
    "patch_size": ListOf(SIZE, lo=3, hi=3), "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "in_channels": SIZE, "out_channels": SIZE | NULL, "text_dim": SIZE, "freq_dim": SIZE, "ffn_dim": SIZE,
    "num_layers": LAYERS, "cross_attn_norm": FLAG, "qk_norm": TEXT | NULL, "image_dim": SIZE | NULL,
    "added_kv_proj_dim": SIZE | NULL, "rope_max_seq_len": SIZE, "pos_embed_seq_len": SIZE | NULL,
    "inject_sample_info": FLAG, "num_frame_per_block": SIZE,
})


def fps_nodes(dim: int) -> tuple[Node, Node]:
    """``fps_embedding`` (2·d parameters, a lookup) and ``fps_projection`` on one sample's fps id:
    ``FeedForward(d, 6d, mult=1, activation_fn="linear-silu")`` (``LinearActivation``: ``net.0.proj`` d → d,
    SiLU; ``net.2`` d → 6d)."""
    up, act, down = ops.linear(1, dim, dim), ops.activation(dim), ops.linear(1, dim, 6 * dim)
    net = Node("net", children=(Node("0", act, (Node("proj", up),)), Node("2", down)))
    return (Node("fps_embedding", ops.embedding(2, dim)),
            Node("fps_projection", children=(net,), formula="feed_forward"))


@register("SkyReelsV2Transformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def skyreels_v2_transformer(config: Config, shape: RunShape) -> Node:
    """The Wan 2.1 transformer (:func:`~flopcalc.engine.architectures.wan.wan_transformer`: the same modules under
    the same names, ``SkyReelsV2*`` classes), plus ``fps_embedding`` / ``fps_projection`` when
    ``inject_sample_info``. ``shape.timestep_tokens``: the latent frames of a diffusion-forcing forward (one
    timestep each); None: one timestep."""
    node = wan_transformer(config, shape)
    if not config["inject_sample_info"]:
        return node
    return replace(node, children=node.children + fps_nodes(positive_int(config, "num_attention_heads")
                                                            * positive_int(config, "attention_head_dim")))


loading_rules(
    "SkyReelsV2Transformer3DModel",
    # transformer_skyreels_v2.py:566: _keep_in_fp32_modules (as Wan's)
    keep_in_fp32=("rope", "time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"),
    # SkyReelsV2RotaryPosEmbed: float32 cos/sin tables, rope_max_seq_len × head_dim each
    buffers=lambda c: tuple(Buffer(f"rope.freqs_{f}", positive_int(c, "rope_max_seq_len") * positive_int(c, "attention_head_dim"), "float32")
                            for f in ("cos", "sin")),
    source="diffusers/models/transformers/transformer_skyreels_v2.py:374-420, 566",
)
