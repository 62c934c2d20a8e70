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
                     "lora:RANK only peft LoRA adapters are trained. FLOPs exact against FlopCounterMode counting "
                     "forward + backward on meta; memory per GPU (weights, gradients, optimizer states exact; "
                     "activations measured on the real modules) and, with --gpu, whether it fits.")
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
    p.add_argument("--step-time", type=positive_float, help="measured seconds per optimizer step (for MFU, with --gpu)")
    p.add_argument("--gpu", help="a GPU of `flopcalc gpus`: whether the step fits its memory, and MFU with --step-time")
    p.add_argument("--num-gpus", type=positive_int, default=1,
                   help="GPUs per step (data parallel, or sharded with --sharding, × --sequence-parallel)")
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16", "fp8"), default="bf16",
                   help="the dense peak MFU is measured against (default bf16)")
    m = p.add_argument_group("memory per GPU")
    m.add_argument("--optimizer", choices=("adamw", "adamw8bit", "adafactor", "prodigy", "sgd"), default="adamw",
                   help="torch AdamW (default), bitsandbytes AdamW8bit, transformers Adafactor, Prodigy, SGD with "
                        "momentum: their states as each library allocates them")
    m.add_argument("--master-weights", choices=("fp32", "bf16"), default="fp32",
                   help="fp32: trained weights, gradients and states in fp32 under bf16 autocast (accelerate's "
                        "mixed_precision, default); bf16: pure bf16 training")
    m.add_argument("--attention", choices=("fused", "math"), default="fused",
                   help="SDPA through a fused kernel (default) or its math path (the score matrices are saved)")
    m.add_argument("--sharding", choices=("ddp", "fsdp", "fsdp-grad-op", "fsdp-hybrid", "zero1", "zero2", "zero3"),
                   help="how --num-gpus share the states: DDP (default with several GPUs), FSDP2 full shard, "
                        "shard-grad-op, hybrid, DeepSpeed ZeRO-1/2/3")
    m.add_argument("--offload-optimizer", action="store_true",
                   help="optimizer states and fp32 master weights in host memory (ZeRO-Offload, FSDP CPU offload)")
    m.add_argument("--sequence-parallel", metavar="ulysses=U,ring=R",
                   help="split each sample's tokens over U×R GPUs (video DiTs; Ulysses divides the heads, ring the "
                        "tokens)")
    m.add_argument("--ema", action="store_true", help="an EMA copy of the trained weights on the GPU")
    m.add_argument("--base-dtype", choices=("bf16", "fp16", "nf4", "int8", "fp8"), default="bf16",
                   help="with lora:RANK, the frozen base's storage (nf4, int8: QLoRA with bitsandbytes; fp8: quanto)")
    m.add_argument("--blocks-to-swap", type=int, default=0, metavar="K",
                   help="with lora:RANK, K frozen blocks held in host memory and moved in when they run")
    m.add_argument("--fit", action="store_true",
                   help="with --gpu: the setups that fit it, cheapest first, and the fewest GPUs for full fine-tuning")
    m.add_argument("--train-samples", type=positive_int, metavar="N",
                   help="with --step-time: the time, GPU-hours, energy and CO2e of training N samples")
    m.add_argument("--inter-node-bandwidth", type=positive_float, metavar="GB/S",
                   help="GB/s per GPU and direction between nodes (default 50: one 400 Gb/s InfiniBand NDR adapter "
                        "per GPU, as in NVIDIA DGX H100)")
    m.add_argument("--gpus-per-node", type=positive_int, metavar="N", help="GPUs per node (default 8)")
    add_format(p, ("table", "json", "csv"))
    add_family_options(p)


def run_train(args: argparse.Namespace) -> int:
    from flopcalc.training.estimate import train
    from flopcalc.training.report import render_training

    est = train(args.model, trainable=args.trainable, lora_targets=args.lora_targets,
                frozen_encoders=args.frozen_encoders, gradient_checkpointing=args.gradient_checkpointing,
                step_time=args.step_time, gpu=args.gpu, num_gpus=args.num_gpus, precision=args.precision,
                optimizer=args.optimizer, master_weights=args.master_weights, attention=args.attention,
                sharding=args.sharding, offload_optimizer=args.offload_optimizer,
                sequence_parallel=args.sequence_parallel, ema=args.ema, base_dtype=args.base_dtype,
                blocks_to_swap=args.blocks_to_swap, fit=args.fit, train_samples=args.train_samples,
                inter_node_bandwidth=args.inter_node_bandwidth, gpus_per_node=args.gpus_per_node,
                revision=args.revision, **run_settings(args))
    sys.stdout.write(render_training(est, args.format))
    return 0
