"""Architecture assemblers: config → tree of block formulas, one module per model family.

Each module registers its classes with :func:`flopcalc.registry.register` when imported;
:func:`load_all` imports every module of this package (the registry calls it on first use).
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


load_all()
