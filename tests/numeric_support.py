"""Comparing what a fitting script writes with what is shipped, across machines.

Least squares run through OpenBLAS, which picks its kernels for the CPU at run time (``DYNAMIC_ARCH``):
the same data fitted on another CPU can differ in the last bits of a float. Structure, strings and integers
must match exactly; floats to a relative 1e-9; numbers printed in text to one unit of their last printed digit.
"""

from __future__ import annotations

import math
import re
from typing import Any

REL = 1e-9
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def assert_same_numbers(mine: Any, shipped: Any, where: str = "", abs_tol: float = 0.0) -> None:
    """``mine == shipped`` with floats compared to a relative ``REL`` (or ``abs_tol``, for a coefficient whose
    exact value is 0 and whose fit leaves rounding noise)."""
    if isinstance(shipped, float) or isinstance(mine, float):
        assert isinstance(mine, (int, float)) and isinstance(shipped, (int, float)), where
        assert math.isclose(mine, shipped, rel_tol=REL, abs_tol=abs_tol), f"{where}: {mine!r} != {shipped!r}"
    elif isinstance(shipped, dict):
        assert isinstance(mine, dict) and list(mine) == list(shipped), f"{where}: keys differ"
        for key in shipped:
            assert_same_numbers(mine[key], shipped[key], f"{where}.{key}", abs_tol)
    elif isinstance(shipped, list):
        assert isinstance(mine, list) and len(mine) == len(shipped), f"{where}: lengths differ"
        for i, (a, b) in enumerate(zip(mine, shipped)):
            assert_same_numbers(a, b, f"{where}[{i}]", abs_tol)
    else:
        assert mine == shipped, f"{where}: {mine!r} != {shipped!r}"


def assert_same_text(mine: str, shipped: str, where: str = "") -> None:
    """The same text, printed numbers allowed one unit of their last digit apart (a rounding boundary)."""
    assert _NUMBER.split(mine) == _NUMBER.split(shipped), f"{where}: text differs"
    for a, b in zip(_NUMBER.findall(mine), _NUMBER.findall(shipped)):
        if a == b:
            continue
        digits = len(b.split(".")[1].split("e")[0].split("E")[0]) if "." in b else 0
        x, y = float(a.replace(",", "")), float(b.replace(",", ""))
        assert abs(x - y) <= 1.000001 * 10.0 ** (_exponent(b) - digits), f"{where}: {a} != {b}"


def _exponent(number: str) -> int:
    match = re.search(r"[eE]([-+]?\d+)$", number)
    return int(match.group(1)) if match else 0
