"""Weights of the add-on components that sit in pipeline folders under validation/configs (``test_weights.py``
reads the folders' top-level configs only): the SD3 ControlNets, the SDXL ControlNet-Union, FLUX.1 Redux's SigLIP
encoder and embedder, against the real modules on meta, every dtype and quantized format."""

from __future__ import annotations

import pytest

import test_weights as weights  # noqa: E402  (skips without torch)

FOLDERS = ["sd3-controlnet/controlnet", "sd3-controlnet-inpainting/controlnet",
           "controlnet-union-sdxl-promax/controlnet", "flux1-redux-dev/image_encoder", "flux1-redux-dev/image_embedder"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_add_on_weights_are_exact(folder):
    weights.test_weight_bytes_are_exact_for_every_dtype(weights.REPO / "validation" / "configs" / folder)
