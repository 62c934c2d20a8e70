"""``--fit``: the training setups that fit a GPU by flopcalc's own memory estimate, cheapest first, and the fewest
GPUs of that kind that fit full fine-tuning; the run's time, GPU-hours, energy and CO2e from a measured step time.

Candidates are the asked setup changed one step at a time, in the order issue 23 lists the levers (each adds a
cost: gradient checkpointing runs the forward again, 8-bit AdamW quantizes the states, a lower LoRA rank or a smaller
batch changes the training, sharding and sequence parallelism need more GPUs and move bytes between them, block
swap moves frozen blocks over the host link):

1. the setup as asked;
2. the frozen encoders' outputs cached (a preprocessing pass: the text encoders and VAE leave the GPU; every trainer
   offers it, and it is not on issue 23's list only because it changes no training arithmetic);
3. gradient checkpointing, with 2;
4. 8-bit AdamW (for AdamW or Prodigy), with 2 and 3 (the setups below build on this one);
5. a LoRA rank halved down to 4;
6. a batch halved down to 1;
7. FSDP full sharding over the GPUs given (``--num-gpus``);
8. sequence parallelism over the GPUs given (a video DiT: Ulysses over heads that divide, else ring);
9. block swap (LoRA): the fewest blocks of the largest block list held in host memory;
10. DeepSpeed ZeRO-2 with the optimizer offloaded to host memory (with 2 and 3).

A setup "fits" when its peak (live tensors, the caching allocator's segments for the persistent ones and the CUDA
context, :mod:`flopcalc.training.allocator`) is at most the GPU's memory
and its activations are measured (otherwise the peak is a lower bound and nothing is claimed). The fewest GPUs for full
fine-tuning: the smallest N (up to :data:`MAX_GPUS`) at which FSDP full sharding over N GPUs with checkpointing and
AdamW, or 8-bit AdamW, or (a video DiT) with sequence parallelism as well, fits; per-rank memory only shrinks with N
(the activations of a sample do not), so N is found by bisection for each.

Time: flopcalc's energy laws are fitted on inference forwards only; a training step's backward (weight-gradient
GEMMs on transposed operands, the fused attention's backward kernels) was never measured, so no step time is
predicted: give ``--step-time`` (seconds per optimizer step, measured) and the run's time is steps × step time,
GPU-hours × GPUs, energy at most GPU-hours × the GPU's TDP (an upper bound: a training step rarely holds the board
at its power limit throughout), CO2e at the energy command's grid intensity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from flopcalc.training.memory import Inputs, Setup, TrainingMemory, compose
from flopcalc.training.sharding import SequenceParallel

MAX_GPUS = 4096
MIN_RANK = 4


@dataclass(frozen=True)
class Proposal:
    why: str
    memory: TrainingMemory

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        return {"why": self.why, "flags": m.setup.flags(), "peak_bytes": m.peak_bytes,
                "peak_allocated_bytes": m.peak_allocated_bytes, "headroom_bytes": m.headroom_bytes,
                "communication_seconds_per_step": m.communication_seconds}


@dataclass(frozen=True)
class FitResult:
    gpu_name: str
    gpu_memory_bytes: int
    proposals: tuple[Proposal, ...]      # the setups that fit, cheapest first
    tried: int
    fewest_gpus: Proposal | None         # full fine-tuning on the fewest GPUs
    unknown: tuple[str, ...] = ()        # candidates whose activations are not measured

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu_name, "gpu_memory_bytes": self.gpu_memory_bytes,
                "proposals": [p.to_dict() for p in self.proposals], "candidates_tried": self.tried,
                "fewest_gpus_full_fine_tuning": None if self.fewest_gpus is None else {
                    "num_gpus": self.fewest_gpus.memory.setup.num_gpus, **self.fewest_gpus.to_dict()},
                "not_measured": list(self.unknown)}


def _candidates(inp: Inputs, s: Setup, heads: int | None, tokens: int | None) -> list[tuple[str, Setup]]:
    """The setups to try, cheapest first: each lever on top of the cheaper ones."""
    eight = "adamw8bit" if s.optimizer in ("adamw", "prodigy") else s.optimizer
    cached = replace(s, encoders=False)
    ckpt = replace(cached, checkpointing=True)
    both = replace(ckpt, optimizer=eight)
    out = [("as asked", s), ("frozen encoders cached", cached), ("gradient checkpointing", ckpt)]
    if eight != s.optimizer:
        out.append(("8-bit AdamW", both))
    if s.rank:
        r = s.rank // 2
        while r >= MIN_RANK:
            out.append((f"LoRA rank {r}", replace(both, rank=r)))
            r //= 2
    b = s.batch // 2
    while b >= 1:
        out.append((f"batch {b} per GPU", replace(both, batch=b)))
        b //= 2
    if s.num_gpus > 1 and s.sharding is None:
        out.append((f"FSDP full sharding over {s.num_gpus} GPUs", replace(both, sharding="fsdp")))
    if s.num_gpus > 1 and heads:
        for u in range(s.num_gpus, 1, -1):
            if s.num_gpus % u == 0 and heads % u == 0:
                out.append((f"Ulysses sequence parallelism over {u} GPUs",
                            replace(both, sp=SequenceParallel(u, 1), sharding=None)))
                break
        else:
            if tokens and tokens % s.num_gpus == 0:
                out.append((f"ring attention over {s.num_gpus} GPUs",
                            replace(both, sp=SequenceParallel(1, s.num_gpus), sharding=None)))
    if s.rank and inp.swap_list[1] > 1:
        for k in range(1, inp.swap_list[1]):
            out.append((f"block swap: {k} blocks in host memory", replace(both, blocks_to_swap=k)))
    out.append(("DeepSpeed ZeRO-2 with the optimizer offloaded to host memory",
                replace(ckpt, sharding="zero2", offload_optimizer=True)))
    return out


def _fits(m: TrainingMemory) -> bool:
    return m.fits is True


def fit_setups(inp: Inputs, s: Setup, gpu: Any, *, heads: int | None = None, tokens: int | None = None,
               limit: int = 6, **links: Any) -> FitResult:
    """The setups near ``s`` that fit ``gpu``, cheapest first (at most ``limit``), and the fewest GPUs for full
    fine-tuning."""
    proposals: list[Proposal] = []
    unknown: list[str] = []
    seen: set[Setup] = set()
    tried = 0
    block_swap_found = False
    for why, cand in _candidates(inp, s, heads, tokens):
        if cand in seen:
            continue
        if cand.blocks_to_swap and block_swap_found:
            continue
        seen.add(cand)
        tried += 1
        m = compose(inp, cand, gpu=gpu, **links)
        if not m.known:
            unknown.append(why)
            continue
        if _fits(m):
            proposals.append(Proposal(why, m))
            block_swap_found = block_swap_found or bool(cand.blocks_to_swap)
    return FitResult(gpu.name, gpu.memory_bytes, tuple(proposals[:limit]), tried,
                     fewest_gpus(inp, s, gpu, heads=heads, **links), tuple(dict.fromkeys(unknown)))


def _smallest(test: Any, lo: int, hi: int) -> int | None:
    """The smallest N in [lo, hi] with ``test(N)`` (monotone: False … False True … True), or None."""
    if not test(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def fewest_gpus(inp: Inputs, s: Setup, gpu: Any, *, heads: int | None = None, **links: Any) -> Proposal | None:
    """Full fine-tuning on the fewest ``gpu``: FSDP full sharding with checkpointing and cached encoders (AdamW, then
    8-bit AdamW), and for a DiT with Ulysses sequence parallelism too; the smallest GPU count that fits."""
    base = replace(s, rank=None, checkpointing=True, blocks_to_swap=0, base_dtype="bf16", sp=SequenceParallel(),
                   offload_optimizer=False, encoders=False)
    families: list[tuple[str, Any]] = []
    for optimizer in dict.fromkeys((s.optimizer if s.optimizer != "adamw8bit" else "adamw", "adamw8bit")):
        families.append((f"FSDP full sharding, {optimizer}, gradient checkpointing",
                         lambda n, o=optimizer: replace(base, optimizer=o, num_gpus=n,
                                                        sharding="fsdp" if n > 1 else None)))
    if heads:
        for u in sorted({u for u in range(2, heads + 1) if heads % u == 0})[:6]:
            families.append((f"FSDP and Ulysses over {u} GPUs, 8-bit AdamW, gradient checkpointing",
                             lambda n, u=u: replace(base, optimizer="adamw8bit", num_gpus=n * u,
                                                    sp=SequenceParallel(u, 1), sharding="fsdp" if n > 1 else None)))
    best: Proposal | None = None
    for why, make in families:
        first = compose(inp, make(1), gpu=gpu, **links)
        if not first.known:
            continue
        n = _smallest(lambda k: _fits(compose(inp, make(k), gpu=gpu, **links)), 1, MAX_GPUS)
        if n is None:
            continue
        m = compose(inp, make(n), gpu=gpu, **links)
        if best is None or m.setup.num_gpus < best.memory.setup.num_gpus:
            best = Proposal(why, m)
    return best


@dataclass(frozen=True)
class RunCost:
    """A run of ``samples`` training samples at ``step_time`` seconds per optimizer step."""

    samples: int
    samples_per_step: int
    step_time: float
    num_gpus: int
    tdp_w: float
    grid_g_per_kwh: float

    @property
    def steps(self) -> int:
        return math.ceil(self.samples / self.samples_per_step)

    @property
    def seconds(self) -> float:
        return self.steps * self.step_time

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.num_gpus / 3600

    @property
    def energy_kwh_at_most(self) -> float:
        return self.gpu_hours * self.tdp_w / 1000

    @property
    def co2e_kg_at_most(self) -> float:
        return self.energy_kwh_at_most * self.grid_g_per_kwh / 1000

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "samples_per_step": self.samples_per_step, "steps": self.steps,
                "step_time_s": self.step_time, "seconds": self.seconds, "gpu_hours": self.gpu_hours,
                "energy_kwh_at_most": self.energy_kwh_at_most, "co2e_kg_at_most": self.co2e_kg_at_most,
                "grid_g_per_kwh": self.grid_g_per_kwh, "tdp_w": self.tdp_w,
                "energy_method": "GPU-hours × TDP: an upper bound (no training power law is fitted)"}
