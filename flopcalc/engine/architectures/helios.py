"""Helios video transformer: ``HeliosTransformer3DModel`` (diffusers ``models/transformers/transformer_helios.py``;
block formulas in ``formulas/helios.py``), as the Helios pipelines call it: the chunk being denoised
(``latent_frames`` × ``latent_height`` × ``latent_width``) packed after three histories of the full-resolution latent
(``height`` × ``width`` of the :class:`RunShape`, latent cells: the pyramid pipeline denoises its chunk at a lower
resolution than its histories; None: the chunk's grid), with the history sizes the pipelines default to (16, 2, 1
latent frames and the first-frame prefix: :func:`flopcalc.formulas.helios.history_tokens`).

* ``patch_embedding`` (a ``p``-strided ``nn.Conv3d``) on the chunk, ``patch_short`` / ``patch_mid`` / ``patch_long``
  (``has_multi_term_memory_patch``; kernels ``p``, ``2p``, ``4p``) on the histories; the pipelines need the 1×2×2
  patches the histories' hard-coded paddings and rotary pooling assume (others are refused).
* ``condition_embedder``: ``time_embedder`` and ``time_proj`` once for the sample's timestep and, with
  ``zero_history_timestep``, once more for the histories' zero timestep, which ``forward`` embeds once per call
  (``torch.zeros((1))``, line 793) whatever the batch: a batched call's rows after the first do not repeat it
  (``RunShape.split`` :data:`LATER_ROWS`); ``text_embedder`` on the text tokens.
* ``num_layers`` blocks on all packed tokens; ``norm_out`` (``HeliosOutputNorm``: a 2d ``scale_shift_table`` and an
  ``FP32LayerNorm``) and ``proj_out`` on the chunk's tokens only.
* ``rope``: three float32 frequency tables (``rope_dim[i] // 2`` values each, non-persistent buffers); the rotary
  angles are outer products and cosines per call (no counted work).
"""

from __future__ import annotations

from math import prod

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, TEXT, Choice, Config, ListOf, Real, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.helios import helios_block, history_tokens
from flopcalc.formulas.wan import wan_condition_embedder

CLASS = "HeliosTransformer3DModel"
#: ``HeliosTransformer3DModel.__init__`` keyword defaults (transformer_helios.py:579-601).
DEFAULTS = {
    "patch_size": [1, 2, 2], "num_attention_heads": 40, "attention_head_dim": 128, "in_channels": 16,
    "out_channels": 16, "text_dim": 4096, "freq_dim": 256, "ffn_dim": 13824, "num_layers": 40,
    "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "eps": 1e-6, "added_kv_proj_dim": None,
    "rope_dim": [44, 42, 42], "rope_theta": 10000.0, "guidance_cross_attn": True, "zero_history_timestep": True,
    "has_multi_term_memory_patch": True, "is_amplify_history": False, "history_scale_mode": "per_head",
}
SOURCE = "diffusers/models/transformers/transformer_helios.py"
#: ``RunShape.split`` of a batched call's rows after the first: the histories' zero timestep is embedded once per
#: call, counted with the first row.
LATER_ROWS = "helios_later_rows"

declare_keys(CLASS, {
    "patch_size": ListOf(SIZE, lo=3, hi=3), "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "in_channels": SIZE, "out_channels": SIZE | NULL, "text_dim": SIZE, "freq_dim": SIZE, "ffn_dim": SIZE,
    "num_layers": LAYERS, "cross_attn_norm": FLAG, "qk_norm": TEXT | NULL, "added_kv_proj_dim": SIZE | NULL,
    "rope_dim": ListOf(SIZE, lo=3, hi=3), "rope_theta": Real(0.0, 1e9), "guidance_cross_attn": FLAG,
    "zero_history_timestep": FLAG, "has_multi_term_memory_patch": FLAG, "is_amplify_history": FLAG,
    "history_scale_mode": Choice("scalar", "per_head"),
})


def check_patches(config: Config) -> None:
    """The pipelines' history paddings ((2, 4, 4), (4, 8, 8)) and rotary pooling fit 1×2×2 patches only, and they
    pass the histories, which need ``has_multi_term_memory_patch``."""
    if list(config["patch_size"]) != [1, 2, 2]:
        raise ConfigError(f"{config.component}/config.json: patch_size {list(config['patch_size'])}: the Helios "
                          "pipelines pad and pool the histories for 1×2×2 patches (the real call fails otherwise)")
    if not config["has_multi_term_memory_patch"]:
        raise ConfigError(f"{config.component}/config.json: has_multi_term_memory_patch is false: the Helios "
                          "pipelines pass history latents, which then have no patch embedding (the real call fails)")


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE,
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=1, text_len=8))
def helios_transformer(config: Config, shape: RunShape) -> Node:
    check_patches(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    rope = list(config["rope_dim"])
    if sum(rope) != head_dim or any(r % 2 for r in rope):
        raise ConfigError(f"{config.component}/config.json: rope_dim {rope} must be even widths summing to "
                          f"attention_head_dim {head_dim} (the rotary tables cover each head; the real forward fails "
                          "otherwise)")
    dim = heads * head_dim
    c_in = positive_int(config, "in_channels")
    c_out = config["out_channels"] or c_in
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    h, w = shape.latent_height, shape.latent_width
    hh = h if shape.height is None else shape.height
    hw = w if shape.width is None else shape.width
    grid_h, grid_w = (h // 2, w // 2) if isinstance(h, int) and isinstance(w, int) else (h / 2, w / 2)
    n = frames * grid_h * grid_w
    if isinstance(n, int) and n == 0:
        raise ResolutionError(f"{config.component}: a latent of {frames}×{h}×{w} is smaller than one 1×2×2 patch")
    if any(isinstance(v, int) and v % 2 for v in (hh, hw)):
        raise ResolutionError(f"{config.component}: a history latent of {hh}×{hw}: the mid and long histories' rotary "
                              "tables (pooled from the short history's grid) then miss their patched tokens (the real "
                              "forward fails); use a size whose latent is even (a multiple of 16 pixels)")
    short, mid, long = history_tokens(hh, hw)
    tokens = n + short + mid + long
    zero_history = bool(config["zero_history_timestep"]) and shape.split != LATER_ROWS
    amplify = bool(config["is_amplify_history"])
    scale = (heads if config["history_scale_mode"] == "per_head" else 1) if amplify else 0
    added = config["added_kv_proj_dim"]
    block = helios_block(dim=dim, heads=heads, head_dim=head_dim, ffn_dim=positive_int(config, "ffn_dim"),
                         tokens=tokens, current=n, text_tokens=shape.text_len,
                         cross_attn_norm=bool(config["cross_attn_norm"]),
                         guidance_cross_attn=bool(config["guidance_cross_attn"]),
                         added_kv_dim=None if added is None else positive_int(config, "added_kv_proj_dim"),
                         history_scale=scale)
    return Node("transformer", children=(
        Node("patch_embedding", ops.conv(c_in, dim, 4, n)),
        Node("patch_short", ops.conv(c_in, dim, 4, short)),
        Node("patch_mid", ops.conv(c_in, dim, 32, mid)),
        Node("patch_long", ops.conv(c_in, dim, 256, long)),
        wan_condition_embedder(dim=dim, freq_dim=positive_int(config, "freq_dim"),
                               text_dim=positive_int(config, "text_dim"), text_tokens=shape.text_len,
                               timesteps=2 if zero_history else 1),
        module_list("blocks", [block] * count_int(config, "num_layers")),
        Node("norm_out", children=(Node("scale_shift_table", ops.parameters(2 * dim)),
                                   Node("norm", ops.layer_norm(n, dim, affine=False, thop_rule=False)))),
        Node("proj_out", ops.linear(n, dim, c_out * prod((1, 2, 2)))),
    ), formula="helios_transformer")


#: transformer_helios.py:550-557: ``_keep_in_fp32_modules``.
KEEP_IN_FP32 = ("time_embedder", "scale_shift_table", "norm1", "norm2", "norm3", "history_key_scale")

loading_rules(
    CLASS, keep_in_fp32=KEEP_IN_FP32,
    # HeliosRotaryPosEmbed (:327-333): float32 frequency bases, len(arange(0, dim, 2)[: dim // 2]) each
    buffers=lambda c: tuple(Buffer(f"rope.freqs_base_{axis}", dim // 2, "float32")
                            for axis, dim in zip("tyx", c["rope_dim"])),
    source="diffusers/models/transformers/transformer_helios.py:327-333, 550-557",
)
