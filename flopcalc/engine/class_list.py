"""The diffusers class lists shipped in the package (``flopcalc/data/diffusers/<version>.json``, written by
``validation/extract_diffusers_classes.py``): every pipeline class a diffusers release exports with the model
classes its ``__init__`` hints allow per component, and every model class, each marked ``from_config`` where the
library builds it from a config alone. ``flopcalc coverage`` reads them, and so does ``estimate --measure`` to
know which class a pipeline expects in a component's place (:mod:`flopcalc.engine.measure.stand_in`). No
diffusers is needed at run time."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from flopcalc.engine.errors import OptionError


def shipped_versions() -> list[str]:
    """The diffusers versions a class list ships for, oldest first."""
    folder = files("flopcalc").joinpath("data/diffusers")
    names = [Path(entry.name).stem for entry in folder.iterdir() if entry.name.endswith(".json")]
    return sorted(names, key=lambda v: tuple(int(p) if p.isdigit() else 0 for p in v.split(".")))


def class_list(version: str | None = None) -> dict[str, Any]:
    """The shipped class list of diffusers ``version`` (default: the newest shipped)."""
    versions = shipped_versions()
    version = version or versions[-1]
    if version not in versions:
        raise OptionError(f"no class list for diffusers {version}; shipped: {', '.join(versions)} "
                          "(python validation/extract_diffusers_classes.py writes one from an installed diffusers)")
    return _read(version)


@lru_cache(maxsize=4)
def _read(version: str) -> dict[str, Any]:
    return json.loads(files("flopcalc").joinpath(f"data/diffusers/{version}.json").read_text(encoding="utf-8"))


def slot_classes(pipeline: str, component: str) -> tuple[dict[str, Any], ...]:
    """The classes the newest class list's ``pipeline.__init__`` hint allows for ``component`` (entries with
    ``class``, ``library``, ``from_config``), in the hint's order; empty for a pipeline or component it does not
    list."""
    entry = class_list()["pipelines"].get(pipeline)
    if entry is None:
        return ()
    return tuple(c for comp in entry["components"] if comp["name"] == component for c in comp["classes"])


def builds_from_config(class_name: str) -> bool:
    """Whether the newest class list says the library builds ``class_name`` from a config alone (a model class
    diffusers exports, or a class a pipeline's hint names); False for a class it does not list."""
    data = class_list()
    if class_name in data["models"]:
        return bool(data["models"][class_name].get("from_config"))
    for entry in data["pipelines"].values():
        for comp in entry["components"]:
            for c in comp["classes"]:
                if c["class"] == class_name:
                    return bool(c.get("from_config"))
    return False


def class_calls(class_name: str) -> dict[str, list[str]] | None:
    """The parameters of ``class_name``'s ``forward`` (``decode``, ``encode``) by name, ``**`` last where it takes
    any keyword, from the newest class list (a class it builds from a config); None for a class it does not list."""
    return class_list().get("calls", {}).get(class_name)
