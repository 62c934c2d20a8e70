"""Plots of FLOPs against resolution (matplotlib, the optional ``[plot]`` extra): one panel per
model, FLOPs of one generation stacked by component over square image sides, log axes, and the
side where the denoiser's attention overtakes its linear layers marked."""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from flopcalc.errors import FlopcalcError


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FlopcalcError("plots need matplotlib: pip install 'flopcalc[plot]'") from None
    return plt


def default_sides(multiple: int = 64) -> list[int]:
    return list(range(4 * multiple, 4096 + 1, multiple))


def resolution_figure(laws: Sequence[Any], sides: Sequence[int]) -> Any:
    """A figure with one panel per symbolic law (:class:`flopcalc.symbolic.SymbolicReport`)."""
    from flopcalc.sweep import run_sweep
    from flopcalc.symbolic_report import crossover

    plt = _pyplot()
    fig, axes = plt.subplots(len(laws), 1, figsize=(7.5, 3.6 * len(laws)), squeeze=False)
    for ax, law in zip(axes[:, 0], laws):
        sweep = run_sweep(law, {"H": list(sides), "W": list(sides)})
        square = sweep.grid["H"] == sweep.grid["W"]
        x = sweep.grid["H"][square]
        order = np.argsort(x)
        parts = {k: v[square][order] for k, v in sweep.components.items()}
        # smallest at the bottom, so that on log axes every component keeps a visible band
        parts = dict(sorted(parts.items(), key=lambda kv: float(kv[1].mean())))
        ax.stackplot(x[order], *parts.values(), labels=list(parts), alpha=0.85)
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
    fig.tight_layout()
    return fig


def save(fig: Any, path: str) -> None:
    """PNG or SVG by the file's extension."""
    if not path.lower().endswith((".png", ".svg")):
        raise FlopcalcError(f"--out {path!r}: give a .png or .svg file")
    fig.savefig(path, dpi=150)


def svg_text(fig: Any) -> str:
    """The figure as an inline SVG document (for the HTML report)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]
