"""The one tile-slicing rule (``formulas/tiling.py``) against the loop the VAEs run, and the
``CallSplit`` it builds."""

from __future__ import annotations

import pytest

from flopcalc.formulas.tiling import CallSplit, extents, slices, tiled_or_whole, whole


def _loop(size: int, window: int, stride: int) -> list[int]:
    """``tiled_decode``'s loop, written out: ``x[i : i + window]`` for ``i`` in ``range(0, size, stride)``."""
    return [len(range(size)[i:i + window]) for i in range(0, size, stride)]


@pytest.mark.parametrize("window, stride", [(5, 3), (17, 12), (32, 24), (16, 14), (64, 48)])
def test_slices_are_the_loop(window, stride):
    for size in range(1, 200):
        expected = _loop(size, window, stride)
        assert extents(size, window, stride) == expected
        counted = {n: expected.count(n) for n in expected}
        assert dict(slices(size, window, stride)) == counted
        assert [n for n, _ in slices(size, window, stride)] == sorted(counted, reverse=True)


@pytest.mark.parametrize("window, stride", [(5, 3), (17, 12), (32, 24)])
def test_symbolic_slices_are_exact_past_one_slice(window, stride):
    sp = pytest.importorskip("sympy")
    x = sp.Symbol("x", positive=True, integer=True)
    law = slices(x, window, stride)
    for size in range(window, 300):
        numeric = dict(slices(size, window, stride))
        total = {}
        for extent, count in law:
            e, n = int(extent.subs(x, size)) if hasattr(extent, "subs") else extent, int(sp.sympify(count).subs(x, size))
            total[e] = total.get(e, 0) + n
        assert {k: v for k, v in total.items() if v} == numeric


def test_tracked_int_gives_the_law_of_its_expression():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import F, Tracked

    assert slices(Tracked(33, F), 5, 3) == slices(F, 5, 3)
    assert whole(Tracked(3, F)) == ((F, 1),)


def test_call_split_pieces():
    split = CallSplit(slices(33, 5, 3), *tiled_or_whole(60, 40, 32, 32, 24, 24, True))
    assert split.frames == ((5, 10), (3, 1)) and split.rows == ((32, 2), (12, 1)) and split.cols == ((32, 1), (16, 1))
    assert split.calls == 11 * 3 * 2
    assert sum(n for _, n in split.pieces()) == split.calls
    assert split.tiles() == {(32, 32): 2, (32, 16): 2, (12, 32): 1, (12, 16): 1}
    assert not split.is_whole
    assert CallSplit.of(None, 60, 40).is_whole and CallSplit.of(7, 60, 40).tiles() == {(60, 40): 1}
    assert CallSplit(None, *tiled_or_whole(60, 40, 64, 64, 48, 48, True)).is_whole  # fits one tile
    assert CallSplit(None, *tiled_or_whole(600, 400, 64, 64, 48, 48, False)).is_whole  # tiling off
