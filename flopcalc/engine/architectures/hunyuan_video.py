"""HunyuanVideo transformer: ``HunyuanVideoTransformer3DModel`` (diffusers
``models/transformers/transformer_hunyuan_video.py``); block formulas in ``formulas/hunyuan_video.py``.

``HunyuanVideoPipeline`` feeds the ``C × F_lat × H/8 × W/8`` latent and ``T`` Llama tokens
(cropped past the prompt template). The model:

* ``x_embedder.proj``: an ``nn.Conv3d`` with kernel = stride = (p_t, p, p): ``N = ⌊F_lat/p_t⌋ ·
  ⌊h/p⌋ · ⌊w/p⌋`` video tokens (the real code floors);
* ``context_embedder`` (``HunyuanVideoTokenRefiner``): ``time_text_embed`` (timestep 256 → d → d and
  the masked mean of the text states text_embed_dim → d → d), ``proj_in`` (text_embed_dim → d) on the
  T tokens, ``num_refiner_layers`` refiner blocks;
* ``time_text_embed`` (``HunyuanVideoConditionEmbedding``): timestep (256 → d → d; run twice with
  ``image_condition_type: token_replace``, once more on a zero timestep), pooled CLIP text
  (pooled_projection_dim → d → d), and the guidance embedder (256 → d → d) when ``guidance_embeds``;
* ``rope``: 3-D rotary tables from ``arange`` grids (broadcast products, no parameters, no counted work);
* ``num_layers`` dual-stream and ``num_single_layers`` single-stream blocks over N + T tokens;
* ``norm_out`` (``AdaLayerNormContinuous``, d → 2d) and ``proj_out`` (d → p_t·p²·out_channels) on N.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Blocks, Join, Layer, LoraFlow
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, SIZES, TEXT, Config, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list, work_only
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.hunyuan_video import (
    DUAL_BLOCK_FLOW,
    REFINER_BLOCK_FLOW,
    SINGLE_BLOCK_FLOW,
    dual_stream_block,
    single_block,
    token_refiner_block,
)
from flopcalc.engine.registry import RunShape, register

#: ``HunyuanVideoTransformer3DModel.__init__`` keyword defaults (transformer_hunyuan_video.py).
DEFAULTS = {
    "in_channels": 16,
    "out_channels": 16,
    "num_attention_heads": 24,
    "attention_head_dim": 128,
    "num_layers": 20,
    "num_single_layers": 40,
    "num_refiner_layers": 2,
    "mlp_ratio": 4.0,
    "patch_size": 2,
    "patch_size_t": 1,
    "qk_norm": "rms_norm",
    "guidance_embeds": True,
    "text_embed_dim": 4096,
    "pooled_projection_dim": 768,
    "rope_theta": 256.0,
    "rope_axes_dim": (16, 56, 56),
    "image_condition_type": None,
}

#: ``Timesteps(num_channels=256)`` feeds every ``TimestepEmbedding(256, d)`` of the model.
TIMESTEP_CHANNELS = 256
#: ``qk_norm`` values whose per-head norms flopcalc models (``Attention``: RMSNorm, nn.LayerNorm, none).
QK_NORMS = ("rms_norm", "layer_norm", None)
IMAGE_CONDITION_TYPES = (None, "latent_concat", "token_replace")


def patched(size: Any, patch: int) -> Any:
    """Tokens along one axis after a stride-``patch`` patch embedding: ``size // patch`` (the
    ``Conv3d`` and ``num_frames // p_t`` floor); exact division for a symbolic size."""
    if patch == 1:
        return size
    return size // patch if isinstance(size, int) else ops.exact_div(size, patch)


def _choice(config: Config, key: str, allowed: tuple) -> Any:
    value = config[key]
    if value not in allowed:
        raise ConfigError(f"{config.component}/config.json: {key!r} must be one of {', '.join(map(repr, allowed))}, "
                          f"got {value!r}")
    return value


def _mlp_ratio(config: Config) -> float:
    value = config["mlp_ratio"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{config.component}/config.json: 'mlp_ratio' must be a positive number, got {value!r}")
    return float(value)


#: Every config key ``HunyuanVideoTransformer3DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("HunyuanVideoTransformer3DModel", {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "num_single_layers": LAYERS, "num_refiner_layers": LAYERS, "mlp_ratio": RATIO,
    "patch_size": SIZE, "patch_size_t": SIZE, "qk_norm": TEXT | NULL, "guidance_embeds": FLAG,
    "text_embed_dim": SIZE, "pooled_projection_dim": SIZE, "image_condition_type": TEXT | NULL,
    "rope_axes_dim": SIZES,
})


@register("HunyuanVideoTransformer3DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_hunyuan_video.py",
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=1, text_len=8))
def hunyuan_video_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    p, pt = positive_int(config, "patch_size"), positive_int(config, "patch_size_t")
    text_dim = positive_int(config, "text_embed_dim")
    qk_norm = _choice(config, "qk_norm", QK_NORMS)
    token_replace = _choice(config, "image_condition_type", IMAGE_CONDITION_TYPES) == "token_replace"
    mlp_ratio = _mlp_ratio(config)
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    if isinstance(frames, int) and frames < pt:
        raise FlopcalcError(f"{config.component}: {frames} latent frame(s) are fewer than patch_size_t {pt}; the "
                            f"patch embedding needs at least {pt} (more video frames)")
    n = patched(frames, pt) * patched(shape.latent_height, p) * patched(shape.latent_width, p)
    t = shape.text_len

    timestep = mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim)
    embed = [_twice(timestep) if token_replace else timestep,
             mlp_embedder("text_embedder", positive_int(config, "pooled_projection_dim"), dim)]
    if config["guidance_embeds"]:
        embed.append(mlp_embedder("guidance_embedder", TIMESTEP_CHANNELS, dim))

    context_embedder = token_refiner(dim=dim, heads=heads, head_dim=head_dim, text_dim=text_dim, tokens=t,
                                     layers=count_int(config, "num_refiner_layers"))

    dual = dual_stream_block(dim=dim, heads=heads, head_dim=head_dim, video_tokens=n, text_tokens=t,
                             mlp_ratio=mlp_ratio, qk_norm=qk_norm, token_replace=token_replace)
    single = single_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t, mlp_ratio=mlp_ratio,
                          qk_norm=qk_norm, token_replace=token_replace)
    return Node("transformer", children=(
        Node("x_embedder", children=(Node("proj", ops.conv(in_channels, dim, pt * p * p, n)),)),
        context_embedder,
        Node("time_text_embed", children=tuple(embed)),
        module_list("transformer_blocks", [dual] * count_int(config, "num_layers")),
        module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, pt * p * p * out_channels)),
    ), formula="hunyuan_video_transformer")


def token_refiner(*, dim: int, heads: int, head_dim: int, text_dim: int, tokens: Any, layers: int) -> Node:
    """``context_embedder`` (``HunyuanVideoTokenRefiner``, and HunyuanImage's identical
    ``HunyuanImageTokenRefiner``, transformer_hunyuanimage.py:365): ``time_text_embed`` (timestep
    256 → d → d, the masked mean of the text states text_dim → d → d), ``proj_in`` (text_dim → d) on
    the ``tokens`` text tokens, ``layers`` refiner blocks."""
    refiner = token_refiner_block(dim=dim, heads=heads, head_dim=head_dim, tokens=tokens)
    return Node("context_embedder", children=(
        Node("time_text_embed", children=(mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim),
                                          mlp_embedder("text_embedder", text_dim, dim))),
        Node("proj_in", ops.linear(tokens, text_dim, dim)),
        Node("token_refiner", children=(module_list("refiner_blocks", [refiner] * layers),)),
    ), formula="hunyuan_video_token_refiner")


def _twice(node: Node) -> Node:
    """A module called twice per forward (``timestep_embedder`` with ``token_replace``: on the
    timestep and on a zero timestep): its work doubles, its parameters count once."""
    return replace(node, cost=node.cost + work_only(node.cost),
                   children=tuple(_twice(c) for c in node.children))


def _unmeasured(tree: Node, checkpointing: bool) -> str | None:
    """Configs whose autograd differs from what was measured: image-conditioned ``token_replace`` blocks (a second
    modulation for the first frame's tokens), dual-stream blocks with no single-stream block after them (the last
    one's text stream then feeds nothing, and autograd skips its backward), no refiner blocks (the refiner's
    ``time_text_embed`` then feeds nothing)."""
    blocks, single = tree.find("transformer_blocks"), tree.find("single_transformer_blocks")
    refiner = tree.find("context_embedder.token_refiner.refiner_blocks")
    if blocks is not None and any(c.formula == "hunyuan_video_token_replace_block" for c in blocks.children):
        return "its image_condition_type 'token_replace' blocks were not measured in training"
    if blocks is not None and blocks.children and (single is None or not single.children):
        return "with num_single_layers 0 the last dual-stream block's text stream feeds nothing (not modelled)"
    if not (refiner is not None and refiner.children):
        return "with num_refiner_layers 0 the token refiner's timestep and text embedding feeds nothing (not modelled)"
    return None


gradient_graph(
    "HunyuanVideoTransformer3DModel",
    # transformer_hunyuan_video.py:1045-1048: x_embedder(latents); time_text_embed's and the token refiner's
    # timestep / guidance / pooled-text embedders, whose first linears read sinusoidal projections, the pooled CLIP
    # embedding or the masked mean of the Llama states (:460-471); context_embedder.proj_in(Llama states) (:472)
    input_layers=("x_embedder.proj", "context_embedder.proj_in", "context_embedder.time_text_embed.*.linear_1",
                  "time_text_embed.*.linear_1"),
    # :1065-1089: each dual- and single-stream block is checkpointed (the refiner blocks are not); both end in a
    # gated add, so nothing with MACs is left out of the recompute
    checkpointed=("transformer_blocks.*", "single_transformer_blocks.*"),
    source="diffusers/models/transformers/transformer_hunyuan_video.py:1045-1089",
    refuses=_unmeasured,
    lora=LoraFlow(
        steps=(
            Layer("x_embedder.proj", ("latents",), "img"),  # transformer_hunyuan_video.py:1047
            Layer("context_embedder.proj_in", ("text",), "r"),  # :472
            Blocks("context_embedder.token_refiner.refiner_blocks", REFINER_BLOCK_FLOW),  # :473, 423-424
            Join(("r",), "txt"),
            Blocks("transformer_blocks", DUAL_BLOCK_FLOW),  # :1065-1075
            Blocks("single_transformer_blocks", SINGLE_BLOCK_FLOW),  # :1077-1087
            Layer("proj_out", ("img",), "out"),  # :1115
        ),
        # the timestep / guidance / pooled-text embedders (of the model and of the token refiner), the refiner's
        # gates (norm_out.linear) and every AdaLN modulation linear read conditioning only
        frozen=("time_text_embed.**", "context_embedder.time_text_embed.**",
                "context_embedder.token_refiner.refiner_blocks.*.norm_out.linear",
                "transformer_blocks.*.norm1.linear", "transformer_blocks.*.norm1_context.linear",
                "single_transformer_blocks.*.norm.linear", "norm_out.linear"),
        default_targets=(),
        targets_source="diffusers has no LoRA training example for HunyuanVideo (examples/ holds none): "
                       "--lora-targets names them",
        source="diffusers/models/transformers/transformer_hunyuan_video.py:359-379, 542-584, 622-663, 1045-1115",
    ),
)
