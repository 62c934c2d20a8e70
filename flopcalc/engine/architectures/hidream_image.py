"""HiDream-I1 transformer: ``HiDreamImageTransformer2DModel`` (diffusers 0.42.1
``models/transformers/transformer_hidream_image.py``), a sparse (mixture-of-experts) dual/single-stream DiT.

``forward`` (:774-944), at batch 1: ``patchify`` (:706-771) cuts the ``C × h × w`` latent into ``p × p``
patches; a square latent gives ``N = (h/p)(w/p)`` tokens, a non-square one is zero-padded to
``max_seq = max_resolution[0]·max_resolution[1] / p²`` tokens (with a mask on the keys), and every
layer runs on all of them. ``x_embedder`` embeds them; the timestep (``t_embedder``) and the pooled CLIP
embedding (``p_embedder``) each go through a ``TimestepEmbedding`` once. ``caption_projection`` holds one
bias-free linear per block for the Llama hidden states (``caption_channels[1]`` → d, each applied to the
``L`` Llama tokens of the layer ``llama_layers[i]`` picks: all of them run) and one for the ``T`` T5 tokens
(``caption_channels[0]`` → d). The dual-stream blocks see the image tokens and ``T + L`` carried text
tokens plus the block's own ``L`` Llama tokens (``T + 2L``, the last ``L`` dropped after each block); the
single-stream blocks see ``N + T + 2L`` tokens likewise; ``final_layer`` projects the ``N`` image tokens.
The rotary table (``pe_embedder``, ``rope``: an outer product by ``einsum``, then cos/sin) counts no MAC.

Block formulas: :mod:`flopcalc.formulas.hidream` (the MoE's routed experts are ``k`` of ``E`` per token,
whatever the routing). Run shape: ``text_len`` T5 tokens, ``text_len_2`` Llama tokens.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYERS, MAX_LAYERS, NULL, SIZE, SIZES, Config, Int, ListOf, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.hidream import (
    dual_stream_block, out_embed, single_stream_block,
)
from flopcalc.engine.registry import RunShape, register

#: ``HiDreamImageTransformer2DModel.__init__`` keyword defaults (transformer_hidream_image.py:607-624).
DEFAULTS = {
    "patch_size": None,
    "in_channels": 64,
    "out_channels": None,
    "num_layers": 16,
    "num_single_layers": 32,
    "attention_head_dim": 128,
    "num_attention_heads": 20,
    "caption_channels": None,
    "text_emb_dim": 2048,
    "num_routed_experts": 4,
    "num_activated_experts": 2,
    "axes_dims_rope": [32, 32],
    "max_resolution": [128, 128],
    "llama_layers": None,
    "force_inference_output": False,
}

#: ``HiDreamImageTimestepEmbed(frequency_embedding_size=256)``.
FREQUENCIES = 256

#: Every config key ``HiDreamImageTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("HiDreamImageTransformer2DModel", {
    "patch_size": SIZE | NULL, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "num_single_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "caption_channels": ListOf(SIZE, lo=2, hi=2) | NULL, "text_emb_dim": SIZE,
    "num_routed_experts": Int(0, 1024), "num_activated_experts": SIZE, "axes_dims_rope": SIZES,
    "max_resolution": ListOf(SIZE, lo=2, hi=2), "llama_layers": ListOf(Int(0, MAX_LAYERS), lo=0, hi=2 * MAX_LAYERS) | NULL,
    "force_inference_output": FLAG,
})


def _required(config: Config, key: str) -> Any:
    """A key whose class default (None) the real module cannot run with."""
    value = config[key]
    if value is None:
        raise ConfigError(f"{config.component}/config.json: {key!r} is null; HiDreamImageTransformer2DModel "
                          f"cannot be built or run without it: use the model's original config.json")
    return value


def experts(config: Config) -> tuple[int, int]:
    """(routed experts E, experts per token k); ``MoEGate``'s ``topk`` needs k ≤ E."""
    routed = count_int(config, "num_routed_experts")
    active = positive_int(config, "num_activated_experts")
    if routed and active > routed:
        raise ConfigError(f"{config.component}/config.json: num_activated_experts {active} exceeds "
                          f"num_routed_experts {routed} (MoEGate's top-k cannot pick more experts than there are)")
    return routed, active


def image_tokens(config: Config, latent_height: Any, latent_width: Any) -> Any:
    """``patchify``: ``(h/p)(w/p)`` tokens for a square latent, ``max_seq`` (the padded length) otherwise."""
    _required(config, "patch_size")
    p = positive_int(config, "patch_size")
    if latent_height == latent_width:
        return ops.exact_div(latent_height, p) * ops.exact_div(latent_width, p)
    rows, cols = positive_int_list(config, "max_resolution")
    max_seq = rows * cols // (p * p)
    tokens = ops.exact_div(latent_height, p) * ops.exact_div(latent_width, p)
    if isinstance(tokens, int) and tokens > max_seq:
        raise ConfigError(f"{config.component}/config.json: a {latent_height}×{latent_width} latent has {tokens} "
                          f"patches, more than the {max_seq} max_resolution {rows}×{cols} pads a non-square latent to")
    return max_seq


def _llama_layers(config: Config, blocks: int) -> list[int]:
    if blocks == 0:
        raise ConfigError(f"{config.component}/config.json: num_layers + num_single_layers is 0; "
                          "HiDreamImageTransformer2DModel.forward needs at least one block (it reads the Llama "
                          "states of the first)")
    layers = _required(config, "llama_layers")
    if len(layers) != blocks:
        raise ConfigError(f"{config.component}/config.json: llama_layers must name one Llama layer per block "
                          f"(num_layers + num_single_layers = {blocks}), got {len(layers)}")
    return list(layers)


#: A shape every config can take, for parameter counts: no tokens (any patch size divides an empty latent).
NOMINAL = RunShape(latent_height=0, latent_width=0, text_len=0, text_len_2=0)


@register("HiDreamImageTransformer2DModel", role="denoiser", defaults=DEFAULTS, nominal=NOMINAL,
          source="diffusers/models/transformers/transformer_hidream_image.py")
def hidream_image_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    _required(config, "patch_size")
    p = positive_int(config, "patch_size")
    c = positive_int(config, "in_channels")
    out = config["out_channels"] or c
    t5_dim, llama_dim = _required(config, "caption_channels")
    routed, active = experts(config)
    dual, single = count_int(config, "num_layers"), count_int(config, "num_single_layers")
    _llama_layers(config, dual + single)
    n = image_tokens(config, shape.latent_height, shape.latent_width)
    if dual == 0 and shape.latent_height != shape.latent_width:
        raise ConfigError(f"{config.component}/config.json: num_layers is 0; HiDreamImageTransformer2DModel.forward "
                          "then fails on a non-square latent (it extends the padding mask by the text of the last "
                          "dual-stream block, transformer_hidream_image.py:905-911)")
    t, l = shape.text_len, shape.text_len_2
    text = t + 2 * l
    projections = [Node(str(i), children=(Node("linear", ops.linear(l, llama_dim, dim, bias=False)),))
                   for i in range(dual + single)]
    projections.append(Node(str(dual + single), children=(Node("linear", ops.linear(t, t5_dim, dim, bias=False)),)))
    return Node("transformer", children=(
        Node("t_embedder", children=(mlp_embedder("timestep_embedder", FREQUENCIES, dim),)),
        Node("p_embedder", children=(mlp_embedder("pooled_embedder", positive_int(config, "text_emb_dim"), dim),)),
        Node("x_embedder", children=(Node("proj", ops.linear(n, c * p * p, dim)),)),
        module_list("double_stream_blocks", [dual_stream_block(
            tokens=n, text_tokens=text, dim=dim, heads=heads, head_dim=head_dim, routed=routed, active=active)] * dual),
        module_list("single_stream_blocks", [single_stream_block(
            tokens=n + text, dim=dim, heads=heads, head_dim=head_dim, routed=routed, active=active)] * single),
        out_embed("final_layer", tokens=n, dim=dim, out_features=p * p * out),
        module_list("caption_projection", projections),
    ), formula="hidream_image_transformer")

