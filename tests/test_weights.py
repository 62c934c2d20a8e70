"""Weights in memory: exact against the real modules' parameters and buffers under the libraries' loading rules."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from live_support import REPO, measure  # noqa: F401  (skips without torch/diffusers/transformers)
from measure_weights import converted_linears, group_offload_blocks, keep_in_fp32, loaded_bytes, offloaded_modules

from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.quant_formats import FORMATS as LIBRARY_FORMATS
from flopcalc.gpu_memory.quantized import Linears
from flopcalc.gpu_memory.weights import component_weights

COMPONENTS = sorted(p.parent for p in (REPO / "model_cards").glob("*/*/config.json")) + sorted(
    p.parent for p in (REPO / "validation" / "configs").glob("*/config.json"))


@lru_cache(maxsize=None)
def _distinct(path: Path) -> bool:
    """One component per distinct config content (sd1.5 and sd2.1 share a VAE config, ...)."""
    text = (path / "config.json").read_text()
    first = next(p for p in COMPONENTS if (p / "config.json").read_text() == text)
    return first == path


@pytest.mark.parametrize("folder", [p for p in COMPONENTS if _distinct(p)],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_weight_bytes_are_exact_for_every_dtype(folder):
    import warnings

    warnings.filterwarnings("ignore")
    model = _own_modules(measure.build_model(folder))
    config = json.loads((folder / "config.json").read_text())
    for dtype in ("bf16", "fp16", "fp32"):
        real = loaded_bytes(model, dtype)
        ours = component_weights(config, component=folder.name, dtype=dtype)
        assert ours.params == real["params"], dtype
        assert ours.buffer_bytes == real["buffer_bytes"], (dtype, real["buffers"])
        assert ours.bytes == real["bytes"], dtype
        assert sorted(b.numel for b in ours.buffers) == sorted(n for _, n, _, _ in real["buffers"])
        _check_largest_module(model, ours, dtype)
        # block-level group offloading's groups, as bytes (parameterless entries and the top-level order aside)
        assert sorted(b for b in ours.block_bytes if b) == sorted(b for b in group_offload_blocks(model, dtype) if b)
    _check_quantized(model, config, folder.name, loaded_bytes(model, "bf16")["bytes"])


def _own_modules(model):
    """The model without the modules its builder attached from another component (``_measure_shared``: the Z-Image
    ControlNet runs the transformer's embedders, which are the transformer's weights in memory)."""
    import torch

    for name in getattr(model, "_measure_shared", ()):
        if name in model._modules:
            model._modules[name] = torch.nn.Identity()
        else:
            model._parameters.pop(name, None)
    return model


#: The most the enclosing modules' direct parameters add to the largest module while it runs under sequential
#: offload, over every bundled component (SigLIP's attention-pooling head: nn.MultiheadAttention holds its
#: in-projection as direct parameters while its out_proj runs, 7.09% over the largest MLP linear; HunyuanDiT's
#: text_embedding_padding beside text_embedder: 2.03%).
ENCLOSING_SHARE = 0.071


def _check_largest_module(model, ours, dtype):
    """The largest single module (what sequential offload moves at once) is exact, parameters and bytes; the
    enclosing modules' direct parameters add at most :data:`ENCLOSING_SHARE` (the bound the docs state)."""
    real = offloaded_modules(model, dtype)
    path, numel, nbytes = real["largest"]
    assert (ours.largest_module_params, ours.largest_module_bytes) == (numel, nbytes), (dtype, path)
    assert real["most"] <= real["stack"] <= real["most"] * (1 + ENCLOSING_SHARE), path


def _check_quantized(model, config, component, bf16_bytes):
    """The trees' nn.Linear weight elements are the real module's; each library format converts exactly the
    nn.Linear layers the library's skip rules leave (elements and count), and the component's bytes are its bf16
    bytes with those layers' weights in the format's layout (GGUF: ``test_gguf.py``, against diffusers' loader)."""
    keep = keep_in_fp32(model, "bf16")
    linear = converted_linears(model, "quanto")["linear"]
    ours = component_weights(config, component=component, dtype="bf16")
    assert ours.linear_params == sum(i * o for _, i, o in linear)
    for fmt in LIBRARY_FORMATS.values():
        real = converted_linears(model, fmt.library)
        ours = component_weights(config, component=component, dtype=fmt.name)
        layers = [Linears(path, 1, i, o, any(part in keep for part in path.split("."))) for path, i, o in
                  real["converted"]]
        stored = fmt.stored(layers)
        assert ours.quantized_params == sum(q * lin.d_in * lin.d_out for lin, (_, q) in zip(layers, stored)), fmt.name
        assert ours.quantized_layers == sum(q for _, q in stored), fmt.name
        storage = sum(b - (4 if lin.kept else 2) * lin.elements for lin, (b, _) in zip(layers, stored))
        assert ours.bytes == bf16_bytes + storage, fmt.name


def test_kept_float32_modules_are_counted():
    cfg = json.loads((REPO / "model_cards" / "wan2.1-t2v-1.3b" / "transformer" / "config.json").read_text())
    bf16 = component_weights(cfg, component="transformer", dtype="bf16")
    assert bf16.params_fp32 > 0 and bf16.param_bytes == 2 * bf16.params + 2 * bf16.params_fp32
    t5 = json.loads((REPO / "model_cards" / "flux-dev" / "text_encoder_2" / "config.json").read_text())
    assert component_weights(t5, component="t", dtype="bf16").params_fp32 == 0
    assert component_weights(t5, component="t", dtype="fp16").params_fp32 > 0


def test_unknown_dtypes_are_refused():
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    with pytest.raises(FlopcalcError, match="bnb-int8/nf4"):
        component_weights(cfg, component="transformer", dtype="int4")
