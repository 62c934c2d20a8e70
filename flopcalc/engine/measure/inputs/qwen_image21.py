"""Input builders for Qwen-Image 2.1 (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``QwenImage21Transformer2DModel`` and ``AutoencoderKLQwenImage21``. The text encoder,
``Qwen3VLForConditionalGeneration``, has its builder in ``text_encoders.py``.

Settings are pipeline level: ``height``/``width`` in pixels (the latent is ``H/16 × W/16``: the pipeline's
``vae_scale_factor`` 16), ``text_len`` the Qwen3-VL tokens the transformer sees (after the system turn is dropped).

One thing needs help on meta. The transformer reads its ``img_mask`` (which positions of the vision-language
sequence are image slots) as data: ``torch.where`` / ``repeat_interleave`` build the joint sequence's image mask
from it, ``QwenImage21Rope`` and ``_qwenimage21_prefix_segments`` call ``tolist()``, ``build_token_metadata`` calls
``nonzero`` (transformer_qwenimage21.py:309-324, 680-713, 842-860, 925-967). None of that holds a matmul, and a
meta tensor cannot answer it. The builder passes ``img_mask`` as a :class:`HostMask`: a real CPU bool tensor, as
the pipeline builds it (``T`` text positions, then ``N/4`` image slots: pipeline_qwenimage21.py:749-755), whose
derived masks stay on the CPU; the one op that mixes such a mask with the meta activations (``torch.where`` in
``_select_modulation_rows``, :238-254) gets the mask moved to meta. Every other tensor is meta; nothing is
patched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, input_builder

#: ``QwenImage21Pipeline.vae_scale_factor`` (pipeline_qwenimage21.py:207).
VAE_SCALE_FACTOR = 16
#: Latent tokens per image slot of the vision-language sequence (``_IMG_TOKENS_PER_SLOT``).
TOKENS_PER_SLOT = 4
#: The optional setting ``kv_cache``: 1 is the pipeline's first denoising step (``kv_cache_mode="extract"``), 2 a
#: later one (``"cached"``); absent, a forward without a cache (``use_kv_cache=False``).
KV_MODES = {1: "extract", 2: "cached"}


class HostMask(torch.Tensor):
    """A CPU mask among meta tensors (see the module doc): results on the CPU stay host masks, and
    ``torch.where`` with a CPU condition over meta values moves the condition to meta."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (func is torch.where and len(args) == 3 and isinstance(args[0], torch.Tensor)
                and args[0].device.type == "cpu"
                and any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args[1:])):
            args = (args[0].as_subclass(torch.Tensor).to("meta"), *args[1:])
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        return tree_map(_host, out)


def _host(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and not isinstance(value, HostMask):
        return value.as_subclass(HostMask)
    return value


def _image_slots_mask(text_len: int, tokens: int) -> torch.Tensor:
    """``img_mask`` of a text-to-image call: ``text_len`` text positions, then one slot per 2×2 group of the
    ``tokens`` target latents (``append_target_slots``)."""
    return torch.cat([torch.zeros(1, text_len, dtype=torch.bool),
                      torch.ones(1, tokens // TOKENS_PER_SLOT, dtype=torch.bool)], dim=1).as_subclass(HostMask)


@input_builder("QwenImage21Transformer2DModel", settings=("height", "width", "text_len"), optional=("kv_cache",))
def _qwen_image21_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``QwenImage21Pipeline`` calls it at batch 1, text to image (pipeline_qwenimage21.py:784-795):
    hidden_states (1, N, in_channels·patch²) with ``N = (H/16)(W/16)``, encoder_hidden_states (1, text_len,
    context_in_dim), timestep (1,), img_shapes ``[[(1, H/16, W/16)]]``, img_mask (1, text_len + N/4) (a
    :class:`HostMask`), no encoder mask (``encode_prompt`` drops an all-ones one).

    With ``kv_cache`` (:data:`KV_MODES`): 1, ``kv_cache_mode="extract"`` with an empty ``QwenImage21KVCache``; 2,
    ``"cached"`` with a cache holding every layer's text keys and values ``(1, text_len, heads, head_dim)`` (meta
    tensors), as the first step leaves them."""
    from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21KVCache

    lat_h = _exact_div(s["height"], VAE_SCALE_FACTOR, "height")
    lat_w = _exact_div(s["width"], VAE_SCALE_FACTOR, "width")
    tokens, text_len = lat_h * lat_w, s["text_len"]
    if tokens % TOKENS_PER_SLOT:
        raise ValueError(f"the {lat_h}×{lat_w} latent does not split into 2×2 image slots (height and width must be "
                         f"multiples of {2 * VAE_SCALE_FACTOR})")
    patch = _cfg(model, "patch_size")
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, tokens, _cfg(model, "in_channels") * patch * patch)),
        "encoder_hidden_states": TensorSpec((1, text_len, _cfg(model, "context_in_dim"))),
        "timestep": TensorSpec((1,)),
        "img_mask": _image_slots_mask(text_len, tokens),
        "img_shapes": [[(1, lat_h, lat_w)]],
    }
    kv = s.get("kv_cache")
    if kv:
        if kv not in KV_MODES:
            raise ValueError(f"kv_cache must be one of {sorted(KV_MODES)}, got {kv}")
        heads, head_dim = _cfg(model, "num_attention_heads"), _cfg(model, "attention_head_dim")

        class _Cache(QwenImage21KVCache):  # named in the measurement's inputs by what it holds
            def __repr__(self) -> str:
                return f"QwenImage21KVCache of {text_len} text tokens per layer ({KV_MODES[kv]})"

        cache = _Cache(len(model.transformer_blocks))
        if KV_MODES[kv] == "cached":
            for layer in cache.layer_caches:
                layer.store(torch.zeros(1, text_len, heads, head_dim, device="meta"),
                            torch.zeros(1, text_len, heads, head_dim, device="meta"))
        inputs["kv_cache"] = cache
        inputs["kv_cache_mode"] = KV_MODES[kv]
    return inputs


@input_builder("AutoencoderKLQwenImage21", settings=("height", "width"), calls=("decode", "encode"))
def _qwen_image21_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, z_dim, 1, H/16, W/16), the unpacked latent the pipeline decodes (pipeline_qwenimage21.py:840-853);
    encode: x (1, in_channels, 1, H, W), a condition image as ``preprocess(...).unsqueeze(2)`` gives it (RGBA: 4
    channels)."""
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), 1, s["height"], s["width"]))}
    return {"z": TensorSpec((1, _cfg(model, "z_dim"), 1, _exact_div(s["height"], VAE_SCALE_FACTOR, "height"),
                            _exact_div(s["width"], VAE_SCALE_FACTOR, "width")))}


_qwen_image21_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "Inputs as QwenImage21Pipeline passes them (text to image). img_mask is a real CPU bool tensor (a HostMask: "
    "text positions, then the image slots) so that forward's mask bookkeeping (repeat_interleave, nonzero, tolist) "
    "runs; the one torch.where mixing it with meta activations gets it on meta. Nothing is patched."
)
