"""Wan-Animate's transformer: ``WanAnimateTransformer3DModel`` (diffusers
``models/transformers/transformer_wan_animate.py``): Wan 2.1's image-to-video blocks (``formulas/wan.py``) with a
pose embedding, a face motion encoder and face adapters (``formulas/wan_animate.py``).

As ``WanAnimatePipeline`` calls it (one segment: ``T`` latent frames plus the reference frame before them, ``h × w``
= H/8 × W/8, ``F`` face frames of ``s × s`` pixels; ``RunShape.latent_frames`` = T + 1, ``RunShape.frames`` = F):

* ``patch_embedding`` (``nn.Conv3d(2z + 4, d)``, kernel = stride = patch) on the ``T + 1`` frames:
  ``N = (T+1)/p_t · h/p_h · w/p_w`` tokens; ``pose_patch_embedding`` (``nn.Conv3d(z, d)``) on the ``T`` pose latent
  frames, added to the tokens after the first frame's (:1241-1243);
* ``condition_embedder``: the timestep MLP, ``time_proj``, the text projection (``L`` tokens) and the image embedder
  on the ``I`` CLIP tokens (``RunShape.image_tokens``), put before the text (:1245-1252);
* ``motion_encoder`` on each face frame, ``face_encoder`` on their motion vectors (:1254-1267);
* ``num_layers`` ``WanTransformerBlock``s (added k/v: the context split at 512 text tokens, as Wan's
  ``context_split``), and after every ``inject_face_latents_blocks``-th block (0, k, 2k, ...) a face adapter
  (:1269-1284);
* ``norm_out`` (``FP32LayerNorm``, no affine), ``proj_out``, ``scale_shift_table`` (2d).
"""

from __future__ import annotations

from math import prod

from flopcalc.engine.architectures.wan import context_split, patch_size, floor_div, rotary_buffers
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, TEXT, Config, ListOf, Nested, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, FlopcalcError, ResolutionError
from flopcalc.engine.loading import loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.wan import wan_condition_embedder, wan_image_embedder, wan_transformer_block
from flopcalc.formulas.wan_animate import MOTION_ENCODER_CHANNELS, face_adapter, face_encoder, motion_encoder

CLASS = "WanAnimateTransformer3DModel"
#: ``WanAnimateTransformer3DModel.__init__`` keyword defaults (transformer_wan_animate.py:1041-1067).
DEFAULTS = {
    "patch_size": [1, 2, 2], "num_attention_heads": 40, "attention_head_dim": 128, "in_channels": 36,
    "latent_channels": 16, "out_channels": 16, "text_dim": 4096, "freq_dim": 256, "ffn_dim": 13824, "num_layers": 40,
    "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "eps": 1e-6, "image_dim": 1280,
    "added_kv_proj_dim": None, "rope_max_seq_len": 1024, "pos_embed_seq_len": None,
    "motion_encoder_channel_sizes": None, "motion_encoder_size": 512, "motion_style_dim": 512, "motion_dim": 20,
    "motion_encoder_dim": 512, "face_encoder_hidden_dim": 1024, "face_encoder_num_heads": 4,
    "inject_face_latents_blocks": 5, "motion_encoder_batch_size": 8,
}
SOURCE = "diffusers/models/transformers/transformer_wan_animate.py"

declare_keys(CLASS, {
    "patch_size": ListOf(SIZE, lo=3, hi=3), "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "in_channels": SIZE | NULL, "latent_channels": SIZE | NULL, "out_channels": SIZE | NULL, "text_dim": SIZE,
    "freq_dim": SIZE, "ffn_dim": SIZE, "num_layers": LAYERS, "cross_attn_norm": FLAG, "qk_norm": TEXT | NULL,
    "image_dim": SIZE | NULL, "added_kv_proj_dim": SIZE | NULL, "rope_max_seq_len": SIZE,
    "pos_embed_seq_len": SIZE | NULL, "motion_encoder_channel_sizes": Nested({}) | NULL,
    "motion_encoder_size": SIZE, "motion_style_dim": SIZE, "motion_dim": SIZE, "motion_encoder_dim": SIZE,
    "face_encoder_hidden_dim": SIZE, "face_encoder_num_heads": SIZE, "inject_face_latents_blocks": SIZE,
    "motion_encoder_batch_size": SIZE,
})


def channels(config: Config) -> tuple[int, int]:
    """``(in_channels, latent_channels)`` as ``__init__`` resolves them (:1070-1078): either gives the other
    (``in = 2·latent + 4``); both must agree."""
    given_in, given_latent = config["in_channels"], config["latent_channels"]
    if given_in is None and given_latent is None:
        raise ConfigError(f"{config.component}/config.json: at least one of in_channels and latent_channels must be set")
    latent = positive_int(config, "latent_channels") if given_latent is not None else (given_in - 4) // 2
    in_ch = positive_int(config, "in_channels") if given_in is not None else 2 * latent + 4
    if in_ch != 2 * latent + 4 or latent <= 0:
        raise ConfigError(f"{config.component}/config.json: in_channels {in_ch} must be 2 × latent_channels + 4 "
                          f"(latent_channels {latent}), as WanAnimateTransformer3DModel asserts")
    return in_ch, latent


def motion_channels(config: Config) -> dict:
    """``motion_encoder_channel_sizes`` or the default table; the encoder reads one entry per power of two from
    ``motion_encoder_size`` down to 4."""
    size = positive_int(config, "motion_encoder_size")
    table = config["motion_encoder_channel_sizes"] or MOTION_ENCODER_CHANNELS
    if size < 8 or size & (size - 1):
        raise ConfigError(f"{config.component}/config.json: motion_encoder_size {size} must be a power of two of at "
                          "least 8 (the encoder halves it down to 4)")
    needed = [str(2 ** i) for i in range(2, size.bit_length())]
    missing = [k for k in needed if k not in table]
    if missing:
        raise ConfigError(f"{config.component}/config.json: motion_encoder_channel_sizes lacks {missing}")
    if any(isinstance(table[k], bool) or not isinstance(table[k], int) or table[k] <= 0 for k in needed):
        raise ConfigError(f"{config.component}/config.json: motion_encoder_channel_sizes must map each size to a "
                          "positive channel count")
    return {k: table[k] for k in needed}


def _check(config: Config, layers: int) -> None:
    if config["pos_embed_seq_len"] is not None:
        raise ConfigError(f"{config.component}/config.json: pos_embed_seq_len is set (a first-last-frame Wan image "
                          "embedder), which Wan-Animate does not use; leave it null")
    if config["image_dim"] is None:
        raise ConfigError(f"{config.component}/config.json: image_dim is null, but WanAnimatePipeline passes CLIP "
                          "image states, which the condition embedder then cannot embed (the real call fails)")
    k = positive_int(config, "inject_face_latents_blocks")
    if layers % k:
        raise ConfigError(f"{config.component}/config.json: num_layers {layers} is not a multiple of "
                          f"inject_face_latents_blocks {k}: forward calls a face adapter after block {layers // k * k}, "
                          f"which the model does not build ({layers // k} adapters; the real call fails)")


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE,
          # 5 frames: 2 latent frames and the reference (3), as many as the face adapter's 2 face frames + its zero frame
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=3, text_len=8, image_tokens=4, frames=5))
def wan_animate_transformer(config: Config, shape: RunShape) -> Node:
    layers = count_int(config, "num_layers")
    _check(config, layers)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_ch, latent = channels(config)
    out_ch = config["out_channels"] or latent
    pt, ph, pw = patch_size(config)
    frames = shape.latent_frames
    if frames is None or shape.image_tokens is None or shape.frames is None:
        raise FlopcalcError(f"{config.component}: the Wan-Animate transformer runs on a segment's latent with its "
                            "reference frame, the CLIP image tokens and the face video: estimate WanAnimatePipeline")
    gh, gw = floor_div(shape.latent_height, ph), floor_div(shape.latent_width, pw)
    grid_t, pose_t = floor_div(frames, pt), floor_div(frames - 1, pt)
    if any(isinstance(g, int) and g == 0 for g in (grid_t, pose_t, gh, gw)):
        raise ResolutionError(f"{config.component}: a segment of {frames} latent frames (with the reference) at "
                              f"{shape.latent_height}×{shape.latent_width} is smaller than one {pt}×{ph}×{pw} patch")
    n, n_pose = grid_t * gh * gw, pose_t * gh * gw
    images, text = shape.image_tokens, shape.text_len
    context = images + text
    image_context = 0
    if config["added_kv_proj_dim"] is not None:
        image_context, context = context_split(context)
    block = wan_transformer_block(
        dim=dim, heads=heads, head_dim=head_dim, ffn_dim=positive_int(config, "ffn_dim"), tokens=n,
        text_tokens=context, cross_attn_norm=bool(config["cross_attn_norm"]), image_tokens=image_context,
        added_kv_dim=None if config["added_kv_proj_dim"] is None else positive_int(config, "added_kv_proj_dim"))
    face_heads = positive_int(config, "face_encoder_num_heads")
    face, face_frames = face_encoder(in_dim=positive_int(config, "motion_encoder_dim"), out_dim=dim,
                                     hidden_dim=positive_int(config, "face_encoder_hidden_dim"), heads=face_heads,
                                     frames=shape.frames)
    t_face = face_frames + 1  # the zero frame forward prepends (:1266-1267)
    if isinstance(t_face, int) and isinstance(n, int) and n % t_face:
        raise ResolutionError(f"{config.component}: {n} video tokens do not split over the face adapter's {t_face} "
                              "frames (the face video and the latent disagree; the real call fails)")
    adapters = layers // positive_int(config, "inject_face_latents_blocks")
    adapter = face_adapter(dim=dim, heads=heads, tokens=n, face_tokens=t_face * (face_heads + 1),
                           per_frame=face_heads + 1)
    return Node("transformer", children=(
        Node("patch_embedding", ops.conv(in_ch, dim, pt * ph * pw, n)),
        Node("pose_patch_embedding", ops.conv(latent, dim, pt * ph * pw, n_pose)),
        wan_condition_embedder(dim=dim, freq_dim=positive_int(config, "freq_dim"),
                               text_dim=positive_int(config, "text_dim"), text_tokens=text,
                               image=wan_image_embedder(image_dim=positive_int(config, "image_dim"), dim=dim,
                                                        image_tokens=images)),
        motion_encoder(size=positive_int(config, "motion_encoder_size"),
                       style_dim=positive_int(config, "motion_style_dim"), motion_dim=positive_int(config, "motion_dim"),
                       out_dim=positive_int(config, "motion_encoder_dim"), channels=motion_channels(config),
                       frames=shape.frames),
        face,
        module_list("blocks", [block] * layers),
        module_list("face_adapter", [adapter] * adapters),
        Node("norm_out", ops.layer_norm(n, dim, affine=False, thop_rule=False)),
        Node("proj_out", ops.linear(n, dim, out_ch * prod((pt, ph, pw)))),
        Node("scale_shift_table", ops.parameters(2 * dim)),
    ), formula="wan_animate_transformer")


#: transformer_wan_animate.py:1026-1034: ``_keep_in_fp32_modules``, applied for every dtype.
KEEP_IN_FP32 = ("time_embedder", "scale_shift_table", "norm1", "norm2", "norm3", "motion_synthesis_weight", "rope")


def _buffers(config: Config):
    """Wan's rotary tables, and each blurred ``MotionConv2d``'s non-persistent 4×4 float32 blur kernel (:136)."""
    from flopcalc.engine.loading import Buffer

    size = positive_int(config, "motion_encoder_size")
    blocks = size.bit_length() - 3  # one res block per halving down to 4
    blurs = tuple(Buffer(f"motion_encoder.res_blocks.{i}.{conv}.blur_kernel", 16, "float32")
                  for i in range(blocks) for conv in ("conv2", "conv_skip"))
    return (*rotary_buffers(config), *blurs)


loading_rules(CLASS, keep_in_fp32=KEEP_IN_FP32, buffers=_buffers, source=SOURCE + ":136, 1026-1034")
