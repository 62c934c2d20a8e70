r"""Optimizer states: the bytes each optimizer keeps per trainable parameter tensor, as its library allocates them.

A state's size depends on each tensor's shape (8-bit blocks, small-tensor rules, Adafactor's factored moments), so
the trainable parameters are listed as tensors (:class:`Tensor`): from the cost tree, each ``nn.Linear`` is a weight
``(d_out, d_in)`` and, where it has one, a bias ``(d_out,)`` (exact: a linear layer's node carries both dimensions);
every other module's parameters (norms, convolutions, embeddings, modulation tables) are one tensor per module of
its own parameter count, 1-D (the tree does not split them: a convolution's weight and bias, a norm's weight and
bias are counted as one tensor). ``validation/measure_training_memory.py`` steps the real optimizers on the real
modules' parameters; the difference this approximation leaves is in ``docs/training.md``. LoRA's tensors are each
adapted layer's ``lora_A`` ``(r, d_in)`` and ``lora_B`` ``(d_out, r)``.

==============  ============================================================  ==============================================
optimizer       state per tensor of ``n`` elements (``w``: bytes of the       source
                parameter's dtype, the master dtype)
==============  ============================================================  ==============================================
``adamw``       ``exp_avg``, ``exp_avg_sq``: ``2·n·w`` (``step`` is a 0-dim     torch/optim/adamw.py ``_init_group``:
                host tensor unless ``capturable``/``fused``)                  ``zeros_like(p, memory_format=preserve)``
``adamw8bit``   ``n ≥ 4096``: ``state1``, ``state2`` uint8 (``2·n``) and an    bitsandbytes/optim/optimizer.py
                fp32 ``absmax`` per 256-element block for each                ``Optimizer2State.init_state``: ``blocksize =
                (``2·4·⌈n/256⌉``); ``n < 4096`` (``min_8bit_size``): two fp32   256``, ``min_8bit_size=4096``; plus the two
                states, ``8·n``                                               256-entry fp32 quantization maps (2 KiB, once)
``adafactor``   ≥ 2 dims ``(…, r, c)``: ``exp_avg_sq_row`` (…, r) and          transformers/optimization.py ``Adafactor.step``
                ``exp_avg_sq_col`` (…, c), fp32 (the gradient is cast to      (``beta1=None``: no first moment), states
                fp32 first); 1-D: ``exp_avg_sq`` ``4·n``                        ``.to(grad)`` after ``grad = grad.float()``
``prodigy``     ``s``, ``p0`` (a copy of the parameter; a 0-dim tensor if the   prodigyopt/prodigy.py ``step`` (``slice_p=1``,
                parameter is all zeros at the first step: LoRA's ``lora_B``),  ``betas[0]=0.9``)
                ``exp_avg``, ``exp_avg_sq``: ``4·n·w``
``sgd``         ``momentum_buffer``: ``n·w`` (momentum 0.9, as the scripts     torch/optim/sgd.py (a clone of the gradient)
                set it)
==============  ============================================================  ==============================================

Optimizer *step* temporaries (freed after ``step()``): torch's default on CUDA is the ``foreach`` implementation, which
computes ``exp_avg_sq.sqrt()`` for the whole parameter group at once (``torch/optim/adamw.py`` ``_multi_tensor_adamw``:
``torch._foreach_sqrt(device_exp_avg_sqs)``): ``n·w`` for AdamW; bitsandbytes, Adafactor (tensor by tensor) and SGD
(in place) none beyond a tensor's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from flopcalc.engine.cost import Node
from flopcalc.engine.errors import OptionError

OPTIMIZERS = ("adamw", "adamw8bit", "adafactor", "prodigy", "sgd")
#: bitsandbytes ``Optimizer2State.init_state``: absmax blocks of 256 elements, fp32; tensors under 4096 elements keep
#: 32-bit states; two 256-entry fp32 quantization maps (``dynamic``, ``udynamic``) moved to the GPU once.
BNB_BLOCK = 256
BNB_MIN_8BIT_SIZE = 4096
BNB_QMAPS_BYTES = 2 * 256 * 4
SOURCES = {
    "adamw": "torch.optim.AdamW (torch/optim/adamw.py): exp_avg, exp_avg_sq like the parameter",
    "adamw8bit": "bitsandbytes.optim.AdamW8bit (bitsandbytes/optim/optimizer.py Optimizer2State.init_state): uint8 "
                 "states, fp32 absmax per 256-element block, fp32 states under 4096 elements",
    "adafactor": "transformers.optimization.Adafactor (beta1=None): factored fp32 second moment for tensors of 2+ "
                 "dims",
    "prodigy": "prodigyopt.Prodigy (prodigyopt/prodigy.py): s, p0, exp_avg, exp_avg_sq like the parameter",
    "sgd": "torch.optim.SGD(momentum=0.9) (torch/optim/sgd.py): momentum_buffer like the parameter",
}


@dataclass(frozen=True)
class Tensor:
    """``count`` trainable tensors of one shape: ``rows × cols`` (``cols`` 1 for a 1-D tensor); ``zero``: all zeros
    when the optimizer first steps (LoRA's ``lora_B``, initialised to zero)."""

    rows: int
    cols: int
    count: int = 1
    zero: bool = False

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    @property
    def two_dim(self) -> bool:
        return self.cols > 1


def check_optimizer(name: str) -> str:
    if name not in OPTIMIZERS:
        raise OptionError(f"--optimizer {name!r}: choose one of {', '.join(OPTIMIZERS)}")
    return name


def tree_tensors(tree: Node) -> tuple[Tensor, ...]:
    """The parameter tensors of every module of ``tree`` (see the module doc), grouped by shape."""
    counts: dict[tuple[int, int], int] = {}

    def add(rows: int, cols: int, k: int) -> None:
        if rows * cols:
            counts[(rows, cols)] = counts.get((rows, cols), 0) + k

    def visit(node: Node, k: int) -> None:
        k *= node.count
        c = node.cost
        if c.params:
            linear = c.linear_layers == 1 and c.linear_rows and c.params - c.linear_weights in (0, c.linear_rows)
            if linear:
                add(c.linear_rows, c.linear_weights // c.linear_rows, k)
                add(c.params - c.linear_weights, 1, k)
            else:
                add(c.params, 1, k)
        for child in node.children:
            visit(child, k)

    visit(tree, 1)
    return tuple(Tensor(r, c, n) for (r, c), n in sorted(counts.items()))


def lora_tensors(layers: Iterable[tuple[int, int, int]], rank: int) -> tuple[Tensor, ...]:
    """LoRA's trainable tensors for adapted layers ``(d_in, d_out, count)``: ``lora_A`` (rank × d_in), ``lora_B``
    (d_out × rank, zero at initialisation: ``init_lora_weights="gaussian"`` zeroes B)."""
    out: list[Tensor] = []
    for d_in, d_out, k in layers:
        out += [Tensor(rank, d_in, k), Tensor(d_out, rank, k, zero=True)]
    return tuple(out)


def _per_tensor(name: str, t: Tensor, width: int) -> int:
    n = t.numel
    if name == "adamw":
        return 2 * n * width
    if name == "sgd":
        return n * width
    if name == "prodigy":
        return (3 * n + (1 if t.zero else n)) * width
    if name == "adafactor":
        return 4 * (t.rows + t.cols) if t.two_dim else 4 * n
    if name == "adamw8bit":
        return 8 * n if n < BNB_MIN_8BIT_SIZE else 2 * n + 8 * -(-n // BNB_BLOCK)
    raise OptionError(f"--optimizer {name!r}: choose one of {', '.join(OPTIMIZERS)}")


def state_tensors(name: str, t: Tensor, width: int) -> list[tuple[int, int]]:
    """``(bytes, count)`` of each state tensor ``name`` allocates for the ``t.count`` parameters ``t`` (what the
    caching allocator is asked for: :mod:`flopcalc.training.allocator`); they sum to ``t.count × _per_tensor``."""
    n, k = t.numel, t.count
    if name == "adamw":
        return [(n * width, 2 * k)]
    if name == "sgd":
        return [(n * width, k)]
    if name == "prodigy":
        return [(n * width, 3 * k), ((1 if t.zero else n) * width, k)]
    if name == "adafactor":
        return [(4 * t.rows, k), (4 * t.cols, k)] if t.two_dim else [(4 * n, k)]
    if name == "adamw8bit":
        return [(4 * n, 2 * k)] if n < BNB_MIN_8BIT_SIZE else [(n, 2 * k), (4 * -(-n // BNB_BLOCK), 2 * k)]
    raise OptionError(f"--optimizer {name!r}: choose one of {', '.join(OPTIMIZERS)}")


def state_bytes(name: str, tensors: Iterable[Tensor], width: int) -> int:
    """Bytes of ``name``'s states for ``tensors`` whose parameters are ``width`` bytes each."""
    tensors = tuple(tensors)
    total = sum(t.count * _per_tensor(name, t, width) for t in tensors)
    return total + (BNB_QMAPS_BYTES if name == "adamw8bit" and any(t.numel >= BNB_MIN_8BIT_SIZE for t in tensors)
                    else 0)


def step_temporary_bytes(name: str, tensors: Iterable[Tensor], width: int) -> int:
    """Bytes an ``optimizer.step()`` allocates and frees: AdamW's foreach ``sqrt`` of every second moment at once."""
    if name != "adamw":
        return 0
    return sum(t.count * t.numel for t in tensors) * width
