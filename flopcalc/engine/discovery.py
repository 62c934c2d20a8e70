"""Lazy discovery: which module registers which architecture, which pipeline, which card.

Answering one question (``flopcalc estimate flux-dev``) needs the FLUX plan, four assemblers and one
card, not the forty-odd modules and twenty card files of the package. Registration stays where it is
(a decorator in each family's own module: nothing central is edited per family); this module keeps an
*index* of what each module registers, built the one way that cannot drift, by importing every
module and reading the registries, and caches it.

The cache is one JSON file in the user's cache folder (``FLOPCALC_CACHE_DIR``, else
``$XDG_CACHE_HOME/flopcalc``, else ``~/.cache/flopcalc``), keyed by a fingerprint of the package's
family modules and card files (name, size, modification time) and the flopcalc version: editing,
adding or removing a family module or a card rebuilds it on the next run. Where the folder cannot be
written the index is rebuilt in memory each run (correct, only slower). ``FLOPCALC_CACHE_DIR=""``
turns the cache off.

A lookup that the index cannot answer falls back to importing everything, so a stale or corrupt
cache can cost time, never a wrong answer.

This module sits below the registries it indexes: each registry (:mod:`flopcalc.engine.registry`, the
pipeline plans, the family options) hands it a *section* with :func:`provide` when it is imported, and the
index is built by importing every family module (which imports those registries) and reading the sections.
Family modules are imported by name, as plugins: the only imports in the package made from a string.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = ["Index", "index", "provide", "architecture_modules", "pipeline_modules", "denoiser_modules",
           "load_everything", "load_modules", "load_class", "cache_file"]

_FORMAT = 4
_PACKAGE = Path(__file__).resolve().parents[1]  # the flopcalc package


#: The sections every index has, each provided by the registry that owns it (:func:`provide`).
SECTIONS = ("architectures", "pipelines", "served", "denoisers", "options", "block_kinds")
_PROVIDERS: dict[str, Callable[[], Any]] = {}


def provide(section: str, read: Callable[[], Any]) -> None:
    """Register ``read``, which returns ``section`` of the index from the registry that calls this (once,
    when that registry's module is imported)."""
    if section not in SECTIONS:
        raise RuntimeError(f"unknown index section {section!r} (one of {', '.join(SECTIONS)})")
    _PROVIDERS[section] = read


class Index:
    """What each module registers: ``architectures`` {class name or alias: [module]},
    ``pipelines`` {pipeline class name: module}, ``served`` {pipeline class name: [modules of the plans
    that may serve its folders]}, ``denoisers`` {denoiser class: [plan module]}, ``options`` {family option:
    its declaration (:mod:`flopcalc.engine.settings`)}, ``block_kinds`` [every formula a per-block summary stops
    at, :func:`flopcalc.engine.cost.block_kinds`], ``cards`` {card folder: parsed card.yaml}."""

    def __init__(self, data: Mapping[str, Any]):
        self.architectures: dict[str, list[str]] = data["architectures"]
        self.pipelines: dict[str, str] = data["pipelines"]
        self.served: dict[str, list[str]] = data["served"]
        self.denoisers: dict[str, list[str]] = data["denoisers"]
        self.options: dict[str, dict[str, Any]] = data["options"]
        self.block_kinds: list[str] = data["block_kinds"]
        self.cards: dict[str, dict[str, Any]] = data["cards"]

    def as_dict(self) -> dict[str, Any]:
        return {"architectures": self.architectures, "pipelines": self.pipelines, "served": self.served,
                "denoisers": self.denoisers, "options": self.options, "block_kinds": self.block_kinds,
                "cards": self.cards}


def _family_dirs() -> tuple[Path, Path]:
    return _PACKAGE / "engine" / "architectures", _PACKAGE / "engine" / "pipelines"


def _module_names(folder: Path, package: str) -> list[str]:
    import pkgutil

    return [f"{package}.{info.name}" for info in pkgutil.iter_modules([str(folder)]) if info.name != "base"]


def load_everything() -> None:
    """Import every architecture and pipeline module (each registers what it defines)."""
    import importlib

    arch_dir, pipe_dir = _family_dirs()
    for name in _module_names(arch_dir, "flopcalc.engine.architectures") + _module_names(pipe_dir, "flopcalc.engine.pipelines"):
        importlib.import_module(name)


def _fingerprint(cards_dir: Path | None) -> list[Any]:
    from flopcalc.engine.version import __version__

    entries: list[Any] = [_FORMAT, __version__, list(sys.version_info[:2]), str(_PACKAGE)]
    folders = [*_family_dirs()]
    for folder in folders:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.endswith(".py"):
                st = entry.stat()
                entries.append([folder.name, entry.name, st.st_size, st.st_mtime_ns])
    if cards_dir is not None:
        for entry in sorted(os.scandir(cards_dir), key=lambda e: e.name):
            card = Path(entry.path, "card.yaml")
            if entry.is_dir() and card.is_file():
                st = card.stat()
                entries.append(["card", entry.name, st.st_size, st.st_mtime_ns])
    return entries


def cache_file() -> Path | None:
    """Where the index is cached, or None when caching is off: one file per installed copy of the
    package (two checkouts or environments do not overwrite each other's index)."""
    import zlib

    configured = os.environ.get("FLOPCALC_CACHE_DIR")
    if configured == "":
        return None
    if configured is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        configured = os.path.join(base, "flopcalc")
    tag = format(zlib.crc32(str(_PACKAGE).encode()), "08x")
    return Path(configured) / f"index-{tag}.json"


def _build(cards_dir: Path | None) -> Index:
    """Import everything and read what registered where (the registries record each module)."""
    from flopcalc.engine.card_files import read_all_card_data

    load_everything()
    missing = [s for s in SECTIONS if s not in _PROVIDERS]
    if missing:
        raise RuntimeError(f"no registry provided the index sections {missing}")
    sections = {s: _PROVIDERS[s]() for s in SECTIONS}
    return Index({**sections, "cards": read_all_card_data() if cards_dir is not None else {}})


_INDEX: list[Index] = []


def index() -> Index:
    """The index, from the cache when it is current, else built (and cached when possible)."""
    if _INDEX:
        return _INDEX[0]
    from flopcalc.engine.card_files import cards_dir

    folder = cards_dir()
    fingerprint = _fingerprint(folder)
    path = cache_file()
    built = _read_cache(path, fingerprint) if path is not None else None
    if built is None:
        built = _build(folder)
        if path is not None:
            _write_cache(path, fingerprint, built)
    _INDEX.append(built)
    return built


def _read_cache(path: Path, fingerprint: list[Any]) -> Index | None:
    try:
        data = json.loads(path.read_bytes())
        if data.get("fingerprint") != json.loads(json.dumps(fingerprint)):
            return None
        return Index(data["index"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_cache(path: Path, fingerprint: list[Any], built: Index) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fingerprint": fingerprint, "index": built.as_dict()}))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    except (OSError, TypeError, ValueError):
        pass  # a read-only home: the index lives in memory for this run


def architecture_modules(class_name: str) -> list[str]:
    return index().architectures.get(class_name, [])


def pipeline_modules(pipeline: str) -> list[str]:
    """The module of ``pipeline``'s plan, then those of the plans that may serve its folders."""
    module = index().pipelines.get(pipeline)
    return ([module] if module else []) + index().served.get(pipeline, [])


def denoiser_modules(class_name: str) -> list[str]:
    return index().denoisers.get(class_name, [])


def load_modules(modules: list[str]) -> None:
    """Import family modules by name (each registers what it defines on import)."""
    import importlib

    for module in modules:
        importlib.import_module(module)


def load_class(class_name: str | None) -> None:
    """Import the modules that register ``class_name`` (its assemblers, config keys, loading rules)."""
    if class_name:
        load_modules(architecture_modules(class_name))


def reset() -> None:
    """Forget the in-memory index (tests)."""
    _INDEX.clear()
