"""``memory --fit``: the settings under which a pipeline fits a named GPU, the cheapest slowdown first.

Every candidate is a full :func:`~flopcalc.gpu_memory.estimate.memory` estimate at the user's run settings with one
change of how the pipeline is loaded and run (nothing that changes the image is proposed: size, steps and guidance
stay as given):

* offload: none, ``enable_model_cpu_offload()``, ``enable_group_offload`` at block level (1 block per group, with
  and without CUDA streams) and leaf level (with and without streams), ``enable_sequential_cpu_offload()``;
* a block swap of the denoiser's last N blocks (the fewest that fit), without offload;
* ``vae.enable_tiling()`` where the pipeline applies it (for an image VAE whose ``enable_tiling`` takes tile sizes,
  the proposal also gives the largest tile side that fits, :mod:`flopcalc.gpu_memory.vae_tiles`);
* weights quantized: the text encoders, then the denoiser too, to fp8 (optimum-quanto qfloat8; bitsandbytes int8 takes
  the same bytes) or nf4 (bitsandbytes NF4), with no offload or model offload (the modes the hooks support for them),
  and with VAE tiling where tiling lowers the peak.

A candidate is proposed when its estimated ``peak_bytes`` (the caching allocator's reserved peak and the CUDA context,
:mod:`flopcalc.gpu_memory.allocator`) is within the GPU's memory, and only if no candidate with a subset
of its flags is (a flag it can do without is not proposed). Those whose every call's activations are estimated
(:attr:`MemoryEstimate.fits` True) come first; those with a call not estimated follow, saying which. Then:
unquantized before quantized (quantization changes the weights), then the
extra seconds per generation the weight transfers cost over the GPU's host link (``flopcalc gpus``: PCIe generation ×
lanes), counted without overlap with the compute (an upper bound; CUDA streams hide part of it), then the peak.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.estimate import MemoryEstimate, memory

#: Quantizations proposed, the least lossy first (bits per converted weight: 8, 8, 4).
QUANTIZED = ("fp8", "nf4")
#: The largest number of candidates listed.
LISTED = 12


@dataclass(frozen=True)
class Candidate:
    """One setting that fits: the flags that select it, its estimate, and what it costs."""

    flags: tuple[str, ...]
    estimate: MemoryEstimate
    quantized: int  # components whose weights it quantizes
    extra_seconds: float  # weight transfers per generation over the host link, not overlapped

    @property
    def command_line(self) -> str:
        return " ".join(self.flags) or "(as given)"

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {"flags": list(self.flags), "offload": e.offload, "peak_bytes": e.peak_bytes,
                "host_bytes": e.host_bytes, "transfer_bytes": e.transfer_bytes, "extra_seconds": self.extra_seconds,
                "quantized_components": self.quantized, "fits": e.fits,
                "activations_not_estimated": list(e.unestimated),
                "dtypes": {c.component: c.dtype for c in e.components},
                "vae_tile": None if self.vae_tile is None else self.vae_tile.to_dict()}

    @property
    def vae_tile(self) -> Any:
        """With ``--vae-tiling``: the largest tile side that fits (:mod:`flopcalc.gpu_memory.vae_tiles`)."""
        return self.estimate.vae_tile if "--vae-tiling" in self.flags else None


@dataclass(frozen=True)
class FitResult:
    model: str
    gpu_key: str
    gpu_name: str
    gpu_memory_bytes: int
    host_link_bytes_per_s: float
    candidates: tuple[Candidate, ...]  # those that fit, best first (at most LISTED)
    tried: int
    smallest: MemoryEstimate  # the candidate with the smallest peak (what comes closest when none fits)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": {"key": self.gpu_key, "name": self.gpu_name,
                                             "memory_bytes": self.gpu_memory_bytes,
                                             "host_link_bytes_per_s": self.host_link_bytes_per_s},
                "tried": self.tried, "fits": [c.to_dict() for c in self.candidates],
                "smallest_peak_bytes": self.smallest.peak_bytes}


#: The offload modes tried on each loading of the weights: (flags, MemoryEstimate fields).
OFFLOADS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    ((), {}), (("--offload", "model"), {"offload": "model"}),
    (("--offload", "group-block", "--stream"), {"offload": "group-block", "stream": True}),
    (("--offload", "group-block"), {"offload": "group-block"}),
    (("--offload", "group-leaf", "--stream"), {"offload": "group-leaf", "stream": True}),
    (("--offload", "sequential"), {"offload": "sequential"}))
#: The offload modes the quantization libraries' hooks support (``memory`` refuses the others).
QUANTIZED_OFFLOADS = OFFLOADS[:2]


@dataclass(frozen=True)
class Candidates:
    """Every setting tried for one model at one run setting, independent of the GPU (a GPU only filters them)."""

    model: str
    estimates: tuple[tuple[tuple[str, ...], MemoryEstimate, int], ...]  # (flags, estimate, components quantized)
    blocks: int  # the denoiser's blocks (a block swap of 1..blocks is derived per GPU)


def candidates(model: str, *, attention: str = "fused", **settings: Any) -> Candidates:
    """Every loading of the weights (as given; the text encoders, then the denoiser too, quantized) with and without
    VAE tiling, estimated once; the offload modes and block swaps are the same estimate under another mode
    (:func:`dataclasses.replace`: the weights, activations and forwards do not change)."""
    from flopcalc.engine.pipelines.base import pipeline_options

    for fixed in ("offload", "dtype", "dtype_of", "stream", "blocks_per_group", "block_swap"):
        if fixed in settings:
            raise FlopcalcError(f"--fit chooses the offload, dtypes and block swap itself; leave out --"
                                f"{fixed.replace('_', '-')}")
    base = memory(model, attention=attention, **settings)
    try:
        tiling = "vae_tiling" in pipeline_options(base.pipeline) and settings.get("vae_tiling") is None
    except KeyError:  # a lone component: no pipeline options
        tiling = False
    encoders = [c.component for c in base.components if c.component.startswith("text_encoder")]
    denoiser = max(base.running, key=lambda c: sum(c.block_bytes), default=None)
    loadings: list[tuple[tuple[str, ...], dict[str, Any], int]] = [((), {}, 0)]
    for q in QUANTIZED:
        for targets in (encoders, [*encoders, denoiser.component] if denoiser else []):
            if targets:
                loadings.append((tuple(f for t in targets for f in ("--dtype-of", f"{t}={q}")),
                                 {"dtype_of": {t: q for t in targets}}, len(targets)))
    out: list[tuple[tuple[str, ...], MemoryEstimate, int]] = []
    tilings: list[tuple[tuple[str, ...], dict[str, Any]]] = [((), {})]
    if tiling:
        tiled = memory(model, attention=attention, **{**settings, "vae_tiling": True})
        out += [((*oflags, "--vae-tiling"), replace(tiled, **okw), 0) for oflags, okw in OFFLOADS]
        if tiled.peak_bytes < base.peak_bytes:  # tiling lowers the peak: try it with the quantized weights too
            tilings.append((("--vae-tiling",), {"vae_tiling": True}))
    for lflags, lkw, quantized in loadings:
        for tflags, tkw in (tilings if quantized else [((), {})]):
            try:
                est = base if not quantized else memory(model, attention=attention, **{**settings, **lkw, **tkw})
            except FlopcalcError:
                continue
            for oflags, okw in (QUANTIZED_OFFLOADS if quantized else OFFLOADS):
                out.append(((*lflags, *oflags, *tflags), replace(est, **okw), quantized))
    return Candidates(base.model, tuple(out), len(denoiser.block_bytes) if denoiser else 0)


def fit(model: str, *, gpu: str, attention: str = "fused", prepared: Candidates | None = None,
        **settings: Any) -> FitResult:
    """The settings under which ``model`` at ``settings`` fits ``gpu`` (see the module docstring); ``prepared``:
    :func:`candidates` already computed for these settings (to try many GPUs)."""
    from flopcalc.hardware.gpus import gpu as lookup

    g = lookup(gpu)
    tried = prepared or candidates(model, attention=attention, **settings)
    mem = g.memory_bytes
    on_gpu = [(flags, replace(e, gpu_key=g.key, gpu_name=g.name, gpu_memory_bytes=mem), q)
              for flags, e, q in tried.estimates]
    for flags, e, q in list(on_gpu):
        if e.offload != "none" or q or not tried.blocks:
            continue
        # the fewest swapped denoiser blocks that fit (the peak falls with each block swapped)
        lo, hi = 1, tried.blocks
        if replace(e, block_swap=hi).fits is False:
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if replace(e, block_swap=mid).fits is not False else (mid + 1, hi)
        on_gpu.append((("--block-swap", str(lo), *flags), replace(e, block_swap=lo), 0))
    found = [Candidate(flags, e, q, e.transfer_bytes / g.host_link_bytes_per_s) for flags, e, q in on_gpu
             if e.fits is not False]
    needed = [c for c in found if not any(set(o.flags) < set(c.flags) for o in found)]  # no flag it can do without
    ordered = sorted(needed, key=lambda c: (c.estimate.fits is not True, c.quantized, round(c.extra_seconds, 6),
                                            c.estimate.peak_bytes))
    smallest = min((e for _, e, _ in on_gpu), key=lambda e: e.peak_bytes)
    return FitResult(tried.model, g.key, g.name, mem, g.host_link_bytes_per_s, tuple(ordered[:LISTED]), len(on_gpu),
                     smallest)


def render_fit(result: FitResult, fmt: str = "table") -> str:
    import json

    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n"
    gib = lambda n: f"{n / 2**30:,.2f}"  # noqa: E731
    head = (f"{result.model} on {result.gpu_name} ({gib(result.gpu_memory_bytes)} GiB): settings that fit, cheapest "
            f"first ({result.tried} tried)")
    if not result.candidates:
        return (f"{head}\n  none fits: the smallest peak is {gib(result.smallest.peak_bytes)} GiB "
                f"(offload {result.smallest.offload}); try a smaller size, batch or frame count\n")
    rows = [("#", "flags", "peak GiB", "host RAM GiB", "extra s / generation", "weights")]
    for i, c in enumerate(result.candidates, 1):
        e = c.estimate
        rows.append((str(i), c.command_line, gib(e.peak_bytes), gib(e.host_bytes), f"{c.extra_seconds:,.2f}",
                     ("as loaded" if not c.quantized else f"{c.quantized} component(s) quantized")
                     + ("" if e.fits else "; not estimated: " + ", ".join(e.unestimated))
                     + (f"; vae tiles up to {c.vae_tile.tile} px every {c.vae_tile.stride}"
                        if c.vae_tile is not None and c.vae_tile.tile is not None else "")))
    from flopcalc.render.text_tables import columns

    return "\n".join([head, *("  " + line for line in columns(rows, right=(2, 3, 4))),
                      f"  extra seconds: weight bytes moved per generation ÷ the host link "
                      f"({result.host_link_bytes_per_s / 1e9:,.1f} GB/s), not overlapped with the compute (an upper "
                      "bound; CUDA streams hide part of it)"]) + "\n"
