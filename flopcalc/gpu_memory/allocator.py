"""The two peaks: live tensors, and what decides an out-of-memory error.

``allocated_peak_bytes`` is what flopcalc's weights and activation fits count: bytes of live tensors at the peak. A
CUDA out-of-memory error is decided by what PyTorch's caching allocator has *reserved* (``cudaMalloc``'d segments,
``torch.cuda.max_memory_reserved()``) plus what the process holds outside it (the CUDA context). :func:`reserve`
adds, each from its source:

* ``allocator_bytes``: the caching allocator's rounding and fragmentation above the live bytes. Its rules
  (512-byte rounding, 2 MiB small segments, 20 MiB segments under 10 MiB, 2 MiB rounding above, best-fit reuse,
  splitting, no coalescing across segments) are replayed exactly by :mod:`flopcalc.gpu_memory.caching_allocator`;
  ``validation/build_allocator_fixtures.py`` replays the weights and every allocation and free of each call the
  activation manifest measures, and ``validation/fit_allocator.py`` fits, per component kind (text encoder,
  denoiser, VAE decoder), ``reserve = overhead × weights [or a constant] + (factor − 1) × activations [+ constant]``
  (terms chosen inside the folds) with its nested leave-one-component-out error
  (``flopcalc/data/allocator_fit.json``), each measured call's own factor (its
  leave-one-size-out error) and each measured config's weights replayed exactly;
* ``workspace_bytes``: the cuBLAS and cuBLASLt workspaces PyTorch allocates through the same allocator on the first
  matmul of a stream and keeps (``aten/src/ATen/cuda/CublasHandlePool.cpp``, ``parseChosenWorkspaceSize``:
  ``:4096:2:16:8`` = 8 MiB + 128 KiB by default, 32 MiB on sm90 (Hopper); ROCm 32 MiB, 128 MiB on gfx94x/gfx95x;
  ``parseCUDABlasLtWorkspaceSize``: 1 MiB on CUDA, 76 MiB hipBLASLt on ROCm), counted as the segments they reserve;
* ``context_bytes``: the CUDA context of one process on the GPU's architecture (``architectures`` of
  ``flopcalc/data/gpus.yaml``, each with its source; not in ``max_memory_reserved``).

``reserved_peak_bytes`` = allocated + allocator + workspace (what ``torch.cuda.max_memory_reserved()`` reads);
``peak_bytes`` = reserved + context (what must fit the GPU's memory).

Not modelled: cuDNN convolution workspaces (allocated and freed per call through the same allocator; their sizes are
cuDNN's heuristic choice, not documented); the memory-efficient attention kernel's float32 ``output_accum``
(``aten/src/ATen/native/transformers/cuda/attention.cu``, ``_efficient_attention_forward``: only when
``Kernel::kNeedsOutputAccumulatorBuffer``, head dims above its keys per block with a 16-bit output; the output and
logsumexp are in the recorded calls); library kernels loaded lazily after the
context is made, CUDA graphs, ``expandable_segments`` and other ``PYTORCH_CUDA_ALLOC_CONF`` settings, several
streams; the allocator's release-and-retry when ``cudaMalloc`` fails (near the limit a run may still fit with less
than the reserve: the estimate is the reserve of an unconstrained run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.caching_allocator import allocation_size, reserved_for, round_size

if TYPE_CHECKING:
    from flopcalc.hardware.gpus import GPU

_DATA = Path(__file__).resolve().parents[1] / "data" / "allocator_fit.json"
KINDS = ("text_encoder", "denoiser", "vae_decoder")

MIB = 1 << 20
#: ``parseChosenWorkspaceSize`` defaults (CublasHandlePool.cpp): CUDA ``:4096:2:16:8`` unless sm90; ROCm 32 MiB
#: unless gfx94x/gfx95x. ``parseCUDABlasLtWorkspaceSize``: CUDA 1024 KiB, ROCm 76 MiB (hipBLASLt).
CUBLAS_DEFAULT = 4096 * 1024 * 2 + 16 * 1024 * 8
CUBLAS_WORKSPACE = {"hopper": 4096 * 8 * 1024, "cdna2": 32 * MIB, "cdna3": 128 * MIB}
CUBLASLT_WORKSPACE = {"cdna2": 76 * MIB, "cdna3": 76 * MIB}
CUBLASLT_DEFAULT = 1024 * 1024


@dataclass(frozen=True)
class Reserve:
    allocated_peak_bytes: int   # live tensors at the peak (what flopcalc computed before)
    allocator_bytes: int        # the caching allocator's rounding and fragmentation above it
    workspace_bytes: int        # cuBLAS / cuDNN / attention-kernel workspaces
    context_bytes: int          # the CUDA context of one process on this GPU (not in max_memory_reserved)
    error: float                # the relative error of allocator_bytes + workspace_bytes (cross-validated)
    note: str = ""              # what the figures do not cover (no GPU named, a training step, ...)

    @property
    def reserved_peak_bytes(self) -> int:
        """What ``torch.cuda.max_memory_reserved()`` would read."""
        return self.allocated_peak_bytes + self.allocator_bytes + self.workspace_bytes

    @property
    def peak_bytes(self) -> int:
        """What decides an out-of-memory error: the reserved peak and the CUDA context."""
        return self.reserved_peak_bytes + self.context_bytes

    @property
    def uncertainty_bytes(self) -> int:
        """The ± on ``allocator_bytes + workspace_bytes``: their cross-validated relative error times them."""
        return round(self.error * (self.allocator_bytes + self.workspace_bytes))

    @property
    def peak_range(self) -> tuple[int, int]:
        """``peak_bytes`` less and more :attr:`uncertainty_bytes`, never below the live tensors, the workspaces and
        the context (the allocator reserves at least what is live): the interval the reserve law earned."""
        floor = self.allocated_peak_bytes + self.workspace_bytes + self.context_bytes
        return max(floor, self.peak_bytes - self.uncertainty_bytes), self.peak_bytes + self.uncertainty_bytes

    def to_dict(self) -> dict[str, Any]:
        low, high = self.peak_range
        return {"allocated_peak_bytes": self.allocated_peak_bytes, "allocator_bytes": self.allocator_bytes,
                "workspace_bytes": self.workspace_bytes, "reserved_peak_bytes": self.reserved_peak_bytes,
                "context_bytes": self.context_bytes, "peak_bytes": self.peak_bytes, "peak_bytes_low": low,
                "peak_bytes_high": high, "allocator_workspace_rel_error": self.error, "note": self.note}


@lru_cache(maxsize=1)
def fit() -> dict[str, Any]:
    """The fitted reserve law (``validation/fit_allocator.py``)."""
    with _DATA.open(encoding="utf-8") as fh:
        return json.load(fh)


def workspace_sizes(gpu: "GPU | None") -> tuple[int, ...]:
    """The workspace allocations PyTorch makes on ``gpu``'s architecture (bytes asked), none without a GPU."""
    if gpu is None:
        return ()
    arch = gpu.architecture or ""
    return CUBLAS_WORKSPACE.get(arch, CUBLAS_DEFAULT), CUBLASLT_WORKSPACE.get(arch, CUBLASLT_DEFAULT)


def workspace_bytes(gpu: "GPU | None") -> int:
    """What the workspaces reserve: their segments (an 8 MiB + 128 KiB cuBLAS workspace takes a 20 MiB segment,
    whose rest other requests of 1–10 MiB may share: an upper bound by at most 12 MiB)."""
    return reserved_for(workspace_sizes(gpu))


def _law(kind: str) -> Mapping[str, Any]:
    if kind not in KINDS:
        raise FlopcalcError(f"reserve: kind {kind!r}: choose one of {', '.join(KINDS)}")
    return fit()["kinds"][kind]


def weights_reserve(class_name: str | None, config: Mapping[str, Any], dtype: str, nbytes: int) -> int | None:
    """What the caching allocator reserves above the weights of a measured config loaded in ``dtype`` (the replay of
    its own tensors: ``configs`` of the fit, bf16 and float32; fp16 tensors have bf16's sizes), or None: not
    measured, another dtype, or ``nbytes`` not the replayed weights' bytes (adapters, other kept-fp32 modules)."""
    from flopcalc.gpu_memory.activations import config_key

    width = {"bf16": "", "fp16": "", "fp32": "fp32_"}.get(dtype)
    entry = fit()["configs"].get(f"{class_name}:{config_key(config)}")
    if width is None or entry is None or entry[f"{width}weights_bytes"] != nbytes:
        return None
    return entry[f"{width}weights_reserved_bytes"] - entry[f"{width}weights_bytes"]


def call_law(class_name: str | None, call: str, config: Mapping[str, Any], *, tiled: bool = False
             ) -> tuple[float, float] | None:
    """``(factor, leave-one-size-out error)`` of a measured call's own reserve law (``calls`` of the fit: the reserve
    above the weights = factor × the activations), or None."""
    from flopcalc.gpu_memory.activations import config_key

    entry = fit()["calls"].get(f"{class_name}.{call}{':tiled' if tiled else ''}:{config_key(config)}")
    if entry is None:
        return None
    return entry["activation_factor"], entry["loo_max_rel_error"]


def kind_of_role(role: str) -> str:
    """The reserve law of a planned call's role: text and image encoders take the text encoders', VAE (and audio VAE,
    vocoder, upsampler) calls the VAE decoders', every other module the denoisers'."""
    if role in ("text_encoder", "image_encoder", "text_connector", "projection"):
        return "text_encoder"
    if role in ("vae_decoder", "vae_encoder", "vae", "audio_vae", "vocoder", "upsampler"):
        return "vae_decoder"
    return "denoiser"


def replayed_weights(configs: Mapping[str, Mapping[str, Any]], weights: Sequence[Any]) -> dict[str, int]:
    """Component → the exact reserve above its weights (:func:`weights_reserve`) where its config was replayed at its
    dtype."""
    from flopcalc.engine.config import class_name_of

    out = {}
    for w in weights:
        cfg = configs.get(w.component)
        r = None if cfg is None else weights_reserve(class_name_of(cfg), cfg, w.dtype, w.bytes)
        if r is not None:
            out[w.component] = r
    return out


def reserve(allocated_peak_bytes: int, *, gpu: "GPU | None", largest_block_bytes: int = 0, training: bool = False,
            tensors: Sequence[int] | None = None, activation_bytes: int = 0, kind: str = "denoiser",
            weights: Mapping[str, int] | None = None, exact_weights: Sequence[tuple[int, int]] = (),
            activation_law: tuple[float, float] | None = None) -> Reserve:
    """The peaks of a run whose live tensors peak at ``allocated_peak_bytes``.

    ``activation_bytes`` of them are the running call's activations (a component of ``kind``: ``text_encoder``,
    ``denoiser``, ``vae_decoder``); the rest are weights. ``exact_weights``: ``(bytes, reserve above them)`` of weight
    sets whose reserve is known (:func:`weights_reserve`); ``tensors``: sizes of tensors allocated in order and kept
    (weights as ``pipe.to("cuda")`` moves them), replayed exactly; the remaining weight bytes are of the kinds
    ``weights`` maps to their bytes (default: all of ``kind``) and take their kind's fitted overhead.
    ``largest_block_bytes``: the largest single allocation, whose own segment rounding is a floor of the reserve.
    ``training``: the inference law (not fitted on training steps; said in ``note``). ``activation_law``: the call's
    own ``(factor, error)`` (:func:`call_law`) instead of its kind's.
    ``error``: each law's cross-validated error (the largest; relative to its part, or to 64 MiB where the part is
    smaller, as the fit states it) over ``allocator_bytes + workspace_bytes``; replayed parts and the workspaces
    (PyTorch's own sizes) count as exact."""
    known = sum(b for b, _ in exact_weights) + (sum(tensors) if tensors is not None else 0)
    rest = allocated_peak_bytes - activation_bytes - known
    if min(allocated_peak_bytes, activation_bytes, rest) < 0:
        raise FlopcalcError(f"reserve: {activation_bytes} activation bytes and {known} replayed weight bytes do not "
                            f"fit in {allocated_peak_bytes} allocated")
    if weights is None:
        weights = {kind: rest}
    elif sum(weights.values()) != rest:
        raise FlopcalcError(f"reserve: weights of {sum(weights.values())} B, not the {rest} B left beside the "
                            "activations and the replayed weights")
    exact = sum(r for _, r in exact_weights) + (reserved_for(tensors) - sum(tensors) if tensors is not None else 0)
    parts = [(round(_law(k)["weights_overhead"] * b + _law(k)["weights_constant_bytes"]),
              _law(k)["weights_loco_max_rel_error"]) for k, b in weights.items() if b]
    if activation_bytes:
        law = _law(kind)
        if activation_law is None:
            parts.append((round((law["activation_factor"] - 1) * activation_bytes + law["activation_constant_bytes"]),
                          law["activation_loco_max_rel_error"]))
        else:
            parts.append((round((activation_law[0] - 1) * activation_bytes), activation_law[1]))
    floor = allocation_size(round_size(largest_block_bytes)) - largest_block_bytes if largest_block_bytes else 0
    allocator = max(exact + sum(p for p, _ in parts), floor, 0)
    ws = workspace_bytes(gpu)
    total = allocator + ws
    uncertain = sum(max(abs(p), fit()["significant_bytes"]) * e for p, e in parts)
    notes = []
    if gpu is None:
        notes.append("no GPU named: the CUDA context and the cuBLAS workspaces are not included")
    if training:
        notes.append("the allocator reserve was fitted on inference calls, not on training steps")
    return Reserve(allocated_peak_bytes, allocator, ws, 0 if gpu is None else gpu.context_bytes,
                   uncertain / total if total else 0.0, "; ".join(notes))
