"""NucleusMoE-Image: ``NucleusMoEImageTransformer2DModel`` (diffusers
``models/transformers/transformer_nucleusmoe_image.py``).

A single-stream DiT in which only the image tokens run through the blocks (:835-925): ``img_in`` on the ``N`` packed
2×2 latent patches, ``txt_norm`` (RMSNorm) on the ``m`` text tokens, ``time_text_embed`` (sinusoidal projection,
``TimestepEmbedding`` d → 4d → d, RMSNorm) on one timestep, then ``num_layers`` blocks, each projecting the text to keys
and values of its own (``encoder_proj``, ``add_k_proj``/``add_v_proj``) that the image queries attend to beside the
image's; the feed-forward of a block is a dense SwiGLU or, where ``dense_moe_strategy`` says (:348-359), an
expert-choice mixture of experts; ``norm_out`` and ``proj_out`` on the image tokens. Block formulas:
:mod:`flopcalc.formulas.nucleusmoe_image`. The rotary tables (``NucleusMoEEmbedRope``) are table lookups.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, TEXT, Config, Int, ListOf, Real, boolean, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.nucleusmoe_image import dense_mlp, dense_mlp_width, expert_capacity, expert_choice_moe, nucleus_block

SOURCE = "diffusers/models/transformers/transformer_nucleusmoe_image.py"

#: ``NucleusMoEImageTransformer2DModel.__init__`` keyword defaults (transformer_nucleusmoe_image.py:776-796).
DEFAULTS = {
    "patch_size": 2,
    "in_channels": 64,
    "out_channels": None,
    "num_layers": 24,
    "attention_head_dim": 128,
    "num_attention_heads": 16,
    "num_key_value_heads": None,
    "joint_attention_dim": 3584,
    "axes_dims_rope": [16, 56, 56],
    "mlp_ratio": 4.0,
    "moe_enabled": True,
    "dense_moe_strategy": "leave_first_three_and_last_block_dense",
    "num_experts": 128,
    "moe_intermediate_dim": 1344,
    "capacity_factors": 8.0,
    "use_sigmoid": False,
    "route_scale": 2.5,
    "use_grouped_mm": False,
}

#: ``NucleusMoEEmbedRope``: 4096 positions per axis (:150).
ROPE_POSITIONS = 4096

_FACTOR = Real(0.0, 1e6)
declare_keys("NucleusMoEImageTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL,
    "joint_attention_dim": SIZE, "axes_dims_rope": ListOf(Int(0, 1_000_000), lo=3, hi=3), "mlp_ratio": Real(0.0, 1e3),
    "moe_enabled": FLAG, "dense_moe_strategy": TEXT, "num_experts": SIZE, "moe_intermediate_dim": SIZE,
    "capacity_factors": _FACTOR | ListOf(_FACTOR), "use_sigmoid": FLAG, "route_scale": Real(-1e9, 1e9),
    "use_grouped_mm": FLAG,
})


def is_moe_layer(strategy: str, index: int, layers: int) -> bool:
    """``_is_moe_layer`` (:348-359): any strategy name it does not know makes every block MoE, as there."""
    if strategy == "leave_first_three_and_last_block_dense":
        return 3 <= index < layers - 1
    if strategy == "leave_first_three_blocks_dense":
        return index >= 3
    if strategy == "leave_first_block_dense":
        return index >= 1
    return strategy != "all_dense"


def moe_layers(config: Config) -> list[bool]:
    """Which blocks are MoE (``moe_enabled and _is_moe_layer(...)``, :818)."""
    layers = count_int(config, "num_layers")
    if not boolean(config, "moe_enabled"):
        return [False] * layers
    return [is_moe_layer(config["dense_moe_strategy"], i, layers) for i in range(layers)]


def capacity_factors(config: Config) -> list[float]:
    """``capacity_factors`` as the list the blocks index (:800): one float for every block, or a list with an entry
    per block."""
    value, layers = config["capacity_factors"], count_int(config, "num_layers")
    if not isinstance(value, list):
        return [float(value)] * layers
    if len(value) < layers:
        raise ConfigError(f"{config.component}/config.json: capacity_factors has {len(value)} entries for {layers} "
                          "blocks (block i reads capacity_factors[i])")
    return [float(v) for v in value]


def _geometry(config: Config) -> tuple[int, int, int, int]:
    """Width, heads, head width, key/value heads, with the checks the real module needs to run."""
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    kv = config["num_key_value_heads"]
    kv = heads if kv is None else positive_int(config, "num_key_value_heads")
    if heads % kv:
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} must be a multiple of "
                          f"num_key_value_heads {kv}")
    axes = config["axes_dims_rope"]
    if sum(axes) != head_dim or any(a % 2 for a in axes):
        raise ConfigError(f"{config.component}/config.json: axes_dims_rope {axes} must be even and sum to "
                          f"attention_head_dim {head_dim} (the rotary table spans one head)")
    return heads * head_dim, heads, head_dim, kv


@register("NucleusMoEImageTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def nucleusmoe_transformer(config: Config, shape: RunShape) -> Node:
    """``NucleusMoEImageTransformer2DModel.forward`` (:835-925) on one row: ``N = (h/p)(w/p)`` image tokens of the
    ``h × w`` latent (``in_channels`` features each, packed by the pipeline) and ``shape.text_len`` text tokens."""
    if boolean(config, "use_grouped_mm"):
        raise ConfigError(f"{config.component}/config.json: use_grouped_mm true runs the experts through F.grouped_mm, "
                          "which flopcalc does not model; the default loop (use_grouped_mm false) is modelled")
    dim, heads, head_dim, kv = _geometry(config)
    p, c = positive_int(config, "patch_size"), positive_int(config, "in_channels")
    out = c if config["out_channels"] is None else positive_int(config, "out_channels")
    text_dim = positive_int(config, "joint_attention_dim")
    rows, cols = ops.exact_div(shape.latent_height, p), ops.exact_div(shape.latent_width, p)
    n, t = rows * cols, shape.text_len
    if isinstance(rows, int) and max(rows // 2, cols // 2) + t > ROPE_POSITIONS:
        raise ConfigError(f"{config.component}: the text's rotary positions start after the image's "
                          f"({max(rows // 2, cols // 2)}) and NucleusMoEEmbedRope holds {ROPE_POSITIONS}: "
                          f"{t} text tokens do not fit")
    experts, width = positive_int(config, "num_experts"), positive_int(config, "moe_intermediate_dim")
    factors = capacity_factors(config)
    blocks = []
    for i, moe in enumerate(moe_layers(config)):
        if moe:
            capacity = expert_capacity(n, experts, factors[i]) if isinstance(n, int) else None
            if capacity is None:
                raise ConfigError("NucleusMoEImageTransformer2DModel: the expert capacity is a ceiling of the token "
                                  "count (max(1, ceil(capacity_factor · N / num_experts))): no closed-form law")
            if capacity > n:
                raise ConfigError(f"{config.component}/config.json: block {i} gives each expert "
                                  f"{capacity} tokens (capacity_factor {factors[i]} × {n} / {experts}), more than the "
                                  f"{n} there are (torch.topk fails)")
            mlp = expert_choice_moe("img_mlp", tokens=n, dim=dim, experts=experts, width=width, capacity=capacity)
        else:
            if dense_mlp_width(dim, float(config["mlp_ratio"])) == 0:
                raise ConfigError(f"{config.component}/config.json: the dense feed-forward width "
                                  f"int({dim} × mlp_ratio × 2/3) // 128 × 128 is 0")
            mlp = dense_mlp(n, dim, float(config["mlp_ratio"]))
        blocks.append(nucleus_block(tokens=n, text_tokens=t, dim=dim, heads=heads, head_dim=head_dim, kv_heads=kv,
                                    text_dim=text_dim, mlp=mlp))
    return Node("transformer", children=(
        Node("time_text_embed", ops.rms_norm(1, dim), (mlp_embedder("timestep_embedder", dim, 4 * dim, dim),)),
        Node("txt_norm", ops.rms_norm(t, text_dim)),
        Node("img_in", ops.linear(n, c, dim)),
        module_list("transformer_blocks", blocks),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, p * p * out, bias=False)),
    ), formula="nucleusmoe_image_transformer")
