"""Multi-GPU layouts of one generation as xDiT runs them: which degrees a model allows.

xDiT (github xdit-project/xDiT, ``xfuser/config/config.py`` ``ParallelConfig``) splits a DiT denoiser's work over
``N = cfg × ulysses × ring`` GPUs:

* CFG parallel: the two guidance passes on two GPUs (``cfg_degree`` 2), only where the pipeline runs two passes;
* Ulysses sequence parallelism: attention heads split over ``ulysses_degree`` GPUs, which must divide the heads
  (``num_attention_heads``: each GPU holds whole heads after the all-to-all);
* ring attention: the sequence split over ``ring_degree`` GPUs, which must divide the sequence of the attention
  (every GPU holds an equal block).

The heads come from the denoiser's ``config.json`` (``num_attention_heads``); the sequence from the counts
themselves: the largest attention call scores ``heads × L × L`` for ``L`` tokens. A denoiser without
``num_attention_heads`` (a UNet) can only run CFG parallel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flopcalc.engine.errors import FlopcalcError

if TYPE_CHECKING:
    from flopcalc.engine.cost import Node
    from flopcalc.flops.report import Report

#: The most GPUs a layout is searched for (a listing of the legal counts stops there).
MAX_LISTED = 64


@dataclass(frozen=True)
class Layout:
    cfg: int
    ulysses: int
    ring: int

    @property
    def gpus(self) -> int:
        return self.cfg * self.ulysses * self.ring

    def describe(self) -> str:
        return f"cfg {self.cfg} × ulysses {self.ulysses} × ring {self.ring}"


@dataclass(frozen=True)
class Limits:
    """What bounds the degrees of one denoiser: guidance passes, attention heads, tokens of its longest attention."""

    passes: int
    heads: int | None
    tokens: int | None


def _largest_scores(node: "Node") -> int:
    return max([node.cost.scores or 0, *(_largest_scores(c) for c in node.children)])


def limits(report: "Report") -> Limits:
    denoisers = [c for c in report.components if c.role == "denoiser"]
    if not denoisers:
        raise FlopcalcError(f"{report.model}: no denoiser to split over several GPUs")
    den = max(denoisers, key=lambda c: c.macs)
    heads = report.configs.get(den.component, {}).get("num_attention_heads")
    if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
        return Limits(report.passes, None, None)
    scores = _largest_scores(den.tree)
    tokens = math.isqrt(scores // heads) if scores and scores % heads == 0 else None
    if tokens is not None and tokens * tokens * heads != scores:
        tokens = None
    return Limits(report.passes, heads, tokens)


def layouts(lim: Limits, num_gpus: int) -> list[Layout]:
    """Every ``cfg × ulysses × ring`` split of ``num_gpus`` the limits allow, most Ulysses first (xDiT's advice:
    Ulysses before ring where the heads allow it)."""
    out = []
    for cfg in ((1, 2) if lim.passes >= 2 else (1,)):
        if num_gpus % cfg:
            continue
        rest = num_gpus // cfg
        # Ulysses degrees divide the heads: O(heads) candidates whatever the count asked
        for ulysses in (d for d in range(min(rest, lim.heads or 1), 0, -1) if rest % d == 0):
            ring = rest // ulysses
            if (ulysses > 1 or ring > 1) and lim.heads is None:
                continue
            if ulysses > 1 and lim.heads % ulysses:
                continue
            if ring > 1 and (lim.tokens is None or lim.tokens % ring):
                continue
            out.append(Layout(cfg, ulysses, ring))
    return sorted(out, key=lambda l: (-l.cfg, -l.ulysses))


def layout(report: "Report", num_gpus: int) -> tuple[str, ...]:
    """The layout ``num_gpus`` GPUs would run as, said aloud; a count the model does not allow is one error
    naming the counts it does."""
    lim = limits(report)
    found = layouts(lim, num_gpus)
    if found:
        return (f"{num_gpus} GPUs as {found[0].describe()}" + (f" ({lim.heads} heads, {lim.tokens} tokens)"
                                                              if lim.heads else ""),)
    legal = [n for n in range(2, MAX_LISTED + 1) if layouts(lim, n)]
    why = (f"{lim.heads} attention heads, {lim.tokens or 'unknown'} tokens, {lim.passes} guidance pass(es)"
           if lim.heads else f"no num_attention_heads (not a DiT): CFG parallel only, {lim.passes} pass(es)")
    listed = ", ".join(map(str, legal[:12])) + (" …" if len(legal) > 12 else "") if legal else "none above 1"
    raise FlopcalcError(f"--num-gpus {num_gpus}: {report.model} cannot be split that way ({why}); legal GPU counts: "
                        f"{listed}")
