"""Kandinsky 5 transformer: ``Kandinsky5Transformer3DModel`` (diffusers ``models/transformers/transformer_kandinsky.py``);
block formulas in ``formulas/kandinsky5.py``.

The Kandinsky 5 pipelines pass the latent channels-last ``(F, h, w, C)`` (with ``visual_cond``: the latent, the
image condition and its mask, ``2C + 1`` channels), patched by ``patch_size`` ``(p_t, p_h, p_w)`` into
``N = (F/p_t)(h/p_h)(w/p_w)`` tokens (an image: F = 1), and ``T`` Qwen2.5-VL prompt tokens (``text_len``) plus one
pooled CLIP vector. A run shape is the latent grid and ``text_len``; one timestep per row.

Only the dense attention is modelled: ``attention_type`` ``"nabla"`` (NABLA sparse attention through flex-attention
block masks chosen from the attention map at run time) is refused with its reason.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, SIZE, TEXT, Config, ListOf, boolean, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.kandinsky5 import kandinsky5_transformer

SOURCE = "diffusers/models/transformers/transformer_kandinsky.py"

#: ``Kandinsky5Transformer3DModel.__init__`` keyword defaults (transformer_kandinsky.py:560-585, diffusers 0.42.1).
DEFAULTS = {
    "in_visual_dim": 4, "in_text_dim": 3584, "in_text_dim2": 768, "time_dim": 512, "out_visual_dim": 4,
    "patch_size": [1, 2, 2], "model_dim": 2048, "ff_dim": 5120, "num_text_blocks": 2, "num_visual_blocks": 32,
    "axes_dims": [16, 24, 24], "visual_cond": False, "attention_type": "regular",
}
#: ``Kandinsky5RoPE1D(head_dim)``'s ``max_pos`` and ``Kandinsky5RoPE3D``'s per-axis ``max_pos`` (:222, :239).
TEXT_ROPE_POSITIONS, VISUAL_ROPE_POSITIONS = 1024, 128
NOMINAL = RunShape(latent_height=4, latent_width=4, latent_frames=1, text_len=8)

declare_keys("Kandinsky5Transformer3DModel", {
    "in_visual_dim": SIZE, "in_text_dim": SIZE, "in_text_dim2": SIZE, "time_dim": SIZE, "out_visual_dim": SIZE,
    "patch_size": ListOf(SIZE, lo=3, hi=3), "model_dim": SIZE, "ff_dim": SIZE, "num_text_blocks": LAYERS,
    "num_visual_blocks": LAYERS, "axes_dims": ListOf(SIZE, lo=3, hi=3), "visual_cond": FLAG, "attention_type": TEXT,
})


def head_dim(config: Config) -> int:
    """``head_dim = sum(axes_dims)`` (:587), which must divide ``model_dim``."""
    dims = config["axes_dims"]
    hd = sum(dims)
    if positive_int(config, "model_dim") % hd:
        raise ConfigError(f"{config.component}/config.json: model_dim {config['model_dim']} is not a multiple of the "
                          f"head width sum(axes_dims) = {hd}")
    if any(d % 2 for d in dims):
        raise ConfigError(f"{config.component}/config.json: every axes_dims entry must be even (rotary pairs), got "
                          f"{list(dims)}")
    return hd


def visual_tokens(config: Config, shape: RunShape):
    """``N = (F/p_t)(h/p_h)(w/p_w)``: the tokens ``Kandinsky5VisualEmbeddings`` makes of the latent."""
    pt, ph, pw = config["patch_size"]
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    return ops.exact_div(frames, pt) * ops.exact_div(shape.latent_height, ph) * ops.exact_div(shape.latent_width, pw)


@register("Kandinsky5Transformer3DModel", role="denoiser", defaults=DEFAULTS, nominal=NOMINAL, source=SOURCE)
def kandinsky5_transformer_model(config: Config, shape: RunShape) -> Node:
    if config["attention_type"] == "nabla":
        raise ConfigError(f"{config.component}/config.json: attention_type 'nabla' (NABLA sparse attention: flex "
                          "attention on block masks picked from the attention map at run time) is not modelled; "
                          "flopcalc counts the dense attention types")
    if shape.text_len is None:
        raise ConfigError(f"{config.component}: Kandinsky5Transformer3DModel runs under a Kandinsky 5 pipeline")
    patch = config["patch_size"]
    return kandinsky5_transformer(
        visual_tokens=visual_tokens(config, shape), text_tokens=shape.text_len,
        in_visual_dim=positive_int(config, "in_visual_dim"), visual_cond=boolean(config, "visual_cond"),
        out_visual_dim=positive_int(config, "out_visual_dim"), patch_volume=patch[0] * patch[1] * patch[2],
        in_text_dim=positive_int(config, "in_text_dim"), in_text_dim2=positive_int(config, "in_text_dim2"),
        dim=positive_int(config, "model_dim"), time_dim=positive_int(config, "time_dim"),
        ff_dim=positive_int(config, "ff_dim"), head_dim=head_dim(config),
        text_blocks=count_int(config, "num_text_blocks"), visual_blocks=count_int(config, "num_visual_blocks"))


def _buffers(config: Config) -> tuple[Buffer, ...]:
    """Non-persistent float32 rotary tables: ``text_rope_embeddings.args`` (1024 positions × head_dim/2) and
    ``visual_rope_embeddings.args_i`` (128 positions × axes_dims[i]/2)."""
    dims = config["axes_dims"]
    return (Buffer("text_rope_embeddings.args", TEXT_ROPE_POSITIONS * (sum(dims) // 2), "float32"),
            *(Buffer(f"visual_rope_embeddings.args_{i}", VISUAL_ROPE_POSITIONS * (d // 2), "float32")
              for i, d in enumerate(dims)))


# transformer_kandinsky.py:557: the time embedding and every modulation stay float32
loading_rules("Kandinsky5Transformer3DModel", buffers=_buffers,
              keep_in_fp32=("time_embeddings", "modulation", "visual_modulation", "text_modulation"),
              source="diffusers/models/transformers/transformer_kandinsky.py:557")
