#!/usr/bin/env python
"""Compare ``flopcalc.train()``'s memory of a training step with every fixture of ``fixtures/training_memory``.

For each fixture (one case, mode and size, written by ``build_training_memory_fixtures.py``) flopcalc is asked the
same step (the card measured, the fixture's size, frames, trainable, LoRA targets, checkpointing, master dtype and
attention, frozen encoders cached) and its parts are set against the measured bytes:

* ``saved``, ``forward peak``, ``backward peak``: the fitted activation laws (``fit_training_memory.py``) at the
  fixture's size, and the law's own leave-one-size-out error (what ``flopcalc train`` prints);
* ``combined``: the activations and gradients as ``flopcalc.training.memory`` combines them,
  ``max(backward peak, gradients + backward peak − saved)``, against the measured ``step_peak_bytes``;
* ``step``: the same plus the weights (parameters and buffers) against the measured step with its weights.

Per case it prints the range of each signed error (flopcalc / measured − 1) over every mode and size; the figures
of docs/training.md's "Measured errors" table come from this output. ``--modes`` prints every fixture's row.

    python validation/check_training_memory.py                 # every case
    python validation/check_training_memory.py --only qwen-image --modes
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
FIXTURES = HERE / "fixtures" / "training_memory"


def ours(fx: dict):
    """flopcalc's memory of the fixture's step (as tests/test_training_memory.py asks it)."""
    sys.path.insert(0, str(REPO_ROOT))
    from flopcalc.training.estimate import train

    st, extra = fx["settings"], {}
    if fx["trainable"] == "lora":
        extra.update(trainable=f"lora:{fx['lora']['rank']}", lora_targets=tuple(fx["lora"]["targets"]))
    if "num_frames" in st:
        extra["num_frames"] = st["num_frames"]
    card = Path(fx["config_dir"]).parent.name  # the card measured (hunyuanvideo-33f is HunyuanVideo at 33 frames)
    return train(card, height=st["height"], width=st["width"], gradient_checkpointing=fx["checkpointing"],
                 master_weights=fx["master"], attention=fx["attention"], frozen_encoders="cached", **extra).memory


def errors(fx: dict) -> dict[str, float | None] | None:
    """Signed relative errors of one fixture's parts; None where flopcalc has no law for its mode."""
    m = ours(fx)
    a = m.activations
    if a is None:
        return None
    combined = max(a.backward_peak, m.gradients_bytes + a.backward_peak - a.saved)
    weights = fx["param_bytes"] + fx["buffer_bytes"]
    return {
        "saved": a.saved / fx["saved_bytes"] - 1,
        "forward_peak": a.forward_peak / fx["forward_peak_bytes"] - 1,
        "backward_peak": a.backward_peak / fx["backward_peak_bytes"] - 1,
        "loo": m.law.loo_max_rel_error if m.law else None,
        "combined": combined / fx["step_peak_bytes"] - 1,
        "step": (weights + combined) / (weights + fx["step_peak_bytes"]) - 1,
    }


def mode_name(fx: dict) -> str:
    frames = f" F{fx['settings']['num_frames']}" if "num_frames" in fx["settings"] else ""
    return (f"{fx['trainable']} {'ckpt' if fx['checkpointing'] else 'nockpt'} {fx['master']} {fx['attention']} "
            f"{fx['settings']['height']}x{fx['settings']['width']}{frames}")


def pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


def unsigned(x: float | None) -> str:
    """A law's leave-one-size-out error; "-" where none is stated (two sizes, or a quadratic through three)."""
    return "-" if x is None else f"{100 * x:.2f}%"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="this case only (repeatable)")
    ap.add_argument("--modes", action="store_true", help="print every fixture's row too")
    args = ap.parse_args(argv)
    by_case: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(FIXTURES.glob("*/*.json")):
        if not args.only or path.parent.name in args.only:
            by_case[path.parent.name].append(json.loads(path.read_text(encoding="utf-8")))
    keys = ("saved", "forward_peak", "backward_peak", "combined", "step")
    for case, fixtures in by_case.items():
        rows = []
        for fx in fixtures:
            e = errors(fx)
            if e is None:
                print(f"{case}: {mode_name(fx)}: no law for this mode (fewer than two sizes measured, or "
                      "fit_training_memory.py not run)")
                continue
            rows.append(e)
            if args.modes:
                print(f"{case:28s} {mode_name(fx):44s} " + " ".join(f"{k} {pct(e[k])}" for k in keys)
                      + f" LOO {unsigned(e['loo'])}")
        if not rows:
            continue
        ranges = " ".join(f"{k} {pct(min(r[k] for r in rows))} … {pct(max(r[k] for r in rows))}" for k in keys)
        loo = max((r["loo"] for r in rows if r["loo"] is not None), default=None)
        print(f"{case}: {len(rows)} fixtures; {ranges}; largest LOO {unsigned(loo)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
