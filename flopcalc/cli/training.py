"""The training command: ``train``."""

from __future__ import annotations

import argparse
import sys

from flopcalc.cli.common import (
    GENERATION_OPTIONS, add_family_options, add_format, add_model, add_run_options, positive_float, positive_int,
    run_settings,
)


def configure_train(p: argparse.ArgumentParser) -> None:
    p.description = ("MODEL as for `flopcalc estimate`. The denoiser is trained in full; frozen text encoders and "
                     "the VAE encoder run forward once per sample (online) or not at all (cached); with --trainable "
                     "lora:RANK only peft LoRA adapters are trained. Exact against FlopCounterMode counting forward + "
                     "backward on meta.")
    add_model(p)
    add_run_options(p, GENERATION_OPTIONS, num_frames="frames per training clip (video pipelines)",
                    batch_size="samples per GPU per optimizer step (the options a training sample has no use for, "
                               "--steps, --guidance-scale and the like, are refused)")
    p.add_argument("--trainable", default="denoiser", metavar="denoiser|lora:RANK",
                   help="what is trained: the denoiser, every parameter (default), or peft LoRA adapters of rank RANK "
                        "on the frozen denoiser (lora:16)")
    p.add_argument("--lora-targets", metavar="NAME,...",
                   help="with lora:RANK, the layers adapted, as peft's target_modules (a name or its dotted suffix, "
                        "e.g. attn.to_q,attn.to_v); default: the family's diffusers training script's")
    p.add_argument("--frozen-encoders", choices=("online", "cached"), default="online",
                   help="online: text encoders and VAE encoder run forward per sample; cached: precomputed")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="diffusers' enable_gradient_checkpointing(): the wrapped blocks run forward again in backward")
    p.add_argument("--step-time", type=positive_float, help="measured seconds per optimizer step (for MFU)")
    p.add_argument("--gpu", help="a GPU of `flopcalc gpus`, for MFU")
    p.add_argument("--num-gpus", type=positive_int, default=1, help="data-parallel GPUs per step")
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16", "fp8"), default="bf16",
                   help="the dense peak MFU is measured against (default bf16)")
    add_format(p, ("table", "json", "csv"))
    add_family_options(p)


def run_train(args: argparse.Namespace) -> int:
    from flopcalc.training.estimate import train
    from flopcalc.training.report import render_training

    est = train(args.model, trainable=args.trainable, lora_targets=args.lora_targets,
                frozen_encoders=args.frozen_encoders, gradient_checkpointing=args.gradient_checkpointing,
                step_time=args.step_time, gpu=args.gpu, num_gpus=args.num_gpus, precision=args.precision,
                revision=args.revision, **run_settings(args))
    sys.stdout.write(render_training(est, args.format))
    return 0
