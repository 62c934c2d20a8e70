r"""GPU memory of one training step, per GPU: weights, gradients, optimizer states, activations, the peak.

Per rank (``D`` data-parallel ranks × ``S`` sequence-parallel ranks = ``--num-gpus``; :mod:`flopcalc.training.sharding`
says what each engine divides by ``D``):

* **weights**: the trained parameters in the master dtype (``--master-weights fp32``: float32, as accelerate's
  ``mixed_precision="bf16"`` trains; ``bf16``: pure bf16), the frozen ones (LoRA's base) in the compute dtype or
  quantized (``--base-dtype nf4|int8|fp8``, QLoRA), both exact from the configuration with the buffers
  (:func:`flopcalc.gpu_memory.weights.component_weights`); LoRA's adapters, ``r·(d_in + d_out)`` per adapted layer;
  an EMA copy of the trained parameters (``--ema``, diffusers' ``EMAModel`` on the GPU); the frozen text encoders and
  VAE in bf16 when they run online (``--frozen-encoders online``), none when their outputs are cached;
* **gradients**: one per trained parameter, in its dtype (``zero_grad(set_to_none=True)``: allocated by the backward,
  freed before the next forward);
* **optimizer states**: :mod:`flopcalc.training.optimizers`, exact per tensor shape;
* **activations**: what the forward saves for the backward and the backward's transient peak, measured laws of the
  real module (:mod:`flopcalc.training.activation_fits`), divided by the sequence-parallel degree; the frozen
  encoders' forward peak (inference, ``torch.no_grad()``: :mod:`flopcalc.gpu_memory.activations`) when they run
  online.

The peak of live tensors is the largest of three moments:

* encoding (online encoders): weights + optimizer states + the largest encoder's activation peak;
* the forward: weights + states + the forward's peak (the saved activations and the last temporaries; under
  checkpointing with fp32 master weights autocast's cache of every weight's bf16 copy);
* the backward: weights + states + ``max(backward peak, gradients + backward peak − saved)``: the activations' peak
  early in the backward (few gradients yet), or all gradients at its end with one block's backward temporaries
  (gradients grow as activations are freed, block by block); under FSDP / ZeRO-3 both plus the gathered blocks;
* the optimizer step: weights + states + gradients + the step's temporaries (AdamW's foreach ``sqrt``).

``peak_bytes`` adds what PyTorch's caching allocator reserves above the persistent tensors' own bytes (its segment
rules, :mod:`flopcalc.training.allocator`) and the CUDA context on ``--gpu`` (gpus.yaml); the activations'
fragmentation and the workspaces are left out and said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.training.activation_fits import ActivationLaw
from flopcalc.training.optimizers import Tensor, state_bytes, step_temporary_bytes
from flopcalc.training.sharding import (
    GPUS_PER_NODE, INTER_NODE_BYTES_PER_S, SHARDED, Collective, SequenceParallel, ring_share,
)

MASTER_WEIGHTS = ("fp32", "bf16")
BASE_DTYPES = ("bf16", "fp16", "nf4", "int8", "fp8")
GIB = 2 ** 30
WIDTH = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class Setup:
    """The choices a training step's memory depends on (what ``--fit`` varies)."""

    rank: int | None = None          # LoRA rank, None: full fine-tuning
    checkpointing: bool = False
    optimizer: str = "adamw"
    master: str = "fp32"
    attention: str = "fused"
    batch: int = 1
    sharding: str | None = None      # None: one GPU, or DDP when several
    num_gpus: int = 1
    offload_optimizer: bool = False
    sp: SequenceParallel = field(default_factory=SequenceParallel)
    ema: bool = False
    base_dtype: str = "bf16"
    blocks_to_swap: int = 0
    encoders: bool = True            # frozen text encoders and VAE online (resident, run per sample), else cached

    @property
    def dp(self) -> int:
        """The data-parallel degree: GPUs ÷ the sequence-parallel degree."""
        return self.num_gpus // self.sp.degree

    @property
    def strategy(self) -> str:
        return self.sharding or "ddp"

    def flags(self) -> str:
        """The command-line options that select this setup."""
        out = [f"--trainable lora:{self.rank}" if self.rank else "--trainable denoiser"]
        if self.checkpointing:
            out.append("--gradient-checkpointing")
        if self.optimizer != "adamw":
            out.append(f"--optimizer {self.optimizer}")
        if self.master != "fp32":
            out.append(f"--master-weights {self.master}")
        if self.batch != 1:
            out.append(f"--batch-size {self.batch}")
        if self.num_gpus != 1:
            out.append(f"--num-gpus {self.num_gpus}")
        if self.sharding:
            out.append(f"--sharding {self.sharding}")
        if self.offload_optimizer:
            out.append("--offload-optimizer")
        if self.sp.degree > 1:
            out.append(f"--sequence-parallel {self.sp.describe()}")
        if self.blocks_to_swap:
            out.append(f"--blocks-to-swap {self.blocks_to_swap}")
        if self.base_dtype != "bf16":
            out.append(f"--base-dtype {self.base_dtype}")
        if not self.encoders:
            out.append("--frozen-encoders cached")
        return " ".join(out)


@dataclass(frozen=True)
class Encoder:
    """A frozen component run forward per sample when encoders are online: its bf16 weights and activation peak."""

    component: str
    weights_bytes: int
    activation_bytes: int | None  # None: not measured


@dataclass(frozen=True)
class Inputs:
    """What the memory of a training step of one model at one size is made of, computed once (:func:`inputs_of`)."""

    model: str
    class_name: str
    params: int                                   # the denoiser's parameters
    tensors: tuple[Tensor, ...]                   # its parameters as tensors (full fine-tuning)
    weights: Mapping[str, int]                    # its weights' bytes (parameters + buffers) per dtype
    buffer_bytes: Mapping[str, int]               # its buffers' bytes per dtype
    lora_layers: tuple[tuple[int, int, int], ...]  # (d_in, d_out, count) of the adapted layers
    lora_tokens: int                              # Σ tokens over adapted layers (a rank's share of what LoRA saves)
    block_params: int                             # the largest block gradient checkpointing wraps (FSDP's unit)
    blocks_params: int                            # all blocks' parameters (the rest is FSDP's root, kept gathered)
    swap_list: tuple[str, int, int]               # (path, items, parameters per item) of the longest block list
    encoders: tuple[Encoder, ...]
    laws: Mapping[str, ActivationLaw | None]      # mode key → the measured law (None: not measured)
    attention_sizes: tuple[tuple[int, int, int], ...]  # (tokens, width, count) of the denoiser's attentions
    lora_measured: bool = True                    # the LoRA targets asked are those the laws were measured with
    lora_rank_measured: int = 16
    notes: tuple[str, ...] = ()
    idle_tensors: tuple[Tensor, ...] = ()         # parameters no gradient reaches (memory_inputs.idle_tensors)

    @property
    def graded_tensors(self) -> tuple[Tensor, ...]:
        """The parameter tensors that get a gradient in full fine-tuning: :attr:`tensors` less :attr:`idle_tensors`
        (autograd never allocates a gradient for the others, and the optimizers skip a parameter whose ``grad`` is
        None: torch/optim/adam.py ``_init_group``, sgd.py ``_init_group``, transformers ``Adafactor.step``)."""
        if not self.idle_tensors:
            return self.tensors
        left = {(t.rows, t.cols, t.zero): t.count for t in self.tensors}
        for t in self.idle_tensors:
            left[(t.rows, t.cols, t.zero)] -= t.count
        return tuple(Tensor(r, c, k, z) for (r, c, z), k in left.items() if k > 0)


@dataclass(frozen=True)
class TrainingMemory:
    """The memory of one training step on one GPU (rank), in bytes; ``None`` where it is not known."""

    setup: Setup
    trainable_weights_bytes: int
    frozen_weights_bytes: int
    encoder_weights_bytes: int
    ema_bytes: int
    gradients_bytes: int
    gradient_buckets_bytes: int
    optimizer_bytes: int
    optimizer_step_bytes: int
    gathered_bytes: int
    activations: Activations | None
    encoder_activation_bytes: int
    peak_allocated_bytes: int
    phase: str                               # the moment of the peak: encode, backward, optimizer step
    reserve: Any                             # flopcalc.training.allocator.Reserve
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None
    law: ActivationLaw | None = None
    communication: tuple[Collective, ...] = ()
    host_bytes: int = 0                      # optimizer states (and master copy) offloaded to host memory
    notes: tuple[str, ...] = ()

    @property
    def weights_bytes(self) -> int:
        return self.trainable_weights_bytes + self.frozen_weights_bytes + self.encoder_weights_bytes + self.ema_bytes

    @property
    def activations_bytes(self) -> int | None:
        """Saved for the backward at the end of the forward."""
        return None if self.activations is None else self.activations.saved

    @property
    def activation_peak_bytes(self) -> int | None:
        return None if self.activations is None else self.activations.peak

    @property
    def peak_bytes(self) -> int:
        return self.reserve.peak_bytes

    @property
    def known(self) -> bool:
        """Whether the activations are estimated (else every total is a lower bound)."""
        return self.activations_bytes is not None

    @property
    def fits(self) -> bool | None:
        if self.gpu_memory_bytes is None:
            return None
        if self.peak_bytes > self.gpu_memory_bytes:
            return False
        return True if self.known else None

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.gpu_memory_bytes is None else self.gpu_memory_bytes - self.peak_bytes

    @property
    def communication_bytes(self) -> int:
        return sum(c.bytes for c in self.communication)

    @property
    def communication_seconds(self) -> float:
        return sum(c.seconds for c in self.communication)

    def to_dict(self) -> dict[str, Any]:
        s = self.setup
        return {
            "unit": "bytes, per GPU (rank)",
            "setup": {"optimizer": s.optimizer, "master_weights": s.master, "attention": s.attention,
                      "gradient_checkpointing": s.checkpointing, "batch_size": s.batch,
                      "sharding": s.sharding, "num_gpus": s.num_gpus, "data_parallel": s.dp,
                      "offload_optimizer": s.offload_optimizer, "sequence_parallel": s.sp.to_dict(), "ema": s.ema,
                      "base_dtype": s.base_dtype, "blocks_to_swap": s.blocks_to_swap,
                      "frozen_encoders": "online" if s.encoders else "cached",
                      "trainable": f"lora:{s.rank}" if s.rank else "denoiser"},
            "weights_bytes": self.weights_bytes,
            "weights": {"trainable": self.trainable_weights_bytes, "frozen": self.frozen_weights_bytes,
                        "encoders": self.encoder_weights_bytes, "ema": self.ema_bytes},
            "gradients_bytes": self.gradients_bytes,
            "gradient_buckets_bytes": self.gradient_buckets_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "optimizer_step_temporary_bytes": self.optimizer_step_bytes,
            "gathered_bytes": self.gathered_bytes,
            "activations_bytes": self.activations_bytes,
            "activation_peak_bytes": self.activation_peak_bytes,
            "forward_peak_bytes": None if self.activations is None else self.activations.forward_peak,
            "backward_peak_bytes": None if self.activations is None else self.activations.backward_peak,
            "backward_transient_bytes": None if self.activations is None
            else self.activations.backward_peak - self.activations.saved,
            "encoder_activation_bytes": self.encoder_activation_bytes,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_phase": self.phase,
            "peak_bytes": self.peak_bytes,
            "reserve": self.reserve.to_dict(),
            "activation_law": None if self.law is None else self.law.to_dict(),
            "host_bytes": self.host_bytes,
            "communication": [c.to_dict() for c in self.communication],
            "communication_bytes_per_step": self.communication_bytes,
            "communication_seconds_per_step": self.communication_seconds,
            "gpu": None if self.gpu_name is None else {"name": self.gpu_name, "memory_bytes": self.gpu_memory_bytes,
                                                       "fits": self.fits, "headroom_bytes": self.headroom_bytes},
            "notes": list(self.notes),
        }


def lora_params(layers: tuple[tuple[int, int, int], ...], rank: int) -> int:
    return rank * sum(k * (d_in + d_out) for d_in, d_out, k in layers)


def _law_for(inp: Inputs, s: Setup) -> tuple[ActivationLaw | None, str]:
    from flopcalc.training.activation_fits import mode_key

    key = mode_key("lora" if s.rank else "full", s.checkpointing, law_master(s), s.attention)
    return inp.laws.get(key), key


def law_master(s: Setup) -> str:
    """The master dtype whose measured activations apply: FSDP2 (``MixedPrecisionPolicy(param_dtype=bf16)``) and
    DeepSpeed ZeRO (bf16 model weights, the fp32 master copy in the optimizer) run the forward on bf16 weights, so
    autocast makes no cast copies of them: the pure-bf16 law; one GPU or DDP with fp32 master weights: the autocast
    law (its bf16 copies of the weights included)."""
    sharded = s.sharding is not None and s.sharding != "ddp"
    return "bf16" if sharded else s.master


@dataclass(frozen=True)
class Activations:
    """A step's activation memory on one rank (bytes): saved by the forward, its peak, the backward's peak."""

    saved: int
    forward_peak: int
    backward_peak: int

    @property
    def peak(self) -> int:
        return max(self.forward_peak, self.backward_peak)


def activations(inp: Inputs, s: Setup) -> tuple[Activations | None, ActivationLaw | None, list[str]]:
    """The measured laws at the batch, LoRA's rank correction, ÷ the sequence-parallel degree; None where the
    config, mode or LoRA targets were not measured."""
    law, key = _law_for(inp, s)
    if law is None:
        return None, None, [f"activations of {inp.class_name} in mode {key} not measured: totals are lower bounds"]
    if s.rank and not inp.lora_measured:
        return None, law, ["activations measured with other LoRA targets (train.memory.activation_law lists them): "
                           "totals are lower bounds"]
    values = [law.bytes(q, s.batch) for q in ("saved", "forward_peak", "backward_peak")]
    if s.rank and s.rank != inp.lora_rank_measured and not s.checkpointing:
        extra = (s.rank - inp.lora_rank_measured) * inp.lora_tokens * 2 * s.batch  # lora_A's outputs, bf16
        values = [max(0, v + extra) for v in values]
    sp = s.sp.degree
    return Activations(*(-(-v // sp) for v in values)), law, []


def sharded_numel(tensors: tuple[Tensor, ...], d: int) -> int:
    """Elements of one rank's shards: FSDP2 chunks each parameter on dim 0 over ``d`` ranks, padded to equal chunks
    (``FSDPParam``: ``ceil(dim0 / d)`` rows of each)."""
    return sum(t.count * -(-t.rows // d) * t.cols for t in tensors)


def _gathered(inp: Inputs, s: Setup, compute: int) -> int:
    if s.dp <= 1:
        return 0
    if s.strategy in ("fsdp", "fsdp-hybrid", "zero3"):
        # the root's own parameters (kept gathered), the running block and the prefetched one, all-gathered in the
        # compute dtype (an upper bound: the largest block); in the backward one block's unsharded grads
        root = inp.params - inp.blocks_params
        trained = 0 if s.rank else inp.block_params
        return (root + 2 * inp.block_params + trained) * compute
    if s.strategy == "fsdp-grad-op":
        return inp.params * compute  # every block stays gathered from its forward to its backward
    return 0


def compose(inp: Inputs, s: Setup, *, gpu: Any = None, inter_node_bytes_per_s: float = INTER_NODE_BYTES_PER_S,
            gpus_per_node: int = GPUS_PER_NODE) -> TrainingMemory:
    """The memory of ``inp`` trained as ``s`` on one rank of ``s.num_gpus`` ``gpu`` (a
    :class:`flopcalc.hardware.gpus.GPU`, or None)."""
    from flopcalc.training.allocator import Reserve, reserved_bytes
    from flopcalc.training.optimizers import lora_tensors

    width = WIDTH[s.master]
    compute = 2
    d = s.dp
    p_sharded, g_sharded, o_sharded = SHARDED[s.strategy] if s.num_gpus > 1 or s.sharding else (False,) * 3
    div_p, div_g, div_o = (d if p_sharded else 1), (d if g_sharded else 1), (d if o_sharded else 1)
    if s.strategy == "fsdp-hybrid":
        group = min(d, gpus_per_node)
        div_p = div_g = div_o = group
    zero = s.sharding in ("zero1", "zero2", "zero3")
    notes: list[str] = []
    if s.rank:
        tensors = lora_tensors(inp.lora_layers, s.rank)
        trained = lora_params(inp.lora_layers, s.rank)
        frozen = inp.weights[s.base_dtype]
        if s.blocks_to_swap:
            _, items, per_item = inp.swap_list
            frozen -= s.blocks_to_swap * per_item * (compute if s.base_dtype in WIDTH else 1)
            notes.append(f"block swap: {s.blocks_to_swap} of {items} {inp.swap_list[0]} held in host memory, moved in "
                         "for their forward and backward")
        trained_bytes = trained * width
    else:
        tensors = inp.tensors
        trained = inp.params
        frozen = 0
        trained_bytes = inp.weights["fp32" if s.master == "fp32" else "bf16"]  # parameters + buffers
    # what gets a gradient and optimizer states: every trained tensor but those autograd never reaches; DeepSpeed ZeRO
    # allocates its flat gradient and state partitions for every parameter
    graded = tensors if s.rank or zero else inp.graded_tensors
    graded_numel = sum(t.numel * t.count for t in graded)
    if zero and s.master == "fp32":
        # DeepSpeed keeps bf16 model weights; the fp32 master copy lives with the optimizer partition
        trained_model_bytes = trained * compute + (0 if s.rank else inp.buffer_bytes["bf16"])
        master_copy = trained * 4
    else:
        trained_model_bytes, master_copy = trained_bytes, 0
    grad_width = compute if zero else width
    if not s.rank and p_sharded and not zero and div_p > 1:
        # FSDP pads each parameter's dim 0 to a multiple of the shard count: exact per tensor
        shard = sharded_numel(tensors, div_p)
        trained_model_bytes, div_p_trained = shard * width + inp.buffer_bytes[s.master], 1
        grads_numel = sharded_numel(graded, div_g) if g_sharded else graded_numel
    else:
        div_p_trained, grads_numel = div_p, None
    trainable_w = -(-trained_model_bytes // div_p_trained)
    frozen_w = -(-frozen // div_p)
    online = inp.encoders if s.encoders else ()
    encoders = sum(e.weights_bytes for e in online)
    ema = trained * width if s.ema else 0
    grads = grads_numel * grad_width if grads_numel is not None else -(-graded_numel * grad_width // div_g)
    buckets = trained * width if s.strategy == "ddp" and d > 1 else 0
    if grads_numel is not None and o_sharded:  # FSDP: states of the padded shards
        local = tuple(Tensor(-(-t.rows // div_o), t.cols, t.count, t.zero) for t in graded)
        states = state_bytes(s.optimizer, local, width) + master_copy // div_o
        step_tmp = step_temporary_bytes(s.optimizer, local, width)
    else:
        states = -(-(state_bytes(s.optimizer, graded, width) + master_copy) // div_o)
        step_tmp = -(-step_temporary_bytes(s.optimizer, graded, width) // div_o)
    host = 0
    if s.offload_optimizer:
        host, states, step_tmp = states, 0, 0
    act, law, act_notes = activations(inp, s)
    notes += act_notes
    if zero:
        notes.append(f"{s.sharding}: per-rank bytes from DeepSpeed's partitioning rules (flopcalc/training/sharding.py), "
                     "not measured (DeepSpeed is not installed where the fixtures are measured)")
    if law is not None and s.master == "fp32" and law_master(s) == "bf16":
        notes.append(f"activations: the bf16 law ({s.sharding} runs the forward on bf16 weights: no autocast copies "
                     "of fp32 weights)")
    enc_act = max((e.activation_bytes or 0 for e in online), default=0) * s.batch
    gathered = _gathered(inp, s, compute)
    resident = trainable_w + frozen_w + encoders + ema + buckets + states
    phases = {"optimizer step": resident + grads + step_tmp}
    if online:
        phases["encode"] = resident + enc_act
    if act is not None:
        phases["forward"] = resident + gathered + act.forward_peak
        phases["backward"] = resident + gathered + max(act.backward_peak, grads + act.backward_peak - act.saved)
    else:
        phases["backward"] = resident + gathered + grads
    phase = max(phases, key=lambda k: phases[k])
    peak = phases[phase]
    name = mem = None
    if gpu is not None:
        name, mem = gpu.name, gpu.memory_bytes
    persistent = _persistent(inp, s, tensors, graded, zero=zero, width=width,
                             param_width=compute if zero and s.master == "fp32" else width, grad_width=grad_width,
                             div_p=div_p if p_sharded else 1, div_g=div_g if g_sharded else 1,
                             div_o=div_o if o_sharded else 1, flat=encoders + buckets, ema=bool(ema),
                             frozen=frozen_w if s.rank else 0)
    res = Reserve(peak, sum(b * k for b, k in persistent), reserved_bytes(persistent),
                  getattr(gpu, "context_bytes", 0) if gpu is not None else 0)
    comm = communication(inp, s, gpu, trained, grad_width, compute, inter_node_bytes_per_s, gpus_per_node)
    return TrainingMemory(s, trainable_w, frozen_w, encoders, ema, grads, buckets, states, step_tmp, gathered, act,
                          enc_act, peak, phase, res, name, mem, law, comm, host, tuple(inp.notes) + tuple(notes))


def _persistent(inp: Inputs, s: Setup, tensors: tuple[Tensor, ...], graded: tuple[Tensor, ...], *, zero: bool,
                width: int, param_width: int, grad_width: int, div_p: int, div_g: int, div_o: int, flat: int,
                ema: bool, frozen: int) -> list[tuple[int, int]]:
    """``(bytes, count)`` of the tensors a rank keeps across steps, as the caching allocator is asked for them: the
    trained parameters, their gradients, optimizer states and EMA copy per tensor (FSDP2 shards each on dim 0;
    DeepSpeed ZeRO keeps gradients, optimizer states and the fp32 master copy in flat partition buffers); LoRA's frozen
    base per tensor in bf16/fp16 (quantized: one buffer); the online encoders and DDP's gradient buckets as one buffer
    each (packed: a lower bound). ``graded``: the trained tensors that get gradients and optimizer states."""
    from flopcalc.training.optimizers import state_tensors

    def local(t: Tensor, d: int) -> Tensor:
        return t if d <= 1 else Tensor(-(-t.rows // d), t.cols, t.count, t.zero)

    out: list[tuple[int, int]] = [(local(t, div_p).numel * param_width, t.count) for t in tensors]
    if frozen and s.base_dtype in WIDTH and not s.blocks_to_swap:
        out += [(local(t, div_p).numel * WIDTH[s.base_dtype], t.count) for t in inp.tensors]
    elif frozen:
        out.append((frozen, 1))
    if ema:
        out += [(t.numel * width, t.count) for t in tensors]
    if zero:
        trained = sum(t.numel * t.count for t in tensors)
        out.append((-(-trained * grad_width // div_g), 1))
        states = state_bytes(s.optimizer, tensors, width) + (trained * 4 if s.master == "fp32" else 0)
        if not s.offload_optimizer:
            out.append((-(-states // div_o), 1))
    else:
        out += [(local(t, div_g).numel * grad_width, t.count) for t in graded]
        if not s.offload_optimizer:
            for t in graded:
                out += state_tensors(s.optimizer, local(t, div_o), width)
    if flat:
        out.append((flat, 1))
    return [(b, k) for b, k in out if b > 0 and k > 0]


def communication(inp: Inputs, s: Setup, gpu: Any, trained: int, grad_width: int, compute: int,
                  inter_node_bytes_per_s: float, gpus_per_node: int) -> tuple[Collective, ...]:
    """The collectives of one step on one rank (:mod:`flopcalc.training.sharding`)."""
    if s.num_gpus <= 1:
        return ()
    intra = gpu.gpu_link_bytes_per_s if gpu is not None else float("inf")
    intra_name = gpu.gpu_link_label if gpu is not None else "GPU link"
    inter = min(intra, inter_node_bytes_per_s)
    d = s.dp

    def link(group: int) -> tuple[str, float]:
        return (intra_name, intra) if group * s.sp.degree <= gpus_per_node else (
            f"inter-node ({inter_node_bytes_per_s / 1e9:g} GB/s)", inter)

    out: list[Collective] = []
    params_all = inp.params if not s.rank else inp.params + trained  # FSDP / ZeRO-3 gather the frozen base too
    if d > 1:
        if s.strategy == "ddp":
            name, bw = link(d)
            out.append(Collective("all-reduce", "gradients", 2 * ring_share(trained * grad_width, d), name, bw))
        elif s.strategy in ("fsdp", "fsdp-grad-op", "zero3"):
            name, bw = link(d)
            # the forward gathers every unit; the backward again every block (the root stays gathered), not at all
            # under fsdp-grad-op
            again = 0 if s.strategy == "fsdp-grad-op" else inp.blocks_params
            out.append(Collective("all-gather", "parameters (bf16), forward" + ("" if not again else " and backward"),
                                  ring_share((params_all + again) * compute, d), name, bw))
            reduce_width = grad_width if s.strategy == "zero3" else 4
            out.append(Collective("reduce-scatter", "gradients", ring_share(trained * reduce_width, d), name, bw))
        elif s.strategy == "fsdp-hybrid":
            group = min(d, gpus_per_node)
            name, bw = link(group)
            out.append(Collective("all-gather", "parameters (bf16), forward and backward, within a node",
                                  ring_share((params_all + inp.blocks_params) * compute, group), name, bw))
            out.append(Collective("reduce-scatter", "gradients, within a node", ring_share(trained * 4, group),
                                  name, bw))
            replicas = d // group
            if replicas > 1:
                iname, ibw = link(d)
                out.append(Collective("all-reduce", "gradient shards, across nodes",
                                      2 * ring_share(-(-trained * 4 // group), replicas), iname, ibw))
        elif s.strategy in ("zero1", "zero2"):
            name, bw = link(d)
            out.append(Collective("reduce-scatter", "gradients (bf16)", ring_share(trained * grad_width, d), name, bw))
            out.append(Collective("all-gather", "updated parameters (bf16)", ring_share(trained * compute, d), name,
                                  bw))
    if s.offload_optimizer:
        host = gpu.host_link_bytes_per_s if gpu is not None else float("inf")
        label = gpu.host_link_label if gpu is not None else "host link"
        shard = d if SHARDED[s.strategy][2] else 1
        out.append(Collective("host copy", "gradients out, updated parameters in (bf16)",
                              2 * -(-trained * compute // shard), label, host))
    if s.blocks_to_swap:
        host = gpu.host_link_bytes_per_s if gpu is not None else float("inf")
        label = gpu.host_link_label if gpu is not None else "host link"
        per = inp.swap_list[2] * (compute if s.base_dtype in WIDTH else 1)
        out.append(Collective("host copy", "swapped blocks in, forward and backward", 2 * s.blocks_to_swap * per,
                              label, host))
    if s.sp.degree > 1:
        name, bw = link(1)
        passes = 3 if s.checkpointing else 2  # forward, backward (and the recompute's forward)
        if s.sp.ulysses > 1:
            u = s.sp.ulysses
            total = sum(k * 4 * ring_share(-(-tokens // s.sp.degree) * width_ * compute, u)
                        for tokens, width_, k in inp.attention_sizes)
            out.append(Collective("all-to-all", f"Ulysses q, k, v and output, {passes} passes", passes * total * s.batch,
                                  name, bw))
        if s.sp.ring > 1:
            r = s.sp.ring
            per = sum(k * 2 * (r - 1) * -(-tokens // s.sp.degree) * width_ * compute
                      for tokens, width_, k in inp.attention_sizes)
            out.append(Collective("ring send", "K and V blocks (forward), K, V, dK, dV (backward)",
                                  (passes + 1) * per * s.batch, name, bw))
    return tuple(out)


def check_setup(s: Setup, *, heads: int | None, tokens: int | None) -> None:
    """One-line refusals of a setup that does not apply."""
    if s.num_gpus % s.sp.degree:
        raise OptionError(f"--sequence-parallel {s.sp.describe()} needs a multiple of {s.sp.degree} GPUs; "
                          f"--num-gpus is {s.num_gpus}")
    if s.sp.degree > 1:
        if heads is None:
            raise OptionError("--sequence-parallel: this denoiser has no num_attention_heads (not a DiT); Ulysses and "
                              "ring attention split a transformer's heads and tokens")
        if s.sp.ulysses > 1 and heads % s.sp.ulysses:
            legal = [u for u in range(2, heads + 1) if heads % u == 0]
            raise OptionError(f"--sequence-parallel ulysses={s.sp.ulysses}: Ulysses splits the {heads} attention heads "
                              f"whole; legal degrees: {', '.join(map(str, legal[:12]))}")
        if s.sp.ring > 1 and (tokens is None or tokens % s.sp.ring):
            raise OptionError(f"--sequence-parallel ring={s.sp.ring}: ring attention splits the {tokens or 'unknown'} "
                              "tokens of the attention into equal blocks; choose a degree that divides it")
    if s.offload_optimizer and s.sharding not in ("zero1", "zero2", "zero3", "fsdp", "fsdp-hybrid", "fsdp-grad-op"):
        raise OptionError("--offload-optimizer is DeepSpeed ZeRO-Offload or FSDP's CPU offload: give --sharding "
                          "zero1|zero2|zero3|fsdp (with --num-gpus 1 for one GPU)")
    if s.base_dtype != "bf16" and not s.rank:
        raise OptionError(f"--base-dtype {s.base_dtype}: a quantized or fp16 frozen base goes with --trainable lora:RANK "
                          "(full fine-tuning trains every weight in the master dtype)")
    if s.blocks_to_swap and not s.rank:
        raise OptionError("--blocks-to-swap moves frozen blocks to host memory: it goes with --trainable lora:RANK")


def with_setup(mem: TrainingMemory, inp: Inputs, **changes: Any) -> TrainingMemory:
    """``mem`` recomposed with some of its setup changed (for ``--fit``)."""
    return compose(inp, replace(mem.setup, **changes))
