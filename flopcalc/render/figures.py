"""Figures (matplotlib, the optional ``[plot]`` extra): the pyplot module set up headless, and a figure as PNG,
SVG or an inline SVG document."""

from __future__ import annotations

import io
from typing import Any

from flopcalc.engine.errors import FlopcalcError, install_hint

#: The files a figure can be written to.
SUFFIXES = (".png", ".svg")


def pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FlopcalcError(f"plots need matplotlib: {install_hint('plot')}") from None
    return plt


def figure_bytes(fig: Any, path: str) -> bytes:
    """The figure as PNG or SVG, by the extension of ``path``."""
    fmt = path.lower().rsplit(".", 1)[-1]
    if f".{fmt}" not in SUFFIXES:
        raise FlopcalcError(f"--out {path!r}: give a .png or .svg file")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=150)
    return buf.getvalue()


def svg_text(fig: Any) -> str:
    """The figure as an inline SVG document (for the HTML report)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]
