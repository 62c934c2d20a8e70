#!/usr/bin/env python
"""Write the activation-peak fixtures listed in ``validation/activation_manifest.yaml``.

    python validation/build_activation_fixtures.py            # every case (a few minutes)
    python validation/build_activation_fixtures.py --check    # re-measure and compare, write nothing
    python validation/build_activation_fixtures.py --only sd1.5  # one case (repeatable)
    python validation/build_activation_fixtures.py --only sdxl-base --component unet  # one component of it
    python validation/build_activation_fixtures.py --only wan2.2-ti2v-5b-tiled --attention math  # one path of it

Fixtures: ``validation/fixtures/activations/<case>/<component>[-<call>]-<attention>-[F<frames>-]<H>x<W>.json``
(``L<seq_len>`` for a text encoder), rendered
as the other fixtures (keys sorted, no timestamps). Never edit them by hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from build_fixtures import render, settle, settle_stale  # noqa: E402
from measure import resolve_class_name, versions  # noqa: E402
from measure_activations import peak_elements  # noqa: E402

MANIFEST = HERE / "activation_manifest.yaml"
FIXTURES = HERE / "fixtures" / "activations"


def jobs() -> list[tuple[str, dict, str, dict[str, int], str]]:
    """``(case, entry, attention, size settings, fixture suffix)``: an image or video call at each of its sizes
    (``height``/``width``; with ``reference_at_size``, also ``reference_height``/``reference_width``: an input
    image at the output size, as FLUX.1 Kontext's pipeline plans it), a text encoder at each of its ``seq_lens``
    (``seq_len``), a video call with ``frame_counts`` at each of its frame counts (``num_frames``) at each of its
    ``sizes`` (one size for a call that runs at one size only; a grid for a tiled decode, whose peak follows the
    frames and the tiles apart)."""
    with open(MANIFEST, encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)
    out = []
    for case, c in spec["cases"].items():
        for entry in c["components"]:
            if "seq_lens" in entry:
                points = [({"seq_len": n}, f"L{n}") for n in entry["seq_lens"]]
            elif "frame_counts" in entry:
                points = [({"height": h, "width": w, "num_frames": f}, f"F{f}-{h}x{w}")
                          for f in entry["frame_counts"] for h, w in entry["sizes"]]
            else:
                points = [({"height": h, "width": w} | ({"reference_height": h, "reference_width": w}
                                                       if entry.get("reference_at_size") else {}), f"{h}x{w}")
                          for h, w in entry.get("sizes", spec["sizes"])]
            for attention in ("math", "fused"):
                for point, suffix in points:
                    out.append((case, {**entry, "root": c["root"]}, attention, point, suffix))
    return out


def _target(case: str, entry: dict, attention: str, suffix: str) -> Path:
    """The fixture file of one measured point."""
    call = entry.get("call", "forward")
    stem = entry["component"] + ("" if call == "forward" else f"-{call}")
    return FIXTURES / case / f"{stem}-{attention}-{suffix}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", action="append", metavar="CASE", help="measure only this case (repeatable)")
    parser.add_argument("--component", action="append", metavar="NAME",
                        help="measure only this component of the cases measured (repeatable)")
    parser.add_argument("--attention", choices=("math", "fused"),
                        help="measure only this attention path (the other's fixtures are left as they are)")
    args = parser.parse_args(argv)
    differ = 0
    written: set[Path] = set()
    planned = {_target(case, entry, attention, suffix) for case, entry, attention, _, suffix in jobs()}
    for case, entry, attention, point, suffix in jobs():
        if (args.only and case not in args.only) or (args.component and entry["component"] not in args.component) \
                or (args.attention and attention != args.attention):
            continue
        start = time.perf_counter()
        call = entry.get("call", "forward")
        folder = REPO_ROOT / entry["root"] / entry["component"]
        settings = {**entry.get("settings", {}), **point}
        measured = peak_elements(folder, settings, call=call, attention=attention)
        fixture = {"case": case, "component": entry["component"], "call": call, "attention": attention,
                   "class_name": resolve_class_name(folder), "settings": measured["settings"],
                   "peak_elements": measured["peak_elements"], "input_elements": measured["input_elements"],
                   "phase_peaks": measured["phase_peaks"],
                   "method": "peak of live floating activation elements (parameters and buffers excluded) during "
                             "one batch-1 call under torch.no_grad() on meta, tracked by a TorchDispatchMode "
                             "(validation/measure_activations.py); attention " + (
                                 "math path (F.scaled_dot_product_attention decomposed: scores materialised)"
                                 if attention == "math" else
                                 "routed to aten._scaled_dot_product_efficient_attention (no score matrix)"),
                   "versions": versions()}
        target = _target(case, entry, attention, suffix)
        written.add(target)
        status = settle(target, render(fixture), check=args.check)
        differ += args.check and status != "same"
        print(f"{time.perf_counter() - start:6.2f}s  {status:7s}  {target.relative_to(FIXTURES)}", flush=True)
    # a fixture the manifest no longer lists, in a case folder just measured (one --component leaves the others)
    differ += settle_stale({p for t in written for p in t.parent.glob("*.json")} - planned, FIXTURES,
                           check=args.check)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
