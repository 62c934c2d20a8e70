#!/usr/bin/env python
"""Measure one rank of an FSDP2-sharded training step on fake tensors and a fake process group, no GPU.

The denoiser is built on meta, moved to fake CPU tensors, every block gradient checkpointing wraps and then the root
wrapped in ``fully_shard`` (FSDP2, ``reshard_after_forward=True``, ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``) over a ``init_device_mesh("cpu", (N,))`` of torch's fake backend
(``torch.testing._internal.distributed.fake_pg.FakeStore``: every collective returns at once, shapes exact), full
fine-tuning with fp32 parameters, torch's ``AdamW(foreach=True)``. One forward + backward runs under
``FSDPMemTracker`` (torch/distributed/_tools/fsdp2_mem_tracker.py: sharded and unsharded parameters, gradients,
all-gather and reduce-scatter buffers, activations, temporaries) and a dispatch mode that records every c10d
collective and the bytes of its buffers; then one ``optimizer.step()``. Recorded per rank, in bytes: the local shards
of the parameters, gradients and optimizer states (exact), the tracker's peak by category, and each collective's
buffer bytes (an all-gather's output, a reduce-scatter's input: a rank sends ``(N−1)/N`` of it on a ring).

    python validation/measure_sharding.py                 # every case and world size, fixtures/training_sharding
    python validation/measure_sharding.py --only flux-tiny

This module never imports ``flopcalc``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

OUT = HERE / "fixtures" / "training_sharding"
#: case → (config folder, settings, the module lists gradient checkpointing wraps: FSDP's units)
CASES = {
    "flux-tiny": ("validation/configs/flux-tiny-train", {"height": 256, "width": 256, "text_len": 64},
                  ("transformer_blocks", "single_transformer_blocks")),
    "flux-dev": ("model_cards/flux-dev/transformer", {"height": 512, "width": 512, "text_len": 512},
                 ("transformer_blocks", "single_transformer_blocks")),
}
WORLDS = (1, 2, 4, 8, 64)


def measure(case: str, world: int) -> dict[str, Any]:
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    from measure import _locate, _wrap, build_inputs, build_model, versions
    from measure_training import _tensors
    from measure_training_memory import _sdpa_fused

    folder, settings, lists = CASES[case]
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    mesh = init_device_mesh("cpu", (world,))
    model = build_model(_locate(REPO_ROOT / folder)).train()
    log: list[tuple[str, int]] = []

    class Collectives(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            if name.startswith("c10d."):
                tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                # an all-gather's output is its largest buffer, a reduce-scatter's input too
                log.append((name, max(t.numel() * t.element_size() for t in tensors)))
            return func(*args, **(kwargs or {}))

    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        model.requires_grad_(True)
        specs, used = build_inputs(model, settings)
        numel = sum(p.numel() for p in model.parameters())
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for name in lists:
            for block in getattr(model, name):
                fully_shard(block, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        inputs = {k: None if v is None else torch.zeros(v.shape, dtype=torch.bfloat16 if v.dtype.is_floating_point
                                                          else v.dtype) for k, v in specs.items()}
        wrapper, positional = _wrap(model, "forward", inputs)
        tracker = FSDPMemTracker(model, opt)
        torch.nn.functional.scaled_dot_product_attention, sdpa = _sdpa_fused, torch.nn.functional.scaled_dot_product_attention
        try:
            with tracker, Collectives():
                sum(t.float().sum() for t in _tensors(wrapper(*positional))).backward()
        finally:
            torch.nn.functional.scaled_dot_product_attention = sdpa
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        opt.step()
        local = lambda t: t.to_local() if hasattr(t, "to_local") else t  # noqa: E731
        size = lambda t: local(t).numel() * local(t).element_size()  # noqa: E731
        out = {
            "case": case, "config_dir": folder, "settings": used, "world_size": world, "params": numel,
            "method": "FSDP2 fully_shard per block and root, MixedPrecisionPolicy(bf16, fp32), fake process group, "
                      "FakeTensorMode; AdamW(foreach=True); FSDPMemTracker peak of one forward + backward",
            "local_param_bytes": sum(size(p) for p in model.parameters()),
            "local_grad_bytes": sum(size(p.grad) for p in model.parameters() if p.grad is not None),
            "local_optimizer_bytes": sum(size(v) for s in opt.state.values() for v in s.values()
                                         if isinstance(v, torch.Tensor) and v.dim()),
            "tracker_peak": {getattr(k, "value", str(k)): int(v) for k, v in peak.items() if v},
            "collectives": {name: {"calls": n, "buffer_bytes": sum(b for m, b in log if m == name)}
                            for name, n in Counter(m for m, _ in log).items()},
            "versions": versions(),
        }
    dist.destroy_process_group()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="this case only (repeatable)")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    for case in args.only or CASES:
        for world in WORLDS:
            fixture = measure(case, world)
            path = OUT / f"{case}-N{world}.json"
            path.write_text(json.dumps(fixture, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            print(f"wrote {path.relative_to(REPO_ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
