"""The two value types every formula returns: :class:`Cost` (what one forward does) and
:class:`Node` (a module of the real model with its cost and its submodules).

Counts are kept apart by *who counts them*, so that one tree answers every convention:

=========== ============================================== ========= ======
field       what                                           ``torch`` ``thop``
=========== ============================================== ========= ======
linear      MACs of dense layers (``nn.Linear``)            yes       yes
conv        MACs of convolutions (``nn.Conv*d``)            yes       yes
attention   MACs of QKᵀ and A·V (functional matmuls)        yes       no
functional  other MACs thop's hooks miss: functional        yes       no
            matmuls/convs, subclassed Linear/Conv types
thop_extra  thop's non-MAC rules (``nn.LayerNorm``,         no        yes
            ``nn.Softmax``, ``nn.Upsample`` modules)
elementwise norms, activations, softmax, upsampling        no        no
scores      attention scores (heads × L_q × L_k): the        no        no
            softmax elements an attention kernel computes
params      parameters of the module                       --        --
=========== ============================================== ========= ======

Three more fields describe the ``nn.Linear`` weights among ``params`` (no counting convention reads
them; weight quantizers convert exactly these, :mod:`flopcalc.gpu_memory.quantized`): ``linear_weights``, their
elements (``d_in·d_out``, biases excluded); ``linear_rows``, their output rows (``d_out``, one scale
each under per-row formats); ``linear_blocks``, their 64-element blocks (``⌈d_in·d_out/64⌉`` per
weight, one absmax each under bitsandbytes 4-bit); ``linear_packed``, their bytes at two 4-bit values
a byte (``⌈d_in·d_out/2⌉`` per weight); ``linear_layers``, how many there are.

``torch`` is what ``torch.utils.flop_counter.FlopCounterMode`` counts (matmul, convolution,
attention; it reports FLOPs = 2 × MACs); ``thop`` is what thop 0.1.1 counts (module hooks matched
by exact type: MACs of ``nn.Linear``/``nn.Conv*d`` plus its LayerNorm/Softmax/Upsample rules,
nothing functional).
``elementwise`` is flopcalc's own estimate, reported on a line of its own and never added to
either convention (per-element weights in :mod:`flopcalc.formulas.ops`; its softmax part is
``SOFTMAX_OPS × scores``). ``scores`` is the size of the attention matrices, as
:func:`flopcalc.formulas.ops.attention` computes it: the energy laws read from it each call's head
width (``attention / (2·scores)``) and the elementwise work a fused attention kernel does not
leave to separate kernels.

Values are plain ``int`` on the numeric path; the same formulas accept sympy symbols.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterable, Iterator

CONVENTIONS = ("torch", "thop")

#: Block formulas a per-block summary stops at (transformer blocks, ResNets, attentions, samplers:
#: the units a reader compares), declared by the modules that build them (:func:`block_kinds`).
_BLOCK_KINDS: set[str] = set()


def block_kinds(*formulas: str) -> frozenset[str]:
    """Declare ``formulas`` (``Node.formula`` values) as block kinds, once, at the import of the formula or
    architecture module that builds them. Other modules may build nodes of the same formula (an assembler naming
    its feed-forward ``feed_forward``) without importing the declaring one, so a summary reads the declarations
    of the whole package from the discovery index (:func:`declared_block_kinds` is its provider), not only those
    of the modules imported so far."""
    _BLOCK_KINDS.update(formulas)
    return frozenset(formulas)


def declared_block_kinds() -> frozenset[str]:
    """The block kinds declared by the modules imported so far."""
    return frozenset(_BLOCK_KINDS)


def larger(a: Any, b: Any) -> Any:
    """max(a, b) of two parameter counts; ``sympy.Max`` where a formula is rendered with symbolic sizes."""
    if isinstance(a, int) and isinstance(b, int):
        return a if a >= b else b
    import sympy

    return sympy.Max(a, b)


@dataclass(frozen=True, slots=True)
class Cost:
    """Work of one forward pass at batch size 1, split by who counts it (see module doc)."""

    linear: Any = 0
    conv: Any = 0
    attention: Any = 0
    functional: Any = 0
    thop_extra: Any = 0
    elementwise: Any = 0
    params: Any = 0
    scores: Any = 0
    linear_weights: Any = 0
    linear_rows: Any = 0
    linear_blocks: Any = 0
    linear_packed: Any = 0
    linear_layers: Any = 0
    #: parameters of the largest single module (or bare parameter) inside: a maximum, not a sum. What
    #: ``enable_sequential_cpu_offload()`` holds at once (accelerate moves one module's direct weights at a time).
    largest_module: Any = 0
    #: parameters among ``params`` that one token's forward does not use: a mixture of experts' routed experts
    #: its gate does not pick (``E − k`` of them per MoE layer). ``params − idle_params``: the active parameters.
    idle_params: Any = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.linear + other.linear,
            self.conv + other.conv,
            self.attention + other.attention,
            self.functional + other.functional,
            self.thop_extra + other.thop_extra,
            self.elementwise + other.elementwise,
            self.params + other.params,
            self.scores + other.scores,
            self.linear_weights + other.linear_weights,
            self.linear_rows + other.linear_rows,
            self.linear_blocks + other.linear_blocks,
            self.linear_packed + other.linear_packed,
            self.linear_layers + other.linear_layers,
            larger(self.largest_module, other.largest_module),
            self.idle_params + other.idle_params,
        )

    def __mul__(self, k: Any) -> Cost:
        return Cost(
            self.linear * k,
            self.conv * k,
            self.attention * k,
            self.functional * k,
            self.thop_extra * k,
            self.elementwise * k,
            self.params * k,
            self.scores * k,
            self.linear_weights * k,
            self.linear_rows * k,
            self.linear_blocks * k,
            self.linear_packed * k,
            self.linear_layers * k,
            self.largest_module,  # k copies of a module: the largest is still one of them
            self.idle_params * k,
        )

    __rmul__ = __mul__

    def macs(self, convention: str = "torch") -> Any:
        """Multiply-accumulates under ``convention`` (``torch`` or ``thop``)."""
        if convention == "torch":
            return self.linear + self.conv + self.attention + self.functional
        if convention == "thop":
            return self.linear + self.conv + self.thop_extra
        raise ValueError(f"unknown convention {convention!r}; choose one of {', '.join(CONVENTIONS)}")

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


ZERO = Cost()
#: The fields that describe a module's parameters rather than the work of a forward.
WEIGHT_FIELDS = ("params", "linear_weights", "linear_rows", "linear_blocks", "linear_packed",
                 "linear_layers", "largest_module", "idle_params")


def work_only(cost: Cost) -> Cost:
    """``cost`` without its parameter fields: a second call of weights counted elsewhere."""
    return Cost(cost.linear, cost.conv, cost.attention, cost.functional, cost.thop_extra, cost.elementwise)


def total_of(costs: Iterable[Cost]) -> Cost:
    """Σ costs, field by field (one object, no intermediate sums: this is the hot loop)."""
    lin = conv = att = fn = tx = el = par = sc = lw = lr = lb = lp = ll = big = idle = 0
    for c in costs:
        lin += c.linear
        conv += c.conv
        att += c.attention
        fn += c.functional
        tx += c.thop_extra
        el += c.elementwise
        par += c.params
        sc += c.scores
        lw += c.linear_weights
        lr += c.linear_rows
        lb += c.linear_blocks
        lp += c.linear_packed
        ll += c.linear_layers
        big = larger(big, c.largest_module)
        idle += c.idle_params
    return Cost(lin, conv, att, fn, tx, el, par, sc, lw, lr, lb, lp, ll, big, idle)


@dataclass(frozen=True)
class Node:
    """A module of the real model: its own cost, its submodules, and how often it repeats.

    ``name`` is the attribute name the real module has in diffusers/transformers
    (``transformer_blocks``, ``attn``, ``up_blocks``), so a node's dotted path is the path of the
    module it mirrors. Identical consecutive entries of a ``ModuleList`` are one node with
    ``span=(first, last)`` and ``count = last - first + 1``; ``total`` already includes the count.
    ``formula`` names the block formula that produced the node.
    """

    name: str
    cost: Cost = ZERO
    children: tuple[Node, ...] = ()
    count: int = 1
    span: tuple[int, int] | None = None
    formula: str = ""
    total: Cost = ZERO  # computed: (cost + Σ children.total) × count

    def __post_init__(self) -> None:
        inner = self.per_item
        object.__setattr__(self, "total", inner * self.count if self.count != 1 else inner)

    @property
    def per_item(self) -> Cost:
        """Cost of one repeat (equals ``total`` when ``count`` is 1)."""
        return total_of((self.cost, *(c.total for c in self.children)))

    def walk(self, prefix: str = "") -> Iterator[tuple[str, Node]]:
        """Yield ``(dotted path, node)`` depth-first, the root first."""
        path = f"{prefix}.{self.name}" if prefix else self.name
        yield path, self
        for child in self.children:
            yield from child.walk(path)

    def find(self, path: str) -> Node | None:
        """The node of one module path (``transformer_blocks.5.attn``); a grouped list entry
        answers for each index in its span with its per-item cost."""
        node: Node | None = self
        for part in path.split(".") if path else ():
            node = _child(node, part) if node is not None else None
        return node


def _child(node: Node, part: str) -> Node | None:
    for child in node.children:
        if child.name == part:
            return child
        if child.span is not None and part.isdigit() and child.span[0] <= int(part) <= child.span[1]:
            return Node(part, child.cost, child.children, formula=child.formula)
    return None


def module_list(name: str, items: list[Node]) -> Node:
    """A ``ModuleList`` named ``name`` whose i-th entry is ``items[i]``; consecutive entries with
    equal cost and structure are grouped into one spanned node (``0-18``, count 19)."""
    grouped: list[Node] = []
    start = 0
    for i in range(1, len(items) + 1):
        if i < len(items) and _same(items[i], items[start]):
            continue
        first, last = start, i - 1
        item = items[start]
        label = str(first) if first == last else f"{first}-{last}"
        grouped.append(
            Node(label, item.cost, item.children, count=last - first + 1,
                 span=(first, last) if last > first else None, formula=item.formula)
        )
        start = i
    return Node(name, children=tuple(grouped))


def _same(a: Node, b: Node) -> bool:
    return a.total == b.total and a.formula == b.formula and len(a.children) == len(b.children)


def invalid_count(node: Node) -> str | None:
    """Where an exact (numeric) tree breaks the rules every count obeys: each cost field and each
    repeat count a non-negative ``int`` (then every total, a sum of products of them, is one too).
    None when it holds; symbolic entries (sympy expressions, tracked ints) are not judged. Shared
    subtrees are checked once; paths are only traced when the fast pass finds something."""
    if _plain_counts(node):
        return None
    for path, item in node.walk():
        for f in fields(Cost):
            value = getattr(item.cost, f.name)
            if _bad(value):
                return f"{path}.{f.name} = {value!r}"
        if _bad(item.count):
            return f"{path} repeated {item.count!r} times"
    return None


def _plain_counts(root: Node) -> bool:
    """Every cost field and count in the tree a plain non-negative ``int`` (the hot, common case)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        c = node.cost
        if c is not ZERO:
            for v in (c.linear, c.conv, c.attention, c.functional, c.thop_extra, c.elementwise, c.params):
                if v.__class__ is not int or v < 0:
                    return False
        if node.count.__class__ is not int or node.count < 0:
            return False
        stack.extend(node.children)
    return True


def _bad(value: Any) -> bool:
    """A value no count may take: negative, a bool, a float / complex / numpy number (not exact)."""
    if value.__class__ is int:
        return value < 0
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value < 0
    return isinstance(value, (float, complex)) or type(value).__module__ == "numpy"
