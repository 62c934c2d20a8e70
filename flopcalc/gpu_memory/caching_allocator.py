"""A replay of PyTorch's CUDA caching allocator: what ``torch.cuda.max_memory_reserved()`` reads after a sequence of
allocations and frees, exact for one stream with the default settings (no ``PYTORCH_CUDA_ALLOC_CONF``).

The rules, as PyTorch's source states them (``c10/cuda/CUDACachingAllocator.cpp``, class
``DeviceCachingAllocator``; constants in ``c10/core/AllocatorConfig.h`` of torch 2.13.0, the header installed
with the wheel):

* ``round_size``: every request is rounded up to a multiple of ``kMinBlockSize`` = 512 B (``AllocatorConfig.h:19``;
  ``roundup_power2_divisions`` is unset by default, so no power-of-two rounding);
* ``get_pool``: a rounded size ≤ ``kSmallSize`` = 1 MiB (``AllocatorConfig.h:21``) goes to the small pool, larger to
  the large pool; a block never moves between pools;
* ``get_free_block``: best fit, the smallest cached free block of the pool at least the size (the pool is a
  ``std::set`` ordered by ``BlockComparatorSize``: stream, then size, then address, so equal sizes go to the lowest
  address); ``max_split_size`` is unlimited by default, so the oversize rules never apply;
* ``get_allocation_size``: when no cached block fits, a new segment (one ``cudaMalloc``) of ``kSmallBuffer`` =
  2 MiB for the small pool (``AllocatorConfig.h:17``), ``large_segment_size`` = 20 MiB for a large request under
  ``kMinLargeAlloc`` = 10 MiB (``AllocatorConfig.h:23, 340``), else the request rounded up to ``kRoundLarge`` =
  2 MiB (``AllocatorConfig.h:25``);
* ``should_split``: the rest of a block is split off as a free block when it is ≥ 512 B (small pool) or > 1 MiB
  (large pool); otherwise the whole block is handed out (counted in ``allocated_bytes``);
* ``free_block`` / ``try_merge_blocks``: a freed block merges with its free neighbours of the same segment only
  (blocks of different segments never coalesce) and goes back to its pool;
* segments are never returned while memory is left (``release_cached_blocks`` runs only when a ``cudaMalloc``
  fails, or on ``torch.cuda.empty_cache()``): the reserved peak is the reserved total at the end;
  ``expandable_segments`` is off by default (``AllocatorConfig.h:353``).

New segments get increasing addresses (an assumption: ``cudaMalloc``'s addresses are the driver's; they only break
ties between free blocks of equal size).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable

K_MIN_BLOCK_SIZE = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_LARGE_BUFFER = 20 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20


def round_size(size: int) -> int:
    """``round_size``: the request rounded up to a multiple of 512 B (at least 512 B)."""
    return max(K_MIN_BLOCK_SIZE, -(-size // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE)


def allocation_size(size: int) -> int:
    """``get_allocation_size``: the segment a new ``cudaMalloc`` reserves for a rounded request of ``size``."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


@dataclass(eq=False)
class _Block:
    addr: int
    size: int
    small: bool
    allocated: bool = False
    requested: int = 0
    prev: "_Block | None" = None
    next: "_Block | None" = None


@dataclass
class CachingAllocator:
    """The device allocator of one GPU and one stream. :meth:`malloc` returns a handle for :meth:`free`."""

    allocated: int = 0  # bytes of blocks handed out (``allocated_bytes``: rounded and unsplit remainders included)
    requested: int = 0  # bytes asked for (``requested_bytes``)
    reserved: int = 0  # bytes of segments (``reserved_bytes``)
    peak_allocated: int = 0
    peak_requested: int = 0
    segments: int = 0
    _next_addr: int = 0
    _pools: dict[bool, list[tuple[int, int]]] = field(default_factory=lambda: {True: [], False: []})
    _free: dict[int, _Block] = field(default_factory=dict)

    @property
    def peak_reserved(self) -> int:
        """Segments are never released here, so the reserved peak is the reserved total."""
        return self.reserved

    def _insert(self, block: _Block) -> None:
        bisect.insort(self._pools[block.small], (block.size, block.addr))
        self._free[block.addr] = block

    def _remove(self, block: _Block) -> None:
        pool = self._pools[block.small]
        del pool[bisect.bisect_left(pool, (block.size, block.addr))]
        del self._free[block.addr]

    def malloc(self, nbytes: int) -> _Block:
        size = round_size(nbytes)
        small = size <= K_SMALL_SIZE
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i < len(pool):
            block = self._free[pool[i][1]]
            self._remove(block)
        else:
            segment = allocation_size(size)
            block = _Block(self._next_addr, segment, small)
            self._next_addr += -(-segment // K_ROUND_LARGE) * K_ROUND_LARGE
            self.reserved += segment
            self.segments += 1
        remaining = block.size - size
        if remaining >= K_MIN_BLOCK_SIZE if small else remaining > K_SMALL_SIZE:
            rest = _Block(block.addr + size, remaining, small, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._insert(rest)
        block.allocated, block.requested = True, nbytes
        self.allocated += block.size
        self.requested += nbytes
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_requested = max(self.peak_requested, self.requested)
        return block

    def free(self, block: _Block) -> None:
        if not block.allocated:
            raise ValueError("block freed twice")
        block.allocated = False
        self.allocated -= block.size
        self.requested -= block.requested
        before, after = block.prev, block.next
        if before is not None and not before.allocated:  # [before block] → one block at before's address
            self._remove(before)
            block.addr, block.size, block.prev = before.addr, block.size + before.size, before.prev
            if block.prev is not None:
                block.prev.next = block
        if after is not None and not after.allocated:  # [block after]
            self._remove(after)
            block.size, block.next = block.size + after.size, after.next
            if block.next is not None:
                block.next.prev = block
        self._insert(block)


def replay(events: Iterable[tuple[int, int]]) -> CachingAllocator:
    """Replay ``(key, nbytes)`` events: ``nbytes > 0`` allocates a storage under ``key``, ``nbytes == 0`` frees the
    storage of ``key`` (a key may be reused after its free)."""
    alloc = CachingAllocator()
    live: dict[int, _Block] = {}
    for key, nbytes in events:
        if nbytes > 0:
            if key in live:
                raise ValueError(f"storage {key} allocated twice")
            live[key] = alloc.malloc(nbytes)
        else:
            alloc.free(live.pop(key))
    return alloc


def reserved_for(sizes: Iterable[int]) -> int:
    """The bytes reserved after allocating ``sizes`` in order and freeing none (weights moved to the GPU)."""
    alloc = CachingAllocator()
    for n in sizes:
        alloc.malloc(n)
    return alloc.reserved
