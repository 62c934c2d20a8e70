"""The two peaks: live tensors, and what decides an out-of-memory error (interface placeholder).

``allocated_peak_bytes`` is what flopcalc's weights and activation figures count: bytes of live tensors at the peak.
An out-of-memory error is decided by what PyTorch's caching allocator has reserved plus the CUDA context.
:func:`reserve` returns both; this placeholder adds nothing (``allocator_bytes = workspace_bytes = context_bytes =
0``, ``error = 0``) until the measured allocator model replaces this module with the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from flopcalc.hardware.gpus import GPU


@dataclass(frozen=True)
class Reserve:
    allocated_peak_bytes: int   # live tensors at the peak
    allocator_bytes: int        # the caching allocator's rounding and fragmentation above it
    workspace_bytes: int        # cuBLAS / cuDNN / attention-kernel workspaces
    context_bytes: int          # the CUDA context of one process on this GPU
    error: float                # the relative error of allocator_bytes + workspace_bytes
    note: str = ""

    @property
    def reserved_peak_bytes(self) -> int:
        """What ``torch.cuda.max_memory_reserved()`` would read."""
        return self.allocated_peak_bytes + self.allocator_bytes + self.workspace_bytes

    @property
    def peak_bytes(self) -> int:
        """What decides an out-of-memory error: the reserved peak and the CUDA context."""
        return self.reserved_peak_bytes + self.context_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"allocated_peak_bytes": self.allocated_peak_bytes, "allocator_bytes": self.allocator_bytes,
                "workspace_bytes": self.workspace_bytes, "reserved_peak_bytes": self.reserved_peak_bytes,
                "context_bytes": self.context_bytes, "peak_bytes": self.peak_bytes,
                "allocator_workspace_rel_error": self.error, "note": self.note}


def reserve(allocated_peak_bytes: int, *, gpu: "GPU | None", largest_block_bytes: int = 0, training: bool = False,
            tensors: Sequence[int] | None = None) -> Reserve:
    """The peaks of a run whose live tensors peak at ``allocated_peak_bytes`` (placeholder: no reserve, no context)."""
    return Reserve(allocated_peak_bytes, 0, 0, 0, 0.0,
                   "allocator reserve and CUDA context not modelled yet (interface placeholder)")
