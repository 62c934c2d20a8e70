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

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, SIZES, Config, boolean, count_int, declare_keys, positive_int, positive_int_list,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.z_image import ADALN_EMBED_DIM, padded_length, z_image_block, z_image_final_layer
from flopcalc.engine.gradients import Attend, Blocks, Join, Layer, LoraFlow
from flopcalc.engine.registry import RunShape, register

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
#: :func:`flopcalc.engine.config.declare_keys` validates it.
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


def _block_flow(x: str) -> tuple:
    """``ZImageTransformerBlock.forward`` (transformer_z_image.py:228-282) on the stream ``x``, modulated or not:
    ``attention_norm1`` (RMSNorm), q/k/v, attention, ``to_out.0``, ``attention_norm2`` (an RMSNorm: its multiply
    saves the output projection's result when it requires grad, as the gate after it does), the residual; then
    the SwiGLU feed-forward ``w2(silu(w1(·)) · w3(·))`` (:171-183) through ``ffn_norm2`` into the residual."""
    return (
        *(Layer(f"attention.{p}", (x,), p) for p in ("to_q", "to_k", "to_v")),
        Attend("attention", q=("to_q",), k=("to_k",), v=("to_v",), to="o"),
        Layer("attention.to_out.0", ("o",), "a"),
        Join((x, "a"), x, gated="a"),  # :270 / :277 x + [gate_msa *] attention_norm2(attn_out)
        Layer("feed_forward.w1", (x,), "g"),
        Layer("feed_forward.w3", (x,), "u"),
        Join(("g", "u"), "h"),  # silu(w1(x)) * w3(x)
        Layer("feed_forward.w2", ("h",), "f"),
        Join((x, "f"), x, gated="f"),  # :273 / :280 x + [gate_mlp *] ffn_norm2(feed_forward(...))
    )


def _unused_patch_entries(tree: Node, checkpointing: bool) -> str | None:
    """peft adapts a target in every ``all_final_layer`` entry, also those the call never runs (parameters without
    work the flow does not see): training is validated on configs holding the pipeline's patch pair only."""
    entries = tree.find("all_final_layer")
    if entries is not None and len(entries.children) > 1:
        return (f"all_patch_size/all_f_patch_size hold {len(entries.children)} patch pairs; training is validated "
                f"with the pipeline's ({PATCH_SIZE}, {F_PATCH_SIZE}) only")
    return None


gradient_graph(
    "ZImageTransformer2DModel",
    # transformer_z_image.py:955 t_embedder (its mlp.0 reads the sinusoidal frequencies, :65-75), :990 the
    # patch embedder on the latent patches. cap_embedder.1 (:1006) reads cap_embedder.0's RMSNorm, whose weight
    # is trained: it computes an input gradient.
    input_layers=("all_x_embedder.*", "t_embedder.mlp.0"),
    # transformer_z_image.py:995-1003, 1011-1015, 1058-1065: every noise-refiner, context-refiner and main block is
    # checkpointed; its last op saving tensors (ffn_norm2 and the gate, :273 / :280) follows every layer: the whole
    # block runs again
    checkpointed=("noise_refiner.*", "context_refiner.*", "layers.*"),
    source="diffusers/models/transformers/transformer_z_image.py:943-1078",
    refuses=_unused_patch_entries,
    lora=LoraFlow(
        steps=(
            Layer("all_x_embedder.2-1", ("latents",), "img"),  # :990 (the pipeline's patch 2, frame patch 1)
            Blocks("noise_refiner", _block_flow("img")),  # :995-1003
            Layer("cap_embedder.1", ("text",), "cap"),  # :1006 (cap_embedder.0, an RMSNorm: no MACs)
            Blocks("context_refiner", _block_flow("cap")),  # :1011-1015
            Join(("img", "cap"), "x"),  # :861 _build_unified_sequence: cat([x, cap])
            Blocks("layers", _block_flow("x")),  # :1058-1065
            Layer("all_final_layer.2-1.linear", ("x",), "out"),  # :1069-1074 FinalLayer on every token (:310-311)
        ),
        # the timestep embedder and every adaLN modulation (blocks and final layer) read the timestep embedding only
        frozen=("t_embedder.**", "noise_refiner.*.adaLN_modulation", "layers.*.adaLN_modulation",
                "all_final_layer.*.adaLN_modulation"),
        default_targets=("to_k", "to_q", "to_v", "to_out.0"),
        targets_source="diffusers examples/dreambooth/train_dreambooth_lora_z_image.py (commit "
                       "027e8eebf33896eecb64c74836258c52593259d5), main(): target_modules when --lora_layers is not "
                       "given",
        source="diffusers/models/transformers/transformer_z_image.py:171-311, 943-1078",
        lists=("noise_refiner", "context_refiner", "layers"),
    ),
)
