"""T2I-Adapter (``T2IAdapter``): how it is fed on meta. ``forward(x)`` takes the control image
``(1, in_channels, H, W)``, resized by the pipeline to the generated size
(``_preprocess_adapter_image`` in ``pipelines/t2i_adapter/pipeline_stable_diffusion_adapter.py``)."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, input_builder


@input_builder("T2IAdapter", settings=("height", "width"))
def _t2i_adapter_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """``x`` ``(1, in_channels, H, W)``."""
    return {"x": _f32(1, _cfg(model, "in_channels"), s["height"], s["width"])}
