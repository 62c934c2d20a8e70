"""Architecture assemblers: config → tree of block formulas, one module per model family.

Each module registers its classes with :func:`flopcalc.engine.registry.register` when imported. Nothing
here imports them: the registry imports the module a class needs on first use (through
:mod:`flopcalc.engine.discovery`'s index), or all of them when asked for the full list.
"""
