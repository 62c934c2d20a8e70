"""The README and docs/: short README with the two commands first, every link resolving, every example running,
and every printed example output what the command prints today."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_readme_is_short_and_starts_with_the_two_commands():
    text = _text(REPO / "README.md")
    assert len(text.splitlines()) <= 300
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert blocks[0].strip() == "pip install . && flopcalc estimate flux-dev"
    assert "<!-- test-command" in text.split("```bash", 3)[2] or "<!-- test-command" in text[:text.index(blocks[1])]
    assert "pip install -e \".[validate,test,plot]\" && python -m pytest -q" in blocks[1]


def test_there_are_docs_pages_and_the_readme_links_each():
    docs = [p for p in PAGES if p.parent.name == "docs"]
    assert len(docs) >= 5
    readme = _text(REPO / "README.md")
    for page in docs:
        assert f"(docs/{page.name})" in readme, f"README does not link docs/{page.name}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set[str]:
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", _text(page), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_link_resolves(page):
    broken = []
    for target in LINK.findall(_text(page)):
        if target.startswith(("http://", "https://", "mailto:")):
            if not re.fullmatch(r"https?://[\w.-]+(/\S*)?", target):
                broken.append(target)
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, f"{_rel(page)}: broken links {broken}"


def _examples(page: Path) -> list[str]:
    out = []
    for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", _text(page), re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                part = part.strip().removeprefix("$ ")
                if part.startswith("flopcalc "):
                    out.append(part)
    return out


EXAMPLES = sorted({(line, _rel(page)) for page in PAGES for line in _examples(page)})


def test_the_docs_have_examples():
    assert len(EXAMPLES) >= 10


@lru_cache(maxsize=None)
def _run(command: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flopcalc", *shlex.split(command)[1:]], capture_output=True,
                          text=True, timeout=180, cwd=cwd)


@pytest.mark.parametrize("example, page", EXAMPLES)
def test_every_example_runs(example, page, tmp_path):
    res = _run(example, str(tmp_path))
    assert res.returncode == 0, (page, example, res.stderr)
    assert res.stdout.strip()


def _printed_examples() -> list[tuple[str, str, tuple[str, ...]]]:
    """``text`` blocks that show a command (``$ flopcalc …``) and what it prints: (page, command, lines)."""
    out = []
    for page in PAGES:
        for block in re.findall(r"```text\n(.*?)```", _text(page), re.S):
            lines = block.splitlines()
            if lines and lines[0].startswith("$ flopcalc "):
                shown = tuple(line for line in lines[1:] if line.strip() and line.strip() != "…")
                out.append((_rel(page), lines[0][2:], shown))
    return out


@pytest.mark.parametrize("page, command, shown", _printed_examples(), ids=lambda v: v if isinstance(v, str) else "")
def test_printed_examples_are_what_the_command_prints(page, command, shown, tmp_path):
    res = _run(command, str(tmp_path))
    assert res.returncode == 0, res.stderr
    printed = res.stdout.splitlines()

    def matches(line: str) -> bool:  # "…" inside a shown line stands for what it leaves out
        pattern = re.compile(".*".join(re.escape(part) for part in line.split("…")))
        return any(pattern.fullmatch(out) for out in printed)

    stale = [line for line in shown if not matches(line)]
    assert not stale, f"{page}: `{command}` no longer prints {stale[:3]}"
