"""Text tables for people (aligned columns under a rule) and the one switch every result type renders
through: a table, JSON (the result's ``to_dict()``) or CSV."""

from __future__ import annotations

import json
from typing import Any, Callable

FORMATS = ("table", "json", "csv")


def columns(rows: list[tuple[str, ...]], right: tuple[int, ...], rule_before_last: bool = False) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def fmt(r: tuple[str, ...]) -> str:
        return "  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))).rstrip()

    out = [fmt(rows[0]), "-" * len(fmt(rows[0]))]
    body = [fmt(r) for r in rows[1:]]
    if rule_before_last:
        body.insert(len(body) - 1, "-" * len(out[0]))
    return out + body


def render_as(est: Any, fmt: str, table: Callable[[Any], str], to_csv: Callable[[Any], str]) -> str:
    """``est`` (a frozen result with ``to_dict()``) as a table, JSON or CSV."""
    if fmt == "json":
        return json.dumps(est.to_dict(), indent=2) + "\n"
    if fmt == "csv":
        return to_csv(est)
    if fmt == "table":
        return table(est)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def ruled_table(rows: list[tuple[str, ...]], numeric_from: int) -> list[str]:
    """Rows as aligned columns (columns from ``numeric_from`` on right-aligned), a rule under the header and
    above the last (total) row."""
    return columns(rows, right=tuple(range(numeric_from, len(rows[0]))), rule_before_last=True)
