"""``StableUnCLIPImageNormalizer`` (diffusers ``pipelines/stable_diffusion/stable_unclip_image_normalizer.py``): the
mean and standard deviation of the CLIP image embeddings stable unCLIP noises. Its ``scale`` / ``unscale`` are
elementwise (``(x − mean) / std``, ``x · std + mean``): no MACs; ``2 · embedding_dim`` parameters (``mean`` and
``std``, each ``(1, embedding_dim)``)."""

from __future__ import annotations

from flopcalc.engine.config import SIZE, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops

#: ``StableUnCLIPImageNormalizer.__init__`` keyword defaults.
DEFAULTS = {"embedding_dim": 768}

declare_keys("StableUnCLIPImageNormalizer", {"embedding_dim": SIZE})


@register("StableUnCLIPImageNormalizer", role="image_normalizer", defaults=DEFAULTS,
          source="diffusers/pipelines/stable_diffusion/stable_unclip_image_normalizer.py")
def stable_unclip_image_normalizer(config: Config, shape: RunShape) -> Node:
    """``scale`` then ``unscale`` of one embedding (``noise_image_embeddings``): 2 × embedding_dim elementwise ops
    each (not counted), parameters ``mean`` and ``std``."""
    d = positive_int(config, "embedding_dim")
    return Node("image_normalizer", ops.parameters(2 * d), formula="image_normalizer")
