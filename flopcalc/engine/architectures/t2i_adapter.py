"""T2I-Adapter: ``T2IAdapter`` (diffusers ``models/adapter.py``), run once per control image; its
features are added to the UNet's down-block outputs (elementwise: no MACs in the UNet).

On an ``H × W`` image of ``in_channels`` channels, ``PixelUnshuffle(d)`` (no MACs) makes
``in_channels·d²`` channels at ``H/d × W/d``; then, per ``adapter_type``:

* ``full_adapter`` (``FullAdapter``, adapter.py:303): a 3×3 ``conv_in`` to ``c₀``; ``body[0]``
  ``AdapterBlock(c₀, c₀)``; ``body[i]`` ``AdapterBlock(cᵢ₋₁, cᵢ, down)``;
* ``full_adapter_xl`` (``FullAdapterXL``, adapter.py:353): ``conv_in``; blocks ``(c₀, c₀)``,
  ``(c₀, c₁)``, ``(c₁, c₂, down)``, then ``(cᵢ, cᵢ)``;
* ``light_adapter`` (``LightAdapter``, adapter.py:481): no ``conv_in``; ``LightAdapterBlock(in·d², c₀)``,
  ``(cᵢ, cᵢ₊₁, down)``, and a last ``(c_last, c_last, down)``.

``AdapterBlock``: an ``AvgPool2d(2, ceil_mode=True)`` when ``down`` (the map halves, rounding up; no
MACs, ``out numel`` ops in thop's convention), a 1×1 ``in_conv`` when the widths differ, and
``num_res_blocks`` ``AdapterResnetBlock`` (3×3 ``block1``, 1×1 ``block2``). ``LightAdapterBlock``: the
pool, a 1×1 ``in_conv`` to ``out/4``, ``num_res_blocks`` ``LightAdapterResnetBlock`` (two 3×3 convs at
``out/4``), a 1×1 ``out_conv``.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import LAYERS, SIZE, SIZES, TEXT, Config, declare_keys, positive_int
from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.engine.registry import RunShape, register

BLOCK_KINDS = block_kinds("adapter_block")

#: ``T2IAdapter.__init__`` keyword defaults (adapter.py:248-255).
DEFAULTS = {
    "in_channels": 3,
    "channels": [320, 640, 1280, 1280],
    "num_res_blocks": 2,
    "downscale_factor": 8,
    "adapter_type": "full_adapter",
}


def _conv(name: str, c_in: int, c_out: int, kernel: int, h: Any, w: Any) -> Node:
    return Node(name, ops.conv2d(c_in, c_out, kernel, h, w))


def _half(size: Any) -> Any:
    """``AvgPool2d(kernel_size=2, stride=2, ceil_mode=True)``: ``⌈size / 2⌉``."""
    return ops.conv_output_size(size + 1, 2, 2)


def _block(c_in: int, c_out: int, n_res: int, h: Any, w: Any, *, down: bool, light: bool) -> tuple[Node, Any, Any]:
    """One ``AdapterBlock`` / ``LightAdapterBlock`` and the size it leaves."""
    children = []
    if down:
        h, w = _half(h), _half(w)
        children.append(Node("downsample", Cost(thop_extra=c_in * h * w)))
    if light:
        mid = c_out // 4
        children.append(_conv("in_conv", c_in, mid, 1, h, w))
        res = Node("", children=(_conv("block1", mid, mid, 3, h, w), _conv("block2", mid, mid, 3, h, w)))
        children += [module_list("resnets", [res] * n_res), _conv("out_conv", mid, c_out, 1, h, w)]
    else:
        if c_in != c_out:
            children.append(_conv("in_conv", c_in, c_out, 1, h, w))
        res = Node("", children=(_conv("block1", c_out, c_out, 3, h, w), _conv("block2", c_out, c_out, 1, h, w)))
        children.append(module_list("resnets", [res] * n_res))
    return Node("", children=tuple(children), formula="adapter_block"), h, w


def _layout(kind: str, c: list[int], c_in: int) -> list[tuple[int, int, bool]]:
    """``(in, out, down)`` of each body block."""
    if kind == "full_adapter":
        return [(c[0], c[0], False)] + [(c[i - 1], c[i], True) for i in range(1, len(c))]
    if kind == "full_adapter_xl":
        return [(c[i - 1], c[i], False) if i == 1 else (c[i - 1], c[i], True) if i == 2 else (c[i], c[i], False)
                for i in range(len(c))]
    return ([(c_in, c[0], False)] + [(c[i], c[i + 1], True) for i in range(len(c) - 1)]
            + [(c[-1], c[-1], True)])


#: Every config key ``T2IAdapter`` reads (assembler and plans), as :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("T2IAdapter", {
    "in_channels": SIZE, "channels": SIZES, "num_res_blocks": LAYERS, "downscale_factor": SIZE, "adapter_type": TEXT,
})

@register("T2IAdapter", role="adapter", defaults=DEFAULTS, source="diffusers/models/adapter.py")
def t2i_adapter(config: Config, shape: RunShape) -> Node:
    kind = config["adapter_type"]
    if kind not in ("full_adapter", "full_adapter_xl", "light_adapter"):
        raise ConfigError(f"{config.component}/config.json: adapter_type {kind!r} is not one of full_adapter, "
                          "full_adapter_xl, light_adapter (T2IAdapter raises ValueError)")
    d = positive_int(config, "downscale_factor")
    c = [int(x) for x in config["channels"]]
    n_res = positive_int(config, "num_res_blocks")
    for side, name in ((shape.height, "height"), (shape.width, "width")):
        if isinstance(side, int) and side % d:
            raise ConfigError(f"{config.component}: the control image {name} {side} must be a multiple of the "
                              f"adapter's downscale_factor {d} (PixelUnshuffle)")
    h, w = ops.exact_div(shape.height, d), ops.exact_div(shape.width, d)
    c_in = positive_int(config, "in_channels") * d * d
    children = []
    if kind != "light_adapter":
        children.append(_conv("conv_in", c_in, c[0], 3, h, w))
    body = []
    for b_in, b_out, down in _layout(kind, c, c_in):
        node, h, w = _block(b_in, b_out, n_res, h, w, down=down, light=kind == "light_adapter")
        body.append(node)
    children.append(module_list("body", body))
    return Node("t2i_adapter", children=(Node("adapter", children=tuple(children)),), formula="t2i_adapter")
