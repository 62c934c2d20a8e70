"""Perturbed-attention guidance (PAG): which self-attention layers a PAG pipeline perturbs, and what
each batch row runs there.

diffusers ``pipelines/pag/pag_utils.py`` ``PAGMixin._set_pag_attn_processor`` (lines 37-92) gives
every module of the denoiser that is an ``Attention`` and not a cross-attention
(``not module.is_cross_attention``), and whose name ``re.search``-es one of ``pag_applied_layers``
(and is no "fake integral match": both last dotted parts numeric and equal), the PAG processor; a
layer id that matches no such module is a ``ValueError``. The ids are regular expressions there:
``"blocks.1"`` matches ``transformer_blocks.1.attn`` and ``transformer_blocks.10.attn`` to ``.19``
alike (``.`` matches any character). flopcalc accepts only simple ids (letters, digits, ``_``, ``.``:
no regular-expression syntax beyond the dot) and matches them exactly as diffusers does.

The processors (``models/attention_processor.py``: ``PAGCFGIdentitySelfAttnProcessor2_0`` :5142,
``PAGIdentitySelfAttnProcessor2_0`` :5043, the joint :1508/:1664, HunyuanDiT :3325/:3448 and Sana
linear :5393/:5448 variants) split the batch into the original rows (uncond and cond with CFG, cond
without), which run attention, and the perturbed row, which takes the identity path: ``to_v`` then
``to_out`` only (the joint variant instead masks the image-image scores to the identity and runs the
full attention). A run shape carries a :class:`PerturbedAttention` for either kind of row
(``identity``), and the denoiser's assembler hands the per-layer choice to its block formulas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from flopcalc.engine.errors import OptionError

#: A layer id flopcalc accepts: dotted identifiers (``mid``, ``down_blocks.1``, ``blocks.14``).
#: At most this many layer ids, each at most this long.


def layer_ids(value: object) -> tuple[str, ...]:
    """``pag_applied_layers`` as given (one id or a list of ids), validated: simple dotted ids only."""
    from flopcalc.engine.settings import simple_names

    return simple_names(value, "pag_applied_layers")


#: Denoiser classes whose assemblers read a run's ``perturbed`` (:func:`supports_perturbation`).
_PERTURBABLE: set[str] = set()


def supports_perturbation(class_name: str) -> None:
    """Declare, in the architecture module, that ``class_name``'s assembler realises ``RunShape.perturbed``."""
    _PERTURBABLE.add(class_name)


def check_perturbable(class_name: str, component: str) -> None:
    """Refuse PAG on a denoiser class whose assembler would not realise it (its module is loaded first)."""
    from flopcalc.engine.registry import lookup

    lookup(class_name, "forward", component=component)
    if class_name not in _PERTURBABLE:
        raise OptionError(f"{component}: flopcalc does not model perturbed-attention guidance on {class_name}; "
                          "estimate with --pag-scale 0")


def _fake_integral_match(layer_id: str, name: str) -> bool:
    """``PAGMixin``'s ``is_fake_integral_match`` (pag_utils.py:60)."""
    a, b = layer_id.split(".")[-1], name.split(".")[-1]
    return a.isnumeric() and b.isnumeric() and a == b


@dataclass(frozen=True)
class PerturbedAttention:
    """The PAG layers of one denoiser forward and the rows this run stands for: ``identity`` True for
    the perturbed row (identity attention in the chosen layers), False for an original row (uncond,
    cond), which runs the PAG processor's original path there."""

    layers: tuple[str, ...]
    identity: bool

    def applies(self, name: str) -> bool:
        """Whether the self-attention module ``name`` gets the PAG processor."""
        return any(re.search(layer, name) is not None and not _fake_integral_match(layer, name)
                   for layer in self.layers)

    def select(self, self_attention: Iterable[str], component: str) -> frozenset[str]:
        """The names among the denoiser's ``self_attention`` modules that get the PAG processor; a
        layer id matching none is refused, as diffusers refuses it."""
        names = list(self_attention)
        chosen = frozenset(n for n in names if self.applies(n))
        for layer in self.layers:
            if not any(re.search(layer, n) is not None and not _fake_integral_match(layer, n) for n in names):
                raise OptionError(f"{component}: pag_applied_layers {layer!r} matches no self-attention layer "
                                  f"(diffusers: 'Cannot find PAG layer'); e.g. {', '.join(_examples(names))}")
        return chosen


def _examples(names: Sequence[str]) -> list[str]:
    return [names[0], names[len(names) // 2], names[-1]] if names else ["(the model has none)"]


def selected(perturbed: PerturbedAttention | None, self_attention: Iterable[str], component: str) -> frozenset[str]:
    """The PAG-processed self-attention module names of a run (none for a run without PAG:
    ``perturbed`` is the run shape's)."""
    return frozenset() if perturbed is None else perturbed.select(self_attention, component)
