#!/usr/bin/env python
"""Replay whole pipelines through the caching allocator, to check how ``flopcalc memory`` composes its reserve
(each component's weights replayed alone, one call's reserve law on top) against one allocator that sees everything:
``validation/fixtures/allocator_pipelines/<card>-<H>x<W>.json``.

A pipeline without offload (``pipe.to("cuda")``): every component's weights in bf16, in the order
``DiffusionPipeline.to`` moves them (``_get_signature_keys``: the component names sorted), each in
``nn.Module._apply`` order; then the calls of one generation in the pipeline's order (text encoders, the denoiser's
forward twice: two steps reach the steady state, later steps repeat the second's allocations and frees, and the
VAE decode), each call's allocations and frees as ``validation/measure_allocations.py`` records them (fused attention,
batch 1). Recorded: the live and reserved peaks of the whole sequence. What stays live between calls (the prompt
embeddings, the latents) is freed at the end of each recorded call here: at most a few MiB.

    python validation/replay_pipelines.py           # write the fixtures
    python validation/replay_pipelines.py --check   # re-measure and compare, write nothing

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

from build_fixtures import render, settle  # noqa: E402
from measure import versions  # noqa: E402
from measure_allocations import prepare, record_events  # noqa: E402

from flopcalc.gpu_memory.caching_allocator import CachingAllocator  # noqa: E402

OUT = HERE / "fixtures" / "allocator_pipelines"
DTYPE = "bf16"

#: card, size, and the calls of one generation in order: (component, call, settings); the denoiser twice.
PIPELINES = (
    ("sd1.5", (512, 512), (("text_encoder", "forward", {"seq_len": 77}),
                           ("unet", "forward", {"text_len": 77}), ("unet", "forward", {"text_len": 77}),
                           ("vae", "decode", {}))),
    ("sdxl-base", (1024, 1024), (("text_encoder", "forward", {"seq_len": 77}),
                                 ("text_encoder_2", "forward", {"seq_len": 77}),
                                 ("unet", "forward", {"text_len": 77}), ("unet", "forward", {"text_len": 77}),
                                 ("vae", "decode", {}))),
    ("sd3-medium", (1024, 1024), (("text_encoder", "forward", {"seq_len": 77}),
                                  ("text_encoder_2", "forward", {"seq_len": 77}),
                                  ("text_encoder_3", "forward", {"seq_len": 256}),
                                  ("transformer", "forward", {"text_len": 333}),
                                  ("transformer", "forward", {"text_len": 333}), ("vae", "decode", {}))),
    ("flux-dev", (1024, 1024), (("text_encoder", "forward", {"seq_len": 77}),
                                ("text_encoder_2", "forward", {"seq_len": 512}),
                                ("transformer", "forward", {"text_len": 512}),
                                ("transformer", "forward", {"text_len": 512}), ("vae", "decode", {}))),
)


def measure(card: str, size: tuple[int, int], calls: tuple) -> dict:
    root = REPO_ROOT / "model_cards" / card
    order = sorted({c for c, _, _ in calls})
    alloc = CachingAllocator()
    models = {}
    for name in order:
        model, weights, keys, _ = prepare(root / name, DTYPE)
        models[name] = (model, keys)
        for n in weights:
            alloc.malloc(n)
    weights_bytes, weights_reserved = alloc.requested, alloc.reserved
    offset = 0
    for component, call, settings in calls:
        model, keys = models[component]
        point = {"height": size[0], "width": size[1]} if "seq_len" not in settings else {}
        events, _, _ = record_events(model, keys, {**settings, **point}, call=call, dtype=DTYPE)
        live = {}
        for key, n in events:
            if n:
                live[key + offset] = alloc.malloc(n)
            else:
                alloc.free(live.pop(key + offset))
        offset += max((k for k, _ in events), default=0)
    return {"card": card, "height": size[0], "width": size[1], "dtype": DTYPE, "attention": "fused",
            "weights_order": order, "calls": [f"{c}.{k}" for c, k, _ in calls],
            "weights_bytes": weights_bytes, "weights_reserved_bytes": weights_reserved,
            "peak_live_bytes": alloc.peak_requested, "peak_reserved_bytes": alloc.reserved,
            "method": "validation/replay_pipelines.py: weights then calls, replayed through "
                      "flopcalc/gpu_memory/caching_allocator.py", "versions": versions()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("diffusers").setLevel(logging.ERROR)
    differ = 0
    for card, size, calls in PIPELINES:
        start = time.perf_counter()
        target = OUT / f"{card}-{size[0]}x{size[1]}.json"
        status = settle(target, render(measure(card, size, calls)), check=args.check)
        differ += args.check and status != "same"
        print(f"{time.perf_counter() - start:6.2f}s  {status:7s}  {target.relative_to(OUT)}", flush=True)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
