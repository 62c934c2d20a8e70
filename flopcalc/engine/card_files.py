"""Where the bundled model cards lie, and their ``card.yaml`` files read (``yaml.safe_load`` only).

The cards themselves (names, aliases, lookups) are :mod:`flopcalc.engine.cards`; this module only finds
and reads the files, for it and for the discovery index, which caches what it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; importlib.abc.Traversable on 3.10
    from importlib.resources.abc import Traversable

CARD_FILE = "card.yaml"


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
        return Path(__file__).resolve().parents[2] / "model_cards"
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


