"""JoyImage-Edit: ``JoyImageEditTransformer3DModel`` (diffusers ``models/transformers/transformer_joyimage.py``) and
``JoyImageEditPlusTransformer3DModel`` (``transformer_joyimage_edit_plus.py``, the same modules and defaults; it takes
its latent as ``(B, patches, C, p_t, p_h, p_w)`` patches, embedded one by one by the same ``Conv3d``: the same work).

A double-stream DiT (:372-604): ``img_in`` (a ``Conv3d`` with kernel and stride ``patch_size``) on the latent, giving
``N = (t/p_t)(h/p_h)(w/p_w)`` image tokens; ``condition_embedder`` (sinusoidal timestep, ``time_embedder``
256 → d → d, ``time_proj`` SiLU then d → 6d, and ``text_embedder``, a GELU(tanh) ``PixArtAlphaTextProjection``
``text_dim`` → d → d on the ``m`` text tokens); ``num_layers`` double-stream blocks; ``norm_out`` (FP32LayerNorm
without affine) and ``proj_out`` (d → out_channels · prod(patch_size)) on the image tokens. Block formulas:
:mod:`flopcalc.formulas.joyimage`. The rotary tables are computed on the CPU from the grid (no matmul).
"""

from __future__ import annotations

from flopcalc.engine.config import (
    LAYERS, NULL, SIZE, SIZES, TEXT, Config, Int, ListOf, Real, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.joyimage import joyimage_block

SOURCE = "diffusers/models/transformers/transformer_joyimage.py"
PLUS_SOURCE = "diffusers/models/transformers/transformer_joyimage_edit_plus.py"

#: ``JoyImageEditTransformer3DModel.__init__`` keyword defaults (transformer_joyimage.py:390-403), which
#: ``JoyImageEditPlusTransformer3DModel.__init__`` repeats (transformer_joyimage_edit_plus.py:362-376).
DEFAULTS = {
    "patch_size": [1, 2, 2],
    "in_channels": 16,
    "out_channels": None,
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "text_dim": 4096,
    "mlp_width_ratio": 4.0,
    "num_layers": 20,
    "rope_dim_list": [16, 56, 56],
    "rope_type": "rope",
    "theta": 256,
}
#: ``JoyImageTimeTextImageEmbedding(time_freq_dim=256)`` (:428-433).
TIME_FREQ_DIM = 256

declare_keys(("JoyImageEditTransformer3DModel", "JoyImageEditPlusTransformer3DModel"), {
    "patch_size": ListOf(SIZE, lo=3, hi=3), "in_channels": SIZE, "out_channels": SIZE | NULL, "hidden_size": SIZE,
    "num_attention_heads": SIZE, "text_dim": SIZE, "mlp_width_ratio": Real(0.0, 1e3), "num_layers": LAYERS,
    "rope_dim_list": SIZES | NULL, "rope_type": TEXT, "theta": Real(0.0, 1e9) | Int(1, 10**9),
})


def _geometry(config: Config, plus: bool = False) -> tuple[int, int, int]:
    """Width, heads, MLP width, with the checks ``__init__`` and ``get_rotary_pos_embed`` make."""
    dim, heads = positive_int(config, "hidden_size"), positive_int(config, "num_attention_heads")
    if dim % heads:
        raise ConfigError(f"{config.component}/config.json: hidden_size ({dim}) must be divisible by "
                          f"num_attention_heads ({heads})")
    rope = config["rope_dim_list"]
    head_dim = dim // heads
    if rope is not None and sum(positive_int_list(config, "rope_dim_list")) != head_dim:
        raise ConfigError(f"{config.component}/config.json: sum(rope_dim_list) should equal head_dim ({head_dim})")
    if rope is None and head_dim % 3:
        raise ConfigError(f"{config.component}/config.json: without rope_dim_list the head width {head_dim} is split "
                          "in 3 rotary axes and must divide by 3")
    if not plus and config["rope_type"] not in ("rope", "mrope"):  # the Plus class never reads it
        raise ConfigError(f"{config.component}/config.json: rope_type {config['rope_type']!r}: diffusers knows 'rope' "
                          "and 'mrope'")
    width = int(dim * float(config["mlp_width_ratio"]))
    if width == 0:
        raise ConfigError(f"{config.component}/config.json: int(hidden_size × mlp_width_ratio) is 0")
    return dim, heads, width


def _tree(config: Config, n, t, plus: bool, formula: str) -> Node:
    """What both classes run on ``n`` image tokens and ``t`` text tokens."""
    dim, heads, width = _geometry(config, plus)
    pt, ph, pw = config["patch_size"]
    c = positive_int(config, "in_channels")
    out = c if config["out_channels"] is None else positive_int(config, "out_channels")
    kernel = pt * ph * pw
    return Node("transformer", children=(
        Node("img_in", ops.conv(c, dim, kernel, n)),
        Node("condition_embedder", children=(
            mlp_embedder("time_embedder", TIME_FREQ_DIM, dim),
            Node("time_proj", ops.activation(dim) + ops.linear(1, dim, 6 * dim)),
            mlp_embedder("text_embedder", positive_int(config, "text_dim"), dim, tokens=t),
        )),
        module_list("double_blocks", [joyimage_block(tokens=n, text_tokens=t, dim=dim, heads=heads, mlp_width=width)]
                    * count_int(config, "num_layers")),
        Node("norm_out", ops.layer_norm(n, dim, affine=False, thop_rule=False)),
        Node("proj_out", ops.linear(n, dim, out * kernel)),
    ), formula=formula)


@register("JoyImageEditTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def joyimage_transformer(config: Config, shape: RunShape) -> Node:
    """``JoyImageEditTransformer3DModel.forward`` (:522-604) on one row: the latent of ``shape.latent_frames``
    (default 1) × ``latent_height`` × ``latent_width`` and ``shape.text_len`` text tokens."""
    pt, ph, pw = config["patch_size"]
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    n = ops.exact_div(frames, pt) * ops.exact_div(shape.latent_height, ph) * ops.exact_div(shape.latent_width, pw)
    return _tree(config, n, shape.text_len, False, "joyimage_transformer")


@register("JoyImageEditPlusTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=PLUS_SOURCE)
def joyimage_plus_transformer(config: Config, shape: RunShape) -> Node:
    """``JoyImageEditPlusTransformer3DModel.forward`` (transformer_joyimage_edit_plus.py:444-537) on one row: the
    ``(h/p_h)(w/p_w)`` patches of one latent frame (``JoyImageEditPlusPipeline.prepare_latents``) and
    ``shape.text_len`` text tokens."""
    pt, ph, pw = config["patch_size"]
    if pt != 1:
        raise ConfigError(f"{config.component}/config.json: patch_size[0] {pt}: JoyImageEditPlusPipeline patchifies one "
                          "latent frame (t // p_t patches in time), so p_t must be 1")
    n = ops.exact_div(shape.latent_height, ph) * ops.exact_div(shape.latent_width, pw)
    return _tree(config, n, shape.text_len, True, "joyimage_plus_transformer")


#: ``_keep_in_fp32_modules`` (transformer_joyimage.py:381-386): modules whose names hold these stay fp32 on load.
loading_rules("JoyImageEditTransformer3DModel", keep_in_fp32=("time_embedder", "norm1", "norm2", "norm_out"),
              source=SOURCE)
#: The Plus class's ``_keep_in_fp32_modules`` (transformer_joyimage_edit_plus.py:354-359): the same.
loading_rules("JoyImageEditPlusTransformer3DModel", keep_in_fp32=("time_embedder", "norm1", "norm2", "norm_out"),
              source=PLUS_SOURCE)
