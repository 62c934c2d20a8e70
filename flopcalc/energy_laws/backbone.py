"""The physics every prediction obeys: what each op class runs at on a GPU, and the bounds no point or interval
end may cross.

**Which peak each op class runs at** (``precision`` → the dense tensor peak of the dtype its kernels use):

* ``bf16`` / ``fp16``: everything at the 16-bit tensor peak (the two have the same peak on every GPU of the table,
  so they give the same time on the same stack);
* ``fp8``: linear layers at the fp8 tensor peak (what fp8 quantisation of ``nn.Linear`` runs), attention and
  convolutions at bf16;
* ``fp32``: what PyTorch does by default: ``torch.backends.cuda.matmul.allow_tf32`` is False, so matmuls (linear
  layers, attention) run in full fp32 on the CUDA cores, while ``torch.backends.cudnn.allow_tf32`` is True, so
  cuDNN convolutions run in TF32 on the tensor cores (PyTorch docs, "TensorFloat-32 (TF32) on Ampere (and later)
  devices"); ``tf32=True`` (``--tf32``, ``torch.backends.cuda.matmul.allow_tf32 = True``) runs the matmuls in TF32
  too. A GPU without TF32 (before Ampere) runs convolutions in fp32 as well.

**Bounds** (for ``n`` GPUs): latency ≥ Σ over op classes of FLOPs ÷ (dense peak of its dtype × n); average power
≤ TDP × n and ≥ idle power × n, so energy lies between idle × latency and TDP × latency. :func:`clamp` applies
them to a point and its interval: a bound is a fact, an interval end beyond it is not a possible outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopcalc.engine.errors import FlopcalcError

OP_CLASSES = ("linear", "attention", "conv")
PRECISIONS = ("bf16", "fp16", "fp32", "fp8")


@dataclass(frozen=True)
class Peaks:
    """Dense peak (FLOP/s, one GPU) each op class runs at, and the dtype it runs in."""

    linear: float
    attention: float
    conv: float
    dtypes: tuple[str, str, str]

    def of(self, op: str) -> float:
        return getattr(self, op)


def peaks(gpu, precision: str, tf32: bool = False) -> Peaks:
    """The dense peaks ``precision`` runs each op class at on ``gpu`` (see the module docstring); a precision the
    GPU has no peak for is one clear error."""
    if precision not in PRECISIONS:
        raise FlopcalcError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    have = gpu.peak_flops

    def need(dtype: str) -> float:
        if dtype not in have:
            raise FlopcalcError(f"{gpu.name} has no {dtype} peak in the GPU table (it has {', '.join(have)}); pick "
                                "another --precision")
        return have[dtype]

    if precision in ("bf16", "fp16"):
        dtypes = (precision,) * 3
    elif precision == "fp8":
        half = "bf16" if "bf16" in have else "fp16"
        dtypes = ("fp8", half, half)
    else:
        matmul = "tf32" if tf32 and "tf32" in have else "fp32"
        if tf32 and "tf32" not in have:
            raise FlopcalcError(f"--tf32: {gpu.name} has no TF32 tensor cores (TF32 came with Ampere)")
        dtypes = (matmul, matmul, "tf32" if "tf32" in have else "fp32")
    return Peaks(*(need(d) for d in dtypes), dtypes)


def min_latency(work: dict[str, float], p: Peaks, num_gpus: int = 1) -> float:
    """The fastest ``work`` ({op class: FLOPs}) can run: every FLOP at its dtype's dense peak on every GPU."""
    return sum(work[op] / p.of(op) for op in OP_CLASSES) / num_gpus


@dataclass(frozen=True)
class Bounds:
    """What no prediction may cross, for one item on ``num_gpus`` GPUs."""

    min_latency_s: float
    max_power_w: float
    min_power_w: float

    def to_dict(self) -> dict[str, float]:
        return {"min_latency_s": self.min_latency_s, "max_power_w": self.max_power_w,
                "min_power_w": self.min_power_w}


def bounds(work: dict[str, float], gpu, p: Peaks, num_gpus: int = 1) -> Bounds:
    return Bounds(min_latency(work, p, num_gpus), gpu.tdp_w * num_gpus, gpu.idle_w * num_gpus)


def clamp(latency: tuple[float, float, float], energy: tuple[float, float, float], b: Bounds
          ) -> tuple[tuple[float, float, float], tuple[float, float, float], list[str]]:
    """(low, point, high) of latency and energy, each end within the bounds: latency ≥ the minimum, and each
    energy end between the idle and the TDP power over its matching latency end. Returns the clamped triples and
    what was clamped, said aloud."""
    said = []
    lat = (max(latency[0], b.min_latency_s), max(latency[1], b.min_latency_s), max(latency[2], b.min_latency_s))
    if lat != tuple(latency):
        said.append(f"latency held at the physical minimum {b.min_latency_s:.3g} s (every FLOP at the dense peak)")
    e0, e1, e2 = (min(max(e, b.min_power_w * t), b.max_power_w * t) for e, t in zip(energy, lat))
    en = (e0, e1, e2)
    if any(abs(a - e) > 1e-9 * e for a, e in zip(en, energy)):
        said.append(f"energy held within idle {b.min_power_w:g} W and TDP {b.max_power_w:g} W over its latency")
    return lat, en, said  # both maps are monotone: low ≤ point ≤ high still holds
