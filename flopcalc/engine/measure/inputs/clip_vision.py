"""Input builder for the CLIP vision tower ``CLIPVisionModelWithProjection`` (transformers
``models/clip/modeling_clip.py``), the image encoder of Wan 2.1 image-to-video (imported by ``measure.py``).

``WanImageToVideoPipeline.encode_image`` runs it on the image processor's output, ``pixel_values`` of
``image_size × image_size`` (the processor resizes and crops to it), with ``output_hidden_states=True``
(no extra work). Nothing needs help on meta.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, input_builder


@input_builder("CLIPVisionModelWithProjection", settings=("height", "width"))
def _clip_vision_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """pixel_values (1, num_channels, height, width); height and width must be the config's image_size
    (the position embeddings are not interpolated)."""
    size = model.config.image_size
    if (s["height"], s["width"]) != (size, size):
        raise ValueError(f"CLIPVisionModelWithProjection takes {size}x{size} images, got {s['height']}x{s['width']}")
    return {"pixel_values": TensorSpec((1, model.config.num_channels, s["height"], s["width"]))}
