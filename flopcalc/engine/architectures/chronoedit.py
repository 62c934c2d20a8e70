"""ChronoEdit video transformer: ``ChronoEditTransformer3DModel`` (diffusers
``models/transformers/transformer_chronoedit.py``), the Wan 2.1 transformer with its own rotary embedding; the
rest is :func:`flopcalc.engine.architectures.wan.wan_transformer` and ``formulas/wan.py`` as they are (the same
modules under the same names: ``WanTransformerBlock``, ``WanTimeTextImageEmbedding``, ``WanAttnProcessor`` are
copied into the ChronoEdit module, lines 71-358, 433-520).

* ``rope`` (``ChronoEditRotaryPosEmbed``, lines 361-430): the Wan cos/sin tables (buffers, no parameters), sliced
  per call; on a latent of exactly 2 frames (the image and the edit, as ``ChronoEditPipeline`` denoises them) the
  temporal rows are ``freqs[:rope_temporal_skip_len][[0, -1]]`` (the first and the ``skip − 1``-th position)
  instead of ``[:2]``. No counted work either way; the two rows fit the latent only when ``p_t = 1``, so a 2-frame
  latent with ``patch_size[0] ≠ 1`` is refused (the real forward fails: the rotary table is wider than the heads).
* ``rope_temporal_skip_len`` (default 8): read only by the rotary tables.
* ``_keep_in_fp32_modules`` drops ``"rope"`` (line 565); the rope has no parameters and its non-persistent tables
  are created in float32 whatever the load dtype, so the loaded bytes equal Wan's.
"""

from __future__ import annotations

from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, TEXT, Config, ListOf, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ResolutionError
from flopcalc.engine.architectures.wan import DEFAULTS as WAN_DEFAULTS, patch_size, wan_transformer
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register

CLASS = "ChronoEditTransformer3DModel"
#: ``ChronoEditTransformer3DModel.__init__`` keyword defaults (transformer_chronoedit.py:585-604): Wan's, plus
#: ``rope_temporal_skip_len``.
DEFAULTS = {**WAN_DEFAULTS, "rope_temporal_skip_len": 8}
SOURCE = "diffusers/models/transformers/transformer_chronoedit.py"

declare_keys(CLASS, {
    "patch_size": ListOf(SIZE, lo=3, hi=3), "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "in_channels": SIZE, "out_channels": SIZE | NULL, "text_dim": SIZE, "freq_dim": SIZE, "ffn_dim": SIZE,
    "num_layers": LAYERS, "cross_attn_norm": FLAG, "qk_norm": TEXT | NULL, "image_dim": SIZE | NULL,
    "added_kv_proj_dim": SIZE | NULL, "rope_max_seq_len": SIZE, "pos_embed_seq_len": SIZE | NULL,
    "rope_temporal_skip_len": SIZE,
})


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE)
def chronoedit_transformer(config: Config, shape: RunShape) -> Node:
    """:func:`~flopcalc.engine.architectures.wan.wan_transformer` on the same shape (image tokens with
    ``image_dim``, split at 512 text tokens with ``added_kv_proj_dim``); a 2-frame latent needs ``p_t = 1``."""
    positive_int(config, "rope_temporal_skip_len")
    pt = patch_size(config)[0]
    if shape.latent_frames == 2 and pt != 1:
        raise ResolutionError(f"{config.component}: a 2-frame latent with patch_size[0] = {pt}: "
                              "ChronoEditRotaryPosEmbed puts its two temporal rows into num_frames // p_t = 1 frame: "
                              "the real forward fails unless p_t is 1")
    return wan_transformer(config, shape)


loading_rules(
    CLASS,
    # transformer_chronoedit.py:565: _keep_in_fp32_modules (Wan's without "rope", which has no parameters)
    keep_in_fp32=("time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"),
    # ChronoEditRotaryPosEmbed (:381-397): float32 cos/sin tables, rope_max_seq_len × head_dim each, non-persistent
    # (created in float32 at init, not cast by the load dtype)
    buffers=lambda c: tuple(Buffer(f"rope.freqs_{f}", positive_int(c, "rope_max_seq_len")
                                   * positive_int(c, "attention_head_dim"), "float32") for f in ("cos", "sin")),
    source="diffusers/models/transformers/transformer_chronoedit.py:381-397, 565",
)
