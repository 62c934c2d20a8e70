"""ConsisID video transformer: ``ConsisIDTransformer3DModel`` (diffusers
``models/transformers/consisid_transformer_3d.py``), the CogVideoX transformer (``ConsisIDBlock`` is
``CogVideoXBlock``; :func:`flopcalc.engine.architectures.cogvideox.cogvideox_transformer`) with, when
``is_train_face``, the face modules of ``formulas/consisid.py``:

* ``local_facial_extractor`` on the face's ``id_cond`` and the ``LFE_num_scale`` ViT hidden states (``image_tokens``
  tokens each: the EVA-CLIP ViT-L/14 at 336 px the pipeline's ``consisid_utils`` runs outside the pipeline, 577), once
  per call: the pipeline passes one face for the whole (CFG-doubled) batch;
* ``num_layers // cross_attn_interval`` ``perceiver_cross_attention`` layers, one after every ``cross_attn_interval``-th
  block, on the video tokens of each row (their ``norm1`` and ``to_kv`` on the face's tokens once per call).

A batched call's rows after the first (``RunShape.split`` :data:`LATER_ROWS`) hold none of the once-per-call work.
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.architectures.cogvideox import DEFAULTS as COGVIDEOX_DEFAULTS, _pos_embedding, cogvideox_transformer
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.consisid import local_facial_extractor, perceiver_cross_attention

CLASS = "ConsisIDTransformer3DModel"
#: ``ConsisIDTransformer3DModel.__init__`` keyword defaults (consisid_transformer_3d.py:463-507), and the CogVideoX
#: keys the shared CogVideoX plan and assembler read that ConsisID does not take, at their "absent" values
#: (``ofs_embed_dim`` / ``patch_size_t`` None, ``patch_bias`` True: ``CogVideoXPatchEmbed(bias=True)``, :523).
DEFAULTS = {
    **{k: COGVIDEOX_DEFAULTS[k] for k in ("num_attention_heads", "attention_head_dim", "in_channels", "out_channels",
                                          "flip_sin_to_cos", "freq_shift", "time_embed_dim", "text_embed_dim",
                                          "num_layers", "dropout", "attention_bias", "sample_width", "sample_height",
                                          "sample_frames", "patch_size", "temporal_compression_ratio",
                                          "max_text_seq_length", "activation_fn", "timestep_activation_fn",
                                          "norm_elementwise_affine", "norm_eps", "spatial_interpolation_scale",
                                          "temporal_interpolation_scale", "use_rotary_positional_embeddings",
                                          "use_learned_positional_embeddings")},
    "ofs_embed_dim": None, "patch_size_t": None, "patch_bias": True,
    "is_train_face": False, "is_kps": False, "cross_attn_interval": 2, "cross_attn_dim_head": 128,
    "cross_attn_num_heads": 16, "LFE_id_dim": 1280, "LFE_vit_dim": 1024, "LFE_depth": 10, "LFE_dim_head": 64,
    "LFE_num_heads": 16, "LFE_num_id_token": 5, "LFE_num_querie": 32, "LFE_output_dim": 2048, "LFE_ff_mult": 4,
    "LFE_num_scale": 5, "local_face_scale": 1.0,
}
SOURCE = "diffusers/models/transformers/consisid_transformer_3d.py"
#: ``RunShape.split`` of a batched call's rows after the first.
LATER_ROWS = "consisid_later_rows"
#: The face ViT's tokens per hidden state (EVA-CLIP ViT-L/14 on the 336 × 336 face crop, consisid_utils.py:202:
#: 24² + 1), which the pipeline's caller passes as ``id_vit_hidden``.
FACE_VIT_TOKENS = 577

declare_keys(CLASS, {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE, "out_channels": SIZE,
    "num_layers": LAYERS, "patch_size": SIZE, "patch_size_t": SIZE | NULL, "patch_bias": FLAG,
    "text_embed_dim": SIZE, "time_embed_dim": SIZE, "ofs_embed_dim": SIZE | NULL,
    "activation_fn": TEXT, "attention_bias": FLAG, "norm_elementwise_affine": FLAG,
    "use_rotary_positional_embeddings": FLAG, "use_learned_positional_embeddings": FLAG,
    "sample_width": SIZE, "sample_height": SIZE, "sample_frames": SIZE, "max_text_seq_length": SIZE,
    "temporal_compression_ratio": SIZE, "spatial_interpolation_scale": RATIO, "temporal_interpolation_scale": RATIO,
    "is_train_face": FLAG, "is_kps": FLAG, "cross_attn_interval": SIZE, "cross_attn_dim_head": SIZE,
    "cross_attn_num_heads": SIZE, "LFE_id_dim": SIZE, "LFE_vit_dim": SIZE, "LFE_depth": SIZE, "LFE_dim_head": SIZE,
    "LFE_num_heads": SIZE, "LFE_num_id_token": SIZE, "LFE_num_querie": SIZE, "LFE_output_dim": SIZE,
    "LFE_ff_mult": SIZE, "LFE_num_scale": SIZE,
})


def check_face(config: Config) -> None:
    """What makes the face modules fail in the real forward: ``LFE_depth`` not a multiple of ``LFE_num_scale``
    (an assert), ``num_layers`` not a multiple of ``cross_attn_interval`` (the last block indexes a missing
    cross-attention), ``LFE_output_dim`` other than the cross-attention's ``kv_dim = int(inner · 2/3)``."""
    if not config["is_train_face"]:
        return
    depth, scales = positive_int(config, "LFE_depth"), positive_int(config, "LFE_num_scale")
    if depth % scales:
        raise ConfigError(f"{config.component}/config.json: LFE_depth {depth} is not a multiple of LFE_num_scale "
                          f"{scales} (LocalFacialExtractor asserts it)")
    layers, interval = count_int(config, "num_layers"), positive_int(config, "cross_attn_interval")
    if layers % interval:
        raise ConfigError(f"{config.component}/config.json: num_layers {layers} is not a multiple of "
                          f"cross_attn_interval {interval}: block {layers - 1 - (layers - 1) % interval} would use "
                          f"perceiver_cross_attention[{(layers - 1) // interval}], which is not built")
    inner = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    if positive_int(config, "LFE_output_dim") != int(inner / 3 * 2):
        raise ConfigError(f"{config.component}/config.json: LFE_output_dim {config['LFE_output_dim']} must be "
                          f"int({inner} / 3 · 2) = {int(inner / 3 * 2)}, the cross-attention's kv_dim")


@register(CLASS, role="denoiser", defaults=DEFAULTS, source=SOURCE,
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=2, text_len=8))
def consisid_transformer(config: Config, shape: RunShape) -> Node:
    base = cogvideox_transformer(config, replace(shape, split=None, image_tokens=None))
    # unlike CogVideoX's, ConsisID's norm_final runs on the text and video tokens together, then drops the text
    # (consisid_transformer_3d.py:725-727)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    n = frames * ops.exact_div(shape.latent_height, patch) * ops.exact_div(shape.latent_width, patch)
    norm = Node("norm_final", ops.layer_norm(n + shape.text_len, dim, affine=bool(config["norm_elementwise_affine"])))
    base = replace(base, children=tuple(norm if c.name == "norm_final" else c for c in base.children))
    if not config["is_train_face"]:
        return base
    check_face(config)
    per_call = shape.split != LATER_ROWS
    vit_tokens = FACE_VIT_TOKENS if shape.image_tokens is None else shape.image_tokens
    queries = positive_int(config, "LFE_num_querie")
    lfe = local_facial_extractor(
        id_dim=positive_int(config, "LFE_id_dim"), vit_dim=positive_int(config, "LFE_vit_dim"),
        depth=positive_int(config, "LFE_depth"), head_dim=positive_int(config, "LFE_dim_head"),
        heads=positive_int(config, "LFE_num_heads"), id_tokens=positive_int(config, "LFE_num_id_token"),
        queries=queries, output_dim=positive_int(config, "LFE_output_dim"),
        ff_mult=positive_int(config, "LFE_ff_mult"), scales=positive_int(config, "LFE_num_scale"),
        vit_tokens=vit_tokens)
    if not per_call:  # the extractor's parameters, none of its work
        lfe = _no_work(lfe)
    cross = perceiver_cross_attention(dim=dim, head_dim=positive_int(config, "cross_attn_dim_head"),
                                      heads=positive_int(config, "cross_attn_num_heads"), kv_dim=int(dim / 3 * 2),
                                      tokens=n, face_tokens=queries, per_call=per_call)
    count = count_int(config, "num_layers") // positive_int(config, "cross_attn_interval")
    return replace(base, children=base.children + (lfe, module_list("perceiver_cross_attention", [cross] * count)))


def _no_work(node: Node) -> Node:
    """``node`` with its parameters and none of its work (the once-per-call modules in a later row)."""
    cost = replace(node.cost, linear=0, conv=0, attention=0, functional=0, thop_extra=0, elementwise=0, scores=0)
    return replace(node, cost=cost, children=tuple(_no_work(c) for c in node.children))


loading_rules(CLASS, buffers=_pos_embedding, source="diffusers/models/embeddings.py:490 (CogVideoXPatchEmbed, as "
                                                    "CogVideoX's)")
