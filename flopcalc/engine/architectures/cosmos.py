"""Cosmos video/image transformer: ``CosmosTransformer3DModel`` (diffusers
``models/transformers/transformer_cosmos.py``), as Cosmos Predict2 configures it; block formulas in
``formulas/cosmos.py``.

The model sees the ``z × T × h × w`` latent (an image: ``T`` = 1) and ``L`` T5 tokens of width ``text_embed_dim``:

* ``forward`` concatenates a condition mask (Video2World) and the padding mask (``concat_padding_mask``) as extra
  channels: ``patch_embed`` (``CosmosPatchEmbed``) is a linear (no bias) from ``(z + extra)·p_t·p_h·p_w`` to
  ``d`` on ``N = (T/p_t)(h/p_h)(w/p_w)`` tokens (each side floored);
* ``rope`` (``CosmosRotaryPosEmbed``): cos/sin built per call from outer products (no matmul, no parameters);
  ``learnable_pos_embed`` (``extra_pos_embed_type="learnable"``): three parameter tables, added (no matmul);
* ``time_embed`` (``CosmosEmbedding``) on the timesteps: one per sample, or one per latent frame when the pipeline
  passes a ``(B, 1, T, 1, 1)`` timestep (Video2World); ``forward`` then expands the embeddings to every token, so
  each block's three adaLN-LoRA norms and the output norm run on all ``N`` tokens (``RunShape.timestep_tokens``:
  the rows the norms see);
* ``num_layers`` ``CosmosTransformerBlock``s, ``norm_out`` (``CosmosAdaLayerNorm``) and ``proj_out`` (d →
  ``p_t p_h p_w · out_channels``, no bias).

Configs with an image context (``img_context_dim_in``, Cosmos 2.5 Transfer), a cross-attention projection
(``use_crossattn_projection``) or ControlNet injection are refused: no Predict2 checkpoint has them.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, ListOf, Real, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.engine.architectures.wan import floor_div
from flopcalc.formulas.cosmos import cosmos_ada_norm, cosmos_time_embed, cosmos_transformer_block
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import loading_rules

#: ``CosmosTransformer3DModel.__init__`` keyword defaults (transformer_cosmos.py:605-627).
DEFAULTS = {
    "in_channels": 16,
    "out_channels": 16,
    "num_attention_heads": 32,
    "attention_head_dim": 128,
    "num_layers": 28,
    "mlp_ratio": 4.0,
    "text_embed_dim": 1024,
    "adaln_lora_dim": 256,
    "max_size": [128, 240, 240],
    "patch_size": [1, 2, 2],
    "rope_scale": [2.0, 1.0, 1.0],
    "concat_padding_mask": True,
    "extra_pos_embed_type": "learnable",
    "use_crossattn_projection": False,
    "crossattn_proj_in_channels": 1024,
    "encoder_hidden_states_channels": 1024,
    "controlnet_block_every_n": None,
    "img_context_dim_in": None,
    "img_context_num_tokens": 256,
    "img_context_dim_out": 2048,
}
SOURCE = "diffusers/models/transformers/transformer_cosmos.py"

declare_keys("CosmosTransformer3DModel", {
    "in_channels": SIZE, "out_channels": SIZE, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "mlp_ratio": RATIO, "text_embed_dim": SIZE, "adaln_lora_dim": SIZE,
    "max_size": ListOf(SIZE, lo=3, hi=3), "patch_size": ListOf(SIZE, lo=3, hi=3),
    "rope_scale": ListOf(Real(0.0, 1e6), lo=3, hi=3), "concat_padding_mask": FLAG,
    "extra_pos_embed_type": TEXT | NULL, "use_crossattn_projection": FLAG, "img_context_dim_in": SIZE | NULL,
    "controlnet_block_every_n": SIZE | NULL,
})


def _refuse_unsupported(config: Config) -> None:
    for key in ("use_crossattn_projection", "img_context_dim_in", "controlnet_block_every_n"):
        if config[key]:
            raise ConfigError(f"{config.component}/config.json: {key} is set (a Cosmos 2.5 / Transfer transformer), "
                              "which flopcalc does not count; Cosmos Predict2 leaves it unset")
    if config["extra_pos_embed_type"] not in (None, "learnable"):
        raise ConfigError(f"{config.component}/config.json: extra_pos_embed_type must be null or 'learnable', got "
                          f"{config['extra_pos_embed_type']!r}")


@register("CosmosTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def cosmos_transformer(config: Config, shape: RunShape) -> Node:
    """One forward. ``shape.timestep_tokens`` set (the latent frames) means Video2World's call: a per-frame
    ``(B, 1, T, 1, 1)`` timestep (``time_embed`` on ``T`` rows, the adaLN norms on all ``N`` tokens); its
    ``condition_mask`` channel is one of ``in_channels`` (17 = 16 + 1 for Video2World checkpoints)."""
    _refuse_unsupported(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    pt, ph, pw = (int(p) for p in config["patch_size"])
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    grid = (floor_div(frames, pt), floor_div(shape.latent_height, ph), floor_div(shape.latent_width, pw))
    if any(isinstance(g, int) and g == 0 for g in grid):
        raise ResolutionError(f"{config.component}: a latent of {frames}×{shape.latent_height}×{shape.latent_width} "
                              f"(frames × height × width) is smaller than one {pt}×{ph}×{pw} patch")
    n = grid[0] * grid[1] * grid[2]
    rows = 1 if shape.timestep_tokens is None else n  # a per-frame timestep is expanded to every token
    time_rows = 1 if shape.timestep_tokens is None else shape.timestep_tokens
    lora = positive_int(config, "adaln_lora_dim")
    # in_channels counts Video2World's condition_mask channel already (16 + 1); the padding mask adds one
    channels = positive_int(config, "in_channels") + (1 if config["concat_padding_mask"] else 0)
    block = cosmos_transformer_block(dim=dim, heads=heads, head_dim=head_dim,
                                     text_dim=positive_int(config, "text_embed_dim"), lora_dim=lora,
                                     ff_dim=int(dim * float(config["mlp_ratio"])), tokens=n,
                                     text_tokens=shape.text_len, rows=rows)
    children = [Node("patch_embed", children=(Node("proj", ops.linear(n, channels * pt * ph * pw, dim, bias=False)),))]
    if config["extra_pos_embed_type"] == "learnable":
        sizes = [int(m) // int(p) for m, p in zip(config["max_size"], config["patch_size"])]
        children.append(Node("learnable_pos_embed", ops.parameters(sum(sizes) * dim)))
    out = positive_int(config, "out_channels")
    children += [
        cosmos_time_embed(dim=dim, rows=time_rows),
        module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
        cosmos_ada_norm("norm_out", dim=dim, lora_dim=lora, tokens=n, rows=rows, chunks=2),
        Node("proj_out", ops.linear(n, dim, pt * ph * pw * out, bias=False)),
    ]
    return Node("transformer", children=tuple(children), formula="cosmos_transformer")


loading_rules(
    "CosmosTransformer3DModel",
    keep_in_fp32=("learnable_pos_embed",),  # transformer_cosmos.py:603: _keep_in_fp32_modules
    source="diffusers/models/transformers/transformer_cosmos.py:603",
)
