"""Multi-GPU inference plans: every xDiT layout of one generation on N GPUs, with memory per GPU, communication per
step and the predicted latency.

xDiT (github xdit-project/xDiT, ``xfuser/config/config.py`` ``ParallelConfig``) splits a DiT denoiser over
``N = cfg × ulysses × ring × pipefusion`` GPUs (:mod:`flopcalc.flops.parallel` says which degrees a model allows:
CFG over 2 guidance passes, Ulysses over a divisor of the attention heads, ring over a divisor of the tokens;
PipeFusion over at most the denoiser's blocks). Per GPU, from the exact counts and weights:

* **weights**: every component's (xDiT keeps a full pipeline per GPU), the denoiser's blocks split over the
  PipeFusion stages (its other modules on every stage);
* **activations**: the denoiser forward's peak ÷ (ulysses × ring × pipefusion) (each rank holds its share of the
  tokens; PipeFusion's stages each run their share of the layers on all patches), and one guidance pass's share
  under CFG parallel; the other components' peaks whole (they run on every GPU);
* **communication per denoiser forward**, bytes one GPU sends (16-bit activations): Ulysses, per attention call,
  the all-to-all of Q, K, V before and of the output after, each moving (U − 1)/U of the rank's (L / (U·R)) × D
  tensor (``xfuser/core/long_ctx_attention``: ``SeqAllToAll4D``); ring, per attention call, the K and V chunks of
  (L / R) tokens × D / U passed on R − 1 times; PipeFusion, each stage's output activations (L × D) passed to the
  next stage once per step; CFG parallel, the all-gather of the noise prediction once per step;
  its time at the GPU table's GPU-to-GPU bandwidth (NVLink or PCIe, ``flopcalc gpus``);
* **latency and energy per item**: :func:`flopcalc.energy_laws.predict.predict` with ``num_gpus = N``, the
  multi-GPU overhead fitted on ML.ENERGY's 2/4/8-GPU runs (layout-agnostic: it is the best layout's), its interval
  widened as there.

Not modelled: xDiT's DistriFusion and patch-parallel VAE, PipeFusion's warm-up steps, the overlap of communication
with compute (the communication time is what the link alone takes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flopcalc.engine.errors import FlopcalcError

if TYPE_CHECKING:
    from flopcalc.engine.cost import Node

#: Bytes per activation element moved between GPUs (bf16/fp16 runs).
ACTIVATION_BYTES = 2


@dataclass(frozen=True)
class AttentionCall:
    tokens: int  # L
    width: int  # D = heads × head_dim
    count: int  # calls of this shape per denoiser forward


@dataclass(frozen=True)
class LayoutPlan:
    cfg: int
    ulysses: int
    ring: int
    pipefusion: int
    weights_bytes: int  # per GPU
    activations_bytes: int  # per GPU, the largest call's
    comm_bytes_per_step: int  # one GPU sends, per denoiser step
    comm_seconds_per_step: float
    latency_s: float  # per item
    latency_s_interval: tuple[float, float]
    energy_j: float  # per item, all GPUs
    fits: bool | None

    @property
    def gpus(self) -> int:
        return self.cfg * self.ulysses * self.ring * self.pipefusion

    @property
    def peak_bytes(self) -> int:
        return self.weights_bytes + self.activations_bytes

    def describe(self) -> str:
        return f"cfg {self.cfg} × ulysses {self.ulysses} × ring {self.ring} × pipefusion {self.pipefusion}"

    def to_dict(self) -> dict[str, Any]:
        return {"layout": {"cfg": self.cfg, "ulysses": self.ulysses, "ring": self.ring, "pipefusion": self.pipefusion},
                "gpus": self.gpus, "weights_bytes": self.weights_bytes, "activations_bytes": self.activations_bytes,
                "peak_bytes": self.peak_bytes, "fits": self.fits, "comm_bytes_per_step": self.comm_bytes_per_step,
                "comm_seconds_per_step": self.comm_seconds_per_step, "latency_s": self.latency_s,
                "latency_s_interval": list(self.latency_s_interval), "energy_j": self.energy_j}


@dataclass(frozen=True)
class ParallelPlan:
    model: str
    gpu_key: str
    gpu_name: str
    gpu_link_bytes_per_s: float
    steps: int
    layouts: tuple[LayoutPlan, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": {"key": self.gpu_key, "name": self.gpu_name,
                                             "gpu_link_bytes_per_s": self.gpu_link_bytes_per_s},
                "steps": self.steps, "layouts": [p.to_dict() for p in self.layouts], "notes": list(self.notes)}


def attention_calls(tree: "Node", heads: int) -> list[AttentionCall]:
    """Every attention call of a denoiser forward: tokens L from its scores (heads × L × L) and width D from its
    matmuls (2 × heads × L × L × d multiply-accumulates: QKᵀ and A·V)."""
    out: dict[tuple[int, int], int] = {}

    def visit(node: "Node", k: int) -> None:
        k *= node.count
        c = node.cost
        if c.scores and c.attention:
            per_head = c.scores // heads
            tokens = math.isqrt(per_head)
            if tokens * tokens == per_head:
                width = heads * (c.attention // (2 * c.scores))
                out[(tokens, width)] = out.get((tokens, width), 0) + k
        for child in node.children:
            visit(child, k)

    visit(tree, 1)
    return [AttentionCall(t, w, n) for (t, w), n in sorted(out.items())]


def comm_bytes(calls: list[AttentionCall], cfg: int, ulysses: int, ring: int, pipefusion: int,
               latent_elements: int) -> int:
    """Bytes one GPU sends per denoiser step (see the module docstring)."""
    b = ACTIVATION_BYTES
    total = 0
    for a in calls:
        if ulysses > 1:
            total += a.count * 4 * (a.tokens // (ulysses * ring)) * a.width * b * (ulysses - 1) // ulysses
        if ring > 1:
            total += a.count * 2 * (ring - 1) * (a.tokens // ring) * (a.width // ulysses) * b
    if pipefusion > 1 and calls:
        widest = max(calls, key=lambda a: a.tokens * a.width)
        total += widest.tokens * widest.width * b
    if cfg > 1:
        total += latent_elements * b
    return total


def plan(model: str, *, gpu: str, num_gpus: tuple[int, ...] = (2, 4, 8), precision: str | None = None,
         **settings: Any) -> ParallelPlan:
    """Every legal layout of ``model`` on each count of ``num_gpus`` GPUs (see the module docstring)."""
    from flopcalc.energy_laws.predict import predict
    from flopcalc.engine.limits import check_count
    from flopcalc.flops.estimate import estimate
    from flopcalc.flops.parallel import layouts, limits
    from flopcalc.gpu_memory.estimate import memory
    from flopcalc.hardware.gpus import gpu as lookup

    if not num_gpus:
        raise FlopcalcError("--num-gpus: give at least one GPU count")
    for n in num_gpus:
        check_count("num_gpus", n, "--num-gpus")
    g = lookup(gpu)
    report = estimate(model, **settings)
    lim = limits(report)
    mem = memory(model, gpu=g.key, **settings)
    den = max((c for c in report.components if c.role == "denoiser"), key=lambda c: c.macs)
    den_w = next(c for c in mem.components if c.component == den.component)
    blocks = len(den_w.block_bytes)
    heads = lim.heads or 1
    calls = attention_calls(den.tree, heads) if lim.heads else []
    latent = int(den.shape.get("height", 0) or 0) * int(den.shape.get("width", 0) or 0)
    steps = report.settings.steps or 1
    out: list[LayoutPlan] = []
    notes: list[str] = []
    for n in num_gpus:
        found = layouts(lim, n) if n > 1 else []
        options = [(lay.cfg, lay.ulysses, lay.ring, 1) for lay in found]
        # PipeFusion: the denoiser's blocks in p stages, the rest split as above
        for p in (d for d in range(2, n + 1) if n % d == 0 and d <= blocks):
            options += [(lay.cfg, lay.ulysses, lay.ring, p) for lay in (layouts(lim, n // p) if n // p > 1 else [])]
            if n // p == 1:
                options.append((1, 1, 1, p))
        if n == 1:
            options = [(1, 1, 1, 1)]
        if not options:
            notes.append(f"{n} GPUs: no legal layout ({lim.heads or 'no'} heads, {lim.tokens or 'unknown'} tokens, "
                         f"{lim.passes} pass(es), {blocks} blocks)")
            continue
        try:
            r = predict(report, gpu=g.key, precision=precision, num_gpus=n)
        except FlopcalcError as exc:
            notes.append(f"{n} GPUs: {exc}")
            continue
        for cfg, uly, ring, pf in sorted(set(options), key=lambda o: (-o[0], -o[1], -o[2], o[3])):
            split = den_w.bytes - sum(den_w.block_bytes) + math.ceil(sum(den_w.block_bytes) / pf)
            weights = mem.weights_bytes - den_w.bytes + split
            den_act = mem.activation_bytes(den.component)
            if cfg > 1 and report.batched_passes and report.passes > 1:
                den_act = den_act // report.passes
            others = max((mem.activation_bytes(c.component) for c in mem.components if c.component != den.component),
                         default=0)
            acts = max(den_act // (uly * ring * pf), others)
            comm = comm_bytes(calls, cfg, uly, ring, pf, latent)
            fits = None if mem.unestimated else weights + acts <= g.memory_bytes
            out.append(LayoutPlan(cfg, uly, ring, pf, weights, acts, comm, comm / g.gpu_link_bytes_per_s,
                                  r.latency_s, r.latency_s_interval, r.energy_j, fits))
    if mem.unestimated:
        notes.append(f"activations of {', '.join(mem.unestimated)} not estimated: fits is not said")
    return ParallelPlan(report.model, g.key, g.name, g.gpu_link_bytes_per_s, steps, tuple(out), tuple(notes))


def render_plan(p: ParallelPlan, fmt: str = "table") -> str:
    import json

    if fmt == "json":
        return json.dumps(p.to_dict(), indent=2, allow_nan=False) + "\n"
    gib = lambda n: f"{n / 2**30:,.2f}"  # noqa: E731
    rows = [("GPUs", "cfg × ulysses × ring × pipefusion", "weights GiB/GPU", "activations GiB/GPU", "fits",
             "comm MB/step/GPU", "comm s/step", "latency s/item [90%]")]
    for lay in p.layouts:
        lo, hi = lay.latency_s_interval
        rows.append((str(lay.gpus), f"{lay.cfg} × {lay.ulysses} × {lay.ring} × {lay.pipefusion}",
                     gib(lay.weights_bytes), gib(lay.activations_bytes),
                     {True: "yes", False: "no", None: "?"}[lay.fits], f"{lay.comm_bytes_per_step / 1e6:,.1f}",
                     f"{lay.comm_seconds_per_step:.3f}", f"{lay.latency_s:,.2f} [{lo:,.2f}, {hi:,.2f}]"))
    from flopcalc.render.text_tables import columns

    lines = [f"{p.model} on {p.gpu_name}: xDiT layouts ({p.steps} steps; GPU link "
             f"{p.gpu_link_bytes_per_s / 1e9:,.0f} GB/s)", *columns(rows, right=(0, 2, 3, 5, 6)),
             "latency: the multi-GPU overhead fitted on ML.ENERGY's 2/4/8-GPU runs (`flopcalc energy --num-gpus`), the "
             "same for every layout of one count; communication: what one GPU sends per step, at the link's spec "
             "bandwidth, not overlapped"]
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines) + "\n"
