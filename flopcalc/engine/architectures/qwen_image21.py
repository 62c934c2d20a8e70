"""Qwen-Image 2.1 transformer: ``QwenImage21Transformer2DModel`` (diffusers 0.42.1
``models/transformers/transformer_qwenimage21.py``); block formulas in ``formulas/qwen_image21.py``.

``QwenImage21Pipeline`` feeds the ``z × H/16 × W/16`` latent unpatched (``_pack_latents`` is a plain flatten,
pipeline_qwenimage21.py:416-419): ``N = (H/16)(W/16)`` tokens of ``in_channels · patch_size²`` features (the
pipeline runs ``patch_size`` 1), and ``T`` text tokens of width ``context_in_dim`` (Qwen3-VL hidden states):

* ``img_in`` (bias-free) on the N tokens, ``txt_in`` (``QwenImage21TextProjection``) on the T, on every call;
* ``time_text_embed``: the sinusoidal ``time_proj`` (a float32 ``freqs`` buffer), then ``timestep_embedder``
  (256 → d → d, bias-free) on the timestep and, with ``causal_condition``, a ``t = 0`` row (:944-952);
* ``modulation`` (SiLU, d → 4d, bias-free) on those rows: one shared modulation every block slices;
* ``pos_embed`` (``QwenImage21Rope``): frequency tables kept as a plain list (no parameters, no buffer),
  indexed per call;
* ``num_layers`` single-stream blocks on the joint ``T + N`` sequence, or, with ``RunShape.kv_cache`` ``"cached"``
  (the pipeline's later denoising steps), on the ``N`` target tokens with the text's cached keys and values
  (``"extract"``, the first step, is a full forward that stores them);
* ``norm_out`` (d → d on the rows) and ``proj_out`` (d → patch² · out_channels) on the blocks' tokens.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG,
    LAYERS,
    NULL,
    SIZE,
    SIZES,
    Config,
    count_int,
    declare_keys,
    positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.qwen_image21 import (
    TIMESTEP_CHANNELS,
    norm_out,
    qwen_image21_block,
    text_projection,
)

CLASS = "QwenImage21Transformer2DModel"
SOURCE = "diffusers/models/transformers/transformer_qwenimage21.py"

#: ``QwenImage21Transformer2DModel.__init__`` keyword defaults (transformer_qwenimage21.py:778-791).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 64,
    "out_channels": 64,
    "num_layers": 32,
    "attention_head_dim": 128,
    "num_attention_heads": 32,
    "context_in_dim": 4096,
    "mlp_ratio": 3,
    "axes_dims_rope": (16, 56, 56),
    "eps": 1e-6,
    "causal_condition": True,
}

#: ``RunShape.kv_cache`` values: ``kv_cache_mode`` of the pipeline's denoising loop (pipeline_qwenimage21.py:776).
KV_MODES = (None, "extract", "cached")

declare_keys(CLASS, {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "context_in_dim": SIZE, "mlp_ratio": SIZE,
    "axes_dims_rope": SIZES, "causal_condition": FLAG,
})


def _head_dim(config: Config) -> int:
    """``attention_head_dim``, checked against the rotary axes: ``QwenImage21Rope`` concatenates
    ``sum(axes_dims_rope) / 2`` complex frequencies that multiply the ``head_dim / 2`` pairs of every head."""
    head_dim = positive_int(config, "attention_head_dim")
    axes = config["axes_dims_rope"]
    if sum(axes) != head_dim:
        raise ConfigError(f"{config.component}/config.json: axes_dims_rope {list(axes)} must sum to "
                          f"attention_head_dim {head_dim} (QwenImage21Rope rotates every head with them)")
    return head_dim


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE)
def qwen_image21_transformer(config: Config, shape: RunShape) -> Node:
    """One forward at batch 1 on ``text_len`` text tokens and the ``latent_height × latent_width`` latent (text
    to image), as a full forward or (``kv_cache`` ``"cached"``) on the target tokens only."""
    heads = positive_int(config, "num_attention_heads")
    head_dim = _head_dim(config)
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    mlp_ratio = positive_int(config, "mlp_ratio")
    context = positive_int(config, "context_in_dim")
    mode = shape.kv_cache
    if mode not in KV_MODES:
        raise ValueError(f"unknown kv_cache mode {mode!r}")
    if mode is not None and not config["causal_condition"]:
        raise ConfigError(f"{config.component}/config.json: causal_condition is false, and "
                          "QwenImage21Transformer2DModel refuses a key/value cache without it (the cached text "
                          "tokens must be modulated from t = 0)")
    cached = mode == "cached"
    rows = 2 if config["causal_condition"] else 1  # [t, 0] (transformer_qwenimage21.py:945-948)
    n = shape.latent_height * shape.latent_width
    t = shape.text_len
    q = n if cached else t + n
    block = qwen_image21_block(dim=dim, heads=heads, head_dim=head_dim, mlp_ratio=mlp_ratio, text_tokens=t,
                               image_tokens=n, cached=cached)
    return Node(
        "transformer",
        children=(
            Node("time_text_embed", children=(
                mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim, tokens=rows, bias=False),)),
            text_projection(context, dim, t),
            Node("img_in", ops.linear(n, in_channels * patch * patch, dim, bias=False)),
            Node("modulation", ops.activation(rows * dim),
                 children=(Node("1", ops.linear(rows, dim, 4 * dim, bias=False)),)),
            module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
            norm_out(dim, rows, q),
            Node("proj_out", ops.linear(q, dim, patch * patch * out_channels, bias=False)),
        ),
        formula="qwen_image21_transformer",
    )


#: ``QwenImage21TemporalTimesteps`` registers ``freqs`` (256 / 2 float32 values, non-persistent:
#: transformer_qwenimage21.py:144-146); ``QwenImage21Rope.freqs`` is a plain list (:669-674), not a buffer. The class
#: keeps no module in float32 (no ``_keep_in_fp32_modules``).
loading_rules(CLASS, buffers=lambda config: (Buffer("time_text_embed.time_proj.freqs", TIMESTEP_CHANNELS // 2,
                                                    "float32"),),
              source=SOURCE + ":136-167")
