"""The package's public functions (``flopcalc.estimate``, ``energy``, ``memory``, ``train``) are loaded lazily: a
submodule of the same name would replace the function with itself once imported (Python binds an imported
submodule as an attribute of its package), so no submodule may share a public name."""

from __future__ import annotations

import importlib
import pkgutil
import types

import flopcalc


def test_every_public_name_stays_a_function_after_every_submodule_is_imported():
    for info in pkgutil.iter_modules(flopcalc.__path__):
        if info.name == "__main__":  # runs the CLI
            continue
        try:
            importlib.import_module(f"flopcalc.{info.name}")
        except ImportError:  # an extra's module (the measuring harness without torch)
            continue
    for name in flopcalc.__all__:
        value = getattr(flopcalc, name)
        assert not isinstance(value, types.ModuleType), f"flopcalc.{name} is the module, not the function"
    assert {info.name for info in pkgutil.iter_modules(flopcalc.__path__)}.isdisjoint(flopcalc.__all__)


def test_memory_can_be_called_twice():
    first = flopcalc.memory("sd1.5")
    assert flopcalc.memory("sd1.5") == first
