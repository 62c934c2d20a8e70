"""What a training step's memory is made of, read once from the FLOPs report: the denoiser's weights in every dtype,
its parameter tensors, the blocks gradient checkpointing and FSDP wrap, the adapted layers of a LoRA run, the frozen
encoders, and the measured activation laws at the run's size (:class:`flopcalc.training.memory.Inputs`)."""

from __future__ import annotations

import math
from typing import Any

from flopcalc.engine.cost import Node
from flopcalc.engine.gradients import GradientGraph, items_matched
from flopcalc.training.memory import BASE_DTYPES, Encoder, Inputs

_WIDTH = {"fp32": 4, "bf16": 2, "fp16": 2}
#: buffer dtypes ``Module.to(dtype)`` casts (floating ones; "loaded": the checkpoint's dtype)
_FLOATING = ("loaded", "float32", "float16", "bfloat16", "float64")
#: Components run forward only per sample (``flopcalc.training.estimate.FROZEN_ROLES``).
_ENCODER_ROLES = ("text_encoder", "image_encoder", "vae_encoder")


def blocks(tree: Node, graph: GradientGraph) -> list[tuple[str, int, int]]:
    """``(path, items, parameters per item)`` of each module list item gradient checkpointing wraps (the units FSDP
    wraps too: ``transformer_layer_cls_to_wrap`` names the same block classes)."""
    wrapped = [tuple(c.pattern.split(".")) for c in graph.checkpointed]
    out: list[tuple[str, int, int]] = []

    def visit(node: Node, parts: tuple[str, ...]) -> None:
        for pattern in wrapped:
            items = items_matched(parts, node, pattern)
            if items:
                out.append((".".join(parts[:-1]) or node.name, items, node.per_item.params))
                return
        for child in node.children:
            visit(child, parts + (child.name,))

    visit(tree, ())
    return out


def swap_list(found: list[tuple[str, int, int]]) -> tuple[str, int, int]:
    """The block list holding the most parameters (what ``--blocks-to-swap`` takes blocks from)."""
    if not found:
        return ("", 0, 0)
    totals: dict[str, list[int]] = {}
    for path, items, per in found:
        entry = totals.setdefault(path, [0, 0])
        entry[0] += items
        entry[1] = max(entry[1], per)
    path = max(totals, key=lambda p: totals[p][0] * totals[p][1])
    return (path, totals[path][0], totals[path][1])


def attention_sizes(tree: Node, heads: int | None) -> tuple[tuple[int, int, int], ...]:
    """``(tokens, width, count)`` of each self-attention (queries and keys of one length: ``scores = heads × L²``),
    ``width = heads × head_dim``; cross-attentions are left out."""
    if not heads:
        return ()
    out: dict[tuple[int, int], int] = {}

    def visit(node: Node, k: int) -> None:
        k *= node.count
        c = node.cost
        if c.scores and c.attention and c.scores % heads == 0:
            length = math.isqrt(c.scores // heads)
            if length * length * heads == c.scores:
                head_dim = c.attention // (2 * c.scores)
                key = (length, heads * head_dim)
                out[key] = out.get(key, 0) + k
        for child in node.children:
            visit(child, k)

    visit(tree, 1)
    return tuple((t, w, n) for (t, w), n in sorted(out.items()))


def adapted_layers(tree: Node, chosen: frozenset[str]) -> tuple[tuple[tuple[int, int, int], ...], int]:
    """``((d_in, d_out, count), …)`` of the layers LoRA adapts (``chosen``: paths with a span's first index) and the
    tokens they see in all (Σ count × tokens: what ``lora_A``'s outputs hold per unit of rank)."""
    shapes: dict[tuple[int, int], int] = {}
    tokens = 0

    def visit(node: Node, path: str, k: int) -> None:
        nonlocal tokens
        for child in node.children:
            name = str(child.span[0]) if child.span is not None else child.name
            sub = f"{path}.{name}" if path else name
            kk = k * child.count
            if sub in chosen:
                c = child.cost
                d_out, d_in = c.linear_rows, c.linear_weights // c.linear_rows
                shapes[(d_in, d_out)] = shapes.get((d_in, d_out), 0) + kk
                tokens += kk * (c.linear // c.linear_weights)
            visit(child, sub, kk)

    visit(tree, "", 1)
    return tuple((i, o, n) for (i, o), n in sorted(shapes.items())), tokens


def encoders(report: Any, attention: str) -> tuple[tuple[Encoder, ...], list[str]]:
    """The frozen components a sample runs forward when encoders are online, in bf16, with their activation peaks."""
    from flopcalc.gpu_memory.activations import activation_peak
    from flopcalc.gpu_memory.weights import component_weights

    out, notes = [], []
    seen: set[str] = set()
    for c in report.components:
        if c.role not in _ENCODER_ROLES or c.component in seen:
            continue
        seen.add(c.component)
        cfg = report.configs[c.component]
        weights = component_weights(cfg, component=c.component, dtype="bf16").bytes
        peak = activation_peak(c.class_name, c.call, cfg, c.shape, attention) if c.role == "text_encoder" else None
        if peak is None:
            notes.append(f"{c.component}.{c.call}: its activations are not measured (weights counted)")
        out.append(Encoder(c.component, weights, None if peak is None else peak.elements * 2))
    return tuple(out), notes


def inputs_of(report: Any, den: Any, graph: GradientGraph, *, chosen: frozenset[str] = frozenset(),
              lora_targets: tuple[str, ...] = (), frozen_encoders: str = "online", attention: str = "fused") -> Inputs:
    """The :class:`Inputs` of training ``den`` (the report's denoiser) at the report's size."""
    from flopcalc.gpu_memory.activations import fit_key, form, positions
    from flopcalc.gpu_memory.weights import component_weights
    from flopcalc.training import activation_fits as af
    from flopcalc.training.optimizers import tree_tensors

    cfg = report.configs[den.component]
    weights, buffers = {}, {}
    for dtype in ("fp32", *BASE_DTYPES):
        w = component_weights(cfg, component=den.component, dtype=dtype)
        # training scripts cast the denoiser with ``.to(dtype)`` (accelerate's weight_dtype), which casts the modules
        # ``from_pretrained`` would keep in float32 too
        if dtype in _WIDTH:
            cast_buffers = sum(b.numel * _WIDTH[dtype] if b.dtype in _FLOATING else b.nbytes(dtype) for b in w.buffers)
            weights[dtype] = w.bytes - w.params_fp32 * (4 - _WIDTH[dtype]) - w.buffer_bytes + cast_buffers
            buffers[dtype] = cast_buffers
        else:
            weights[dtype], buffers[dtype] = w.bytes, w.buffer_bytes
    found = blocks(den.tree, graph)
    layers, tokens = adapted_layers(den.tree, chosen)
    key = fit_key(den.class_name, "train", cfg, fed=form(den.shape))
    n = positions(den.shape)
    laws = {}
    for trainable in ("full", "lora"):
        for ckpt in (False, True):
            for master in ("fp32", "bf16"):
                for att in ("fused", "math"):
                    mode = af.mode_key(trainable, ckpt, master, att)
                    laws[mode] = af.law(key, mode, n)
    notes: list[str] = []
    any_law = next((x for x in laws.values() if x is not None), None)
    measured_targets = set((any_law.lora or {}).get("targets", ())) if any_law is not None else set()
    lora_measured = not lora_targets or set(lora_targets) == measured_targets
    if any_law is not None:
        for field, label in (("text_len", "text tokens"), ("num_frames", "frames")):
            fitted, run = any_law.settings.get(field), den.shape.get(field) if field == "text_len" else \
                report.settings.num_frames
            if fitted is not None and run is not None and fitted != run:
                notes.append(f"activations measured at {fitted} {label}, run with {run}: the laws follow the latent "
                             "positions only")
    enc, enc_notes = encoders(report, attention)
    if frozen_encoders != "online":
        enc_notes = []
    heads = cfg.get("num_attention_heads")
    return Inputs(
        model=report.model, class_name=den.class_name, params=den.tree.total.params, tensors=tree_tensors(den.tree),
        weights=weights, buffer_bytes=buffers, lora_layers=layers, lora_tokens=tokens,
        block_params=max((per for _, _, per in found), default=0),
        blocks_params=sum(items * per for _, items, per in found), swap_list=swap_list(found), encoders=enc,
        laws=laws, attention_sizes=attention_sizes(den.tree, heads if isinstance(heads, int) else None),
        lora_measured=lora_measured,
        lora_rank_measured=int((any_law.lora or {}).get("rank", 16)) if any_law is not None else 16,
        notes=tuple(notes + enc_notes), idle_tensors=idle_tensors(den.tree, graph))


def idle_tensors(tree: Node, graph: GradientGraph) -> tuple[Any, ...]:
    """The parameter tensors of the layers the model's output does not depend on (the declared flow's dead branches,
    :func:`flopcalc.training.lora.unused_layers`: Qwen-Image's last block's text stream, ``attn.to_add_out`` and
    ``txt_mlp``): autograd never reaches them, so full fine-tuning allocates no gradient for them (measured:
    validation/fixtures/training_memory/qwen-image, ``grad_bytes``). A flow built from the tree has none."""
    if graph.lora is None or callable(graph.lora.steps):
        return ()
    from flopcalc.engine.gradients import Attend
    from flopcalc.training.lora import unused_layers
    from flopcalc.training.optimizers import tree_tensors

    out: list[Any] = []
    for path, step in unused_layers(tree, graph.lora):
        node = tree.find(path)
        if node is not None and not isinstance(step, Attend):
            out += tree_tensors(node)
    return tuple(out)


def law_key(report: Any, den: Any) -> str:
    """The fit key of the trained denoiser's activation laws (what the fitting script writes)."""
    from flopcalc.gpu_memory.activations import fit_key, form

    return fit_key(den.class_name, "train", report.configs[den.component], fed=form(den.shape))

