"""CLI commands of the training-compute and memory predictors (``flopcalc train``, ``flopcalc memory``).

Registered from :mod:`flopcalc.cli` by :func:`add_parsers`; each parser sets ``handler``, which the main
dispatcher calls. Nothing heavy is imported at registration time.
"""

from __future__ import annotations

import argparse
import sys


def _positive_int(text: str) -> int:
    from flopcalc.cli import _positive_int as parse

    return parse(text)


def _positive_float(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _run_options(p: argparse.ArgumentParser, *, frames: str, batch: str) -> None:
    """MODEL and the run's size options, shared by ``train`` and ``memory``."""
    p.add_argument("model")
    p.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    p.add_argument("--height", type=_positive_int)
    p.add_argument("--width", type=_positive_int)
    p.add_argument("--num-frames", type=_positive_int, help=frames)
    p.add_argument("--batch-size", type=_positive_int, default=1, help=batch)
    p.add_argument("--max-sequence-length", type=_positive_int, help="text tokens (T5: FLUX 512, SD3 256)")


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    from flopcalc.cli import add_family_options

    t = sub.add_parser("train", help="FLOPs per training sample and step (forward + backward), and MFU",
                       description="MODEL as for `flopcalc estimate`. The denoiser is trained in full; frozen text "
                                   "encoders and the VAE encoder run forward once per sample (online) or not at all "
                                   "(cached); with --trainable lora:RANK only peft LoRA adapters are trained. Exact "
                                   "against FlopCounterMode counting forward + backward on meta.")
    _run_options(t, frames="video: frames per training clip", batch="samples per GPU per step")
    t.add_argument("--trainable", default="denoiser", metavar="denoiser|lora:RANK",
                   help="what is trained: the denoiser, every parameter (default), or peft LoRA adapters of rank RANK "
                        "on the frozen denoiser (lora:16)")
    t.add_argument("--lora-targets", metavar="NAME,...",
                   help="with lora:RANK, the layers adapted, as peft's target_modules (a name or its dotted suffix, "
                        "e.g. attn.to_q,attn.to_v); default: the family's diffusers training script's")
    t.add_argument("--frozen-encoders", choices=("online", "cached"), default="online",
                   help="online: text encoders and VAE encoder run forward per sample; cached: precomputed")
    t.add_argument("--gradient-checkpointing", action="store_true",
                   help="diffusers' enable_gradient_checkpointing(): the wrapped blocks run forward again in backward")
    t.add_argument("--step-time", type=_positive_float, help="measured seconds per optimizer step (for MFU)")
    t.add_argument("--gpu", help="GPU of the GPU table (`flopcalc gpus`), for MFU")
    t.add_argument("--num-gpus", type=_positive_int, default=1, help="data-parallel GPUs per step")
    t.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16", "fp8"), default="bf16",
                   help="whose dense peak MFU is against (default bf16)")
    t.add_argument("--format", choices=("table", "json", "csv"), default="table")
    t.set_defaults(handler=_train)

    m = sub.add_parser("memory", help="weights per component in bytes, resident under offload, fit on a GPU",
                       description="MODEL as for `flopcalc estimate`. Weights as from_pretrained(torch_dtype=...) "
                                   "loads them (parameters, float32-kept modules, buffers), exact; activation peaks "
                                   "of the measured denoisers and VAE decoders, estimated.")
    _run_options(m, frames="video: frames to generate",
                 batch="samples in one denoiser forward (2 where a pipeline batches classifier-free guidance)")
    m.add_argument("--attention", choices=("fused", "math"), default="fused",
                   help="fused: SDPA/flash kernels, no score matrix (default); math: the scores materialised")
    tiling = m.add_mutually_exclusive_group()
    tiling.add_argument("--vae-tiling", dest="vae_tiling", action="store_true", default=None,
                        help="decode in tiles (pipe.vae.enable_tiling()): its own activation peak")
    tiling.add_argument("--no-vae-tiling", dest="vae_tiling", action="store_false",
                        help="decode the whole latent in one pass (default: as the pipeline does)")
    m.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "int8", "nf4", "fp8"), default="bf16",
                   help="dtype the weights load in; int8 / nf4: bitsandbytes LLM.int8 / NF4, fp8: optimum-quanto "
                        "qfloat8 (nn.Linear weights quantized, the rest in bf16)")
    m.add_argument("--dtype-of", action="append", default=[], metavar="COMPONENT=DTYPE",
                   help="another dtype for one component, e.g. text_encoder_2=nf4 (repeatable)")
    m.add_argument("--offload", choices=("none", "model", "sequential"), default="none",
                   help="none: pipe.to('cuda'); model: enable_model_cpu_offload(), one component at a time; "
                        "sequential: enable_sequential_cpu_offload(), one module at a time")
    m.add_argument("--gpu", help="GPU of the GPU table (`flopcalc gpus`): fits or not, with headroom")
    m.add_argument("--format", choices=("table", "json", "csv"), default="table")
    add_family_options(m)
    m.set_defaults(handler=_memory)


def _train(args: argparse.Namespace) -> int:
    from flopcalc.training import train
    from flopcalc.training_report import render_training

    est = train(args.model, height=args.height, width=args.width, num_frames=args.num_frames,
                batch_size=args.batch_size, max_sequence_length=args.max_sequence_length, trainable=args.trainable,
                lora_targets=args.lora_targets,
                frozen_encoders=args.frozen_encoders, gradient_checkpointing=args.gradient_checkpointing,
                step_time=args.step_time, gpu=args.gpu, num_gpus=args.num_gpus, precision=args.precision,
                revision=args.revision)
    sys.stdout.write(render_training(est, args.format))
    return 0


def _dtype_of(pairs: list[str]) -> dict[str, str]:
    from flopcalc.errors import FlopcalcError

    out = {}
    for pair in pairs:
        component, sep, dtype = pair.partition("=")
        if not sep or not component or not dtype:
            raise FlopcalcError(f"--dtype-of {pair!r}: expected COMPONENT=DTYPE, e.g. text_encoder_2=fp32")
        out[component] = dtype
    return out


def _memory(args: argparse.Namespace) -> int:
    from flopcalc.cli import family_option_values
    from flopcalc.memory_estimate import memory
    from flopcalc.memory_report import render_memory

    est = memory(args.model, height=args.height, width=args.width, num_frames=args.num_frames,
                 max_sequence_length=args.max_sequence_length, batch_size=args.batch_size, attention=args.attention,
                 dtype=args.dtype, dtype_of=_dtype_of(args.dtype_of), offload=args.offload, gpu=args.gpu,
                 vae_tiling=args.vae_tiling, revision=args.revision, **family_option_values(args))
    sys.stdout.write(render_memory(est, args.format))
    return 0
