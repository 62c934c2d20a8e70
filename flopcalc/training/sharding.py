r"""Sharding a training step over N GPUs: what each rank holds, and what the collectives move per step.

The engines users run, each as its library stores a mixed-precision (fp32 master, bf16 compute) run; ``D`` is the
data-parallel degree (GPUs ÷ the sequence-parallel degree), ``Ψ`` the trainable parameters, ``Φ`` the frozen ones:

==================  =======================================================================================  =========================================================================
``--sharding``      per rank                                                                                 source
==================  =======================================================================================  =========================================================================
``ddp``             parameters, gradients and optimizer states in full; plus DDP's gradient buckets, a second  torch/nn/parallel/distributed.py (``gradient_as_bucket_view=False``, the
                    copy of the gradients (the reducer copies each gradient into its bucket)                   default accelerate keeps): ``Reducer`` buckets of the parameters' dtype
``fsdp``            FSDP2 ``fully_shard`` (``reshard_after_forward=True``): parameters (in the master dtype),   torch/distributed/fsdp/_fully_shard: each parameter chunked on dim 0 over
                    gradients and states ÷ D; while a block runs, its parameters all-gathered in the compute   D ranks (``FSDPParam``); ``MixedPrecisionPolicy(param_dtype=bf16,
                    dtype, and the next block's prefetched (2 blocks); in the backward one block's unsharded   reduce_dtype=fp32)``; one unit per block (the blocks gradient
                    gradients                                                                                   checkpointing wraps), the root's own parameters kept gathered
``fsdp-grad-op``    ``reshard_after_forward=False`` (FSDP1's SHARD_GRAD_OP): as ``fsdp``, but every gathered   same; the forward's all-gather is kept for the backward
                    block stays gathered from its forward to its backward: all parameters in the compute
                    dtype at the peak
``fsdp-hybrid``     HSDP: ``fsdp`` within a node (shard group ``min(D, gpus per node)``), replicated across    FSDP2 ``fully_shard(mesh=(replicate, shard))``
                    nodes
``zero1``           DeepSpeed ZeRO stage 1: bf16 parameters and gradients in full; fp32 master copy and states  Rajbhandari et al. 2020 (ZeRO), section 5; deepspeed/runtime/zero/
                    ÷ D                                                                                          stage_1_and_2.py
``zero2``           stage 2: bf16 parameters in full; gradients, fp32 master and states ÷ D                     same
``zero3``           stage 3: everything ÷ D; the running block gathered (2 with prefetch)                       deepspeed/runtime/zero/stage3.py
==================  =======================================================================================  =========================================================================

``--offload-optimizer`` (DeepSpeed ZeRO-Offload, ``offload_optimizer: cpu``; FSDP2 ``CPUOffloadPolicy``): the fp32
master copy and the optimizer states live in host memory and the step runs on the CPU; the GPU keeps the bf16 (ZeRO)
or sharded (FSDP) parameters and the gradients until they are copied out. Frozen parameters (LoRA's base) are
sharded like the others under FSDP and ZeRO-3, and have neither gradients nor states.

Communication per step, per rank (ring algorithms: an all-gather or a reduce-scatter of ``B`` bytes in total sends
``(D−1)/D · B`` per rank, an all-reduce ``2·(D−1)/D · B``; NCCL, Patarasuk & Yuan 2009): DDP all-reduces the
gradients (their dtype); FSDP all-gathers the parameters in the compute dtype in the forward and again in the
backward (not again under ``fsdp-grad-op``) and reduce-scatters the gradients (fp32); ZeRO-1/2 reduce-scatter the
bf16 gradients and all-gather the updated bf16 parameters (the paper's 2Ψ); ZeRO-3 all-gathers the parameters
twice and reduce-scatters the gradients (3Ψ). Sequence parallelism adds, per attention: Ulysses four all-to-alls
(q, k, v in, the output back), each sending ``(U−1)/U`` of a rank's ``L/U × d`` tensor, again in the backward; ring
attention passes each rank's K and V block around ``R−1`` times in the forward, and K, V and their gradients in the
backward. Times are bytes ÷ the link's one-direction bandwidth: the GPU table's GPU-to-GPU link within a node, and
past ``gpus_per_node`` GPUs the slower of it and the inter-node link (``--inter-node-bandwidth``); a lower bound, and
engines overlap most of it with compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopcalc.engine.errors import OptionError

SHARDINGS = ("ddp", "fsdp", "fsdp-grad-op", "fsdp-hybrid", "zero1", "zero2", "zero3")
#: What each strategy divides by the data-parallel degree: (parameters, gradients, optimizer states).
SHARDED = {
    "ddp": (False, False, False),
    "fsdp": (True, True, True),
    "fsdp-grad-op": (True, True, True),
    "fsdp-hybrid": (True, True, True),
    "zero1": (False, False, True),
    "zero2": (False, True, True),
    "zero3": (True, True, True),
}
#: A node of 8 GPUs (DGX / HGX H100, H200, B200; most cloud 8-GPU instances).
GPUS_PER_NODE = 8
#: One ConnectX-7 NDR InfiniBand adapter (400 Gb/s) per GPU, as the NVIDIA DGX H100 has (eight single-port 400 Gb/s
#: "OSFP ports serving 8 single-port NVIDIA ConnectX-7 VPI", DGX H100 datasheet): 50 GB/s per direction per GPU.
INTER_NODE_BYTES_PER_S = 50e9
INTER_NODE_SOURCE = ("NVIDIA DGX H100 datasheet: 8 × single-port ConnectX-7 VPI, up to 400 Gb/s InfiniBand/Ethernet, "
                     "one per GPU (50 GB/s per direction)")


def check_sharding(name: str | None) -> str | None:
    if name is not None and name not in SHARDINGS:
        raise OptionError(f"--sharding {name!r}: choose one of {', '.join(SHARDINGS)}")
    return name


@dataclass(frozen=True)
class SequenceParallel:
    """xDiT-style sequence parallelism of a video DiT: ``ulysses`` × ``ring`` GPUs per sample."""

    ulysses: int = 1
    ring: int = 1

    @property
    def degree(self) -> int:
        return self.ulysses * self.ring

    def describe(self) -> str:
        return f"ulysses={self.ulysses},ring={self.ring}"

    def to_dict(self) -> dict[str, Any]:
        return {"ulysses": self.ulysses, "ring": self.ring, "degree": self.degree}


def parse_sequence_parallel(text: str | SequenceParallel | None) -> SequenceParallel:
    """``"ulysses=U,ring=R"`` (either may be left out: 1) → :class:`SequenceParallel`; a one-line error otherwise."""
    if text is None:
        return SequenceParallel()
    if isinstance(text, SequenceParallel):
        return text
    if not isinstance(text, str) or not text.strip():
        raise OptionError(f"--sequence-parallel {text!r}: write ulysses=U,ring=R (e.g. ulysses=4 or ulysses=2,ring=2)")
    degrees = {"ulysses": 1, "ring": 1}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if key not in degrees or not sep or not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 1024:
            raise OptionError(f"--sequence-parallel {text!r}: write ulysses=U,ring=R with whole degrees from 1 to "
                              "1024 (e.g. ulysses=4 or ulysses=2,ring=2)")
        degrees[key] = int(value)
    return SequenceParallel(degrees["ulysses"], degrees["ring"])


@dataclass(frozen=True)
class Collective:
    """One kind of collective of a training step: bytes each rank sends per step, and their time on the link."""

    name: str      # all-gather, reduce-scatter, all-reduce, all-to-all, ring send, host copy
    what: str      # what it moves
    bytes: int
    link: str      # the link it runs over
    bytes_per_s: float

    @property
    def seconds(self) -> float:
        return self.bytes / self.bytes_per_s if self.bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.name, "what": self.what, "bytes_per_rank": self.bytes, "link": self.link,
                "link_bytes_per_s": self.bytes_per_s, "seconds": self.seconds}


def ring_share(total: int, group: int) -> int:
    """Bytes one rank sends in a ring all-gather or reduce-scatter of ``total`` bytes over ``group`` ranks."""
    return 0 if group <= 1 else total * (group - 1) // group
