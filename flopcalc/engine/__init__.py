"""The counting engine: from what a user names (a card, a folder, a config.json, a Hub id) to exact cost trees.

It knows nothing of the questions asked of the counts (FLOPs reports, energy, memory, training): those are
the subpackages above it, which read its trees. Inside, from the bottom up: value types and errors
(``errors``, ``limits``, ``cost``, ``gradients``: the vocabulary every formula and family speaks), the block
formulas (the top-level ``formulas/``, installed as ``flopcalc.formulas``), then config access and the
registries (``config``, ``registry``, ``settings``, ``loading``, ``perturbed_attention``), the plugin index
(``discovery``) and the inputs (``cards``, ``sources``), the families (``architectures/``: config → blocks;
``pipelines/``: which component runs how often on what shape) and the fallback that measures a class with no
formula on the meta device (``measure/``). ``docs/architecture.md`` gives the whole layer order.
"""
