"""Input builders for ``HunyuanVideo15Transformer3DModel`` (with its model builder) and
``AutoencoderKLHunyuanVideo15`` (imported by
``flopcalc.engine.measure.harness``; see validation/README.md).

Settings are pipeline level: ``height``/``width`` in pixels and ``num_frames`` (the latent is
``(num_frames - 1)//4 + 1 × H/16 × W/16``, ``HunyuanVideo15Pipeline.prepare_latents`` with its VAE
factors 4 and 16), ``text_len`` Qwen2.5-VL tokens, ``text_len_2`` byT5 tokens, ``image_tokens`` image
tokens (the pipeline's ``vision_num_semantic_tokens``, zeros for text-to-video).

Help on meta. ``forward`` (transformer_hunyuan_video15.py:715-776) branches on the data
(``if torch.all(image_embeds == 0)``) and reorders the three token streams with boolean masks (one of
them, the image mask, built inside ``forward`` by ``torch.zeros``), data-dependent work a meta tensor
cannot do. The model builder hooks a :class:`KnownValues` torch-function mode around each forward: it
records the value of the tensors whose every element is known (the inputs: the Qwen mask all ones,
the glyph mask all zeros, ``image_embeds`` all zeros, as ``HunyuanVideo15Pipeline`` passes them for a
prompt without quoted text; and what ``torch.zeros`` / ``ones`` / ``==`` / ``~`` / ``torch.all`` /
casts make of them), answers ``bool()`` of such a tensor, and indexes with such a mask by selecting all
or nothing. Everything else runs untouched on meta; the model's code is not patched, and none of the
answered operations is a matmul. Whatever the masks hold, the joined sequence has
``text_len + text_len_2 + image_tokens`` tokens.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder, model_builder

#: ``HunyuanVideo15Pipeline`` without a VAE: ``vae_scale_factor_spatial`` 16, ``vae_scale_factor_temporal`` 4.
SPATIAL = 16
TEMPORAL = 4
#: The inputs' known values (see the module doc).
KNOWN_INPUTS = {"encoder_attention_mask": 1, "encoder_attention_mask_2": 0, "image_embeds": 0}
_FILLS = {torch.zeros: 0, torch.zeros_like: 0, torch.ones: 1, torch.ones_like: 1}
_CASTS = (torch.Tensor.bool, torch.Tensor.float, torch.Tensor.long, torch.Tensor.to, torch.Tensor.contiguous)


class KnownValues(TorchFunctionMode):
    """Tracks tensors whose every element equals a known value (see the module doc). It holds them weakly: a
    tensor the model frees is freed (the activation peaks of validation/measure_activations.py run through this
    mode), and its entry goes with it, so that a later tensor given the same ``id`` is not taken for it."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[int, tuple[weakref.ref, float]] = {}  # id → (a weak reference to the tensor, its value)

    def know(self, tensor: torch.Tensor, value: float) -> None:
        key = id(tensor)
        self.values[key] = (weakref.ref(tensor, lambda _, key=key: self.values.pop(key, None)), value)

    def value(self, tensor) -> float | None:
        entry = self.values.get(id(tensor)) if isinstance(tensor, torch.Tensor) else None
        return None if entry is None or entry[0]() is not tensor else entry[1]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        first = args[0] if args else None
        known = self.value(first)
        if func is torch.Tensor.__bool__ and known is not None:
            return bool(known)
        if func is torch.Tensor.__getitem__ and self.value(args[1]) is not None:
            selected = first if self.value(args[1]) else first[: 0]
            if known is not None:
                self.know(selected, known)
            return selected
        out = func(*args, **kwargs)
        if func in _FILLS:
            self.know(out, _FILLS[func])
        elif known is not None and isinstance(out, torch.Tensor):
            if func in _CASTS:
                self.know(out, known)
            elif func in (torch.Tensor.__invert__, torch.Tensor.bitwise_not, torch.Tensor.logical_not):
                self.know(out, not known)
            elif func is torch.Tensor.__eq__ and isinstance(args[1], (int, float)):
                self.know(out, known == args[1])
            elif func in (torch.all, torch.Tensor.all):
                self.know(out, known)
        elif isinstance(out, tuple) and func is torch.Tensor.unbind and known is not None:
            for row in out:
                self.know(row, known)
        return out


def _enter(model: nn.Module, args: tuple, kwargs: dict):
    mode = KnownValues()
    for name, value in KNOWN_INPUTS.items():
        if isinstance(kwargs.get(name), torch.Tensor):
            mode.know(kwargs[name], value)
    model._known_values = mode
    mode.__enter__()


def _exit(model: nn.Module, args: tuple, kwargs: dict, output):
    model._known_values.__exit__(None, None, None)
    del model._known_values


@model_builder("HunyuanVideo15Transformer3DModel")
def _build(config_dir: Path) -> nn.Module:
    """The real class from ``config.json`` on meta, with the :class:`KnownValues` hooks."""
    from diffusers import HunyuanVideo15Transformer3DModel

    config = HunyuanVideo15Transformer3DModel.load_config(str(config_dir))
    with torch.device("meta"):
        model = HunyuanVideo15Transformer3DModel.from_config(config)
    model.register_forward_pre_hook(_enter, with_kwargs=True)
    model.register_forward_hook(_exit, with_kwargs=True)
    model._measure_notes = (
        "forward branches on image_embeds == 0 and reorders the token streams with boolean masks: a KnownValues "
        "torch-function mode (entered by forward hooks) answers those from the inputs' known values (Qwen mask all "
        "ones, glyph mask all zeros, image_embeds all zeros, as HunyuanVideo15Pipeline passes them for text-to-video) "
        "and what zeros/ones/==/~/all/casts make of them; boolean indexing selects all or nothing. The code is not "
        "patched; no answered operation is a matmul.",)
    return model


@input_builder("HunyuanVideo15Transformer3DModel",
               settings=("height", "width", "num_frames", "text_len", "text_len_2", "image_tokens"))
def _hunyuan_video15_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``HunyuanVideo15Pipeline`` calls it at batch 1 (pipeline_hunyuan_video1_5.py:776):
    hidden_states (1, in_channels, F_lat, H/16, W/16) (latents, condition latents and mask concatenated);
    image_embeds (1, image_tokens, image_embed_dim) zeros; timestep (1,); encoder_hidden_states (1,
    text_len, text_embed_dim) with its mask (1, text_len) int64; encoder_hidden_states_2 (1, text_len_2,
    text_embed_2_dim) with its mask (1, text_len_2) int64; no timestep_r."""
    frames = (s["num_frames"] - 1) // TEMPORAL + 1
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, _div(s["height"], SPATIAL, "height"),
                                     _div(s["width"], SPATIAL, "width"))),
        "image_embeds": TensorSpec((1, s["image_tokens"], _cfg(model, "image_embed_dim"))),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_embed_dim"))),
        "encoder_attention_mask": TensorSpec((1, s["text_len"]), torch.int64),
        "encoder_hidden_states_2": TensorSpec((1, s["text_len_2"], _cfg(model, "text_embed_2_dim"))),
        "encoder_attention_mask_2": TensorSpec((1, s["text_len_2"]), torch.int64),
    }


@input_builder("AutoencoderKLHunyuanVideo15", settings=("height", "width", "num_frames"), calls=("decode", "encode"),
               optional=("vae_tiling",))
def _hunyuan_video15_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode z (1, latent_channels, (F − 1)//t + 1, H/s, W/s) as
    ``HunyuanVideo15Pipeline`` decodes its latent (line 826; tiling off, as the pipeline leaves it); encode x
    (1, in_channels, F, H, W). ``vae_tiling`` 1 (optional) calls ``enable_tiling()`` first (its default tile size and
    overlap): the decode then runs on overlapping latent tiles, each with all its frames."""
    if s.get("vae_tiling"):
        model.enable_tiling()
        model._measure_notes = [("vae.enable_tiling() was called before measuring (default tile size and overlap): "
                                 "overlapping latent tiles ran, each with all its frames.")]
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    f, t = _cfg(model, "spatial_compression_ratio"), _cfg(model, "temporal_compression_ratio")
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), (s["num_frames"] - 1) // t + 1,
                             _div(s["height"], f, "height"), _div(s["width"], f, "width")))}
