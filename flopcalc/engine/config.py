"""Read-only access to one component's config.json, with the class defaults the real
constructor would apply, an actionable error for a key that has no default, and validation of
every key a family declares.

Validation is declared, not coded: each architecture module calls :func:`declare_keys` with a
:class:`Spec` per key its assembler (and pipeline plan) reads, e.g. ``{"num_layers": LAYERS,
"patch_size": SIZE, "qk_norm": Choice(None, "rms_norm")}``. A declared value is checked on every
read through :class:`Config` and, eagerly, for every component before a plan is built
(:func:`validate_components`), so a bad value is one :class:`ConfigError` naming the component,
the class, the key, the value and what is expected, before any formula sees it. The bounds
(:data:`MAX_WIDTH`, :data:`MAX_LAYERS`, :data:`MAX_LEVELS`) are far beyond any real model and keep
every formula's loops and integers finite.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError

_MISSING = object()

#: Widths, channels, dimensions, vocabularies, patch and sample sizes: at most 2²⁰.
MAX_WIDTH = 2**20
#: Layers (or blocks) in one stack: at most 1024.
MAX_LAYERS = 1024
#: Entries of a per-level list (``block_out_channels``, ``down_block_types``): at most 16.
MAX_LEVELS = 16
#: Position limits (``max_position_embeddings``): at most 2²⁴ tokens.
MAX_POSITIONS = 2**24


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Spec:
    """What one config value must be. ``problem(value)`` is None when it is valid, else what was expected."""

    what = "a valid value"

    def problem(self, value: Any) -> str | None:  # pragma: no cover - every spec overrides it
        raise NotImplementedError

    def __or__(self, other: Spec) -> Spec:
        return AnyOf(self, other)


@dataclass(frozen=True)
class Int(Spec):
    """An integer in ``[lo, hi]`` (bool is not an integer here)."""

    lo: int = 1
    hi: int = MAX_WIDTH

    @property
    def what(self) -> str:
        kind = {1: "a positive integer", 0: "a non-negative integer"}.get(self.lo, f"an integer ≥ {self.lo}")
        return f"{kind} (at most {self.hi})"

    def problem(self, value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and self.lo <= value <= self.hi
        return None if ok else self.what


@dataclass(frozen=True)
class Real(Spec):
    """A finite number in ``(lo, hi]`` (``lo`` excluded unless ``closed``)."""

    lo: float = 0.0
    hi: float = 1e6
    closed: bool = False

    @property
    def what(self) -> str:
        return f"a finite number {'≥' if self.closed else '>'} {self.lo:g} and ≤ {self.hi:g}"

    def problem(self, value: Any) -> str | None:
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
              and (value >= self.lo if self.closed else value > self.lo) and value <= self.hi)
        return None if ok else self.what


@dataclass(frozen=True)
class Flag(Spec):
    """``true`` or ``false``."""

    what = "true or false"

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else self.what


@dataclass(frozen=True)
class Text(Spec):
    """A string (a name the formulas do not branch on, or check themselves)."""

    what = "a string"

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, str) and len(value) <= 256 else self.what


class Choice(Spec):
    """One of the listed values (``None`` included when listed)."""

    def __init__(self, *values: Any) -> None:
        self.values = values

    @property
    def what(self) -> str:
        shown = ["null" if v is None else repr(v) for v in self.values]
        return shown[0] if len(shown) == 1 else "one of " + ", ".join(shown)

    def problem(self, value: Any) -> str | None:
        ok = any(value is v if v is None or isinstance(v, bool) else
                 (type(value) is type(v) and value == v) for v in self.values)
        return None if ok else self.what


@dataclass(frozen=True)
class ListOf(Spec):
    """A list of ``lo``..``hi`` items, each valid under ``item``."""

    item: Spec
    lo: int = 1
    hi: int = MAX_LEVELS

    @property
    def what(self) -> str:
        size = (str(self.lo) if self.lo == self.hi else f"{self.lo} to {self.hi}") if self.lo else f"at most {self.hi}"
        return f"a list of {size} entries, each {self.item.what}"

    def problem(self, value: Any) -> str | None:
        ok = (isinstance(value, (list, tuple)) and self.lo <= len(value) <= self.hi
              and all(self.item.problem(v) is None for v in value))
        return None if ok else self.what


@dataclass(frozen=True)
class Nested(Spec):
    """A nested config object (``text_config``) whose keys are declared in turn."""

    keys: Mapping[str, Spec]
    what = "an object"

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, Mapping) else self.what


class AnyOf(Spec):
    """Valid under any one of ``specs`` (``SIZE | ListOf(SIZE)``, ``NULL | SIZE``)."""

    def __init__(self, *specs: Spec) -> None:
        self.specs = tuple(s for spec in specs for s in (spec.specs if isinstance(spec, AnyOf) else (spec,)))

    @property
    def what(self) -> str:
        return " or ".join(s.what for s in self.specs)

    def problem(self, value: Any) -> str | None:
        return None if any(s.problem(value) is None for s in self.specs) else self.what


#: The specs most keys need.
SIZE = Int(1, MAX_WIDTH)  # a width, channel count, dimension, head count, patch or sample size
COUNT = Int(0, MAX_WIDTH)  # a size that may be 0 (an absent embedding)
LAYERS = Int(0, MAX_LAYERS)  # layers or blocks in one stack (0: an empty stack, which the real classes build)
POSITIONS = Int(1, MAX_POSITIONS)
RATIO = Real(0.0, 1e3)  # a positive multiplier (mlp_ratio)
FLAG = Flag()
TEXT = Text()
NULL = Choice(None)
SIZES = ListOf(SIZE)  # per-level channels (block_out_channels)
LAYER_COUNTS = ListOf(LAYERS)
FLAGS = ListOf(FLAG, lo=0)
NAMES = ListOf(TEXT)  # per-level block types (checked against the modelled type by the assembler)

_SCHEMAS: dict[str, Mapping[str, Spec]] = {}


def strict() -> bool:
    """``FLOPCALC_STRICT_KEYS=1`` (the test suite sets it): reading a key a declared class did not
    declare is a programming error, raised, so a family cannot read a key it does not validate."""
    return os.environ.get("FLOPCALC_STRICT_KEYS") == "1"


class UndeclaredKeyError(AssertionError):
    """An assembler read a key its class does not declare (raised only under FLOPCALC_STRICT_KEYS=1)."""


def declare_keys(class_names: str | tuple[str, ...], keys: Mapping[str, Spec]) -> Mapping[str, Spec]:
    """Declare what each config key ``class_names`` read must be. Call it once per class in the
    architecture module, listing every key its assemblers and its pipeline plan read."""
    for name in (class_names,) if isinstance(class_names, str) else class_names:
        if name in _SCHEMAS:
            raise RuntimeError(f"config keys of {name} declared twice")
        _SCHEMAS[name] = dict(keys)
    return keys


def nested_keys(spec: Spec | None) -> Mapping[str, Spec] | None:
    """The keys a :class:`Nested` spec (alone or in an :class:`AnyOf`) declares, else None."""
    for s in spec.specs if isinstance(spec, AnyOf) else (spec,):
        if isinstance(s, Nested):
            return s.keys
    return None


def declared_keys(class_name: str | None) -> Mapping[str, Spec] | None:
    """The keys ``class_name`` declares (None when it declares none). The family module that registers the
    class declares them on import: it is loaded here (through the discovery index) when it was not yet."""
    if class_name and class_name not in _SCHEMAS:
        from flopcalc.engine.discovery import load_class

        load_class(class_name)
    return _SCHEMAS.get(class_name or "")


def check_value(component: str, class_name: str | None, key: str, value: Any, spec: Spec) -> Any:
    """``value`` when valid under ``spec``, else one :class:`ConfigError` saying what was expected."""
    expected = spec.problem(value)
    if expected is not None:
        raise ConfigError(f"{component}/config.json ({class_name or 'config'}): {key!r} is {_shown(value)}; "
                          f"expected {expected}. Fix the value, or use the model's original config.json.")
    return value


def validate_values(component: str, class_name: str | None, values: Mapping[str, Any],
                    keys: Mapping[str, Spec], prefix: str = "") -> None:
    """Check every declared key present in ``values`` (recursing into nested objects)."""
    for key, spec in keys.items():
        if key in values:
            value = check_value(component, class_name, prefix + key, values[key], spec)
            inner = nested_keys(spec)
            if inner is not None and isinstance(value, Mapping):
                validate_values(component, class_name, value, inner, f"{prefix}{key}.")


def validate_components(components: Mapping[str, Mapping[str, Any]]) -> None:
    """Validate every component's declared keys, once, before a plan reads any of them."""
    for name, values in components.items():
        if isinstance(values, Mapping):
            cls = class_name_of(values)
            keys = declared_keys(cls)
            if keys:
                validate_values(name, cls, values, keys)


@dataclass(frozen=True)
class Config:
    """A component config (``config.json`` parsed) seen through its class defaults.

    ``defaults`` mirrors the keyword defaults of the real class's ``__init__`` (diffusers) or
    config class (transformers), so a trimmed config means what it means to ``from_config``.
    """

    component: str
    values: Mapping[str, Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: the declared keys (a nested config's, from its parent's :class:`Nested`); None: its class's
    keys: Mapping[str, Spec] | None = None
    #: True when :func:`validate_components` already checked ``values`` (a plan ran on them): reads skip the check
    validated: bool = False

    @property
    def class_name(self) -> str | None:
        return class_name_of(self.values)

    def __getitem__(self, key: str) -> Any:
        keys = self.declared
        spec = keys.get(key) if keys is not None else None
        if spec is None and keys is not None and strict():
            raise UndeclaredKeyError(f"{self.class_name or 'a nested config'} reads {key!r} but does not "
                                     f"declare it (flopcalc.engine.config.declare_keys)")
        value = self.values.get(key, _MISSING)
        if value is _MISSING:
            value = self.defaults.get(key, _MISSING)
            if value is _MISSING:
                raise ConfigError(
                    f"{self.component}/config.json ({self.class_name}) has no {key!r} and the class has no "
                    f"default for it: add the key, or use the model's original config.json."
                )
            return value  # a class default: valid by construction
        if spec is None or self.validated:
            return value
        return check_value(self.component, self.class_name, key, value, spec)

    def __post_init__(self) -> None:
        keys = self.keys if self.keys is not None else declared_keys(self.class_name)
        object.__setattr__(self, "_declared", keys)

    @property
    def declared(self) -> Mapping[str, Spec] | None:
        """The keys this config's class (or, nested, its parent's :class:`Nested`) declares."""
        return self._declared

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` has a value: in the config, or a class default."""
        return key in self.values or key in self.defaults

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]``, or ``default`` when neither the config nor the class defaults have it
        (a present but invalid value still raises)."""
        if key not in self.values and key not in self.defaults:
            if strict() and self.declared is not None and key not in self.declared:
                self[key]  # raises UndeclaredKeyError
            return default
        return self[key]


#: Legacy class names diffusers remaps by a config value when it loads them
#: (``models/model_loading_utils.py`` ``_CLASS_REMAPPING_DICT``): PixArt-α and DiT Hub configs
#: still say ``Transformer2DModel``.
_REMAPPED = {
    "Transformer2DModel": ("norm_type", {"ada_norm_zero": "DiTTransformer2DModel",
                                         "ada_norm_single": "PixArtTransformer2DModel"}),
}


def class_name_of(values: Mapping[str, Any]) -> str | None:
    """The architecture a config declares, as diffusers / transformers would build it:
    diffusers ``_class_name`` (legacy names remapped) or the first of transformers'
    ``architectures`` (of a :class:`Config`: of its raw values, not keys its class reads)."""
    if isinstance(values, Config):
        values = values.values
    name = values.get("_class_name")
    if isinstance(name, str):
        key, table = _REMAPPED.get(name, ("", {}))
        value = values.get(key)
        return table.get(value, name) if isinstance(value, str) else name
    archs = values.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return None


def positive_int(config: Config, key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{config.component}/config.json: {key!r} must be a positive integer, got {value!r}")
    return value


def count_int(config: Config, key: str) -> int:
    """A non-negative integer such as a layer count (0 is a valid, empty stack)."""
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{config.component}/config.json: {key!r} must be a non-negative integer, got {value!r}")
    return value


def boolean(config: Config, key: str) -> bool:
    """A true/false switch (``attention_bias``, ``qk_norm``); anything else is a config error."""
    value = config[key]
    if not isinstance(value, bool):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be true or false, got {value!r}")
    return value


def positive_int_list(config: Config, key: str) -> list[int]:
    """A non-empty list of positive integers (``block_out_channels``, ``dim_mult``)."""
    value = config[key]
    if not isinstance(value, list) or not value or any(
            isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in value):
        raise ConfigError(f"{config.component}/config.json: {key!r} must be a non-empty list of positive integers, "
                          f"got {value!r}")
    return list(value)


def check_block_types(config: Config, key: str, kind: str, count: int) -> None:
    """``key`` must list ``kind`` once per level (``count`` levels): the only block type modelled."""
    types = config[key]
    if not isinstance(types, list) or len(types) != count or any(t != kind for t in types):
        raise ConfigError(f"{config.component}/config.json: {key!r} must list {kind!r} once per entry of "
                          f"block_out_channels ({count}), got {types!r}")
