"""Z-Image ControlNet: ``ZImageControlNetModel`` (diffusers ``models/controlnets/controlnet_z_image.py``).

The ControlNet holds its own control blocks and control patch embedder; ``ZImageControlNetPipeline.__init__`` hands
it the transformer's ``t_embedder``, ``all_x_embedder``, ``cap_embedder``, ``noise_refiner``, ``context_refiner`` and
pad tokens (``from_transformer``, controlnet_z_image.py:511-522), which its forward runs again: their work counts in
the ControlNet's row, their parameters with the transformer (``RunShape.shared``: the transformer's config; without
one, ``ZImageTransformer2DModel``'s class defaults size them). One forward (controlnet_z_image.py:682-866), on
``Nₚ`` latent and ``Tₚ`` caption tokens, each padded to a multiple of 32 as the transformer pads them:

* ``t_embedder`` once; ``all_x_embedder`` (the latent) and ``control_all_x_embedder`` (the control context,
  ``control_in_dim`` channels: the control image's latent, zero-padded or, for inpainting, with the mask and the
  masked image's latent) on the ``Nₚ`` tokens of the pipeline's patch pair (2, 1);
* ``add_control_noise_refiner`` ``"control_layers"``: every ``control_layers`` block runs first on the ``Nₚ`` control
  tokens (the hints for the noise refiner); ``"control_noise_refiner"``: ``control_noise_refiner`` control blocks do,
  ``n_refiner_layers`` of them; None: ``control_noise_refiner`` plain modulated blocks refine the control context
  after the caption (no hints);
* the transformer's ``noise_refiner`` on the ``Nₚ`` latent tokens, ``cap_embedder`` and ``context_refiner`` on the
  ``Tₚ`` caption tokens;
* every ``control_layers`` block (:func:`~flopcalc.formulas.z_image.z_image_control_block`; the one at place 0 with
  ``before_proj``) on the ``Nₚ + Tₚ`` unified tokens, each returning its ``after_proj`` hint.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYER_COUNTS, LAYERS, NULL, SIZE, SIZES, Choice, Config, boolean, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.engine.cost import Node, module_list, work_only
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.architectures import z_image
from flopcalc.formulas import ops
from flopcalc.formulas.z_image import padded_length, z_image_block, z_image_control_block

#: ``ZImageControlNetModel.__init__`` keyword defaults (controlnet_z_image.py:433-447).
DEFAULTS = {
    "control_layers_places": None,
    "control_refiner_layers_places": None,
    "control_in_dim": None,
    "add_control_noise_refiner": None,
    "all_patch_size": [2],
    "all_f_patch_size": [1],
    "dim": 3840,
    "n_refiner_layers": 2,
    "n_heads": 30,
    "n_kv_heads": 30,
    "norm_eps": 1e-5,
    "qk_norm": True,
}

#: The transformer modules ``from_transformer`` shares (the pad tokens and the rotary embedder hold no work).
SHARED = ("t_embedder", "all_x_embedder", "cap_embedder", "noise_refiner", "context_refiner")
#: ``add_control_noise_refiner``'s values (controlnet_z_image.py:452-497, 727-735).
MODES = (None, "control_layers", "control_noise_refiner")

#: Every config key ``ZImageControlNetModel`` reads (assembler and pipeline plans), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("ZImageControlNetModel", {
    "control_layers_places": LAYER_COUNTS, "control_refiner_layers_places": LAYER_COUNTS | NULL,
    "control_in_dim": SIZE, "add_control_noise_refiner": Choice(*MODES), "all_patch_size": SIZES,
    "all_f_patch_size": SIZES, "dim": SIZE, "n_refiner_layers": LAYERS, "n_heads": SIZE, "n_kv_heads": SIZE,
    "qk_norm": FLAG,
})


def _work(node: Node) -> Node:
    """``node``'s work with no parameters: a module of another component, run here."""
    return replace(node, cost=work_only(node.cost), children=tuple(_work(c) for c in node.children))


def _twice(node: Node, first: Node) -> Node:
    """``node`` plus the work of an earlier call of the same modules on other tokens (``first``, the same tree)."""
    return replace(node, cost=node.cost + work_only(first.cost),
                   children=tuple(_twice(a, b) for a, b in zip(node.children, first.children, strict=True)))


def _places(config: Config) -> list[int]:
    places = config["control_layers_places"]
    if not isinstance(places, list) or 0 not in places:
        raise ConfigError(f"{config.component}/config.json: 'control_layers_places' must list the transformer layers "
                          f"the hints go to, 0 among them (ZImageControlNetModel asserts it), got {places!r}")
    return places


@register("ZImageControlNetModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_z_image.py")
def z_image_controlnet(config: Config, shape: RunShape) -> Node:
    dim = positive_int(config, "dim")
    heads = positive_int(config, "n_heads")
    qk_norm = boolean(config, "qk_norm")
    places = _places(config)
    mode = config["add_control_noise_refiner"]
    control_in = positive_int(config, "control_in_dim")
    transformer = shape.shared if shape.shared is not None else Config("transformer", {}, z_image.DEFAULTS)
    if (positive_int(transformer, "dim"), positive_int(transformer, "n_heads")) != (dim, heads):
        raise ConfigError(f"{config.component}/config.json: dim {dim} and n_heads {heads} must be the transformer's "
                          f"({transformer['dim']}, {transformer['n_heads']}): the control stream is added to its own")
    pairs = list(zip(positive_int_list(config, "all_patch_size"), positive_int_list(config, "all_f_patch_size")))
    if (z_image.PATCH_SIZE, z_image.F_PATCH_SIZE) not in pairs:
        raise ConfigError(f"{config.component}/config.json: the pipeline runs patch_size {z_image.PATCH_SIZE} with "
                          f"f_patch_size {z_image.F_PATCH_SIZE}, which 'all_patch_size'/'all_f_patch_size' do not hold")
    n = padded_length(ops.exact_div(shape.latent_height, z_image.PATCH_SIZE)
                      * ops.exact_div(shape.latent_width, z_image.PATCH_SIZE))
    t = padded_length(shape.text_len)
    base = z_image.z_image_transformer(transformer, shape)  # the shared modules, sized by the transformer's config
    shared = [_work(base.find(name)) for name in SHARED]

    def control(tokens: Any, before: bool) -> Node:
        return z_image_control_block(tokens=tokens, dim=dim, heads=heads, qk_norm=qk_norm, before=before)

    layers = [control(n + t, place == 0) for place in places]
    if mode == "control_layers":  # the same blocks ran first on the Nₚ control tokens (controlnet_z_image.py:727-740)
        layers = [_twice(block, control(n, place == 0)) for block, place in zip(layers, places)]
    children = [
        Node("control_all_x_embedder", children=tuple(
            Node(f"{p}-{f}", ops.linear(n if (p, f) == (z_image.PATCH_SIZE, z_image.F_PATCH_SIZE) else 0,
                                        f * p * p * control_in, dim)) for p, f in pairs)),
        module_list("control_layers", layers),
    ]
    refiners = count_int(config, "n_refiner_layers")
    if mode is None:
        children.append(module_list("control_noise_refiner", [
            z_image_block(tokens=n, dim=dim, heads=heads, qk_norm=qk_norm, modulation=True)] * refiners))
    elif mode == "control_noise_refiner":
        children.append(module_list("control_noise_refiner", [control(n, i == 0) for i in range(refiners)]))
    return Node("controlnet", children=tuple(shared + children), formula="z_image_controlnet")
