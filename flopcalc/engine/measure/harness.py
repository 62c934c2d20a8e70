"""Measure the FLOPs of real diffusers/transformers modules without weights.

A component is built from its ``config.json`` on the ``meta`` device (no weights, no memory),
fed meta tensors of the shapes its pipeline would feed it (batch 1), and counted twice:

* ``torch``: :class:`torch.utils.flop_counter.FlopCounterMode` (total, per aten op, per module);
* ``thop``: ``thop.profile`` (MACs by its per-``nn.Module``-type rules, the numbers published
  diffusion tables tend to cite).

The result is one JSON-serialisable dict, the schema of the fixtures under
``validation/fixtures`` (see ``validation/README.md``). It imports nothing of flopcalc beyond its
own input builders (``flopcalc.engine.measure.inputs``): it ships in the package so that ``flopcalc estimate --measure`` builds a model's
inputs with the same builders the validation fixtures were measured with
(``flopcalc/engine/measure/inputs/<family>.py``); ``validation/measure.py`` is this module under the name
the validation scripts and tests import.

Typical use (e.g. from a test)::

    from flopcalc.engine.measure.harness import measure_component
    fx = measure_component("model_cards/flux-dev/transformer",
                           settings={"height": 832, "width": 1216, "text_len": 512})
    fx["torch"]["flops"], fx["thop"]["macs"]
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import math
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from flopcalc.engine.measure.tensors import TensorSpec, _f32, _ids  # noqa: F401  (the builders import them from here)

__all__ = [
    "CALLS",
    "INPUT_BUILDERS",
    "TensorSpec",
    "build_inputs",
    "build_model",
    "count_params",
    "count_thop",
    "count_torch",
    "input_builder",
    "measure_component",
    "measure_model",
    "model_builder",
    "resolve_class_name",
    "versions",
]

#: The repository root of a source checkout (flopcalc/engine/measure/harness.py → ../../..): relative config
#: folders are resolved from it and fixtures record their folder relative to it.
REPO_ROOT = Path(__file__).resolve().parents[3]

#: Deepest module path (in dotted parts) kept in ``torch.by_module`` and ``thop.by_module``.
TORCH_MODULE_DEPTH = 3
THOP_MODULE_DEPTH = 2

#: How each measured call is made: "forward" is ``model(**inputs)``, the others ``model.<call>(**inputs)``.
CALLS = ("forward", "decode", "encode")

#: aten ops that carry the attention score / value matmuls.
ATTENTION_OPS = frozenset(
    {
        "aten.bmm",
        "aten.baddbmm",
        "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_cudnn_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._flash_attention_forward",
        "aten._efficient_attention_forward",
    }
)

_THOP_BUFFERS = ("total_ops", "total_params")


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


#: A builder maps (model, call, settings) to the keyword inputs of that call. A dotted name
#: ``"outer.inner"`` is passed as ``outer={"inner": ...}`` (e.g. ``added_cond_kwargs.time_ids``);
#: a ``None`` value is passed as the constant ``None`` (it is not a thop input).
InputBuilder = Callable[[nn.Module, str, Mapping[str, int]], dict[str, "TensorSpec | None"]]


@dataclass(frozen=True)
class _Registered:
    builder: InputBuilder
    settings: tuple[str, ...]
    calls: tuple[str, ...]
    optional: tuple[str, ...] = ()


#: Class name -> input builder. Add a class by decorating one function with :func:`input_builder`.
INPUT_BUILDERS: dict[str, _Registered] = {}


def input_builder(
    *class_names: str, settings: tuple[str, ...], calls: tuple[str, ...] = ("forward",),
    optional: tuple[str, ...] = (),
) -> Callable[[InputBuilder], InputBuilder]:
    """Register ``fn`` as the input builder of ``class_names``.

    ``settings`` names the pipeline-level settings it reads (they are required and recorded in
    the fixture); ``optional`` those it reads when given (recorded when given); ``calls`` the
    measurable calls it supports.
    """

    def register(fn: InputBuilder) -> InputBuilder:
        for name in class_names:
            if name in INPUT_BUILDERS:
                raise ValueError(f"duplicate input builder for {name}")
            INPUT_BUILDERS[name] = _Registered(fn, settings, calls, optional)
        return fn

    return register


def _cfg(model: nn.Module, key: str) -> Any:
    """Read ``key`` from a diffusers (FrozenDict) or transformers (PretrainedConfig) config."""
    config = model.config
    return config[key] if isinstance(config, Mapping) else getattr(config, key)


def _exact_div(value: int, factor: int, what: str) -> int:
    if value % factor:
        raise ValueError(f"{what}={value} is not a multiple of {factor}")
    return value // factor


@input_builder(
    "CLIPTextModel", "CLIPTextModelWithProjection", "T5EncoderModel", settings=("seq_len",)
)
def _text_encoder_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """Token ids (1, seq_len)."""
    return {"input_ids": _ids(1, s["seq_len"])}


@input_builder("FluxTransformer2DModel", settings=("height", "width", "text_len"),
               optional=("reference_height", "reference_width"))
def _flux_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """FLUX packs the (H/8, W/8) latent into 2x2 patches: (H/16)*(W/16) image tokens. Given a
    reference image size (FLUX.1 Kontext), its packed latent's tokens follow them in the same
    sequence (``FluxKontextPipeline``: ``torch.cat([latents, image_latents], dim=1)``, ids alike)."""
    tokens = _exact_div(s["height"], 16, "height") * _exact_div(s["width"], 16, "width")
    if "reference_height" in s or "reference_width" in s:
        tokens += (_exact_div(s["reference_height"], 16, "reference_height")
                   * _exact_div(s["reference_width"], 16, "reference_width"))
    text_len = s["text_len"]
    inputs = {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "encoder_hidden_states": _f32(1, text_len, _cfg(model, "joint_attention_dim")),
        "pooled_projections": _f32(1, _cfg(model, "pooled_projection_dim")),
        "timestep": _f32(1),
    }
    if _cfg(model, "guidance_embeds"):
        inputs["guidance"] = _f32(1)
    inputs["img_ids"] = _f32(tokens, 3)
    inputs["txt_ids"] = _f32(text_len, 3)
    return inputs


@input_builder("SD3Transformer2DModel", settings=("height", "width", "text_len"), optional=("pag",))
def _sd3_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """Latent (1, C, H/8, W/8), joint text states, pooled text embedding, timestep; with ``pag`` the
    PAG pipelines' processors and batch (:mod:`flopcalc.engine.measure.perturbed`)."""
    inputs = {
        "hidden_states": _f32(
            1,
            _cfg(model, "in_channels"),
            _exact_div(s["height"], 8, "height"),
            _exact_div(s["width"], 8, "width"),
        ),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "pooled_projections": _f32(1, _cfg(model, "pooled_projection_dim")),
        "timestep": _f32(1),
    }
    if s.get("pag"):
        from flopcalc.engine.measure.perturbed import perturb

        return perturb(model, s["pag"], inputs)
    return inputs


@input_builder("AutoencoderKL", settings=("height", "width"), calls=("decode", "encode"), optional=("vae_tiling",))
def _autoencoder_kl_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, H/f, W/f) with f = 2**(len(block_out_channels)-1);
    encode: x (1, in_channels, H, W). ``vae_tiling`` 1 (optional) calls ``enable_tiling()`` first
    (tiles of the config's ``sample_size``, overlap factor 0.25): ``tiled_decode`` /
    ``_tiled_encode`` run when a side exceeds the tile."""
    if s.get("vae_tiling"):
        model.enable_tiling()
        model._measure_notes = [(
            "vae.enable_tiling() was called before measuring (tile size: the config's sample_size, overlap "
            "factor 0.25): tiled_decode / _tiled_encode ran."
        )]
    if call == "encode":
        return {"x": _f32(1, _cfg(model, "in_channels"), s["height"], s["width"])}
    factor = 2 ** (len(_cfg(model, "block_out_channels")) - 1)
    return {
        "z": _f32(
            1,
            _cfg(model, "latent_channels"),
            _exact_div(s["height"], factor, "height"),
            _exact_div(s["width"], factor, "width"),
        )
    }


def enable_sized_tiling(model: nn.Module, s: Mapping[str, int]) -> None:
    """``vae_tiling`` 1: ``model.enable_tiling()`` at the class's defaults; with ``vae_tile`` (px) as well, for a
    class whose ``enable_tiling`` takes tile sizes (``AutoencoderDC``, ``AutoencoderKLQwenImage``, ...),
    ``enable_tiling(tile_sample_min_height=vae_tile, tile_sample_min_width=vae_tile, tile_sample_stride_height=
    stride, tile_sample_stride_width=stride)`` with ``stride = vae_tile × default stride ÷ default tile`` (the
    instance's own defaults before the call: the overlap in the same proportion)."""
    if not s.get("vae_tiling"):
        return
    tile = s.get("vae_tile")
    if tile:
        stride = tile * model.tile_sample_stride_height // model.tile_sample_min_height
        model.enable_tiling(tile_sample_min_height=tile, tile_sample_min_width=tile,
                            tile_sample_stride_height=stride, tile_sample_stride_width=stride)
        how = f"tiles of {tile} px every {stride} px (the default overlap proportion)"
    else:
        model.enable_tiling()
        how = (f"its default tiles of {model.tile_sample_min_height} px every {model.tile_sample_stride_height} px")
    model._measure_notes = [f"vae.enable_tiling() was called before measuring, {how}: tiled_decode ran when a side "
                            "exceeded the tile."]


def _latent(model: nn.Module, s: Mapping[str, int], channels_key: str = "in_channels") -> TensorSpec:
    """The (1, C, H/f, W/f) latent of an SD-family VAE: spatial factor f = 8, or the setting ``vae_scale`` where
    a builder accepts it (the x4 upscaler's 3-level VAE: 4)."""
    f = s.get("vae_scale", 8)
    return _f32(
        1,
        _cfg(model, channels_key),
        _exact_div(s["height"], f, "height"),
        _exact_div(s["width"], f, "width"),
    )


@input_builder("UNet2DConditionModel", settings=("height", "width", "text_len"), optional=("pag", "ip_adapter", "ip_adapter_plus",
                                                                                   "ip_adapter_tokens", "vae_scale"))
def _unet_2d_condition_inputs(
    model: nn.Module, call: str, s: Mapping[str, int]
) -> dict[str, TensorSpec | None]:
    """sample (1, C, H/8, W/8) (H/``vae_scale`` when given: 4 for ``StableDiffusionUpscalePipeline``, whose
    sizes are the output's), timestep (1,), encoder_hidden_states (1, text_len, cross_attention_dim);
    with ``addition_embed_type == "text_time"`` (SDXL) also ``added_cond_kwargs`` text_embeds (1, P)
    and time_ids (1, 6), P = projection_class_embeddings_input_dim - 6 * addition_time_embed_dim
    (the pooled text embedding: 1280 for SDXL base); with ``time_cond_proj_dim`` (LCM) ``timestep_cond``
    (1, time_cond_proj_dim); with ``num_class_embeds`` (the x4 upscaler) or ``class_embed_type: timestep``
    (DeepFloyd IF super-resolution: the noise level) ``class_labels`` (1,) int64, with ``class_embed_type:
    projection`` (stable unCLIP) ``class_labels`` (1, projection_class_embeddings_input_dim); with
    ``encoder_hid_dim_type: text_proj`` the text states are ``encoder_hid_dim`` wide (Kolors, DeepFloyd IF, whose
    ``addition_embed_type: text`` pools them). Kandinsky 2.1 (``text_image`` / ``text_image_proj``): text states of
    ``encoder_hid_dim``, and ``added_cond_kwargs`` text_embeds and image_embeds (1, cross_attention_dim).
    Kandinsky 2.2 (``addition_embed_type`` image / image_hint, ``encoder_hid_dim_type: image_proj``):
    ``encoder_hidden_states=None`` and ``added_cond_kwargs`` image_embeds (1, encoder_hid_dim), plus hint
    (1, 3, H, W) for image_hint, as ``KandinskyV22(Controlnet)Pipeline`` calls it (the sample then has
    ``in_channels`` − 4 channels: the hint's 4 are concatenated inside)."""
    inputs: dict[str, TensorSpec | None] = {
        "sample": _latent(model, s),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "cross_attention_dim")),
    }
    cond_dim = model.config.get("time_cond_proj_dim")  # a ControlNetModel (same builder) has none
    if cond_dim is not None:  # LCM: the guidance embedding w (timestep_cond)
        inputs["timestep_cond"] = _f32(1, cond_dim)
    addition = _cfg(model, "addition_embed_type")
    hid_type = _cfg(model, "encoder_hid_dim_type")
    if addition == "text_time":
        pooled = _cfg(model, "projection_class_embeddings_input_dim") - 6 * _cfg(
            model, "addition_time_embed_dim"
        )
        inputs["added_cond_kwargs.text_embeds"] = _f32(1, pooled)
        inputs["added_cond_kwargs.time_ids"] = _f32(1, 6)
    elif addition in ("image", "image_hint") and hid_type == "image_proj":
        inputs["encoder_hidden_states"] = None
        inputs["added_cond_kwargs.image_embeds"] = _f32(1, _cfg(model, "encoder_hid_dim"))
        if addition == "image_hint":
            inputs["sample"] = _f32(1, _cfg(model, "in_channels") - 4, s["height"] // 8, s["width"] // 8)
            inputs["added_cond_kwargs.hint"] = _f32(1, 3, s["height"], s["width"])
        return inputs
    elif addition == "text_image" and hid_type == "text_image_proj":
        # Kandinsky 2.1 (KandinskyPipeline): the text states of encoder_hid_dim, the pooled text embedding and the
        # image embedding, both of cross_attention_dim
        inputs["encoder_hidden_states"] = _f32(1, s["text_len"], _cfg(model, "encoder_hid_dim"))
        inputs["added_cond_kwargs.text_embeds"] = _f32(1, _cfg(model, "cross_attention_dim"))
        inputs["added_cond_kwargs.image_embeds"] = _f32(1, _cfg(model, "cross_attention_dim"))
        return inputs
    elif addition not in (None, "text"):  # text (DeepFloyd IF) pools encoder_hidden_states: nothing more to pass
        raise NotImplementedError(f"UNet2DConditionModel addition_embed_type={addition!r}")
    if hid_type == "text_proj":  # Kolors: encoder_hid_proj maps encoder_hid_dim text states to cross_attention_dim
        inputs["encoder_hidden_states"] = _f32(1, s["text_len"], _cfg(model, "encoder_hid_dim"))
    if hid_type not in (None, "text_proj"):
        raise NotImplementedError(f"UNet2DConditionModel encoder_hid_dim_type={hid_type!r}")
    class_type = _cfg(model, "class_embed_type")
    if class_type == "timestep":  # DeepFloyd IF super-resolution: class_labels = noise_level, sinusoid-embedded
        inputs["class_labels"] = _ids(1)
    elif class_type == "projection":  # stable unCLIP: the noised image embedding and its noise-level sinusoid
        inputs["class_labels"] = _f32(1, _cfg(model, "projection_class_embeddings_input_dim"))
    elif class_type is not None:
        raise NotImplementedError(f"UNet2DConditionModel class_embed_type={class_type!r}")
    if _cfg(model, "num_class_embeds") is not None:  # x4 upscaler: class_labels = noise_level (an Embedding)
        inputs["class_labels"] = _ids(1)
    if s.get("ip_adapter"):  # an IP-Adapter as load_ip_adapter installs it (flopcalc/engine/measure/ip_adapter.py)
        from flopcalc.engine.measure.ip_adapter import attach

        inputs = attach(model, s["ip_adapter"], inputs, s.get("ip_adapter_plus"), s.get("ip_adapter_tokens"))
    if s.get("pag"):  # perturbed-attention guidance: the PAG pipelines' processors and batch
        from flopcalc.engine.measure.perturbed import perturb

        return perturb(model, s["pag"], inputs)
    return inputs


@input_builder("PixArtTransformer2DModel", settings=("height", "width", "text_len"), optional=("pag",))
def _pixart_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """hidden_states (1, C, H/8, W/8), encoder_hidden_states (1, text_len, caption_channels),
    timestep (1,), added_cond_kwargs resolution (1, 2) and aspect_ratio (1, 1) when the model uses
    additional conditions (``use_additional_conditions``: sample_size == 128 unless the config says),
    else ``{"resolution": None, "aspect_ratio": None}`` as the PixArt-alpha pipeline passes."""
    inputs: dict[str, TensorSpec | None] = {
        "hidden_states": _latent(model, s),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "caption_channels")),
        "timestep": _f32(1),
    }
    if model.use_additional_conditions:
        inputs["added_cond_kwargs.resolution"] = _f32(1, 2)
        inputs["added_cond_kwargs.aspect_ratio"] = _f32(1, 1)
    else:
        inputs["added_cond_kwargs.resolution"] = None
        inputs["added_cond_kwargs.aspect_ratio"] = None
    if s.get("pag"):  # perturbed-attention guidance (PixArtSigmaPAGPipeline): its processors and batch
        from flopcalc.engine.measure.perturbed import perturb

        return perturb(model, s["pag"], inputs)
    return inputs


@input_builder("DiTTransformer2DModel", settings=("height", "width"))
def _dit_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, C, H/8, W/8), timestep (1,), class_labels (1,) int64. Square sizes only:
    DiT's unpatchify sets ``height = width = int(tokens ** 0.5)``."""
    if s["height"] != s["width"]:
        raise ValueError(
            f"DiTTransformer2DModel unpatchifies square latents only, got {s['height']}x{s['width']}"
        )
    return {
        "hidden_states": _latent(model, s),
        "timestep": _f32(1),
        "class_labels": _ids(1),
    }


def _registered(class_name: str) -> _Registered:
    try:
        return INPUT_BUILDERS[class_name]
    except KeyError:
        raise KeyError(
            f"no input builder for {class_name}; known: {sorted(INPUT_BUILDERS)}"
        ) from None


def build_inputs(
    model: nn.Module, settings: Mapping[str, int], call: str = "forward", builder_class: str | None = None
) -> tuple[dict[str, TensorSpec | None], dict[str, int]]:
    """Build the inputs of ``model.<call>`` from pipeline-level ``settings``.

    Returns ``(specs, used_settings)``: the keyword inputs and the subset of ``settings`` the
    class's builder reads (missing ones raise ``KeyError``). ``builder_class``: the class whose builder to use
    (default: the model's own; ``estimate --measure`` lends a class with none the builder of the class its
    pipeline expects in its place, :mod:`flopcalc.engine.measure.stand_in`).
    """
    name = builder_class or type(model).__name__
    reg = _registered(name)
    if call not in reg.calls:
        raise ValueError(f"{name} supports calls {reg.calls}, not {call!r}")
    missing = [k for k in reg.settings if k not in settings]
    if missing:
        raise KeyError(f"{name} needs settings {missing}")
    used = {k: int(settings[k]) for k in (*reg.settings, *reg.optional) if k in settings}
    return reg.builder(model, call, used), used


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


def _read_config(config_dir: Path) -> dict[str, Any]:
    with open(config_dir / "config.json", encoding="utf-8") as fh:
        return json.load(fh)


def resolve_class_name(config_dir: str | Path) -> str:
    """The class named by a config folder: diffusers ``_class_name`` or transformers ``architectures[0]``; where
    neither library exports that name (a checkpoint saved under its authors' own class name, as FramePack's
    ``HunyuanVideoTransformer3DModelPacked``), the class the pipeline's ``model_index.json`` names for the folder,
    which is what ``from_pretrained`` loads."""
    config_dir = Path(config_dir)
    config = _read_config(config_dir)
    named = config.get("_class_name") or (config.get("architectures") or [None])[0]
    if named is not None and _exported(named):
        return named
    index = config_dir.parent / "model_index.json"
    entry = json.loads(index.read_text()).get(config_dir.name) if index.is_file() else None
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str) and _exported(entry[1]):
        return entry[1]
    if named is not None:
        return named
    raise ValueError(f"{config_dir}/config.json names no class (_class_name / architectures)")


def _exported(class_name: str) -> bool:
    """Whether diffusers' or transformers' top level exports ``class_name`` (or a builder is registered for it)."""
    return class_name in MODEL_BUILDERS or any(
        getattr(importlib.import_module(library), class_name, None) is not None for library in ("diffusers", "transformers"))


def _find_class(class_name: str) -> tuple[type[nn.Module], str]:
    """Find ``class_name`` in diffusers, then transformers; returns (class, library)."""
    for library in ("diffusers", "transformers"):
        module = importlib.import_module(library)
        cls = getattr(module, class_name, None)
        if cls is not None:
            return cls, library
    raise ImportError(f"{class_name} is in neither diffusers nor transformers")


#: Class name -> a function building it on meta from its config folder, for classes that neither
#: diffusers' nor transformers' top level exports (e.g. the ChatGLM encoder diffusers vendors for Kolors).
MODEL_BUILDERS: dict[str, Callable[[Path], nn.Module]] = {}


def model_builder(class_name: str) -> Callable[[Callable[[Path], nn.Module]], Callable[[Path], nn.Module]]:
    """Register ``fn(config_dir) -> model`` (built on meta) as the way to build ``class_name``."""

    def register(fn: Callable[[Path], nn.Module]) -> Callable[[Path], nn.Module]:
        if class_name in MODEL_BUILDERS:
            raise ValueError(f"duplicate model builder for {class_name}")
        MODEL_BUILDERS[class_name] = fn
        return fn

    return register


def build_model(config_dir: str | Path, class_name: str | None = None) -> nn.Module:
    """Instantiate ``class_name`` (default: the class the config names) on the meta device, in eval mode.

    diffusers' ``from_config`` may return another class: a legacy ``Transformer2DModel`` config is built
    as ``PixArtTransformer2DModel`` (``norm_type: ada_norm_single``) or ``DiTTransformer2DModel``
    (``ada_norm_zero``), as ``from_pretrained`` would. A class registered with :func:`model_builder` is
    built by its builder."""
    config_dir = Path(config_dir)
    class_name = class_name or resolve_class_name(config_dir)
    if class_name in MODEL_BUILDERS:
        return MODEL_BUILDERS[class_name](config_dir).eval()
    cls, library = _find_class(class_name)
    if library == "diffusers":
        config = cls.load_config(str(config_dir))
        with torch.device("meta"):
            model = cls.from_config(config)
    else:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(config_dir))
        with torch.device("meta"):
            model = cls(config)
    return model.eval()


def count_params(model: nn.Module) -> tuple[int, dict[str, int]]:
    """Total parameters (shared ones once, as ``parameters()`` yields them) and per top-level child. A model whose
    builder attached another component's modules (``model._measure_shared``: their top-level names, as
    ``ZImageControlNetModel.from_transformer`` attaches the transformer's) counts them with that component: left out."""
    shared = frozenset(getattr(model, "_measure_shared", ()))
    total = sum(p.numel() for name, p in model.named_parameters() if name.split(".")[0] not in shared)
    by_child = {
        name: sum(p.numel() for p in child.parameters()) for name, child in model.named_children() if name not in shared
    }
    return total, by_child


def _attention_summary(model: nn.Module) -> str:
    """The attention that runs: transformers' ``_attn_implementation`` or diffusers' processor classes."""
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl is not None:
        return f"transformers attn_implementation={impl}"
    processors = getattr(model, "attn_processors", None)
    if processors:
        names = sorted({type(p).__name__ for p in processors.values()})
        return "diffusers processors: " + ", ".join(names)
    # Models without the attn_processors property (e.g. DiTTransformer2DModel): read the modules.
    names = sorted({type(m.processor).__name__ for m in model.modules() if hasattr(m, "processor")})
    if names:
        return "diffusers processors: " + ", ".join(names)
    return "none"


def _has_attention(model: nn.Module) -> bool:
    return any("Attention" in type(m).__name__ for m in model.modules())


# --------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------


class _Call(nn.Module):
    """Root module making one call on ``model`` from positional tensors (thop needs positional
    inputs; FlopCounterMode then names modules ``_Call.model.<path>`` even for ``decode``/``encode``)."""

    def __init__(
        self,
        model: nn.Module,
        call: str,
        names: list[str],
        constants: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.call = call
        self.names = names
        self.constants = dict(constants or {})

    def forward(self, *tensors: torch.Tensor) -> Any:
        flat = dict(zip(self.names, tensors, strict=True))
        flat.update(self.constants)
        kwargs = _nest(flat)
        if self.call == "forward":
            return self.model(**kwargs)
        return getattr(self.model, self.call)(**kwargs)


_ROOT_PREFIX = "_Call.model."


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": x, "c": y}`` -> ``{"a": {"b": x}, "c": y}`` (keyword inputs such as ``added_cond_kwargs``)."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        outer, dot, inner = name.partition(".")
        if dot:
            out.setdefault(outer, {})[inner] = value
        else:
            out[name] = value
    return out


def _wrap(model: nn.Module, call: str, inputs: Mapping[str, Any]) -> tuple[_Call, tuple[torch.Tensor, ...]]:
    """The positional wrapper and its tensors; non-tensor inputs (``None``) become wrapper constants."""
    tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    constants = {k: v for k, v in inputs.items() if not isinstance(v, torch.Tensor)}
    return _Call(model, call, list(tensors), constants), tuple(tensors.values())


def _sdpa_cpu_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """``aten._scaled_dot_product_flash_attention_for_cpu``: missing from torch's registry (it counts 0)."""
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _custom_mapping() -> dict[Any, Callable[..., int]]:
    """Formulas torch's FLOP registry lacks. Unused on meta (SDPA decomposes into bmm there), kept so the
    counter stays right if a caller passes real CPU tensors."""
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return {op: _sdpa_cpu_flops} if op is not None else {}


def _aggregate_containers(model: nn.Module, flops: dict[str, int]) -> None:
    """Add never-called containers (ModuleList/ModuleDict, e.g. ``transformer_blocks``) as the sum of
    their direct children, deepest first, so paths line up with the module tree."""
    containers = [
        name
        for name, m in model.named_modules()
        if name and isinstance(m, (nn.ModuleList, nn.ModuleDict)) and name not in flops
    ]
    for name in sorted(containers, key=lambda n: -n.count(".")):
        prefix = name + "."
        child_sum = sum(
            v for k, v in flops.items() if k.startswith(prefix) and "." not in k[len(prefix) :]
        )
        if child_sum:
            flops[name] = child_sum


def count_torch(
    model: nn.Module,
    inputs: Mapping[str, torch.Tensor | None],
    call: str = "forward",
    module_depth: int = TORCH_MODULE_DEPTH,
) -> dict[str, Any]:
    """FlopCounterMode on ``model.<call>(**inputs)``: total, per aten op, per module path
    (depth <= ``module_depth``, default 3)."""
    wrapper, positional = _wrap(model, call, inputs)
    counter = FlopCounterMode(display=False, custom_mapping=_custom_mapping())
    with counter, torch.no_grad():
        wrapper(*positional)
    counts = counter.get_flop_counts()
    total = int(counter.get_total_flops())
    by_op = {str(op): int(n) for op, n in counts.get("Global", {}).items() if n}
    full: dict[str, int] = {}
    for key, ops in counts.items():
        if key.startswith(_ROOT_PREFIX):
            full[key[len(_ROOT_PREFIX) :]] = int(sum(ops.values()))
    _aggregate_containers(model, full)
    by_module = {k: v for k, v in full.items() if k.count(".") < module_depth and v}
    by_module["Global"] = total
    return {"flops": total, "by_op": by_op, "by_module": by_module}


def _as_int(value: float, what: str) -> int:
    rounded = int(round(value))
    if not math.isclose(value, rounded, rel_tol=0.0, abs_tol=1e-6):
        raise AssertionError(f"thop {what} is not integral: {value!r}")
    return rounded


def _flatten_thop(tree: dict[str, tuple], prefix: str = "", depth: int = 1) -> dict[str, int]:
    """thop's layer tree ``{name: (ops, params, subtree)}`` as ``{path: macs}`` down to THOP_MODULE_DEPTH."""
    out: dict[str, int] = {}
    for name, (ops, _params, sub) in tree.items():
        path = prefix + name
        out[path] = _as_int(ops, path)
        if depth < THOP_MODULE_DEPTH:
            out.update(_flatten_thop(sub, path + ".", depth + 1))
    return out


def _strip_thop_buffers(module: nn.Module) -> None:
    """thop leaves its counters on modules without a rule; remove them."""
    for m in module.modules():
        for name in _THOP_BUFFERS:
            m._buffers.pop(name, None)


def count_thop(
    model: nn.Module, inputs: Mapping[str, torch.Tensor | None], call: str = "forward"
) -> dict[str, Any]:
    """``thop.profile`` on ``model.<call>(**inputs)`` through a positional wrapper (whose level is stripped).

    Must run outside any ``torch.device("meta")`` context: thop's counters are CPU float64 buffers read
    with ``.item()``. Returns ``{"error": msg}`` if thop raises.
    """
    import thop

    wrapper, positional = _wrap(model, call, inputs)
    try:
        macs, params, tree = thop.profile(wrapper, inputs=positional, verbose=False, ret_layer_info=True)
    except Exception as exc:  # noqa: BLE001 - recorded in the fixture instead
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        _strip_thop_buffers(wrapper)
    _ops, _params, subtree = tree["model"]
    return {
        "macs": _as_int(macs, "macs"),
        "params": _as_int(params, "params"),
        "by_module": _flatten_thop(subtree),
    }


# --------------------------------------------------------------------------------------------
# Whole measurement
# --------------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    """Exact versions of the interpreter, the libraries measured with, and the platform."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("torch", "diffusers", "transformers", "thop", "huggingface_hub"):
        try:
            out[dist] = _normalized(importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _normalized(version: str) -> str:
    """PEP 440 form (thop's metadata says ``0.1.1-2209072238``; pip pins ``0.1.1.post2209072238``)."""
    try:
        from packaging.version import Version

        return str(Version(version))
    except Exception:  # noqa: BLE001 - packaging missing or a non-PEP 440 string: keep it verbatim
        return version


def _method(call: str, attention: str, notes: Sequence[str] = ()) -> str:
    """How the fixture was measured, in words; ``notes`` (case-specific help) are appended."""
    target = "model(**inputs)" if call == "forward" else f"model.{call}(**inputs)"
    return "".join((
        f"{target} on meta tensors (batch 1), model built from config.json under "
        "torch.device('meta'); torch: FlopCounterMode(display=False) with a custom_mapping for "
        "aten._scaled_dot_product_flash_attention_for_cpu (unused on meta: SDPA runs its bmm math "
        "there), module paths relative to the model, ModuleList/ModuleDict entries summed from their "
        "children; thop: thop.profile on a positional wrapper outside the meta context, wrapper "
        f"level stripped. Attention: {attention}.",
        *(" " + note for note in notes),
    ))


def _input_notes(inputs: Mapping[str, Any], module_depth: int) -> list[str]:
    """Method notes for nested keyword inputs, constant ``None`` inputs and a non-default module depth."""
    notes = []
    nested = sorted({k.partition(".")[0] for k in inputs if "." in k})
    if nested:
        notes.append(
            "Inputs named outer.inner are passed as nested dicts (" + ", ".join(nested) + "={...}) by "
            "the wrapper; thop gets their tensors positionally."
        )
    constants = [k for k, v in inputs.items() if v is None]
    if constants:
        notes.append("Passed as constant None (not thop inputs): " + ", ".join(constants) + ".")
    values = [f"{k}={v!r}" for k, v in inputs.items()
              if v is not None and not isinstance(v, torch.Tensor) and not _tensor_list(v)]
    if values:
        notes.append("Passed as constants (not thop inputs): " + ", ".join(values) + ".")
    if module_depth != TORCH_MODULE_DEPTH:
        notes.append(f"torch.by_module goes down to depth {module_depth}.")
    return notes


def _locate(config_dir: Path) -> Path:
    """``config_dir`` as given, or relative to the repository root when it does not exist as given."""
    if config_dir.is_absolute() or config_dir.exists():
        return config_dir
    return REPO_ROOT / config_dir


def _relative_dir(config_dir: Path) -> str:
    path = config_dir.resolve()
    try:
        return path.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _remap_note(named: str, built: str, model: nn.Module) -> str:
    norm = ""
    config = model.config
    if isinstance(config, Mapping) and "norm_type" in config:
        norm = f" for norm_type={config['norm_type']}"
    return (
        f"config.json names {named}; diffusers' {named}.from_config builds {built}{norm} "
        "(LegacyConfigMixin.from_config -> _fetch_remapped_cls_from_config / _CLASS_REMAPPING_DICT "
        "in diffusers/models/model_loading_utils.py), and that is the model measured."
    )


def _check_attention_counted(model: nn.Module, by_op: Mapping[str, int], call: str = "forward") -> None:
    # a VAE call runs one half: attention only in the other half (Mochi's encoder) is not expected to count
    part = getattr(model, {"decode": "decoder", "encode": "encoder"}.get(call, ""), None)
    if _has_attention(part if isinstance(part, nn.Module) else model) and not any(by_op.get(op, 0)
                                                                              for op in ATTENTION_OPS):
        raise AssertionError(
            f"{type(model).__name__} has attention modules but no attention matmul was counted: {by_op}"
        )


def _tensor_list(value: Any) -> bool:
    """A constant list of tensors that carries its ``shape`` and, as its ``dtype``, what it is (Z-Image's lists)."""
    return isinstance(value, list) and hasattr(value, "shape") and any(isinstance(v, torch.Tensor) for v in value)


def _recorded(value: Any) -> Any:
    """An input as a fixture records it: a tensor or a constant list of tensors by its shape, any other constant
    by its value."""
    return list(value.shape) if isinstance(value, torch.Tensor) or _tensor_list(value) else value


def measure_model(
    model: nn.Module,
    inputs: Mapping[str, TensorSpec | torch.Tensor | None],
    *,
    call: str = "forward",
    with_thop: bool = True,
    module_depth: int = TORCH_MODULE_DEPTH,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """Measure an already built (meta) ``model`` on explicit ``inputs``: the ``torch``, ``thop``,
    ``params`` and ``params_by_module`` parts of a fixture, plus ``inputs``/``method``/``device``.

    An input named ``"outer.inner"`` is passed as ``outer={"inner": tensor}``; a ``None`` input is
    passed as the constant ``None``. ``module_depth`` bounds ``torch.by_module`` (recorded in the
    fixture when it is not the default 3); ``notes`` are appended to ``method``."""
    if call not in CALLS:
        raise ValueError(f"call must be one of {CALLS}, not {call!r}")
    tensors = {k: v.make() if isinstance(v, TensorSpec) else v for k, v in inputs.items()}
    params, params_by_module = count_params(model)
    torch_part = count_torch(model, tensors, call, module_depth)
    _check_attention_counted(model, torch_part["by_op"], call)
    notes = [*notes, *_input_notes(tensors, module_depth)]
    result: dict[str, Any] = {
        "class_name": type(model).__name__,
        "call": call,
        "device": "meta",
        "inputs": {k: _recorded(t) for k, t in tensors.items()},
        "input_dtypes": {
            k: str(t.dtype).removeprefix("torch.") for k, t in tensors.items()
            if isinstance(t, torch.Tensor) or _tensor_list(t)
        },
        "method": _method(call, _attention_summary(model), notes),
        "attention": _attention_summary(model),
        "params": int(params),
        "params_by_module": params_by_module,
        "torch": torch_part,
    }
    if module_depth != TORCH_MODULE_DEPTH:
        result["module_depth"] = module_depth
    if with_thop:
        result["thop"] = count_thop(model, tensors, call)
    return result


def measure_component(
    config_dir: str | Path,
    class_name: str | None = None,
    *,
    settings: Mapping[str, int] | None = None,
    inputs: Mapping[str, TensorSpec | torch.Tensor | None] | None = None,
    call: str = "forward",
    with_thop: bool = True,
    module_depth: int = TORCH_MODULE_DEPTH,
) -> dict[str, Any]:
    """Build the component in ``config_dir`` on meta and measure one call; returns the fixture dict.

    Give either ``settings`` (pipeline level: ``height``/``width`` in image pixels, ``text_len``,
    ``seq_len``; the class's input builder turns them into tensors) or explicit ``inputs``
    (name -> :class:`TensorSpec` or meta tensor). ``class_name`` defaults to the class the config
    names. ``call`` is ``"forward"``, or ``"decode"``/``"encode"`` for autoencoders. A relative
    ``config_dir`` that does not exist from the working directory is taken from the repository root.
    ``module_depth`` bounds ``torch.by_module`` (default 3).

    diffusers may build another class than the one named (legacy ``Transformer2DModel`` configs become
    ``PixArtTransformer2DModel`` / ``DiTTransformer2DModel`` by ``norm_type``). The fixture's
    ``class_name`` is then the named class and ``built_class`` the class built.
    """
    config_dir = _locate(Path(config_dir))
    named = class_name or resolve_class_name(config_dir)
    model = build_model(config_dir, named)
    built = type(model).__name__
    notes = []
    if built != named:
        notes.append(_remap_note(named, built, model))
    used = {k: int(v) for k, v in (settings or {}).items()}
    if inputs is None:
        if settings is None:
            raise ValueError("give settings or inputs")
        inputs, used = build_inputs(model, settings, call)
        # How a builder helped on meta: a note on the builder function, or notes it left on the model.
        note = getattr(_registered(built).builder, "method_note", None)
        if note:
            notes.append(note)
        notes.extend(getattr(model, "_measure_notes", ()))
    result = measure_model(
        model, inputs, call=call, with_thop=with_thop, module_depth=module_depth, notes=notes
    )
    if built != named:
        result.update(class_name=named, built_class=built)
    result.update(
        component=config_dir.resolve().name,
        config_dir=_relative_dir(config_dir),
        settings=used,
        versions=versions(),
    )
    return result


def _load_input_builder_modules() -> None:
    """More families' input builders live in ``flopcalc/engine/measure/inputs/<family>.py``; each imports
    ``input_builder`` (and whatever else it needs) from this module. Every module there is imported,
    so a new family's file is found without a list."""
    import pkgutil

    from flopcalc.engine.measure import inputs

    for info in sorted(pkgutil.iter_modules(inputs.__path__), key=lambda i: i.name):
        importlib.import_module(f"{inputs.__name__}.{info.name}")


_load_input_builder_modules()
