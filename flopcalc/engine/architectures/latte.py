r"""Latte video transformer: ``LatteTransformer3DModel`` (diffusers ``models/transformers/latte_transformer_3d.py``),
PixArt-α's ``BasicTransformerBlock`` (``ada_norm_single``, ``formulas/cross_attention_block.py``) alternated over space
and time.

The model sees ``F`` latent frames of ``h × w`` (the 2D VAE's latents, one per frame) and ``L`` T5 tokens:

* ``pos_embed`` (``PatchEmbed``: a ``p``-strided ``nn.Conv2d``) on every frame: ``N = (h/p)(w/p)`` tokens per frame;
  the sin-cos table is a buffer (re-computed, no matmul, when the size differs from ``sample_size``);
* ``adaln_single`` (``AdaLayerNormSingle``: the 256 → d → d timestep MLP and a d → 6d linear) once per sample, its
  output repeated over frames and positions; ``caption_projection`` (``PixArtAlphaTextProjection``) once per sample on
  the ``L`` tokens, then repeated per frame;
* ``num_layers`` pairs: a spatial block per frame (self-attention over its ``N`` tokens, cross-attention to the ``L``
  text tokens: ``to_k``/``to_v`` run on every frame's copy of the text) and, with ``enable_temporal_attentions``
  (the pipeline's default), a temporal block per position (self-attention over the ``F`` frames, no
  cross-attention; the sin-cos ``temp_pos_embed`` added before the first, elementwise);
* ``norm_out`` (LayerNorm, no affine), ``scale_shift_table`` (2d), ``proj_out`` on the ``F·N`` tokens.

.. math::
   \mathrm{MACs} = F \cdot \mathrm{MACs}_\text{spatial}(N, L) + N \cdot \mathrm{MACs}_\text{temporal}(F)
       + \ldots
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, Choice, Config, Real, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list, work_only
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.cross_attention_block import cross_attention_block

CLASS = "LatteTransformer3DModel"
#: ``LatteTransformer3DModel.__init__`` keyword defaults (latte_transformer_3d.py:70-90).
DEFAULTS = {
    "num_attention_heads": 16, "attention_head_dim": 88, "in_channels": None, "out_channels": None, "num_layers": 1,
    "dropout": 0.0, "cross_attention_dim": None, "attention_bias": False, "sample_size": 64, "patch_size": None,
    "activation_fn": "geglu", "num_embeds_ada_norm": None, "norm_type": "layer_norm",
    "norm_elementwise_affine": True, "norm_eps": 1e-5, "caption_channels": None, "video_length": 16,
}
SOURCE = "diffusers/models/transformers/latte_transformer_3d.py"

declare_keys(CLASS, {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE | NULL, "out_channels": SIZE | NULL,
    "num_layers": LAYERS, "cross_attention_dim": SIZE | NULL, "attention_bias": FLAG, "sample_size": SIZE,
    "patch_size": SIZE | NULL, "activation_fn": Choice("geglu", "gelu", "gelu-approximate"),
    "norm_type": Choice("ada_norm_single"), "norm_elementwise_affine": FLAG, "caption_channels": SIZE | NULL,
    "video_length": SIZE, "dropout": Real(0.0, 1.0, closed=True),
})


def _times(node: Node, k: Any) -> Node:
    """``node``'s work ``k`` times (one block over ``k`` rows of the flattened batch), its parameters once."""
    cost = work_only(node.cost) * k + replace(node.cost, linear=0, conv=0, attention=0, functional=0, thop_extra=0,
                                              elementwise=0, scores=0)
    return replace(node, cost=cost, children=tuple(_times(c, k) for c in node.children))


def _required(config: Config, key: str) -> int:
    if config[key] is None:
        raise ConfigError(f"{config.component}/config.json: {key} is null (the class default), which "
                          "LatteTransformer3DModel cannot build with; set it")
    return positive_int(config, key)


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE,
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=1, text_len=8))  # 1: any video_length
def latte_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch, c_in = _required(config, "patch_size"), _required(config, "in_channels")
    caption = _required(config, "caption_channels")
    c_out = config["out_channels"] or c_in
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    length = positive_int(config, "video_length")
    if isinstance(frames, int) and frames not in (1, length):
        raise ResolutionError(f"{config.component}: {frames} latent frames, but the temporal position table holds "
                              f"video_length {length} (added to every position's frames in the first temporal block: "
                              f"the real forward fails); use num_frames {length} (or 1)")
    gh, gw = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    n, t = gh * gw, shape.text_len
    common = dict(dim=dim, heads=heads, head_dim=head_dim, activation=config["activation_fn"],
                  attention_bias=bool(config["attention_bias"]), norm_affine=bool(config["norm_elementwise_affine"]),
                  norm_type="ada_norm_single")
    spatial = cross_attention_block(tokens=n, context_tokens=t, context_dim=config["cross_attention_dim"], **common)
    temporal = cross_attention_block(tokens=frames, context_tokens=0, context_dim=None, **common)
    layers = count_int(config, "num_layers")
    return Node("transformer", children=(
        Node("pos_embed", children=(Node("proj", ops.conv2d(c_in, dim, patch, frames * gh, gw)),)),
        module_list("transformer_blocks", [_times(spatial, frames)] * layers),
        module_list("temporal_transformer_blocks", [_times(temporal, n)] * layers),
        Node("norm_out", ops.layer_norm(frames * n, dim, affine=False)),
        Node("scale_shift_table", ops.parameters(2 * dim)),
        Node("proj_out", ops.linear(frames * n, dim, patch * patch * c_out)),
        Node("adaln_single", children=(Node("emb", children=(mlp_embedder("timestep_embedder", 256, dim),)),
                                       Node("linear", ops.activation(dim) + ops.linear(1, dim, 6 * dim)))),
        mlp_embedder("caption_projection", caption, dim, tokens=t),
    ), formula="latte_transformer")


def _buffers(config: Config) -> tuple[Buffer, ...]:
    """``PatchEmbed``'s non-persistent float32 sin-cos table ((sample_size / patch)² × d, embeddings.py) and
    ``temp_pos_embed`` (``video_length`` × d, float32, non-persistent; latte_transformer_3d.py:159-162)."""
    dim = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    grid = positive_int(config, "sample_size") // _required(config, "patch_size")
    return (Buffer("pos_embed.pos_embed", grid * grid * dim, "float32"),
            Buffer("temp_pos_embed", positive_int(config, "video_length") * dim, "float32"))


loading_rules(CLASS, buffers=_buffers, source="diffusers/models/transformers/latte_transformer_3d.py:159-162; "
                                               "diffusers/models/embeddings.py:332")
