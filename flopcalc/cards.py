"""Bundled model cards: Hub config snapshots (no weights) that ship inside the package.

Each card is a folder ``model_cards/<name>/`` (installed as ``flopcalc.model_cards``) laid out
like the Hub repo (``model_index.json`` and one folder per component) plus ``card.yaml``
(``name``, ``title``, ``hub_id``, ``aliases``, ...) and ``PROVENANCE.json``.

This module is on the CLI's start-up path: it imports nothing heavy (no huggingface_hub). The
parsed ``card.yaml`` files come from :mod:`flopcalc.discovery`'s cached index (rebuilt when a card
file changes), so a run that names one card neither imports YAML nor reads every card. Names and
aliases match case-insensitively. YAML is only ever read with ``yaml.safe_load``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from flopcalc.errors import ConfigError

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; importlib.abc.Traversable on 3.10
    from importlib.resources.abc import Traversable

__all__ = ["Card", "list_cards", "find_card", "card_keys", "cards_root"]

CARD_FILE = "card.yaml"


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


def cards_root() -> Traversable:
    """The folder that holds the bundled cards.

    ``flopcalc.model_cards`` when the package is installed (normal or editable install); from a bare
    source checkout (repository root on ``sys.path``, nothing installed) the top-level
    ``model_cards/`` folder beside the ``flopcalc`` package.
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("flopcalc.model_cards")
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        return Path(__file__).resolve().parent.parent / "model_cards"
    for location in spec.submodule_search_locations or ():
        if Path(location).is_dir():  # plain files (wheel or editable install): no importlib.resources needed
            return Path(location)
    import importlib.resources

    return importlib.resources.files("flopcalc.model_cards")


def cards_dir() -> Path | None:
    """The cards' folder on disk, or None when the package is not installed as plain files."""
    root = cards_root()
    return root if isinstance(root, Path) else None


def read_all_card_data() -> dict[str, dict[str, Any]]:
    """Every card folder's ``card.yaml``, parsed: ``{folder: {"data": ...}}``, or ``{"error": message}``
    for a file that is not valid YAML (said when that card is used, not before)."""
    import json

    import yaml  # deferred: only when the index is rebuilt

    out: dict[str, dict[str, Any]] = {}
    root = cards_root()
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not (entry.is_dir() and entry.joinpath(CARD_FILE).is_file()):
            continue
        try:
            data = yaml.safe_load(entry.joinpath(CARD_FILE).read_text(encoding="utf-8"))
            out[entry.name] = {"data": json.loads(json.dumps(data, default=str))}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            out[entry.name] = {"error": f"is not valid YAML: {exc}"}
    return out


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
        from flopcalc.discovery import index

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
