r"""What PyTorch's CUDA caching allocator reserves for the tensors a training step keeps from step to step.

``peak_allocated_bytes`` (:mod:`flopcalc.training.memory`) counts the bytes of live tensors at the step's peak, what
``torch.cuda.max_memory_allocated()`` reads (the activation fixtures count each storage rounded up to 512 bytes, as
the allocator hands it out). An out-of-memory error is decided by the segments the allocator has reserved from the
driver, which are larger. This module adds the part of that reserve that follows from the allocator's rules and the
persistent tensors' sizes alone, with no measurement:

* every request is rounded up to a multiple of ``kMinBlockSize`` = 512 bytes (``round_size``);
* a request of at most ``kSmallSize`` = 1 MiB is carved from 2 MiB segments (``kSmallBuffer``), one of 1–10 MiB
  (below ``kMinLargeAlloc``) from 20 MiB segments (``kLargeBuffer``), a larger one gets its own segment rounded up
  to a multiple of ``kRoundLarge`` = 2 MiB (``get_allocation_size``).

Sources: ``c10/core/AllocatorConfig.h`` (torch 2.13: ``kSmallBuffer``, ``kMinBlockSize``, ``kSmallSize``,
``kMinLargeAlloc``, ``kRoundLarge``) and ``c10/cuda/CUDACachingAllocator.cpp`` (``kLargeBuffer``, ``round_size``,
``get_allocation_size``), with ``PYTORCH_CUDA_ALLOC_CONF`` unset (no ``roundup_power2_divisions``, no expandable
segments).

The persistent tensors (weights, gradients, optimizer states) are allocated once and stay: each large one fills its
own segment, the small and medium ones are packed into their pools' segments (counted here as packed without gaps:
the last segment of each pool partly filled). :func:`reserved_bytes` is therefore exact for the large tensors and a
lower bound for the pools. ``peak_bytes`` adds the CUDA context of one process on the GPU's architecture
(``context_bytes`` of :class:`flopcalc.hardware.gpus.GPU`, from ``architectures`` in ``flopcalc/data/gpus.yaml``
with its source; 0 without ``--gpu``). Left out, and stated in the output: the fragmentation of the activations'
segments (freed and reused during the step: it depends on the order of allocations, not on sizes alone) and the
cuBLAS / attention workspaces. ``peak_bytes`` is therefore a lower bound of what the step needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from flopcalc.gpu_memory.caching_allocator import (  # noqa: F401  (the rules, cited there, re-exported)
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_MIN_LARGE_ALLOC,
    K_ROUND_LARGE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    round_size,
)
from flopcalc.gpu_memory.caching_allocator import allocation_size as segment_size  # noqa: F401

LEFT_OUT = "not included: fragmentation of the activations' segments, cuBLAS/attention workspaces"


def reserved_bytes(tensors: Iterable[tuple[int, int]]) -> int:
    """The segments reserved for persistent tensors ``(bytes, count)``: a large tensor's own segment; the small and
    medium pools packed into whole 2 MiB and 20 MiB segments."""
    large = small = medium = 0
    for nbytes, count in tensors:
        if nbytes <= 0 or count <= 0:
            continue
        block = round_size(nbytes)
        if block <= K_SMALL_SIZE:
            small += block * count
        elif block < K_MIN_LARGE_ALLOC:
            medium += block * count
        else:
            large += segment_size(block) * count
    return large + -(-small // K_SMALL_BUFFER) * K_SMALL_BUFFER + -(-medium // K_LARGE_BUFFER) * K_LARGE_BUFFER


@dataclass(frozen=True)
class Reserve:
    """The step's peak of live tensors and what the allocator reserves above it for the persistent tensors."""

    allocated_peak_bytes: int   # live tensors at the peak (torch.cuda.max_memory_allocated)
    persistent_bytes: int       # the persistent tensors' bytes the reserve was computed for
    persistent_reserved_bytes: int  # their segments (reserved_bytes)
    context_bytes: int = 0      # the CUDA context of one process (gpus.yaml architectures)

    @property
    def allocator_bytes(self) -> int:
        """The segments' rounding and packing above the persistent tensors' own bytes."""
        return max(0, self.persistent_reserved_bytes - self.persistent_bytes)

    @property
    def reserved_peak_bytes(self) -> int:
        """What ``torch.cuda.max_memory_reserved()`` would read at least."""
        return self.allocated_peak_bytes + self.allocator_bytes

    @property
    def peak_bytes(self) -> int:
        """The reserved peak and the CUDA context: what must fit the GPU's memory."""
        return self.reserved_peak_bytes + self.context_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"allocated_peak_bytes": self.allocated_peak_bytes, "persistent_bytes": self.persistent_bytes,
                "persistent_reserved_bytes": self.persistent_reserved_bytes, "allocator_bytes": self.allocator_bytes,
                "reserved_peak_bytes": self.reserved_peak_bytes, "context_bytes": self.context_bytes,
                "peak_bytes": self.peak_bytes,
                "rule": "PyTorch CUDA caching allocator: 512 B blocks; <= 1 MiB packed in 2 MiB segments, 1-10 MiB "
                        "in 20 MiB, larger in own segments rounded to 2 MiB (c10/core/AllocatorConfig.h, "
                        "c10/cuda/CUDACachingAllocator.cpp)",
                "left_out": LEFT_OUT}
