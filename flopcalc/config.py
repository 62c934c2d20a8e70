"""Read-only access to one component's config.json, with the class defaults the real
constructor would apply and an actionable error for a key that has no default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from flopcalc.errors import ConfigError

_MISSING = object()


@dataclass(frozen=True)
class Config:
    """A component config (``config.json`` parsed) seen through its class defaults.

    ``defaults`` mirrors the keyword defaults of the real class's ``__init__`` (diffusers) or
    config class (transformers), so a trimmed config means what it means to ``from_config``.
    """

    component: str
    values: Mapping[str, Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def class_name(self) -> str | None:
        return class_name_of(self.values)

    def __getitem__(self, key: str) -> Any:
        value = self.values.get(key, _MISSING)
        if value is _MISSING:
            value = self.defaults.get(key, _MISSING)
        if value is _MISSING:
            raise ConfigError(
                f"{self.component}/config.json ({self.class_name}) has no {key!r} and the class has no "
                f"default for it: add the key, or use the model's original config.json."
            )
        return value

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` has a value: in the config, or a class default."""
        return key in self.values or key in self.defaults

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except ConfigError:
            return default


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
    ``architectures``."""
    name = values.get("_class_name")
    if isinstance(name, str):
        key, table = _REMAPPED.get(name, ("", {}))
        return table.get(values.get(key), name)
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
