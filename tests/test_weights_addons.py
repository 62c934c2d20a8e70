"""Weights of the add-on components that sit in pipeline folders under validation/configs (``test_weights.py``
reads the folders' top-level configs only): the SD3 ControlNets, the SDXL ControlNet-Union, FLUX.1 Redux's SigLIP
encoder and embedder, the ControlNets and T2I-Adapter of their pipelines, the IP-Adapters' image encoders, against
the real modules on meta, every dtype and quantized format."""

from __future__ import annotations

import pytest

import test_weights as weights  # noqa: E402  (skips without torch)

FOLDERS = ["sd3-controlnet/controlnet", "sd3-controlnet-inpainting/controlnet",
           "controlnet-union-sdxl-promax/controlnet", "flux1-redux-dev/image_encoder", "flux1-redux-dev/image_embedder",
           # adapters counted in the weights (issue 22): ControlNets and the T2I-Adapter are components of their
           # pipelines, the IP-Adapters' image encoders are weighed when --ip-adapter loads them
           # (FLUX's and SANA's ControlNets are top-level configs there, in test_weights.py)
           "t2i-adapter-full/adapter", "sd-controlnet-canny/controlnet", "hunyuandit-v1.2-controlnet/controlnet",
           "qwen-image-controlnet-union/controlnet", "qwen-image-controlnet-inpaint/controlnet",
           "sd1.5-ip-adapter/image_encoder", "sdxl-base-ip-adapter/image_encoder"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_add_on_weights_are_exact(folder):
    weights.test_weight_bytes_are_exact_for_every_dtype(weights.REPO / "validation" / "configs" / folder)
