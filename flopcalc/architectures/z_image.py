"""Z-Image transformer: ``ZImageTransformer2DModel`` (diffusers ``models/transformers/transformer_z_image.py``).

A single-stream DiT. The latent ``C × H/8 × W/8`` (one frame) is cut into ``p × p`` patches
(``patch_size`` 2, ``f_patch_size`` 1: the forward's defaults, which ``ZImagePipeline`` keeps), and
the ``N₀ = (H/8p)(W/8p)`` image tokens and the ``T`` caption tokens are each padded to a multiple of
32 (:func:`~flopcalc.formulas.z_image.padded_length`). The image tokens are embedded and run through
``n_refiner_layers`` modulated blocks (``noise_refiner``), the caption tokens through an RMSNorm and a
linear (``cap_embedder``) and as many unmodulated blocks (``context_refiner``); then both, concatenated,
through ``n_layers`` modulated blocks (``layers``) and ``all_final_layer``, which projects every token
(the caption's are dropped afterwards). The timestep embedding (``t_embedder``) runs once per sample.
The optional SigLIP branch (``siglip_feat_dim``, the Omni variant) holds parameters but a text-to-image
call never runs it; rotary tables are parameter-free.
"""

from __future__ import annotations

from typing import Any

from flopcalc.config import (
    FLAG, LAYERS, NULL, SIZE, SIZES, Config, boolean, count_int, declare_keys, positive_int, positive_int_list,
)
from flopcalc.cost import Node, module_list
from flopcalc.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.z_image import ADALN_EMBED_DIM, padded_length, z_image_block, z_image_final_layer
from flopcalc.registry import RunShape, register

#: ``ZImageTransformer2DModel.__init__`` keyword defaults (transformer_z_image.py).
DEFAULTS = {
    "all_patch_size": [2],
    "all_f_patch_size": [1],
    "in_channels": 16,
    "dim": 3840,
    "n_layers": 30,
    "n_refiner_layers": 2,
    "n_heads": 30,
    "n_kv_heads": 30,
    "qk_norm": True,
    "cap_feat_dim": 2560,
    "siglip_feat_dim": None,
    "axes_dims": [32, 48, 48],
}

#: ``ZImageTransformer2DModel.forward`` defaults, which ``ZImagePipeline`` keeps.
PATCH_SIZE, F_PATCH_SIZE = 2, 1
#: ``TimestepEmbedder(min(dim, 256), mid_size=1024)`` on a 256-wide sinusoidal embedding.
T_EMBED_MID, T_EMBED_FREQUENCIES = 1024, 256


def _patches(config: Config) -> list[tuple[int, int]]:
    """The (patch, frame patch) pairs of ``all_x_embedder`` / ``all_final_layer``, which must hold the
    pair the pipeline runs."""
    sizes, frames = positive_int_list(config, "all_patch_size"), positive_int_list(config, "all_f_patch_size")
    if len(sizes) != len(frames):
        raise ConfigError(f"{config.component}/config.json: 'all_patch_size' and 'all_f_patch_size' must have the "
                          f"same length, got {sizes} and {frames}")
    pairs = list(zip(sizes, frames))
    if (PATCH_SIZE, F_PATCH_SIZE) not in pairs:
        raise ConfigError(f"{config.component}/config.json: ZImagePipeline runs patch_size {PATCH_SIZE} with "
                          f"f_patch_size {F_PATCH_SIZE}, which 'all_patch_size'/'all_f_patch_size' do not hold")
    return pairs


def _heads(config: Config, dim: int) -> int:
    heads = positive_int(config, "n_heads")
    axes = positive_int_list(config, "axes_dims")
    if dim // heads != sum(axes):
        raise ConfigError(f"{config.component}/config.json: the head width dim // n_heads = {dim // heads} must equal "
                          f"sum(axes_dims) = {sum(axes)}")
    return heads


#: Every config key ``ZImageTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("ZImageTransformer2DModel", {
    "all_patch_size": SIZES, "all_f_patch_size": SIZES, "in_channels": SIZE, "dim": SIZE, "n_layers": LAYERS,
    "n_refiner_layers": LAYERS, "n_heads": SIZE, "n_kv_heads": SIZE, "qk_norm": FLAG, "cap_feat_dim": SIZE,
    "siglip_feat_dim": SIZE | NULL, "axes_dims": SIZES,
})


@register("ZImageTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_z_image.py")
def z_image_transformer(config: Config, shape: RunShape) -> Node:
    dim = positive_int(config, "dim")
    heads = _heads(config, dim)
    c = positive_int(config, "in_channels")
    qk_norm = boolean(config, "qk_norm")
    refiners = count_int(config, "n_refiner_layers")
    cap_dim = positive_int(config, "cap_feat_dim")
    n = padded_length(ops.exact_div(shape.latent_height, PATCH_SIZE) * ops.exact_div(shape.latent_width, PATCH_SIZE))
    t = padded_length(shape.text_len)

    def block(tokens: Any, modulation: bool) -> Node:
        return z_image_block(tokens=tokens, dim=dim, heads=heads, qk_norm=qk_norm, modulation=modulation)

    pairs = _patches(config)  # ModuleDict entries "p-f"; only the pipeline's pair runs
    used = [(p, f) == (PATCH_SIZE, F_PATCH_SIZE) for p, f in pairs]
    adaln = min(dim, ADALN_EMBED_DIM)
    children = [
        Node("all_x_embedder", children=tuple(
            Node(f"{p}-{f}", ops.linear(n if runs else 0, f * p * p * c, dim)) for (p, f), runs in zip(pairs, used))),
        Node("all_final_layer", children=tuple(
            z_image_final_layer(f"{p}-{f}", tokens=n + t, dim=dim, out_channels=p * p * f * c, runs=runs)
            for (p, f), runs in zip(pairs, used))),
        module_list("noise_refiner", [block(n, True)] * refiners),
        module_list("context_refiner", [block(t, False)] * refiners),
        Node("t_embedder", children=(Node("mlp", children=(
            Node("0", ops.linear(1, T_EMBED_FREQUENCIES, T_EMBED_MID) + ops.activation(T_EMBED_MID)),
            Node("2", ops.linear(1, T_EMBED_MID, adaln)),
        )),)),
        Node("cap_embedder", children=(Node("0", ops.rms_norm(t, cap_dim)), Node("1", ops.linear(t, cap_dim, dim)))),
    ]
    siglip = config.get("siglip_feat_dim")
    if siglip is not None:  # the Omni variant's image-conditioning branch: parameters only here
        s = positive_int(config, "siglip_feat_dim")
        children += [
            Node("siglip_embedder", children=(Node("0", ops.rms_norm(0, s)), Node("1", ops.linear(0, s, dim)))),
            module_list("siglip_refiner", [block(0, False)] * refiners),
            Node("siglip_pad_token", ops.parameters(dim)),
        ]
    children += [
        Node("x_pad_token", ops.parameters(dim)),
        Node("cap_pad_token", ops.parameters(dim)),
        module_list("layers", [block(n + t, True)] * count_int(config, "n_layers")),
    ]
    return Node("transformer", children=tuple(children), formula="z_image_transformer")
