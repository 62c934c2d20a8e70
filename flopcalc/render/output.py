"""Where the command line's output goes, and what happens when it cannot go there.

One mechanism for every command (so a command added later inherits it):

* :func:`guard_streams` makes stdout and stderr safe on any terminal: a character the stream's
  encoding lacks (an ASCII or cp1252 console and ``ᵀ``, ``·``, ``×``, ``²``) is written as its
  ASCII stand-in (``T``, ``*``, ``x``, ``^2``) instead of raising ``UnicodeEncodeError``.
* :func:`check_writable` (before the work) and :func:`write_file` (after it) for ``--out`` /
  ``--html``: a missing folder, a directory, a read-only place or a full disk is a
  :class:`OutputError` with one line, never a traceback.
* :func:`run_guarded` runs a command: user errors print one line and exit 2, a closed or full
  stdout one line and exit 2, a broken pipe (``flopcalc … | head``) stops quietly as Unix tools do
  (exit 141), Ctrl-C prints one line and exits 130.
* :class:`Progress` shows progress of work that takes over a second, on stderr and only when stderr
  is a terminal.
* :func:`check_budget` refuses a grid too large up front, naming its size, the limit and the option
  that raises it.
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

from flopcalc.engine.errors import FlopcalcError

T = TypeVar("T")

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

#: ASCII stand-ins for the non-ASCII characters flopcalc prints.
ASCII_FALLBACK = {
    "ᵀ": "T", "·": "*", "×": "x", "²": "^2", "³": "^3", "≈": "~", "→": "->", "←": "<-", "−": "-", "–": "-",
    "—": "--", "…": "...", "≤": "<=", "≥": ">=", "≠": "!=", "±": "+/-", "µ": "u", "°": " deg", "’": "'",
    "‘": "'", "“": '"', "”": '"', "√": "sqrt", "∞": "inf", "⌊": "floor(", "⌋": ")", "⌈": "ceil(", "⌉": ")",
}
ERROR_HANDLER = "flopcalc-ascii"


class OutputError(FlopcalcError):
    """An output file or stream cannot be written."""


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(ASCII_FALLBACK.get(ch, "?") for ch in bad), exc.end


codecs.register_error(ERROR_HANDLER, _ascii_fallback)


def guard_streams() -> None:
    """Characters stdout/stderr cannot encode are written as ASCII stand-ins (see module doc)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=ERROR_HANDLER)
            except (ValueError, OSError):  # a closed stream: reported when it is written to
                pass


def say(message: str) -> None:
    """One line on stderr, whatever state stderr is in."""
    try:
        if sys.stderr is not None:
            print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def run_guarded(command: Callable[[], int]) -> int:
    """Run ``command`` and map every way it can fail on the user's side to one line and an exit status."""
    if sys.stdout is None:  # started with stdout closed (`flopcalc … >&-`)
        say("flopcalc: error: standard output is closed; redirect it to a file or /dev/null (> out.txt)")
        return EXIT_USER_ERROR
    try:
        status = command()
        sys.stdout.flush()
        return status
    except FlopcalcError as exc:
        say(f"flopcalc: error: {exc}")
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        say("flopcalc: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `flopcalc … | head`: the reader has gone; stop quietly, as Unix tools do
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # writing stdout failed otherwise: a full disk (> /dev/full), a closed descriptor
        _silence_stdout()
        if exc.errno == errno.EPIPE:
            return EXIT_BROKEN_PIPE
        say(f"flopcalc: error: cannot write the output to standard output: {exc.strerror or exc}")
        return EXIT_USER_ERROR


# --------------------------------------------------------------------------- files


def check_writable(path: str, option: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Fail early, before any work, when ``path`` cannot be the output file of ``option``."""
    if not path or not path.strip():
        raise OutputError(f"{option}: give a file name")
    target = Path(os.path.expanduser(path))
    if target.is_dir():
        raise OutputError(f"{option} {path!r} is a directory; give a file name inside it")
    if suffixes and target.suffix.lower() not in suffixes:
        raise OutputError(f"{option} {path!r}: give a file ending in {' or '.join(suffixes)}")
    folder = target.parent
    if not folder.exists():
        raise OutputError(f"{option} {path!r}: the folder {str(folder)!r} does not exist; create it first")
    if not folder.is_dir():
        raise OutputError(f"{option} {path!r}: {str(folder)!r} is not a folder")
    if not os.access(folder, os.W_OK) and not (target.exists() and os.access(target, os.W_OK)):
        raise OutputError(f"{option} {path!r}: no permission to write in {str(folder)!r}")
    return target


def write_file(path: str, content: str | bytes, option: str, suffixes: tuple[str, ...] = ()) -> None:
    """Write ``content`` (text as UTF-8) to ``path``; any failure is one :class:`OutputError` line.
    A regular file left half-written (a full disk) is removed."""
    target = check_writable(path, option, suffixes)
    data = content.encode("utf-8") if isinstance(content, str) else content
    existed = target.exists()
    try:
        with open(target, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        if not existed and target.is_file():
            try:
                target.unlink()
            except OSError:
                pass
        raise OutputError(f"{option} {path!r}: cannot write: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- budgets and progress


def check_budget(size: int, limit: int, what: str, option: str, unit: str = "points") -> None:
    """Refuse work of ``size`` units over ``limit`` before it starts."""
    if size > limit:
        raise FlopcalcError(f"{what} has {size:,} {unit}, over the limit of {limit:,}; take fewer values "
                            f"(a coarser step), or raise the limit with {option} {size} if you really want it")


class Progress:
    """``what: i/total`` on stderr, redrawn at most ten times a second, once the work has run a
    second, and only when stderr is a terminal. Use as a context manager; ``advance(n)`` as work ends."""

    def __init__(self, what: str, total: int, *, delay: float = 1.0):
        self.what, self.total, self.delay = what, total, delay
        self.done = 0
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False
        stream = sys.stderr
        try:
            self.enabled = stream is not None and stream.isatty()
        except (ValueError, OSError):
            self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start >= self.delay and now - self.last >= 0.1:
            self.last = now
            self.shown = True
            pct = 100 * self.done / self.total if self.total else 100.0
            self._write(f"\r{self.what}: {self.done:,}/{self.total:,} ({pct:.0f}%)")

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):
            self.enabled = False

    def __exit__(self, *exc: object) -> None:
        if self.shown:
            self._write("\r\033[K")


def each(items: Sequence[T], what: str) -> Iterator[T]:
    """``items`` one by one, with :class:`Progress` as each is done (e.g. one law per model)."""
    with Progress(what, len(items)) as progress:
        for item in items:
            yield item
            progress.advance()
