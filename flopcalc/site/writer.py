"""``flopcalc site --out DIR``: the static site, written as five files that work from ``file://`` and from any
static host (a Hugging Face static Space, GitHub Pages): ``index.html`` (the page, with a Content-Security-Policy that
allows nothing outside the folder), ``style.css``, ``calc.js`` (the ports of flopcalc's evaluation functions),
``app.js`` (the page) and ``data.js`` (:func:`flopcalc.site.export.export`, as a script: a browser opening a file
may not ``fetch`` a JSON file beside it)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.version import __version__
from flopcalc.render.output import OutputError

#: The files of the site, from the package's ``static`` folder (``data.js`` is written from the export).
STATIC = ("index.html", "style.css", "calc.js", "app.js")
#: The whole site stays under this many bytes (a page people open on a phone).
MAX_BYTES = 5 * 2**20


@dataclass(frozen=True)
class Site:
    """What :func:`write_site` wrote."""

    folder: Path
    files: tuple[str, ...]
    bytes: int
    cards: int
    with_law: int

    def summary(self) -> str:
        return (f"wrote {self.folder / 'index.html'}: {self.cards} models ({self.with_law} with a law), "
                f"{len(self.files)} files, {self.bytes / 2**20:.2f} MB; open it in a browser, or publish the folder "
                "(docs/site.md)")


def _out_folder(out: str) -> Path:
    """The output folder: created when missing (its parent must exist); a file there is refused."""
    if not out or not out.strip():
        raise OutputError("--out: give a folder")
    folder = Path(os.path.expanduser(out))
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--out {out!r} is a file; give a folder (it is created if missing)")
    if not folder.exists():
        if not folder.parent.is_dir():
            raise OutputError(f"--out {out!r}: the folder {str(folder.parent)!r} does not exist; create it first")
        try:
            folder.mkdir()
        except OSError as exc:
            raise OutputError(f"--out {out!r}: cannot create it: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK):
        raise OutputError(f"--out {out!r}: no permission to write in it")
    return folder


def page_files(data: dict[str, Any]) -> dict[str, bytes]:
    """The site's files, by name, for the exported ``data``."""
    static = resources.files("flopcalc.site") / "static"
    out = {}
    for name in STATIC:
        text = (static / name).read_text(encoding="utf-8")
        if name == "index.html":
            text = text.replace("__VERSION__", __version__).replace("__CARDS__", str(len(data["cards"])))
        out[name] = text.encode("utf-8")
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/")
    out["data.js"] = f"window.FLOPCALC_DATA = {body};\n".encode("utf-8")
    return out


def write_site(out: str, *, models: Iterable[str] | None = None, jobs: int | None = None,
               progress: Callable[[str], None] | None = None) -> Site:
    """Export every bundled card (or ``models``) and write the site into the folder ``out``."""
    from flopcalc.site.export import card_names, export

    names = card_names(models)  # before the folder is made: a misspelt card is the first error
    folder = _out_folder(out)
    data = export(names, jobs=jobs, progress=progress)
    files = page_files(data)
    size = sum(len(b) for b in files.values())
    if size > MAX_BYTES:
        raise FlopcalcError(f"the site would be {size / 2**20:.1f} MB, over its {MAX_BYTES / 2**20:.0f} MB budget")
    for name, content in files.items():
        try:
            (folder / name).write_bytes(content)
        except OSError as exc:
            raise OutputError(f"--out {out!r}: cannot write {name}: {exc.strerror or exc}") from None
    return Site(folder, tuple(files), size, len(data["cards"]), sum(1 for c in data["cards"] if c.get("law") is not None))
