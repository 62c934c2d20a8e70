"""FramePack's HunyuanVideo transformer: ``HunyuanVideoFramepackTransformer3DModel`` (diffusers
``models/transformers/transformer_hunyuan_video_framepack.py``; the released checkpoint's config names FramePack's
own class, ``HunyuanVideoTransformer3DModelPacked``, which diffusers loads as this one). HunyuanVideo's blocks
(``formulas/hunyuan_video.py``) over the window's latent tokens with the history packed before them.

As ``HunyuanVideoFramepackPipeline`` calls it (one latent window of ``T_w`` frames, ``h × w`` = H/8 × W/8):

* ``x_embedder.proj`` (``nn.Conv3d``, kernel = stride = (p_t, p, p)) on the window: ``N = ⌊T_w/p_t⌋⌊h/p⌋⌊w/p⌋``;
* ``clean_x_embedder`` (``HunyuanVideoHistoryPatchEmbed``, :82-110): ``proj`` (kernel (1, 2, 2)) on the clean
  latents (the image's and one history frame: 2 frames), ``proj_2x`` (2, 4, 4) on 2 history frames and ``proj_4x``
  (4, 8, 8) on 16, each padded (replicate) up to its kernel: ``2⌊h/2⌋⌊w/2⌋ + ⌈h/4⌉⌈w/4⌉ + 4⌈h/8⌉⌈w/8⌉`` tokens
  packed before the window's (``_pack_history_states``, :405-437). The frame counts are the pipeline's
  (``history_sizes`` [1, 2, 16] and the image prefix, pipeline_hunyuan_video_framepack.py:869-906, both sampling
  types); the model's ``forward`` fails without them (it always calls ``clean_x_embedder``);
* ``image_projection`` (``FramepackClipVisionProjection``, :72-80: ``up`` image_proj_dim → 3d, SiLU, ``down``
  3d → d) on the ``I`` SigLIP tokens (``RunShape.image_tokens``), put before the ``L`` text tokens;
* ``context_embedder`` (the token refiner) on the ``L`` text tokens, ``time_text_embed`` (timestep, pooled CLIP,
  guidance);
* ``num_layers`` dual-stream blocks over ``N + N_hist`` video and ``I + L`` context tokens, ``num_single_layers``
  single-stream blocks over all of them (batch 1: the context is cut to the mask's length, the padded prompt's
  ``L`` here: an upper bound, as HunyuanVideo's plans count);
* ``norm_out`` and ``proj_out`` on the window's ``N`` tokens only (``hidden_states[:, -original_context_length:]``).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.hunyuan_video import (
    DEFAULTS as HUNYUAN_VIDEO_DEFAULTS,
    QK_NORMS,
    TIMESTEP_CHANNELS,
    _choice,
    _mlp_ratio,
    patched,
    token_refiner,
)
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, SIZES, TEXT, Config, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.hunyuan_video import dual_stream_block, single_block

CLASS = "HunyuanVideoFramepackTransformer3DModel"
#: FramePack's own name for the class, which the released checkpoint's config.json carries.
PACKED = "HunyuanVideoTransformer3DModelPacked"
#: ``HunyuanVideoFramepackTransformer3DModel.__init__`` keyword defaults (transformer_hunyuan_video_framepack.py).
DEFAULTS = {**HUNYUAN_VIDEO_DEFAULTS, "has_image_proj": False, "image_proj_dim": 1152, "has_clean_x_embedder": False}
SOURCE = "diffusers/models/transformers/transformer_hunyuan_video_framepack.py"
#: The history the pipeline packs (pipeline_hunyuan_video_framepack.py:869-906): the clean latents (the image's
#: latent and one history frame), 2 frames at 2× and 16 at 4× compression; kernels of the three history convs.
CLEAN_FRAMES, HISTORY_2X_FRAMES, HISTORY_4X_FRAMES = 2, 2, 16
KERNEL_1X, KERNEL_2X, KERNEL_4X = (1, 2, 2), (2, 4, 4), (4, 8, 8)

declare_keys((CLASS, PACKED), {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "num_single_layers": LAYERS, "num_refiner_layers": LAYERS, "mlp_ratio": RATIO,
    "patch_size": SIZE, "patch_size_t": SIZE, "qk_norm": TEXT | NULL, "guidance_embeds": FLAG,
    "text_embed_dim": SIZE, "pooled_projection_dim": SIZE, "image_condition_type": TEXT | NULL,
    "rope_axes_dim": SIZES, "has_image_proj": FLAG, "image_proj_dim": SIZE, "has_clean_x_embedder": FLAG,
})


def _ceil_div(size: Any, k: int) -> Any:
    """``⌈size / k⌉``: the replicate padding of ``_pad_for_3d_conv`` (:440-447) then a stride-``k`` conv; exact
    division for a symbolic size (a law holds where it divides)."""
    return -(-size // k) if isinstance(size, int) else ops.exact_div(size, k)


def history_tokens(h: Any, w: Any) -> tuple[Any, Any, Any]:
    """Tokens of the clean latents, the 2× and the 4× history (see the module doc)."""
    clean = CLEAN_FRAMES * patched(h, 2) * patched(w, 2)
    two = _ceil_div(HISTORY_2X_FRAMES, 2) * _ceil_div(h, 4) * _ceil_div(w, 4)
    four = _ceil_div(HISTORY_4X_FRAMES, 4) * _ceil_div(h, 8) * _ceil_div(w, 8)
    return clean, two, four


def _check(config: Config) -> None:
    for key in ("has_clean_x_embedder", "has_image_proj"):
        if not config[key]:
            raise ConfigError(f"{config.component}/config.json: {key} is off, but {CLASS}.forward always calls "
                              f"{'clean_x_embedder' if key == 'has_clean_x_embedder' else 'image_projection'} "
                              "(the real call fails); FramePack checkpoints set it")
    if (config["patch_size"], config["patch_size_t"]) != (2, 1):
        raise ConfigError(f"{config.component}/config.json: patch_size {config['patch_size']}, patch_size_t "
                          f"{config['patch_size_t']}: FramePack's history embedder patches 1×2×2 (and rotary tables "
                          "are built per latent frame), which only patch_size 2 / patch_size_t 1 match (the real call "
                          "fails otherwise)")
    if config["image_condition_type"] is not None:
        raise ConfigError(f"{config.component}/config.json: image_condition_type "
                          f"{config['image_condition_type']!r}: FramePack conditions on the image through its history "
                          "and SigLIP tokens; leave it null")


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE, aliases=(PACKED,),
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=1, text_len=8, image_tokens=4))
def hunyuan_video_framepack_transformer(config: Config, shape: RunShape) -> Node:
    _check(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    p, pt = positive_int(config, "patch_size"), positive_int(config, "patch_size_t")
    qk_norm = _choice(config, "qk_norm", QK_NORMS)
    mlp_ratio = _mlp_ratio(config)
    if shape.image_tokens is None:
        raise FlopcalcError(f"{config.component}: the FramePack transformer projects the image encoder's tokens "
                            "(image_projection) but none were given: estimate HunyuanVideoFramepackPipeline with its "
                            "image_encoder config")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    if isinstance(frames, int) and frames < pt:
        raise FlopcalcError(f"{config.component}: {frames} latent frame(s) are fewer than patch_size_t {pt}")
    h, w = shape.latent_height, shape.latent_width
    n = patched(frames, pt) * patched(h, p) * patched(w, p)
    clean, two, four = history_tokens(h, w)
    video = n + clean + two + four
    images, text = shape.image_tokens, shape.text_len
    context = images + text

    embed = [mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim),
             mlp_embedder("text_embedder", positive_int(config, "pooled_projection_dim"), dim)]
    if config["guidance_embeds"]:
        embed.append(mlp_embedder("guidance_embedder", TIMESTEP_CHANNELS, dim))
    proj_dim = positive_int(config, "image_proj_dim")
    dual = dual_stream_block(dim=dim, heads=heads, head_dim=head_dim, video_tokens=video, text_tokens=context,
                             mlp_ratio=mlp_ratio, qk_norm=qk_norm)
    single = single_block(dim=dim, heads=heads, head_dim=head_dim, tokens=video + context, mlp_ratio=mlp_ratio,
                          qk_norm=qk_norm)
    history = Node("clean_x_embedder", children=(
        Node("proj", ops.conv(in_channels, dim, 4, clean)),
        Node("proj_2x", ops.conv(in_channels, dim, 32, two)),
        Node("proj_4x", ops.conv(in_channels, dim, 256, four)),
    ), formula="hunyuan_video_history_patch_embed")
    return Node("transformer", children=(
        Node("x_embedder", children=(Node("proj", ops.conv(in_channels, dim, pt * p * p, n)),)),
        history,
        token_refiner(dim=dim, heads=heads, head_dim=head_dim, text_dim=positive_int(config, "text_embed_dim"),
                      tokens=text, layers=count_int(config, "num_refiner_layers")),
        Node("image_projection", ops.activation(images * 3 * dim), (
            Node("up", ops.linear(images, proj_dim, 3 * dim)), Node("down", ops.linear(images, 3 * dim, dim)))),
        Node("time_text_embed", children=tuple(embed)),
        module_list("transformer_blocks", [dual] * count_int(config, "num_layers")),
        module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, pt * p * p * out_channels)),
    ), formula="hunyuan_video_framepack_transformer")
