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

Cosmos 2.5 (``Cosmos2_5_PredictBasePipeline``, ``Cosmos2_5_TransferPipeline``): ``use_crossattn_projection`` adds
``crossattn_proj`` (``nn.Linear(crossattn_proj_in_channels, encoder_hidden_states_channels)`` and GELU on the ``L``
text tokens: the Qwen2.5-VL hidden states of every layer, concatenated); ``img_context_dim_in`` (Transfer) makes
every ``attn2`` a ``CosmosAttention`` with an image-context branch and adds ``img_context_proj`` (a linear and GELU)
on the ``I`` image-context tokens the pipeline passes (``RunShape.image_tokens``; such a transformer fails without
them); ``controlnet_block_every_n`` only names the blocks that add the ControlNet's residuals (no counted work).
``CosmosControlNetModel`` (diffusers ``models/controlnets/controlnet_cosmos.py``) is assembled here too.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import (
    COUNT, FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, ListOf, Real, count_int, declare_keys, positive_int,
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
    "extra_pos_embed_type": TEXT | NULL, "use_crossattn_projection": FLAG, "crossattn_proj_in_channels": SIZE,
    "encoder_hidden_states_channels": SIZE, "img_context_dim_in": COUNT | NULL, "img_context_num_tokens": SIZE,
    "img_context_dim_out": SIZE, "controlnet_block_every_n": SIZE | NULL,
})


def _refuse_unsupported(config: Config) -> None:
    if config["extra_pos_embed_type"] not in (None, "learnable"):
        raise ConfigError(f"{config.component}/config.json: extra_pos_embed_type must be null or 'learnable', got "
                          f"{config['extra_pos_embed_type']!r}")


def image_context(config: Config) -> bool:
    """``img_context_dim_in`` set and positive: every ``attn2`` is a ``CosmosAttention`` with the image branch
    (transformer_cosmos.py:646, controlnet_cosmos.py:128)."""
    return bool(config["img_context_dim_in"])


def text_width(config: Config) -> int:
    """The width of the text states the model reads: ``crossattn_proj_in_channels`` with ``use_crossattn_projection``
    (the projection maps them to ``encoder_hidden_states_channels``), else ``text_embed_dim``."""
    key = "crossattn_proj_in_channels" if config["use_crossattn_projection"] else "text_embed_dim"
    return positive_int(config, key)


def _context_projections(config: Config, dim: int, text: Any, image: Any) -> list[Node]:
    """``crossattn_proj`` on the text tokens and ``img_context_proj`` on the image-context tokens (each
    ``nn.Sequential(nn.Linear(d_in, d_out, bias=True), nn.GELU())``, transformer_cosmos.py:667-685, 741-745), with
    the checks that the widths they hand on are the ones the attention reads (the real call fails otherwise)."""
    nodes = []
    if config["use_crossattn_projection"]:
        d_in, d_out = positive_int(config, "crossattn_proj_in_channels"), positive_int(config,
                                                                                      "encoder_hidden_states_channels")
        if d_out != positive_int(config, "text_embed_dim"):
            raise ConfigError(f"{config.component}/config.json: encoder_hidden_states_channels {d_out} is not "
                              f"text_embed_dim {config['text_embed_dim']}: attn2 reads the projected text at "
                              "text_embed_dim (the real call fails)")
        nodes.append(Node("crossattn_proj", ops.activation(text * d_out),
                          (Node("0", ops.linear(text, d_in, d_out)),)))
    if image_context(config):
        d_in, d_out = positive_int(config, "img_context_dim_in"), positive_int(config, "img_context_dim_out")
        if d_out != dim:
            raise ConfigError(f"{config.component}/config.json: img_context_dim_out {d_out} is not the model width "
                              f"{dim}: k_img/v_img read the projected image context at that width (the real call "
                              "fails)")
        nodes.append(Node("img_context_proj", ops.activation(image * d_out), (Node("0", ops.linear(image, d_in, d_out)),)))
    return nodes


def _image_tokens(config: Config, shape: RunShape) -> Any:
    """The image-context tokens ``attn2`` sees: None without the branch; with it, the pipeline's (it must pass
    them: ``CosmosAttnProcessor2_5`` raises on a bare text tensor)."""
    if not image_context(config):
        return None
    if shape.image_tokens is None:
        raise ConfigError(f"{config.component}/config.json: img_context_dim_in is set (a Cosmos 2.5 Transfer model): its "
                          "attention takes a (text, image context) pair, which only Cosmos2_5_TransferPipeline passes "
                          "(the real call fails on text alone)")
    return shape.image_tokens


def _grid(config: Config, shape: RunShape) -> tuple[Any, Any, Any]:
    pt, ph, pw = (int(p) for p in config["patch_size"])
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    grid = (floor_div(frames, pt), floor_div(shape.latent_height, ph), floor_div(shape.latent_width, pw))
    if any(isinstance(g, int) and g == 0 for g in grid):
        raise ResolutionError(f"{config.component}: a latent of {frames}×{shape.latent_height}×{shape.latent_width} "
                              f"(frames × height × width) is smaller than one {pt}×{ph}×{pw} patch")
    return grid


#: A valid shape for parameter counts: the registry's nominal one, with image-context tokens (a Cosmos 2.5 Transfer
#: model's attention refuses to run without them; the others ignore them).
NOMINAL = RunShape(latent_height=64, latent_width=64, text_len=8, seq_len=8, height=512, width=512, image_tokens=8)


@register("CosmosTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE, nominal=NOMINAL)
def cosmos_transformer(config: Config, shape: RunShape) -> Node:
    """One forward. ``shape.timestep_tokens`` set (the latent frames) means Video2World's call: a per-frame
    ``(B, 1, T, 1, 1)`` timestep (``time_embed`` on ``T`` rows, the adaLN norms on all ``N`` tokens); its
    ``condition_mask`` channel is one of ``in_channels`` (17 = 16 + 1 for Video2World checkpoints)."""
    _refuse_unsupported(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    pt, ph, pw = (int(p) for p in config["patch_size"])
    grid = _grid(config, shape)
    n = grid[0] * grid[1] * grid[2]
    images = _image_tokens(config, shape)
    rows = 1 if shape.timestep_tokens is None else n  # a per-frame timestep is expanded to every token
    time_rows = 1 if shape.timestep_tokens is None else shape.timestep_tokens
    lora = positive_int(config, "adaln_lora_dim")
    # in_channels counts Video2World's condition_mask channel already (16 + 1); the padding mask adds one
    channels = positive_int(config, "in_channels") + (1 if config["concat_padding_mask"] else 0)
    block = cosmos_transformer_block(dim=dim, heads=heads, head_dim=head_dim,
                                     text_dim=positive_int(config, "text_embed_dim"), lora_dim=lora,
                                     ff_dim=int(dim * float(config["mlp_ratio"])), tokens=n,
                                     text_tokens=shape.text_len, rows=rows, image_tokens=images)
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
        *_context_projections(config, dim, shape.text_len, 0 if images is None else images),
    ]
    return Node("transformer", children=tuple(children), formula="cosmos_transformer")


loading_rules(
    "CosmosTransformer3DModel",
    keep_in_fp32=("learnable_pos_embed",),  # transformer_cosmos.py:603: _keep_in_fp32_modules
    source="diffusers/models/transformers/transformer_cosmos.py:603",
)


#: ``CosmosControlNetModel.__init__`` keyword defaults (diffusers models/controlnets/controlnet_cosmos.py:54-74).
CONTROLNET_DEFAULTS = {
    "n_controlnet_blocks": 4, "in_channels": 130, "latent_channels": 18, "model_channels": 2048,
    "num_attention_heads": 32, "attention_head_dim": 128, "mlp_ratio": 4.0, "text_embed_dim": 1024,
    "adaln_lora_dim": 256, "patch_size": [1, 2, 2], "max_size": [128, 240, 240], "rope_scale": [2.0, 1.0, 1.0],
    "extra_pos_embed_type": None, "img_context_dim_in": None, "img_context_dim_out": 2048,
    "use_crossattn_projection": False, "crossattn_proj_in_channels": 1024, "encoder_hidden_states_channels": 1024,
}

declare_keys("CosmosControlNetModel", {
    "n_controlnet_blocks": LAYERS, "in_channels": SIZE, "latent_channels": SIZE, "model_channels": SIZE,
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "mlp_ratio": RATIO, "text_embed_dim": SIZE,
    "adaln_lora_dim": SIZE, "patch_size": ListOf(SIZE, lo=3, hi=3), "max_size": ListOf(SIZE, lo=3, hi=3),
    "rope_scale": ListOf(Real(0.0, 1e6), lo=3, hi=3), "extra_pos_embed_type": TEXT | NULL,
    "img_context_dim_in": COUNT | NULL, "img_context_dim_out": SIZE, "use_crossattn_projection": FLAG,
    "crossattn_proj_in_channels": SIZE, "encoder_hidden_states_channels": SIZE,
})


@register("CosmosControlNetModel", role="denoiser", defaults=CONTROLNET_DEFAULTS,
          source="diffusers/models/controlnets/controlnet_cosmos.py", nominal=NOMINAL)
def cosmos_controlnet(config: Config, shape: RunShape) -> Node:
    """``CosmosControlNetModel.forward`` (controlnet_cosmos.py:153-317), as ``Cosmos2_5_TransferPipeline`` calls it
    (the control video's latent, the noisy latent, a per-frame timestep, the (text, image context) pair, the
    condition and padding masks): ``patch_embed`` (a linear, no bias) on the control latent zero-padded to
    ``in_channels`` (control channels + condition mask + padding mask: 130), ``patch_embed_base`` on the noisy latent
    with both masks (``latent_channels``: 18), ``time_embed`` on the timesteps (one per latent frame: the adaLN norms
    then run on every token), ``crossattn_proj`` / ``img_context_proj`` as the transformer's, and
    ``n_controlnet_blocks`` ``CosmosTransformerBlock``s, the first with ``before_proj`` (its output added to the base
    embedding), each with ``after_proj`` (the residual for the transformer). No output norm or projection."""
    _refuse_unsupported(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    if positive_int(config, "model_channels") != dim:
        raise ConfigError(f"{config.component}/config.json: model_channels {config['model_channels']} is not "
                          f"num_attention_heads × attention_head_dim = {dim}: the blocks read the patch embedding at "
                          "that width (the real call fails)")
    pt, ph, pw = (int(p) for p in config["patch_size"])
    grid = _grid(config, shape)
    n = grid[0] * grid[1] * grid[2]
    images = _image_tokens(config, shape)
    rows = 1 if shape.timestep_tokens is None else n
    time_rows = 1 if shape.timestep_tokens is None else shape.timestep_tokens
    lora = positive_int(config, "adaln_lora_dim")
    common = dict(dim=dim, heads=heads, head_dim=head_dim, text_dim=positive_int(config, "text_embed_dim"),
                  lora_dim=lora, ff_dim=int(dim * float(config["mlp_ratio"])), tokens=n, text_tokens=shape.text_len,
                  rows=rows, image_tokens=images)
    blocks = count_int(config, "n_controlnet_blocks")
    stack = [cosmos_transformer_block(**common, before_proj=i == 0, after_proj=True) for i in range(blocks)]
    patch = pt * ph * pw
    children = [
        Node("patch_embed", children=(Node("proj", ops.linear(n, positive_int(config, "in_channels") * patch, dim,
                                                              bias=False)),)),
        Node("patch_embed_base", children=(Node("proj", ops.linear(n, positive_int(config, "latent_channels") * patch,
                                                                   dim, bias=False)),)),
        cosmos_time_embed(dim=dim, rows=time_rows),
    ]
    if config["extra_pos_embed_type"] == "learnable":
        sizes = [int(m) // int(p) for m, p in zip(config["max_size"], config["patch_size"])]
        children.append(Node("learnable_pos_embed", ops.parameters(sum(sizes) * dim)))
    children += [*_context_projections(config, dim, shape.text_len, 0 if images is None else images),
                 module_list("control_blocks", stack)]
    return Node("controlnet", children=tuple(children), formula="cosmos_controlnet")


loading_rules("CosmosControlNetModel", keep_in_fp32=("learnable_pos_embed",),
              source="diffusers/models/controlnets/controlnet_cosmos.py:51 (_keep_in_fp32_modules)")
