"""FLUX.1 Redux image embedder: ``ReduxImageEncoder`` (diffusers ``pipelines/flux/modeling_flux.py``,
lines 31-46).

Two linears with a SiLU between, on each of the N image-encoder tokens (729 for SigLIP so400m at 384²):
``redux_up`` (``redux_dim → 3·txt_in_features``) and ``redux_down`` (``3·txt_in_features →
txt_in_features``), giving N tokens of the T5 width that ``FluxPriorReduxPipeline`` appends to the
prompt embeddings. MACs: ``N·(3rt + 3t²)`` (``r`` = ``redux_dim``, ``t`` = ``txt_in_features``).
"""

from __future__ import annotations

from flopcalc.engine.config import SIZE, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.engine.registry import RunShape, register

#: ``ReduxImageEncoder.__init__`` keyword defaults (modeling_flux.py:33-37).
DEFAULTS = {"redux_dim": 1152, "txt_in_features": 4096}

#: Every config key ``ReduxImageEncoder`` reads.
declare_keys("ReduxImageEncoder", {"redux_dim": SIZE, "txt_in_features": SIZE})


@register("ReduxImageEncoder", role="image_encoder", defaults=DEFAULTS,
          source="diffusers/pipelines/flux/modeling_flux.py")
def redux_image_encoder(config: Config, shape: RunShape) -> Node:
    n = shape.seq_len
    if n is None:
        raise ConfigError(f"{config.component}: ReduxImageEncoder needs the image encoder's token count "
                          "(it runs on the image encoder's output, inside FluxPriorReduxPipeline)")
    r, t = positive_int(config, "redux_dim"), positive_int(config, "txt_in_features")
    return Node("image_embedder", ops.activation(n * 3 * t), children=(
        Node("redux_up", ops.linear(n, r, 3 * t)),
        Node("redux_down", ops.linear(n, 3 * t, t)),
    ), formula="redux_image_encoder")
