"""Bundled model cards: Hub config snapshots (no weights) that ship inside the package.

Each card is a folder ``model_cards/<name>/`` (installed as ``flopcalc.model_cards``) laid out
like the Hub repo (``model_index.json`` and one folder per component) plus ``card.yaml``
(``name``, ``title``, ``hub_id``, ``aliases``, ...) and ``PROVENANCE.json``.

This module is on the CLI's start-up path: it imports nothing heavy (no huggingface_hub). The
parsed ``card.yaml`` files come from :mod:`flopcalc.engine.discovery`'s cached index (rebuilt when a card
file changes), so a run that names one card neither imports YAML nor reads every card. Names and
aliases match case-insensitively. YAML is only ever read with ``yaml.safe_load``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from flopcalc.engine.card_files import CARD_FILE, cards_dir, cards_root, read_all_card_data
from flopcalc.engine.errors import ConfigError

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; importlib.abc.Traversable on 3.10
    from importlib.resources.abc import Traversable

__all__ = ["Card", "list_cards", "find_card", "card_keys", "cards_root"]


@dataclass(frozen=True)
class Card:
    """One bundled model card."""

    name: str
    title: str
    hub_id: str | None
    aliases: tuple[str, ...]
    path: Traversable  # the card's folder: a diffusers pipeline folder (a pathlib.Path when installed on disk)
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # all of card.yaml

    def matches(self, name_or_alias: str) -> bool:
        key = name_or_alias.strip().casefold()
        return key == self.name.casefold() or any(key == a.casefold() for a in self.aliases)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _card(folder: Traversable, parsed: Mapping[str, Any]) -> Card:
    where = f"bundled card {folder.name}/{CARD_FILE}"
    if "error" in parsed:
        raise ConfigError(f"{where} {parsed['error']}")
    data = parsed["data"]
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"].strip():
        raise ConfigError(f"{where} must be a mapping with a non-empty 'name'.")
    aliases = data.get("aliases") or []
    if isinstance(aliases, str):
        aliases = [aliases]
    if not isinstance(aliases, list):
        raise ConfigError(f"{where}: 'aliases' must be a list of names.")
    name = data["name"].strip()
    return Card(
        name=name,
        title=_text(data.get("title")) or name,
        hub_id=_text(data.get("hub_id")),
        aliases=tuple(str(a).strip() for a in aliases if str(a).strip()),
        path=folder,
        data=data,
    )


@functools.lru_cache(maxsize=1)
def _all_cards() -> tuple[Card, ...]:
    root = cards_root()
    if cards_dir() is not None:
        from flopcalc.engine.discovery import index

        parsed = index().cards
    else:  # not plain files (a zip): no cache
        parsed = read_all_card_data()
    cards = [_card(root.joinpath(folder), entry) for folder, entry in parsed.items()]
    return tuple(sorted(cards, key=lambda c: c.name.casefold()))


@functools.lru_cache(maxsize=1)
def _by_key() -> Mapping[str, Card]:
    index: dict[str, Card] = {}
    for card in _all_cards():
        for key in (card.name, *card.aliases):
            index.setdefault(key.casefold(), card)  # a clash is caught by the test suite
    return MappingProxyType(index)


def list_cards() -> list[Card]:
    """All bundled cards, sorted by name."""
    return list(_all_cards())


def find_card(name_or_alias: str) -> Card | None:
    """The card whose ``name`` or one of whose ``aliases`` equals ``name_or_alias`` (any case), else None."""
    if not isinstance(name_or_alias, str) or not name_or_alias.strip():
        return None
    return _by_key().get(name_or_alias.strip().casefold())


def card_keys() -> list[str]:
    """Every name and alias, for "did you mean" hints."""
    return [key for card in _all_cards() for key in (card.name, *card.aliases)]
