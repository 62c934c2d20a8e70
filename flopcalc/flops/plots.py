"""Plots of FLOPs against resolution (matplotlib, the optional ``[plot]`` extra): with several models their
totals overlaid on one axis first, then one panel per model, the FLOPs of one generation per component over square
image sides (log axes) beside each component's share (linear axis), and the side where the denoiser's attention
overtakes its linear layers marked."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flopcalc.engine.errors import FlopcalcError
from flopcalc.render.figures import pyplot


def default_sides(multiple: int = 64) -> list[int]:
    return list(range(4 * multiple, 4096 + 1, multiple))


def resolution_figure(laws: Sequence[Any], sides: Sequence[int]) -> Any:
    """A figure with one row per symbolic law (:class:`flopcalc.flops.symbolic.SymbolicReport`): on the
    left the FLOPs of each component and the total against the square image side (lines on log
    axes: a 0.2% component sits two decades below the total, as it should); on the right each
    component's share of the total (stacked areas on a linear 0–100% axis, so an area's height is
    its share). One colour per component name across every panel. With several laws a first row, across the
    figure, overlays their totals (one colour per model)."""
    from flopcalc.flops.sweep import component_label, evaluate
    from flopcalc.flops.symbolic_report import crossover

    plt = pyplot()
    missing = [law.model for law in laws if not {"H", "W"} <= set(law.symbols)]
    if missing:
        raise FlopcalcError(f"the FLOPs of {', '.join(missing)} do not depend on the image size: nothing to plot "
                            "against resolution (use `flopcalc symbolic` for the law)")
    x = np.asarray(sorted(set(sides)), dtype=np.int64)
    names = list(dict.fromkeys(component_label(c) for law in laws for c in law.components))
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    colour = {name: palette(i % palette.N) for i, name in enumerate(names)}
    overlay = len(laws) > 1  # several models: their totals first, overlaid on one axis
    fig = plt.figure(figsize=(12, 3.8 * (len(laws) + overlay)))
    grid = fig.add_gridspec(len(laws) + overlay, 2, width_ratios=[3, 2])
    axes = [(fig.add_subplot(grid[i + overlay, 0]), fig.add_subplot(grid[i + overlay, 1])) for i in range(len(laws))]
    totals = []
    for (ax, share_ax), law in zip(axes, laws):
        parts = evaluate(law, {"H": x, "W": x}, exact=False).components
        total = sum(parts.values())
        totals.append(total)
        for name, values in parts.items():
            ax.plot(x, values, color=colour[name], label=name, linewidth=1.6)
        ax.plot(x, total, color="black", linewidth=1, linestyle=":", label="total")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("image side (pixels, square)")
        ax.set_ylabel(f"FLOPs per generation ({law.convention})")
        ax.set_title(f"{law.model} · {law.pipeline}", fontsize=10)
        denoisers = {c.component for c in law.components if c.role == "denoiser"}
        for c in crossover(law):
            if c.side and x.min() <= c.side <= x.max() and c.component in denoisers:
                ax.axvline(c.side, color="black", linestyle="--", linewidth=1)
                ax.annotate(f"attention > linear\n({c.component}, {c.side:,.0f} px)", (c.side, ax.get_ylim()[0]),
                            xytext=(4, 8), textcoords="offset points", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(True, which="both", alpha=0.3)
        share_ax.stackplot(x, *[100 * v / total for v in parts.values()], labels=list(parts),
                           colors=[colour[n] for n in parts], alpha=0.85)
        share_ax.set_xscale("log", base=2)
        share_ax.set_ylim(0, 100)
        share_ax.set_xlim(x.min(), x.max())
        share_ax.set_xlabel("image side (pixels, square)")
        share_ax.set_ylabel("share of the total (%)")
        share_ax.grid(True, alpha=0.3)
    if overlay:
        _overlay(fig.add_subplot(grid[0, :]), x, laws, totals, plt.get_cmap("tab10"))
    fig.tight_layout()
    return fig


def _overlay(ax: Any, x: np.ndarray, laws: Sequence[Any], totals: Sequence[np.ndarray], palette: Any) -> None:
    """Every model's total FLOPs against the square image side on one pair of log axes (the compare mode of
    ``flopcalc site``'s chart): each line is the same total as the model's own panel below."""
    for i, (law, total) in enumerate(zip(laws, totals)):
        ax.plot(x, total, color=palette(i % palette.N), linewidth=2, label=law.model)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("image side (pixels, square)")
    ax.set_ylabel(f"FLOPs per generation ({laws[0].convention})")
    ax.set_title("total FLOPs, compared", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
