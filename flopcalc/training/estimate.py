"""``train()``: the FLOPs of one training sample and one step, and the MFU of a measured step time.

What one sample costs (batch 1, torch convention: FLOPs = 2 × MACs):

* the trained denoiser: its forward (the inference report's exact count of one run) and its backward,
  derived module by module from the forward tree (:mod:`flopcalc.training.backward`: weight gradients, input
  gradients except where the input is a model input, attention 2 ×, and under gradient checkpointing
  the recomputed forward of the blocks diffusers wraps);
* frozen text encoders and the VAE encoder: one forward each per sample (``frozen_encoders="online"``)
  or nothing when prompt embeddings and latents are cached beforehand (``"cached"``);
* nothing else: no sampling loop, no VAE decode.

``trainable="lora:RANK"``: the denoiser frozen, peft LoRA adapters of rank RANK on ``lora_targets`` (default:
the family's diffusers training script's ``target_modules``) trained; the forward includes the adapters and
the backward follows which tensors require grad (:mod:`flopcalc.training.lora`).

Per step: × ``batch_size`` (per GPU) × ``num_gpus``. MFU, as the field defines it (PaLM, Chowdhery et al. 2022,
appendix B): the model's FLOPs per step (forward + backward, **without** the forward that gradient checkpointing
runs again) / (step time × GPUs × the GPU's dense peak for ``precision``, :mod:`flopcalc.hardware.gpus`); HFU,
beside it, counts the recompute too (what the hardware ran). A step time at which the hardware would exceed its
dense peak (HFU > 1) is refused: it cannot have been measured.

The common rules of thumb (training = 3 × forward; 4 × with activation recomputation) are reported beside
the exact count for comparison, never used. Validated against ``FlopCounterMode`` counting forward +
backward of the real module on the meta device (``validation/fixtures/training``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from flopcalc.training.backward import Backward, backward, graph_of, lora_supported, refusal
from flopcalc.engine.gradients import GradientGraph
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import FlopcalcError, OptionError, few
from flopcalc.engine.limits import check_count
from flopcalc.training.memory import BASE_DTYPES, MASTER_WEIGHTS
from flopcalc.training.optimizers import OPTIMIZERS
from flopcalc.training.sharding import check_sharding

#: Attention paths whose activation laws are measured: the fused SDPA kernel (no score matrix) and the math path.
ATTENTION = ("fused", "math")

FROZEN_ENCODERS = ("online", "cached")
#: Components run forward only per sample (``--frozen-encoders online``): text encoders, an image-to-video
#: pipeline's image encoder (Wan I2V's CLIP vision tower), the VAE encoder.
FROZEN_ROLES = ("text_encoder", "image_encoder", "vae_encoder")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class ComponentTraining:
    """One component's work per training sample (batch 1), in MACs."""

    component: str
    class_name: str
    call: str
    role: str
    treatment: str  # "trained" | "frozen forward" | "cached"
    forward_macs: int
    backward_macs: int = 0

    @property
    def flops(self) -> int:
        return 2 * (self.forward_macs + self.backward_macs)

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "class_name": self.class_name, "call": self.call, "role": self.role,
                "treatment": self.treatment, "forward_flops": 2 * self.forward_macs,
                "backward_flops": 2 * self.backward_macs, "flops": self.flops}


@dataclass(frozen=True)
class LoraTraining:
    """The adapters of a LoRA run and their share of the trained denoiser's work (MACs, batch 1)."""

    rank: int
    targets: tuple[str, ...]
    layers: int
    trainable_params: int
    adapter_forward: int
    adapter_weight_grad: int
    adapter_input_grad: int
    base_input_grad: int
    #: the adapted layers (paths, a span's first index), what the memory estimate reads
    chosen: frozenset[str] = field(default=frozenset(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "targets": list(self.targets), "trainable_params": self.trainable_params,
                "layers": self.layers, "adapter_forward_flops": 2 * self.adapter_forward,
                "adapter_weight_grad_flops": 2 * self.adapter_weight_grad,
                "adapter_input_grad_flops": 2 * self.adapter_input_grad,
                "frozen_layers_input_grad_flops": 2 * self.base_input_grad}


@dataclass(frozen=True)
class TrainingEstimate:
    """FLOPs of one training sample / step of ``model`` and, given a step time and a GPU, the MFU."""

    model: str
    pipeline: str
    settings: dict[str, Any] = field(hash=False)
    trainable: str
    frozen_encoders: str
    gradient_checkpointing: bool
    batch_size: int
    num_gpus: int
    components: tuple[ComponentTraining, ...]
    trained: ComponentTraining
    backward: Backward
    precision: str
    step_time: float | None = None
    gpu_key: str | None = None
    gpu_name: str | None = None
    peak_flops: float | None = None
    notes: tuple[str, ...] = ()
    params: int = 0
    lora: LoraTraining | None = None
    #: the memory of the step on one GPU (:mod:`flopcalc.training.memory`)
    memory: Any = None
    #: ``fit=True``: the setups that fit the GPU (:mod:`flopcalc.training.fit`)
    fit: Any = None
    #: ``train_samples`` with ``step_time``: the run's time, GPU-hours, energy (:class:`flopcalc.training.fit.RunCost`)
    run: Any = None
    #: GPUs holding one sample (sequence parallelism)
    sp_degree: int = 1

    @property
    def trainable_params(self) -> int:
        """Parameters that receive a gradient: the adapters' under LoRA, else every one of the denoiser."""
        return self.lora.trainable_params if self.lora is not None else self.params

    @property
    def flops_per_sample(self) -> int:
        return sum(c.flops for c in self.components)

    @property
    def samples_per_step(self) -> int:
        """Samples of one optimizer step: the batch per GPU × the data-parallel GPUs (a sample spans the
        sequence-parallel ones)."""
        return self.batch_size * (self.num_gpus // self.sp_degree)

    @property
    def flops_per_step(self) -> int:
        return self.flops_per_sample * self.samples_per_step

    @property
    def trained_forward_flops(self) -> int:
        return 2 * self.trained.forward_macs

    @property
    def fused_attention_flops_per_sample(self) -> int:
        """The same sample with attention through a fused SDPA kernel, whose backward torch counts as
        2.5 × its forward (the scores are recomputed) instead of the math path's 2 ×; under LoRA, for every
        attention whose query, key or value requires grad (the math path computes only the gradients required)."""
        return self.flops_per_sample + 2 * (self.backward.fused_attention_macs() - self.backward.macs)

    @property
    def model_flops_per_sample(self) -> int:
        """The model's FLOPs per sample: forward + backward without the recompute of gradient checkpointing."""
        return self.flops_per_sample - 2 * self.backward.recompute

    @property
    def model_flops_per_step(self) -> int:
        return self.model_flops_per_sample * self.samples_per_step

    def _utilisation(self, flops_per_step: int) -> float | None:
        if self.step_time is None or self.peak_flops is None:
            return None
        return flops_per_step / (self.step_time * self.num_gpus * self.peak_flops)

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation: the model's FLOPs per step (no recompute) over the dense peak × GPUs × step time."""
        return self._utilisation(self.model_flops_per_step)

    @property
    def hfu(self) -> float | None:
        """Hardware FLOPs utilisation: as :attr:`mfu`, with the recomputed forward of gradient checkpointing."""
        return self._utilisation(self.flops_per_step)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "pipeline": self.pipeline,
            "settings": dict(self.settings),
            "unit": "FLOPs (torch convention: 2 × multiply-accumulates of matmuls, convolutions, attention)",
            "train": {
                "trainable": self.trainable,
                "params": self.params,
                "trainable_params": self.trainable_params,
                "frozen_encoders": self.frozen_encoders,
                "gradient_checkpointing": self.gradient_checkpointing,
                "batch_size": self.batch_size,
                "num_gpus": self.num_gpus,
                "flops_per_sample": self.flops_per_sample,
                "flops_per_step": self.flops_per_step,
                "components": [c.to_dict() for c in self.components],
                "backward": {
                    "weight_grad_flops": 2 * self.backward.weight_grad,
                    "input_grad_flops": 2 * self.backward.input_grad,
                    "attention_grad_flops": 2 * self.backward.attention_grad,
                    "recompute_flops": 2 * self.backward.recompute,
                    "skipped_input_grad_flops": 2 * self.backward.no_input_grad,
                    "unused_grad_flops": 2 * self.backward.unused,  # layers the output does not depend on
                },
                "attention_backward": "math path (2 × forward bmm); fused SDPA kernel: 2.5 × forward"
                if self.lora is None else "math path: dQ, dK, dV, dA only for operands that require grad",
                "flops_per_sample_fused_attention": self.fused_attention_flops_per_sample,
                "rules_of_thumb": {"3x_forward": 3 * self.trained_forward_flops,
                                   "4x_forward": 4 * self.trained_forward_flops,
                                   "of": f"{self.trained.component} forward"},
            },
            "notes": list(self.notes),
        }
        if self.lora is not None:
            out["train"]["lora"] = self.lora.to_dict()
        if self.memory is not None:
            out["train"]["memory"] = self.memory.to_dict()
        if self.fit is not None:
            out["train"]["fit"] = self.fit.to_dict()
        if self.run is not None:
            out["train"]["run"] = self.run.to_dict()
        if self.step_time is not None:
            out["step_time_s"] = self.step_time
        if self.gpu_key is not None:
            out["gpu"] = {"key": self.gpu_key, "name": self.gpu_name, "precision": self.precision,
                          "num_gpus": self.num_gpus, "peak_flops": self.peak_flops}
        if self.mfu is not None:
            out["mfu"] = self.mfu
            out["hfu"] = self.hfu
            out["model_flops_per_step"] = self.model_flops_per_step
        return out


#: Run settings a training sample has no use for, and why (every other one of ``flopcalc.estimate``'s applies).
NOT_FOR_TRAINING = {
    "steps": "a training sample runs the denoiser once, at one noise level",
    "guidance_scale": "training runs no classifier-free guidance",
    "true_cfg_scale": "training runs no classifier-free guidance",
    "negative_prompt": "training encodes no negative prompt",
    "num_images_per_prompt": "a training sample is one image or clip (use --batch-size for samples per GPU)",
    "strength": "training encodes the whole target image or clip",
    "vae_tiling": "training encodes the target with the VAE and never decodes",
}


def training_plan(model: str, *, revision: str | None = None, token: str | None = None, **settings: Any) -> Any:
    """The inference report a training sample is counted on: the pipeline planned at one step, the VAE encoder
    planned (``strength=1``: the training latents are encoded), no resolution binning."""
    from flopcalc.flops.estimate import estimate

    sizes = dict(settings, steps=1, resolution_binning=False, revision=revision, token=token)
    try:
        return estimate(model, strength=1.0, **sizes)
    except OptionError as exc:  # an image-to-video pipeline encodes its conditioning anyway
        if "--strength does not apply" not in str(exc):
            raise
        return estimate(model, **sizes)


def train(
    model: str,
    *,
    batch_size: int = 1,
    trainable: str = "denoiser",
    lora_targets: tuple[str, ...] | str | None = None,
    frozen_encoders: str = "online",
    gradient_checkpointing: bool = False,
    step_time: float | None = None,
    gpu: str | None = None,
    num_gpus: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    master_weights: str = "fp32",
    attention: str = "fused",
    sharding: str | None = None,
    offload_optimizer: bool = False,
    sequence_parallel: str | None = None,
    ema: bool = False,
    base_dtype: str = "bf16",
    blocks_to_swap: int = 0,
    fit: bool = False,
    train_samples: int | None = None,
    inter_node_bandwidth: float | None = None,
    gpus_per_node: int | None = None,
    revision: str | None = None,
    token: str | None = None,
    **settings: Any,
) -> TrainingEstimate:
    """FLOPs and memory of one training sample and step of ``model``'s denoiser: full fine-tuning
    (``trainable="denoiser"``) or LoRA (``"lora:RANK"``, adapters on ``lora_targets``, peft's names;
    default: the family's diffusers training script's). ``batch_size``: samples per GPU per step.

    Memory per GPU (:mod:`flopcalc.training.memory`): ``optimizer`` (adamw, adamw8bit, adafactor, prodigy, sgd),
    ``master_weights`` (fp32: mixed precision; bf16: pure bf16), ``attention`` (fused or math), ``sharding`` over
    ``num_gpus`` (ddp, fsdp, fsdp-grad-op, fsdp-hybrid, zero1, zero2, zero3), ``offload_optimizer``,
    ``sequence_parallel`` (``"ulysses=U,ring=R"``), ``ema``, ``base_dtype`` of LoRA's frozen base (bf16, fp16, nf4,
    int8, fp8), ``blocks_to_swap``; against ``gpu`` when given, and with ``fit`` the setups that fit it
    (:mod:`flopcalc.training.fit`). ``step_time`` (with ``gpu``): MFU, and with ``train_samples`` the run's time,
    GPU-hours and energy. ``inter_node_bandwidth`` (GB/s per GPU, one direction) and ``gpus_per_node``: the links
    collectives past one node run over (defaults :data:`flopcalc.training.sharding.INTER_NODE_BYTES_PER_S`, 8).

    ``model`` is anything :func:`flopcalc.estimate` takes, and ``settings`` its run settings that shape a sample
    (``height``, ``width``, ``num_frames``, ``max_sequence_length``, family options such as ``reference_images``);
    one that means nothing to a training sample (:data:`NOT_FOR_TRAINING`) is refused. Sizes default to the
    pipeline's. Raises :class:`FlopcalcError` on bad input, for a denoiser whose backward is not validated, or for
    an option that does not apply.
    """
    from flopcalc.training.lora import parse_trainable
    from flopcalc.training.memory import Setup
    from flopcalc.training.sharding import parse_sequence_parallel

    rank = parse_trainable(trainable)
    if lora_targets is not None and rank is None:
        raise FlopcalcError("--lora-targets goes with --trainable lora:RANK")
    _check_options(frozen_encoders, batch_size, num_gpus, step_time, precision)
    setup = Setup(rank, gradient_checkpointing, _choice("optimizer", optimizer, OPTIMIZERS),
                  _choice("master-weights", master_weights, MASTER_WEIGHTS), _choice("attention", attention, ATTENTION),
                  batch_size, check_sharding(sharding), num_gpus, _flag("offload-optimizer", offload_optimizer),
                  parse_sequence_parallel(sequence_parallel), _flag("ema", ema),
                  _choice("base-dtype", base_dtype, BASE_DTYPES), _blocks(blocks_to_swap), frozen_encoders == "online")
    links = _links(inter_node_bandwidth, gpus_per_node)
    if step_time is not None and gpu is None:
        raise FlopcalcError("MFU needs both --step-time and --gpu")
    if fit and gpu is None:
        raise FlopcalcError("--fit needs --gpu: the GPU the setups should fit")
    if train_samples is not None:
        if isinstance(train_samples, bool) or not isinstance(train_samples, int) or not 1 <= train_samples <= 10**15:
            raise OptionError(f"--train-samples must be a whole number of samples from 1 to 10^15, got "
                              f"{train_samples!r}")
        if step_time is None:
            raise FlopcalcError("--train-samples needs --step-time (seconds per optimizer step, measured): flopcalc's "
                                "energy laws are fitted on inference forwards, not training steps")
    for key, why in NOT_FOR_TRAINING.items():
        if settings.get(key) not in (None, False) and not (key == "num_images_per_prompt" and settings[key] == 1):
            raise OptionError(f"--{key.replace('_', '-')} does not apply to a training step: {why}")
    settings = {k: v for k, v in settings.items() if k not in NOT_FOR_TRAINING}
    report = training_plan(model, revision=revision, token=token, **settings)
    denoisers = [c for c in report.components if c.role == "denoiser"]
    if len(denoisers) != 1:
        raise FlopcalcError(f"{report.model}: training counts one denoiser; this pipeline has "
                            f"{', '.join(c.component for c in denoisers) or 'none'}")
    add_ons = [f"{c.component} ({c.role})" for c in report.components
               if c.role not in ("denoiser", *FROZEN_ROLES, "vae_decoder")]
    if add_ons:
        raise FlopcalcError(f"{report.model}: training with an add-on model is not modelled ({', '.join(add_ons)}); "
                            "estimate the base pipeline")
    den = denoisers[0]
    graph = graph_of(den.class_name)
    lora = None
    if rank is None:
        back = backward(den.tree, graph, checkpointing=gradient_checkpointing)
        forward_macs = den.macs_per_run
    else:
        back, lora = lora_training(den.tree, graph, rank, lora_targets, gradient_checkpointing)
        forward_macs = den.macs_per_run + lora.adapter_forward
    trained = ComponentTraining(den.component, den.class_name, den.call, den.role,
                                "trained" if lora is None else f"LoRA r={rank}", forward_macs, back.macs)
    parts = []
    for c in report.components:
        if c.role == "denoiser":
            parts.append(trained)
        elif c.role in FROZEN_ROLES:
            treatment = "frozen forward" if frozen_encoders == "online" else "cached"
            macs = c.macs_per_run if frozen_encoders == "online" else 0
            parts.append(ComponentTraining(c.component, c.class_name, c.call, c.role, treatment, macs))
    # the inference plan's notes are about sampling (guidance, strength, negative prompts); keep what is missing
    notes = [n for n in report.notes if "absent" in n or "not counted" in n]
    if not any(c.role == "vae_encoder" for c in report.components):
        notes.append("this pipeline has no VAE encoder run: latents are taken as given")
    peak = name = key = g = None
    if gpu is not None:
        from flopcalc.hardware.gpus import gpu as lookup_gpu

        g = lookup_gpu(gpu)
        if step_time is not None and precision not in g.peak_flops:
            raise FlopcalcError(f"{g.name} has no {precision} peak in the GPU table; it has "
                                f"{', '.join(g.peak_flops)}")
        peak, name, key = g.peak_flops.get(precision), g.name, g.key
    memory, fitted = _memory(report, den, graph, lora, setup, g, frozen_encoders, fit, links)
    s = report.settings
    settings = {"height": s.height, "width": s.width, "num_frames": s.num_frames,
                "max_sequence_length": s.max_sequence_length, **{k: v for k, v in den.shape.items()}}
    est = TrainingEstimate(report.model, report.pipeline, settings, trainable, frozen_encoders, gradient_checkpointing,
                           batch_size, num_gpus, tuple(parts), trained, back, precision, step_time, key, name, peak,
                           tuple(notes), den.tree.total.params, lora, memory, fitted, None, setup.sp.degree)
    if est.hfu is not None and est.hfu > 1:
        raise FlopcalcError(f"--step-time {step_time:g}: {est.flops_per_step / 1e12:,.1f} TFLOPs per step on "
                            f"{num_gpus} × {name} would run at {100 * est.hfu:,.0f}% of the dense {precision} peak "
                            f"({peak / 1e12:g} TFLOP/s per GPU): faster than physically possible; check the step "
                            "time, --batch-size (per GPU) and --num-gpus")
    if train_samples is not None:
        from dataclasses import replace

        from flopcalc.energy_laws.predict import DEFAULT_GRID_G_PER_KWH
        from flopcalc.training.fit import RunCost

        est = replace(est, run=RunCost(train_samples, est.samples_per_step, step_time, num_gpus, g.tdp_w,
                                       DEFAULT_GRID_G_PER_KWH))
    return est


def _memory(report: Any, den: Any, graph: GradientGraph, lora: LoraTraining | None, setup: Any, g: Any,
            frozen_encoders: str, fit: bool, links: dict[str, Any]) -> tuple[Any, Any]:
    """The step's memory per GPU and, with ``fit``, the setups that fit ``g``."""
    from flopcalc.flops.parallel import limits
    from flopcalc.training.fit import fit_setups
    from flopcalc.training.memory import check_setup, compose
    from flopcalc.training.memory_inputs import inputs_of

    lim = limits(report)
    check_setup(setup, heads=lim.heads, tokens=lim.tokens)
    if setup.blocks_to_swap:
        _check_swap(setup.blocks_to_swap, den, graph)
    inp = inputs_of(report, den, graph, chosen=lora.chosen if lora else frozenset(),
                    lora_targets=lora.targets if lora else (), frozen_encoders=frozen_encoders,
                    attention=setup.attention)
    memory = compose(inp, setup, gpu=g, **links)
    fitted = fit_setups(inp, setup, g, heads=lim.heads, tokens=lim.tokens, **links) if fit else None
    return memory, fitted


def _check_swap(k: int, den: Any, graph: GradientGraph) -> None:
    from flopcalc.training.memory_inputs import blocks, swap_list

    path, items, _ = swap_list(blocks(den.tree, graph))
    if k >= items:
        raise OptionError(f"--blocks-to-swap {k}: {den.class_name}'s largest block list ({path or 'none'}) has {items} "
                          f"blocks; swap at most {max(items - 1, 0)}")


def _choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise OptionError(f"--{option} {value!r}: choose one of {', '.join(choices)}")
    return value


def _flag(option: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"--{option}: expected true or false, got {value!r}")
    return value


def _blocks(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000:
        raise OptionError(f"--blocks-to-swap {value!r}: a whole number of blocks, 0 or more")
    return value


def _links(bandwidth: float | None, per_node: int | None) -> dict[str, Any]:
    """The inter-node link and node size collectives past one node run over."""
    out: dict[str, Any] = {}
    if bandwidth is not None:
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or not math.isfinite(bandwidth) \
                or not 0 < bandwidth <= 10_000:
            raise OptionError(f"--inter-node-bandwidth {bandwidth!r}: GB/s per GPU and direction, above 0 and at most "
                              "10000")
        out["inter_node_bytes_per_s"] = float(bandwidth) * 1e9
    if per_node is not None:
        check_count("num_gpus", per_node, "--gpus-per-node")
        out["gpus_per_node"] = per_node
    return out


def lora_training(tree: Node, graph: GradientGraph, rank: int, targets: tuple[str, ...] | str | None,
          checkpointing: bool) -> tuple[Backward, LoraTraining]:
    """The backward of a LoRA run of ``tree``: adapters on ``targets`` (default: the family's)."""
    from flopcalc.training.lora import adapters, check_target_names, lora_backward

    if graph.lora is None:
        raise FlopcalcError(f"LoRA training FLOPs are not modelled for {graph.class_name}; modelled denoisers: "
                            f"{few(lora_supported())} (docs/training.md lists them)")
    refusal(tree, graph, checkpointing)
    if isinstance(targets, str):  # "attn.to_q,attn.to_v", as the CLI takes it
        targets = tuple(t.strip() for t in targets.split(","))
    if targets is None and not graph.lora.default_targets:
        raise FlopcalcError(f"{graph.class_name}: diffusers has no LoRA training script to take default targets from; "
                            "name them with --lora-targets (e.g. to_q,to_k,to_v,to_out.0)")
    names = graph.lora.default_targets if targets is None else check_target_names(tuple(targets), graph.lora)
    chosen = adapters(tree, graph.lora, names)
    lb = lora_backward(tree, graph.lora, chosen, rank, graph.checkpointed if checkpointing else ())
    if lb.adapter_weight_grad == 0:  # torch's backward fails: no output requires grad
        raise FlopcalcError(f"LoRA on {', '.join(names)} trains nothing in this {graph.class_name}: the output "
                            "depends on none of these adapters, so "
                            "loss.backward() has nothing to differentiate; name layers the output depends on")
    back = Backward(lb.adapter_weight_grad, lb.adapter_input_grad + lb.base_input_grad, lb.attention_grad,
                    lb.recompute, lb.no_input_grad, lb.fused_attention_grad)
    return back, LoraTraining(rank, names, lb.layers, lb.trainable_params, lb.adapter_forward, lb.adapter_weight_grad,
                              lb.adapter_input_grad, lb.base_input_grad, chosen)


def _check_options(frozen_encoders: str, batch_size: int, num_gpus: int, step_time: float | None,
                   precision: str) -> None:
    if frozen_encoders not in FROZEN_ENCODERS:
        raise FlopcalcError(f"--frozen-encoders {frozen_encoders!r}: choose one of {', '.join(FROZEN_ENCODERS)}")
    check_count("batch_size", batch_size, "--batch-size")
    check_count("num_gpus", num_gpus, "--num-gpus")
    if step_time is not None and not (step_time > 0 and math.isfinite(step_time)):
        raise FlopcalcError(f"--step-time must be a positive number of seconds, got {step_time}")
    if precision not in PRECISIONS:
        raise FlopcalcError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
