"""Rendering a training step's memory, the setups that fit (``--fit``) and a run's cost as text lines."""

from __future__ import annotations

from typing import Any

from flopcalc.render.text_tables import columns

GIB = 2 ** 30


def gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:,.2f}"


def _setup(m: Any) -> str:
    s = m.setup
    parts = [f"LoRA rank {s.rank}" if s.rank else "full fine-tuning", s.optimizer,
             f"{s.master} master weights", f"{s.attention} attention"]
    if s.checkpointing:
        parts.append("gradient checkpointing")
    if s.batch != 1:
        parts.append(f"batch {s.batch}")
    gpus = f"{s.num_gpus} GPU(s)"
    if s.num_gpus > 1 or s.sharding:
        gpus += f", {s.strategy} over {s.dp}" + (f" × sequence-parallel {s.sp.describe()}" if s.sp.degree > 1 else "")
    parts.append(gpus)
    if s.offload_optimizer:
        parts.append("optimizer offloaded to host")
    if s.blocks_to_swap:
        parts.append(f"{s.blocks_to_swap} blocks swapped to host")
    if s.ema:
        parts.append("EMA")
    return ", ".join(parts)


def memory_lines(est: Any) -> list[str]:
    """The memory table of a :class:`~flopcalc.training.estimate.TrainingEstimate` per GPU."""
    m = est.memory
    s = m.setup
    den = est.trained.component
    law = m.law
    err = "" if law is None or law.loo_max_rel_error is None else f"± {100 * law.loo_max_rel_error:.1f}% LOO"
    rows = [("category", "GiB", "")]
    if s.rank:
        base = s.base_dtype
        rows.append((f"weights: {den} frozen base ({base})", gib(m.frozen_weights_bytes), ""))
        rows.append((f"weights: LoRA adapters ({s.master})", gib(m.trainable_weights_bytes), ""))
    else:
        width = "bf16" if s.sharding in ("zero1", "zero2", "zero3") and s.master == "fp32" else s.master
        rows.append((f"weights: {den} ({width})", gib(m.trainable_weights_bytes), ""))
    if m.encoder_weights_bytes:
        rows.append(("weights: frozen encoders online (bf16)", gib(m.encoder_weights_bytes), ""))
    if m.ema_bytes:
        rows.append(("weights: EMA copy", gib(m.ema_bytes), ""))
    rows.append(("gradients", gib(m.gradients_bytes), ""))
    if m.gradient_buckets_bytes:
        rows.append(("DDP gradient buckets", gib(m.gradient_buckets_bytes), ""))
    rows.append((f"optimizer states ({s.optimizer}{', offloaded' if s.offload_optimizer else ''})",
                 gib(m.optimizer_bytes), ""))
    if m.gathered_bytes:
        rows.append(("gathered blocks (unsharded)", gib(m.gathered_bytes), ""))
    a = m.activations
    rows.append(("activations saved for backward", gib(None if a is None else a.saved),
                 "not measured" if a is None else err))
    if a is not None:
        rows.append(("forward peak above saved", gib(a.forward_peak - a.saved), ""))
        rows.append(("backward peak above saved", gib(a.backward_peak - a.saved), ""))
    if m.encoder_activation_bytes:
        rows.append(("frozen encoders' activations (encoding)", gib(m.encoder_activation_bytes), ""))
    rows.append((f"peak allocated ({m.phase})", gib(m.peak_allocated_bytes), "" if m.known else "at least"))
    rows.append(("allocator segments above the persistent tensors", gib(m.reserve.allocator_bytes), ""))
    if m.reserve.context_bytes:
        rows.append(("CUDA context", gib(m.reserve.context_bytes), ""))
    rows.append(("peak" if m.reserve.context_bytes else "peak (no --gpu: without the CUDA context)", gib(m.peak_bytes),
                 "" if m.known else "at least"))
    lines = ["", f"memory per GPU: {_setup(m)}"]
    lines += columns(rows, right=(1,), rule_before_last=True)
    if m.gpu_name is not None:
        lines.append(_verdict(m))
    for c in m.communication:
        lines.append(f"communication: {c.name} of {c.what}: {c.bytes / GIB:,.2f} GiB per step per GPU, "
                     f"{c.seconds:,.3f} s at {c.bytes_per_s / 1e9:,.1f} GB/s ({c.link})")
    if m.host_bytes:
        lines.append(f"host memory: {m.host_bytes / GIB:,.2f} GiB of optimizer states (and fp32 master copy) per GPU")
    if law is not None:
        lines.append(f"activations: measured on {law.measured_on} at n = {law.n_range[0]:,}–{law.n_range[1]:,} latent "
                     f"positions (this run: {law.n:,}{', extrapolated' if law.extrapolated else ''})")
    for note in m.notes:
        lines.append(f"note: {note}")
    from flopcalc.training.allocator import LEFT_OUT

    lines.append(f"peak: {LEFT_OUT}")
    return lines


def _verdict(m: Any) -> str:
    room = m.headroom_bytes
    if m.fits is True:
        return f"{m.gpu_name} ({m.gpu_memory_bytes / GIB:,.2f} GiB): fits, headroom {room / GIB:,.2f} GiB"
    if m.fits is False:
        return f"{m.gpu_name} ({m.gpu_memory_bytes / GIB:,.2f} GiB): does not fit, short by {-room / GIB:,.2f} GiB"
    return (f"{m.gpu_name} ({m.gpu_memory_bytes / GIB:,.2f} GiB): cannot tell (activations not measured; "
            f"the rest leaves {room / GIB:,.2f} GiB)")


def fit_lines(est: Any) -> list[str]:
    f = est.fit
    lines = ["", f"--fit on {f.gpu_name} ({f.gpu_memory_bytes / GIB:,.2f} GiB): setups that fit, cheapest first "
                 f"({f.tried} tried)"]
    if f.proposals:
        rows = [("change", "peak GiB", "headroom GiB", "options")]
        for p in f.proposals:
            rows.append((p.why, gib(p.memory.peak_bytes), gib(p.memory.headroom_bytes), p.memory.setup.flags()))
        lines += columns(rows, right=(1, 2))
    else:
        lines.append("none of the setups tried fits" + (" (activations not measured for: "
                                                         + ", ".join(f.unknown) + ")" if f.unknown else ""))
    g = f.fewest_gpus
    if g is None:
        lines.append(f"full fine-tuning: does not fit on up to the {_max()} GPUs tried" if not f.unknown or
                     est.memory.known else "full fine-tuning: activations not measured, no GPU count claimed")
    else:
        lines.append(f"full fine-tuning on the fewest GPUs: {g.memory.setup.num_gpus} × {f.gpu_name} ({g.why}): "
                     f"{gib(g.memory.peak_bytes)} GiB per GPU; {g.memory.setup.flags()}")
    return lines


def _max() -> int:
    from flopcalc.training.fit import MAX_GPUS

    return MAX_GPUS


def run_lines(est: Any) -> list[str]:
    r = est.run
    return [f"run: {r.samples:,} samples = {r.steps:,} steps × {r.step_time:g} s = {r.seconds / 3600:,.2f} h on "
            f"{r.num_gpus} GPU(s), {r.gpu_hours:,.1f} GPU-hours; energy at most {r.energy_kwh_at_most:,.1f} kWh "
            f"(GPU-hours × TDP {r.tdp_w:g} W), CO2e at most {r.co2e_kg_at_most:,.1f} kg at {r.grid_g_per_kwh:g} "
            "gCO2e/kWh"]
