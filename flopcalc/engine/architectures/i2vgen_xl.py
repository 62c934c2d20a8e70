"""I2VGen-XL's UNet: ``I2VGenXLUNet`` (diffusers ``models/unets/unet_i2vgen_xl.py``), ModelScope's 3-D UNet
(:func:`flopcalc.engine.architectures.unet_3d_condition.unet_3d_body`) plus the image conditioning, as its forward
(unet_i2vgen_xl.py:440) runs it at batch 1:

* ``fps_embedding`` (C0 → 4·C0 → 4·C0) beside ``time_embedding``, once per video;
* ``image_latents_context_embedding`` on the first frame's image latent: a 3×3 conv (4 → 8·c) at h × w, an
  adaptive average pool to 32 × 32 (no MACs), two stride-2 3×3 convs (→ 16·c → ``cross_attention_dim``): 8 × 8 =
  64 context tokens;
* ``context_embedding`` on the CLIP image embedding (one vector): ``cross_attention_dim`` → 4·C0 →
  ``cross_attention_dim · in_channels``, viewed as ``in_channels`` more context tokens;
* ``image_latents_proj_in`` on every frame's image latent (three 3×3 convs 4 → 4c → 4c → c) and
  ``image_latents_temporal_encoder`` over the frames of each latent pixel (one self-attention of 2 heads of width
  c and a GELU MLP of 4c), concatenated to the noise: ``conv_in`` reads 2·c channels;
* the cross-attentions read ``text_len + 64 + in_channels`` context vectors.

``I2VGenXLUNet.__init__`` sets ``num_attention_heads = attention_head_dim`` (its config's
``num_attention_heads`` is ignored), the head *width* of the blocks' transformers and of ``transformer_in``.
"""

from __future__ import annotations

from flopcalc.engine.architectures.unet_2d_condition import _per_block
from flopcalc.engine.architectures.unet_3d_condition import _check, unet_3d_body
from flopcalc.engine.config import NAMES, NULL, SIZE, SIZES, Config, Int, declare_keys, positive_int
from flopcalc.engine.cost import Cost, Node
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.motion_module import per_frame
from flopcalc.formulas.transformer_parts import cross_attention, feed_forward
from flopcalc.engine.registry import RunShape, register

#: ``I2VGenXLUNet.__init__`` keyword defaults (unet_i2vgen_xl.py:117).
DEFAULTS = {
    "sample_size": None,
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["CrossAttnDownBlock3D", "CrossAttnDownBlock3D", "CrossAttnDownBlock3D", "DownBlock3D"],
    "up_block_types": ["UpBlock3D", "CrossAttnUpBlock3D", "CrossAttnUpBlock3D", "CrossAttnUpBlock3D"],
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "cross_attention_dim": 1024,
    "attention_head_dim": 64,
    "num_attention_heads": None,
}
#: ``get_down_block(..., downsample_padding=1)`` in ``I2VGenXLUNet.__init__`` (not a config key).
DOWNSAMPLE_PADDING = 1
#: ``image_latents_context_embedding``'s ``nn.AdaptiveAvgPool2d((32, 32))``.
CONTEXT_POOL = 32

declare_keys("I2VGenXLUNet", {
    "sample_size": SIZE | NULL, "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES,
    "up_block_types": NAMES, "block_out_channels": SIZES, "layers_per_block": Int(1, 1024),
    "norm_num_groups": SIZE | NULL, "cross_attention_dim": SIZE, "attention_head_dim": SIZE | SIZES,
    "num_attention_heads": SIZE | SIZES | NULL
})


def context_tokens(text_len, in_channels: int) -> object:
    """The cross-attention context: the text, the image latent's 8 × 8 pooled tokens, ``in_channels`` image tokens."""
    side = ops.conv_output_size(ops.conv_output_size(CONTEXT_POOL, 3, 2, 1), 3, 2, 1)
    return text_len + side * side + in_channels


def _image_conditioning(c: int, cross: int, temb: int, h, w, frames) -> list[Node]:
    """``image_latents_context_embedding``, ``context_embedding``, ``image_latents_proj_in``,
    ``image_latents_temporal_encoder`` (see the module doc)."""
    mid = ops.conv_output_size(CONTEXT_POOL, 3, 2, 1)
    side = ops.conv_output_size(mid, 3, 2, 1)
    # AdaptiveAvgPool2d: no MACs; thop's count_adap_avgpool counts (prod(in/out) + 1) per output element
    pool = Cost(thop_extra=8 * c * (h * w + CONTEXT_POOL * CONTEXT_POOL), elementwise=8 * c * h * w)
    context = Node("image_latents_context_embedding", children=(
        Node("0", ops.conv2d(4, 8 * c, 3, h, w)),
        Node("2", pool),
        Node("3", ops.conv2d(8 * c, 16 * c, 3, mid, mid)),
        Node("5", ops.conv2d(16 * c, cross, 3, side, side)),
    ))
    image_emb = Node("context_embedding", children=(Node("0", ops.linear(1, cross, temb)),
                                                   Node("2", ops.linear(1, temb, cross * c))))
    proj_in = per_frame(Node("image_latents_proj_in", children=(
        Node("0", ops.conv2d(4, 4 * c, 3, h, w)),
        Node("2", ops.conv2d(4 * c, 4 * c, 3, h, w)),
        Node("4", ops.conv2d(4 * c, c, 3, h, w)),
    )), frames)
    attn = cross_attention("attn1", tokens=frames, dim=c, context_tokens=frames, context_dim=c, heads=2, head_dim=c)
    block = Node("image_latents_temporal_encoder", children=(
        Node("norm1", ops.layer_norm(frames, c)),
        attn,
        feed_forward("ff", frames, c, inner=4 * c),
    ), formula="temporal_transformer_block")
    return [context, image_emb, proj_in, per_frame(block, h * w)]


@register("I2VGenXLUNet", role="denoiser", defaults=DEFAULTS, source="diffusers/models/unets/unet_i2vgen_xl.py",
          nominal=RunShape(latent_height=32, latent_width=32, text_len=8, latent_frames=2))
def i2vgen_xl_unet(config: Config, shape: RunShape) -> Node:
    """``I2VGenXLUNet.forward`` on ``sample`` and ``image_latents`` ``(1, in_channels, F, h, w)``,
    ``encoder_hidden_states`` ``(1, text_len, cross_attention_dim)``, ``image_embeddings`` ``(1, 1,
    cross_attention_dim)`` and one ``fps``."""
    channels = [int(x) for x in config["block_out_channels"]]
    widths = _per_block(config["attention_head_dim"], len(channels), "attention_head_dim", config.component)
    _check(config, channels, widths, "I2VGenXLUNet")
    c = positive_int(config, "in_channels")
    cross = positive_int(config, "cross_attention_dim")
    c0 = channels[0]
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    embeddings = [mlp_embedder("time_embedding", c0, 4 * c0),
                  Node("fps_embedding", children=(Node("0", ops.linear(1, c0, 4 * c0)),
                                                  Node("2", ops.linear(1, 4 * c0, 4 * c0)))),
                  *_image_conditioning(c, cross, 4 * c0, shape.latent_height, shape.latent_width, frames)]
    return unet_3d_body(config, shape, widths, conv_in_channels=2 * c,
                        context_tokens=context_tokens(shape.text_len, c), embeddings=embeddings,
                        transformer_in_width=config["attention_head_dim"], downsample_padding=DOWNSAMPLE_PADDING)
