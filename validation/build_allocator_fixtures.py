#!/usr/bin/env python
"""Replay PyTorch's caching allocator on the calls ``validation/activation_manifest.yaml`` measures, and write what it
reserves: ``validation/fixtures/allocator/<case>/<component>[-<call>]-<H>x<W>.json`` (``L<seq_len>`` for a text
encoder, ``F<frames>-`` for a frame count), rendered as the other fixtures (keys sorted, no timestamps).

For each call (fused attention, the path a GPU runs; batch 1; inference): the component is built on meta in bf16 as a
pipeline loads it, its weight storages are allocated first in ``pipe.to("cuda")``'s order, then the exact sequence of
storage allocations and frees of the call (``validation/measure_allocations.py``) is replayed through
``flopcalc/gpu_memory/caching_allocator.py`` (the allocator's rules, from PyTorch's source). Recorded: the weights'
bytes and what their segments reserve, the peak of live bytes (weights + activations: what flopcalc's
``peak_allocated_bytes`` models), the allocator's ``allocated_bytes`` and ``reserved_bytes`` peaks.
``validation/fit_allocator.py`` fits the reserve law on them.

    python validation/build_allocator_fixtures.py              # every case (long: every manifest call, 5 sizes)
    python validation/build_allocator_fixtures.py --only sd1.5 # one case (repeatable)
    python validation/build_allocator_fixtures.py --check      # re-measure and compare, write nothing

Never edit the fixtures by hand.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO_ROOT))

from build_activation_fixtures import jobs  # noqa: E402
from build_fixtures import render, settle, settle_stale  # noqa: E402
from measure import resolve_class_name, versions  # noqa: E402
from measure_allocations import prepare, record_events  # noqa: E402

from flopcalc.gpu_memory.caching_allocator import CachingAllocator, reserved_for  # noqa: E402

FIXTURES = HERE / "fixtures" / "allocator"
DTYPE = "bf16"
METHOD = ("weights (bf16 as from_pretrained(torch_dtype=torch.bfloat16) loads them, float32-kept modules in float32) "
          "allocated in nn.Module._apply order, then every storage allocation and free of one batch-1 call under "
          "torch.no_grad() on meta, attention routed to aten._scaled_dot_product_efficient_attention "
          "(validation/measure_allocations.py), replayed through flopcalc/gpu_memory/caching_allocator.py "
          "(PyTorch's CUDA caching allocator, default settings, one stream)")


def simulate(weights: list[int], events: list[tuple[int, int]], weights_fp32: list[int], elements: int
             ) -> dict[str, dict[str, int]]:
    """The allocator's figures after the weights and after the call (and after the weights as loaded in float32);
    ``elements``: the call's peak of live floating elements (:func:`measure_allocations.record_events`)."""
    alloc = CachingAllocator()
    for n in weights:
        alloc.malloc(n)
    after_weights = {"bytes": sum(weights), "tensors": len(weights), "reserved_bytes": alloc.reserved,
                     "segments": alloc.segments, "fp32_bytes": sum(weights_fp32),
                     "fp32_reserved_bytes": reserved_for(weights_fp32)}
    live = {}
    largest = 0
    for key, n in events:
        if n:
            live[key] = alloc.malloc(n)
            largest = max(largest, n)
        else:
            alloc.free(live.pop(key))
    return {"weights": after_weights,
            "replay": {"peak_live_bytes": alloc.peak_requested,
                     "activation_peak_bytes": alloc.peak_requested - after_weights["bytes"],
                     "activation_peak_elements": elements,
                     "peak_allocated_bytes": alloc.peak_allocated, "peak_reserved_bytes": alloc.reserved,
                     "segments": alloc.segments, "allocations": sum(1 for _, n in events if n),
                     "largest_allocation_bytes": largest}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", action="append", metavar="CASE", help="only this case (repeatable)")
    args = parser.parse_args(argv)
    logging.getLogger("diffusers").setLevel(logging.ERROR)
    differ = 0
    written: set[Path] = set()
    built: dict[tuple[str, str, str], tuple] = {}
    for case, entry, attention, point, suffix in jobs():
        if attention != "fused" or (args.only and case not in args.only):
            continue
        start = time.perf_counter()
        call = entry.get("call", "forward")
        folder = REPO_ROOT / entry["root"] / entry["component"]
        ident = (case, entry["component"], call)
        if ident not in built:
            built.clear()  # one component's model at a time
            built[ident] = prepare(folder, DTYPE)
        model, weights, keys, weights_fp32 = built[ident]
        events, elements, used = record_events(model, keys, {**entry.get("settings", {}), **point}, call=call,
                                               dtype=DTYPE)
        fixture = {"case": case, "component": entry["component"], "call": call, "attention": "fused",
                   "class_name": resolve_class_name(folder), "settings": used, "dtype": DTYPE,
                   **simulate(weights, events, weights_fp32, elements), "method": METHOD, "versions": versions()}
        stem = entry["component"] + ("" if call == "forward" else f"-{call}")
        target = FIXTURES / case / f"{stem}-{suffix}.json"
        written.add(target)
        status = settle(target, render(fixture), check=args.check)
        differ += args.check and status != "same"
        print(f"{time.perf_counter() - start:6.2f}s  {status:7s}  {target.relative_to(FIXTURES)}", flush=True)
    differ += settle_stale({p for t in written for p in t.parent.glob("*.json")} - written, FIXTURES,
                           check=args.check)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
