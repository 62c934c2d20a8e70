"""One registry from a config's architecture name to the function that turns the config into
a tree of costs, the way ``torch.utils.flop_counter`` registers one formula per op.

An assembler has the signature ``(config: Config, shape: RunShape) -> Node``. A class may have
several calls (``AutoencoderKL``: ``decode`` and ``encode``); ``forward`` is the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from flopcalc.engine.config import Config
from flopcalc.engine.cost import Node, declared_block_kinds
from flopcalc.engine.discovery import load_class, load_everything, provide
from flopcalc.engine.errors import UnknownArchitectureError, close_to, unbuildable


@dataclass(frozen=True)
class RunShape:
    """What one forward of a component sees, at batch size 1.

    Denoisers: the VAE latent grid (``latent_height`` × ``latent_width``, before any patching;
    video: × ``latent_frames``) and ``text_len`` tokens of text conditioning. Text encoders:
    ``seq_len`` tokens. VAE decode: the latent grid (a video VAE may also read ``frames``, the
    decoded frame count, where its frame batching depends on it); VAE encode: the image or video
    (``height`` × ``width``, video: × ``frames``). Image models leave the frame fields None.

    ``split`` says how the call is made, where the assembler realises it (a
    ``flopcalc.formulas.tiling.CallSplit``: temporal chunks × spatial tiles, made by the VAE's own
    ``decode_split`` / ``encode_split``); None: the call as the component makes it by default. It
    is how the call runs, not a size: reports do not list it among the shape's sizes.

    ``image_tokens``: a denoiser conditioned on image-encoder tokens (Wan 2.1 image-to-video: the CLIP
    vision hidden states), how many; None: no image conditioning.

    ``timestep_tokens``: a denoiser given one timestep per token (Wan 2.2 TI2V's
    ``expand_timesteps``: the timestep tensor is ``(batch, tokens)``), how many; None: one timestep.

    ``reference_tokens``: tokens of reference images a pipeline concatenates after the latent's own
    tokens along the sequence (FLUX.1 Kontext: the packed latent of the input image), as the
    pipeline packs them; None: none. The denoiser runs every layer on them too.

    ``perturbed``: perturbed-attention guidance (a ``flopcalc.engine.perturbed_attention.PerturbedAttention``:
    the PAG layers, and whether this run is the perturbed row); None: no PAG. How the call runs, not a
    size, like ``split``.
    ``text_len_2``: tokens of a second text stream the denoiser embeds on its own and joins to the
    first (HunyuanImage's byT5 glyph tokens); None: none.

    ``kv_cache``: reference tokens held as an attention key/value cache (FLUX.2 [klein] KV,
    ``Flux2KleinKVPipeline``): ``"extract"``, the forward that runs the ``reference_tokens`` with the latent and
    caches their keys and values (they attend only to themselves); ``"cached"``, a forward on the latent alone whose
    attention also reads the cached ``reference_tokens`` keys and values; None: no cache. How the call runs, not a
    size, like ``split``.

    ``shared``: the config (a ``Config``) of another component whose modules this one calls as its own
    (``ZImageControlNetModel.from_transformer`` takes the transformer's embedders and refiners): their work counts in
    this run, their parameters with that component; None: none. How the call runs, not a size, like ``split``.

    ``ip_image_embed_dim``: a UNet run with an IP-Adapter (``flopcalc.engine.pipelines.ip_adapter``): the width of
    the one image embedding per row it projects into image tokens (an IP-Adapter Plus: the width of the image
    encoder's hidden states); None: no IP-Adapter. ``ip_resampler``: an IP-Adapter Plus's Resampler,
    ``(encoder tokens, queries, width, heads)``; None: a plain adapter's ``ImageProjection``.
    """

    latent_height: Any = None
    latent_width: Any = None
    text_len: Any = None
    seq_len: Any = None
    height: Any = None
    width: Any = None
    latent_frames: Any = None
    frames: Any = None
    split: Any = None
    timestep_tokens: Any = None
    image_tokens: Any = None
    reference_tokens: Any = None
    perturbed: Any = None
    text_len_2: Any = None
    ip_image_embed_dim: Any = None
    ip_resampler: Any = None
    kv_cache: Any = None
    shared: Any = None


Assembler = Callable[[Config, RunShape], Node]


@dataclass(frozen=True)
class KaplanShape:
    """What Kaplan et al. (2020)'s ``C_fwd ≈ 2N + 2·n_layer·n_ctx·d_attn`` reads from a text
    encoder, declared where the encoder is registered (``register(kaplan=...)``): ``layers``
    gives ``(n_layer, d_attn)`` from the config (d_attn: the width of the queries, heads × head
    width); ``embeddings`` names the nodes whose parameters are embeddings (token, position,
    un-embedding) or never run (a vision tower), left out of N."""

    layers: Callable[[Config], tuple[int, int]]
    embeddings: tuple[str, ...]


@dataclass(frozen=True)
class Architecture:
    class_name: str
    call: str
    assemble: Assembler
    defaults: Mapping[str, Any]
    role: str  # "denoiser" | "text_encoder" | "vae"
    source: str  # the file of the real module it mirrors
    nominal: RunShape  # a valid shape, for parameter counts (which do not depend on it)
    scale_factor: Callable[[Mapping[str, Any]], int] | None = None  # VAEs: image pixels per latent pixel
    kaplan: KaplanShape | None = None  # text encoders where Kaplan's closed form applies
    module: str = ""  # the module that registered it (for lazy discovery)


_REGISTRY: dict[tuple[str, str], Architecture] = {}
#: Class name → the defaults its calls share (what :func:`config_of` applies).
_DEFAULTS_OF_CLASS: dict[str, Mapping[str, Any]] = {}
#: Legacy or alias class names, resolved as diffusers resolves them.
_ALIASES: dict[str, str] = {}


_NOMINAL = RunShape(latent_height=64, latent_width=64, text_len=8, seq_len=8, height=512, width=512)


def register(class_name: str, *, role: str, source: str, defaults: Mapping[str, Any], call: str = "forward",
             aliases: tuple[str, ...] = (), nominal: RunShape = _NOMINAL,
             scale_factor: Callable[[Mapping[str, Any]], int] | None = None,
             kaplan: KaplanShape | None = None) -> Callable[[Assembler], Assembler]:
    """Decorator: register ``fn`` as the assembler of ``class_name``'s ``call`` (``kaplan``: a
    text encoder's shape for ``flopcalc kaplan``)."""

    def deco(fn: Assembler) -> Assembler:
        key = (class_name, call)
        if key in _REGISTRY:
            raise RuntimeError(f"{class_name}.{call} registered twice")
        _REGISTRY[key] = Architecture(class_name, call, fn, dict(defaults), role, source, nominal, scale_factor,
                                      kaplan, fn.__module__)
        _DEFAULTS_OF_CLASS.setdefault(class_name, _REGISTRY[key].defaults)
        for alias in aliases:
            _ALIASES[alias] = class_name
        return fn

    return deco


def lookup(class_name: str | None, call: str = "forward", *, component: str = "model") -> Architecture:
    _load_class(class_name)
    name = _ALIASES.get(class_name or "", class_name)
    arch = _REGISTRY.get((name or "", call))
    if arch is None:
        _load()  # not where the index said (or not registered at all): look everywhere before saying so
        name = _ALIASES.get(class_name or "", class_name)
        arch = _REGISTRY.get((name or "", call))
    if arch is None:
        what = f"class {class_name!r}" if class_name else "no _class_name / architectures entry"
        partial = class_name and any(k[0] == name for k in _REGISTRY)
        near = "" if partial else close_to(class_name or "", {k[0] for k in _REGISTRY})
        raise UnknownArchitectureError(f"{component}: {what} has no {call + ' ' if partial else ''}formula in flopcalc"
                                       f"{near}; `flopcalc coverage` lists the classes it counts")
    return arch


def has_formula(class_name: str | None, call: str = "forward") -> bool:
    """Whether some registered architecture counts ``class_name``'s ``call`` (aliases resolved)."""
    try:
        lookup(class_name, call)
    except UnknownArchitectureError:
        return False
    return True


def config_of(config_values: Mapping[str, Any], *, component: str) -> Config:
    """A component's config seen through the class defaults its assemblers use (none for a class
    no architecture registers): what pipeline plans read, so that a plan and the assembler
    agree on every key the config leaves out."""
    from flopcalc.engine.config import class_name_of

    name = class_name_of(config_values)
    _load_class(name)
    name = _ALIASES.get(name or "", name)
    return Config(component, config_values, _DEFAULTS_OF_CLASS.get(name or "", {}))


def registered() -> list[Architecture]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda a: (a.role, a.class_name, a.call))


def aliases() -> dict[str, str]:
    """Legacy / alias class name → registered class name."""
    _load()
    return dict(_ALIASES)


def assemble(config_values: Mapping[str, Any], shape: RunShape, *, component: str, call: str = "forward",
             class_name: str | None = None, validated: bool = False) -> Node:
    """The cost tree of one component's ``call`` on ``shape``. ``validated``: the plan already
    validated ``config_values`` (:func:`flopcalc.engine.config.validate_components`), so reads need not."""
    from flopcalc.engine.config import class_name_of

    arch = lookup(class_name or class_name_of(config_values), call, component=component)
    with unbuildable(component, arch.class_name, call):
        return arch.assemble(Config(component, config_values, arch.defaults, validated=validated), shape)


def component_params(config_values: Mapping[str, Any], *, component: str, assembled: Node | None = None,
                     call: str = "forward", class_name: str | None = None) -> int:
    """Parameters of the whole component as loaded: the union of the modules its calls use
    (an ``AutoencoderKL`` holds its encoder even when a pipeline only decodes). ``assembled``,
    the tree of ``call`` already built, is reused: parameters do not depend on the shape.
    ``class_name``: the class the pipeline loads, where it is not the one the config names."""
    from flopcalc.engine.config import class_name_of

    name = class_name or class_name_of(config_values)
    _load_class(name)
    name = _ALIASES.get(name or "", name)
    archs = [arch for arch in _REGISTRY.values() if arch.class_name == name]
    if not archs:
        lookup(name, component=component)  # raises the actionable error
    return sum(
        assembled.total.params if assembled is not None and a.call == call else _params_of(a, config_values, component)
        for a in archs
    )


_PARAMS_CACHE: dict[tuple[str, str, str], int] = {}


def _params_of(arch: Architecture, config_values: Mapping[str, Any], component: str) -> int:
    """Parameters of one call's modules, memoised on the config's content."""
    import json

    key = (arch.class_name, arch.call, json.dumps(config_values, sort_keys=True, default=str))
    if key not in _PARAMS_CACHE:
        with unbuildable(component, arch.class_name, arch.call):
            tree = arch.assemble(Config(component, config_values, arch.defaults), arch.nominal)
        _PARAMS_CACHE[key] = tree.total.params
    return _PARAMS_CACHE[key]


def _load() -> None:
    """Import every architecture module (each registers its classes)."""
    if not _ALL_LOADED:
        load_everything()
        _ALL_LOADED.append(True)


_ALL_LOADED: list[bool] = []


def _load_class(class_name: str | None) -> None:
    """Import the modules that register ``class_name`` (found through the discovery index)."""
    if _ALL_LOADED or not class_name:
        return
    if any(key[0] == class_name for key in _REGISTRY) and class_name not in _ALIASES:
        return
    load_class(class_name)


def _index_section() -> dict[str, list[str]]:
    """Class name or alias → the modules that register it (the discovery index's ``architectures``)."""
    architectures: dict[str, list[str]] = {}
    for arch in registered():
        architectures.setdefault(arch.class_name, [])
        if arch.module not in architectures[arch.class_name]:
            architectures[arch.class_name].append(arch.module)
    for alias, target in aliases().items():
        architectures[alias] = architectures.get(target, [])
    return architectures


provide("architectures", _index_section)
provide("block_kinds", lambda: sorted(declared_block_kinds()))
