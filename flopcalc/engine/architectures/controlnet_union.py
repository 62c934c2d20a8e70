"""ControlNet-Union (ControlNet++ / ProMax): ``ControlNetUnionModel`` (diffusers
``models/controlnets/controlnet_union.py``).

A :class:`~flopcalc.engine.architectures.controlnet` ``ControlNetModel`` (the UNet's encoder copy,
``controlnet_cond_embedding``, the zero convolutions: built from the same keys by the same
``get_down_block`` / ``UNetMidBlock2DCrossAttn``, lines 306-410, assembled by
:func:`flopcalc.engine.architectures.controlnet.controlnet_model`) plus the union's fusion of the
``M`` control images it gets (``forward``, lines 541-720):

* ``control_add_embedding`` (``TimestepEmbedding(A·K → E)``, line 300): the sinusoidal embedding
  (``control_type_proj``, no MACs) of the K-hot ``control_type`` vector (``num_control_type`` K,
  ``addition_time_embed_dim`` A), added to the time embedding E = 4·c₀;
* ``controlnet_cond_embedding`` once per control image (M calls: its work M times, its weights once);
* ``transformer_layes``: ``num_trans_layer`` ``ResidualAttentionBlock`` s (width C =
  ``num_trans_channel``, ``num_trans_head`` heads; lines 52-83) on M + 1 vectors (each condition's
  spatial mean plus its ``task_embedding`` row, and the latent's mean): ``ln_1``, ``nn.MultiheadAttention``
  (packed q/k/v ``3C²`` and output ``C²`` per vector, applied functionally by
  ``F.multi_head_attention_forward``, so no submodule runs), ``ln_2``, a 4× QuickGELU MLP (``c_fc``,
  ``c_proj``). The module is built with ``batch_first=False`` on a ``(batch, M + 1, C)`` input: it
  attends over the batch axis with M + 1 as its batch; at the batch-1 forwards flopcalc counts, each
  of the M + 1 vectors attends to itself alone;
* ``spatial_ch_projs`` (``Linear(C → num_proj_channel)``) once per condition.

MACs beyond the ControlNet: ``A·K·E + E² + (M−1)·W_cond + L·(M+1)·(12C² + 2C) + M·C·P``
(``W_cond`` one conditioning-embedding call). flopcalc plans one control image and mode (M = 1), what a
call with a single ``control_image`` / ``control_mode`` runs.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.controlnet import _SHARED, controlnet_model
from flopcalc.engine.architectures.controlnet import DEFAULTS as CONTROLNET_DEFAULTS
from flopcalc.engine.config import SIZE, SIZES, Choice, Config, count_int, declare_keys, declared_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.hunyuan_video_vae import sum_calls
from flopcalc.engine.registry import RunShape, register

#: Block kinds this module builds.
BLOCK_KINDS = block_kinds("residual_attention_block")

#: Control images (and modes) per call: one, as a call with one ``control_image`` / ``control_mode`` runs.
CONDITIONS = 1

#: The ControlNet keys the union shares (its ``__init__`` has no ``mid_block_type``: always
#: ``UNetMidBlock2DCrossAttn``, line 398).
_KEYS = tuple(key for key in _SHARED if key != "mid_block_type")

#: ``ControlNetUnionModel.__init__`` keyword defaults (controlnet_union.py:170-212): the shared keys'
#: (the same values as ``ControlNetModel``'s), its own conditioning-embedding widths and the union's five.
DEFAULTS = {**{key: CONTROLNET_DEFAULTS[key] for key in _KEYS}, "conditioning_channels": 3,
            "conditioning_embedding_out_channels": [48, 96, 192, 384], "global_pool_conditions": False,
            "controlnet_conditioning_channel_order": "rgb", "num_control_type": 6, "num_trans_channel": 320,
            "num_trans_head": 8, "num_trans_layer": 1, "num_proj_channel": 320}

#: Every config key ``ControlNetUnionModel`` reads (assembler and pipeline plans).
declare_keys("ControlNetUnionModel", {
    **{key: spec for key, spec in declared_keys("ControlNetModel").items() if key != "mid_block_type"},
    "conditioning_embedding_out_channels": SIZES, "controlnet_conditioning_channel_order": Choice("rgb"),
    "num_control_type": SIZE, "num_trans_channel": SIZE, "num_trans_head": SIZE, "num_trans_layer": SIZE,
    "num_proj_channel": SIZE,
})


def _controlnet_config(config: Config) -> Config:
    """The ``ControlNetModel`` config with the same encoder: every shared key as the union sets it,
    its mid block ``UNetMidBlock2DCrossAttn``."""
    values: dict[str, Any] = {key: config[key] for key in _KEYS}
    values.update(_class_name="ControlNetModel", mid_block_type="UNetMidBlock2DCrossAttn",
                  conditioning_channels=config["conditioning_channels"],
                  conditioning_embedding_out_channels=config["conditioning_embedding_out_channels"],
                  global_pool_conditions=config["global_pool_conditions"])
    return Config(config.component, values, CONTROLNET_DEFAULTS)


def residual_attention_block(tokens: Any, width: int, heads: int) -> Node:
    """``ResidualAttentionBlock`` (controlnet_union.py:52-83) on ``tokens`` vectors of one position
    each (``batch_first=False``: a length-1 sequence per vector at batch 1)."""
    head_dim = ops.exact_div(width, heads)
    # in_proj_weight / in_proj_bias: bare parameters, F.linear on the tokens; out_proj: an nn.Linear subclass
    # applied by F.linear (no module call)
    in_proj = ops.matmul(tokens, width, 3 * width) + ops.parameters(3 * width * width + 3 * width)
    return Node("block", children=(
        Node("ln_1", ops.layer_norm(tokens, width)),
        Node("attn", in_proj + ops.attention(1, 1, heads, head_dim) * tokens, children=(
            Node("out_proj", ops.linear(tokens, width, width, thop_hooked=False)),)),
        Node("mlp", children=(
            Node("c_fc", ops.linear(tokens, width, 4 * width)),
            Node("gelu", ops.activation(tokens * 4 * width)),
            Node("c_proj", ops.linear(tokens, 4 * width, width)),
        )),
        Node("ln_2", ops.layer_norm(tokens, width)),
    ), formula="residual_attention_block")


@register("ControlNetUnionModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_union.py")
def controlnet_union_model(config: Config, shape: RunShape) -> Node:
    if config["addition_time_embed_dim"] is None:
        raise ConfigError(f"{config.component}/config.json: ControlNetUnionModel needs addition_time_embed_dim "
                          "(its control_type_proj embeds the control type with it)")
    base = controlnet_model(_controlnet_config(config), shape)
    width = positive_int(config, "num_trans_channel")
    kinds = positive_int(config, "num_control_type")
    embed = 4 * int(config["block_out_channels"][0])
    m = CONDITIONS
    children = [sum_calls([(c, m)]) if c.name == "controlnet_cond_embedding" else c for c in base.children]
    children += [
        mlp_embedder("control_add_embedding", positive_int(config, "addition_time_embed_dim") * kinds, embed),
        module_list("transformer_layes", [residual_attention_block(m + 1, width, positive_int(config, "num_trans_head"))]
                    * count_int(config, "num_trans_layer")),
        Node("spatial_ch_projs", ops.linear(m, width, positive_int(config, "num_proj_channel"))),
    ]
    return Node("controlnet", ops.parameters(kinds * width), tuple(children), formula="controlnet_union")
