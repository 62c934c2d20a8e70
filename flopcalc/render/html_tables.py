"""HTML tables for the report page's sections: a header row, then rows whose numeric columns align right and
whose tree rows (indented two spaces a level) indent."""

from __future__ import annotations

import html
from typing import Sequence


def html_table(rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])

    def cell(i: int, v: str) -> str:
        if i in numeric:
            return f'<td class="n">{html.escape(v)}</td>'
        depth = (len(v) - len(v.lstrip(" "))) // 2  # tree rows are indented two spaces a level
        pad = f' style="padding-left:{0.7 + 1.2 * depth:.1f}em"' if depth else ""
        return f"<td{pad}>{html.escape(v.strip())}</td>"

    body = "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
