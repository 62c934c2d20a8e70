"""The memory command: ``memory``."""

from __future__ import annotations

import argparse
import sys

from flopcalc.cli.common import (
    GENERATION_OPTIONS, add_family_options, add_format, add_model, add_run_options, run_settings,
)

#: ``flopcalc.gpu_memory.estimate.OFFLOAD`` (kept here so that building the parser imports nothing).
OFFLOAD = ("none", "model", "group-block", "group-leaf", "sequential")


def add_offload_options(p: argparse.ArgumentParser) -> None:
    """How the pipeline is offloaded (``memory`` and ``energy``)."""
    p.add_argument("--offload", choices=OFFLOAD, default="none",
                   help="none: pipe.to('cuda'); model: enable_model_cpu_offload(), one component at a time; "
                        "group-block / group-leaf: enable_group_offload(offload_type='block_level' / 'leaf_level'); "
                        "sequential: enable_sequential_cpu_offload(), one module at a time")
    p.add_argument("--blocks-per-group", type=int, default=1, metavar="N",
                   help="--offload group-block: num_blocks_per_group (default 1)")
    p.add_argument("--stream", action="store_true",
                   help="group offloading with use_stream=True: the next group is prefetched (two on the GPU)")
    p.add_argument("--block-swap", type=int, default=0, metavar="N",
                   help="without offload: the denoiser's last N blocks kept on the host and copied in for each "
                        "forward, as trainers' blocks_to_swap")


def offload_settings(args: argparse.Namespace) -> dict:
    return {"offload": args.offload, "blocks_per_group": args.blocks_per_group, "stream": args.stream,
            "block_swap": args.block_swap}


def configure_memory(p: argparse.ArgumentParser) -> None:
    p.description = ("MODEL as for `flopcalc estimate`. Weights as from_pretrained(torch_dtype=...) loads them "
                     "(parameters, float32-kept modules, buffers), exact; activation peaks of the measured denoisers "
                     "and VAE decoders, estimated.")
    add_model(p)
    add_run_options(p, GENERATION_OPTIONS)
    p.add_argument("--attention", choices=("fused", "math"), default="fused",
                   help="fused: SDPA/flash kernels, no score matrix (default); math: the scores materialised")
    p.add_argument("--dtype", default="bf16",
                   help="dtype the weights load in: bf16, fp16, fp32, or a quantization of the nn.Linear weights (the "
                        "rest in bf16): bnb-int8 (int8), bnb-nf4 (nf4), bnb-fp4, bnb-nf4-dq, bnb-fp4-dq; quanto-int8, "
                        "quanto-int4, quanto-int2, quanto-float8 (fp8); torchao-int8wo, torchao-int8dq, "
                        "torchao-int4wo[-32|-64|-128|-256], torchao-float8wo, torchao-float8dq; gguf-q8_0, gguf-q6_k, "
                        "gguf-q5_k_m, gguf-q5_k_s, gguf-q5_1, gguf-q5_0, gguf-q4_k_m, gguf-q4_k_s, gguf-q4_1, "
                        "gguf-q4_0, gguf-q3_k_l, gguf-q3_k_m, gguf-q3_k_s, gguf-q2_k, gguf-f16, gguf-bf16 (see "
                        "docs/memory.md)")
    p.add_argument("--dtype-of", action="append", default=[], metavar="COMPONENT=DTYPE",
                   help="another dtype for one component, e.g. text_encoder_2=nf4 (repeatable)")
    add_offload_options(p)
    p.add_argument("--gpu", help="a GPU of `flopcalc gpus`: whether it fits, with the headroom (judged by "
                                 "peak_bytes: the caching allocator's reserved peak and the CUDA context)")
    p.add_argument("--fit", action="store_true",
                   help="with --gpu: the offload modes, block swaps, VAE tiling and quantizations under which it fits, "
                        "the cheapest slowdown first")
    p.add_argument("--lora-rank", type=int, metavar="R",
                   help="LoRA adapters of rank R on the denoiser, as peft adds them (load_lora_weights, unfused)")
    p.add_argument("--lora-targets", metavar="NAMES",
                   help="comma-separated module names the LoRA adapts (default: diffusers' LoRA training script's "
                        "targets for the denoiser)")
    p.add_argument("--transformers-version", metavar="X.Y[.Z]",
                   help="the transformers release that loads the text encoders: decides whether T5's `wo` stays in "
                        "float32 (default: the release the [validate] extra pins)")
    add_format(p, ("table", "json", "csv"))
    add_family_options(p)


def _dtype_of(pairs: list[str]) -> dict[str, str]:
    from flopcalc.engine.errors import FlopcalcError

    out = {}
    for pair in pairs:
        component, sep, dtype = pair.partition("=")
        if not sep or not component or not dtype:
            raise FlopcalcError(f"--dtype-of {pair!r}: expected COMPONENT=DTYPE, e.g. text_encoder_2=fp32")
        out[component] = dtype
    return out


def run_memory(args: argparse.Namespace) -> int:
    from flopcalc.engine.errors import FlopcalcError

    if args.fit:
        from flopcalc.gpu_memory.fit import fit, render_fit

        if args.gpu is None:
            raise FlopcalcError("--fit needs --gpu: the GPU to fit")
        if args.format == "csv":
            raise FlopcalcError("--fit writes a table or JSON (--format table|json)")
        given = [f for f, on in (("--offload", args.offload != "none"), ("--dtype", args.dtype != "bf16"),
                                 ("--dtype-of", bool(args.dtype_of)), ("--stream", args.stream),
                                 ("--blocks-per-group", args.blocks_per_group != 1),
                                 ("--block-swap", args.block_swap != 0)) if on]
        if given:
            raise FlopcalcError(f"--fit chooses {', '.join(given)} itself: leave {'it' if len(given) == 1 else 'them'} "
                                "out")
        result = fit(args.model, gpu=args.gpu, attention=args.attention, revision=args.revision,
                     **run_settings(args))
        sys.stdout.write(render_fit(result, args.format))
        return 0
    from flopcalc.gpu_memory.estimate import memory
    from flopcalc.gpu_memory.report import render_memory

    est = memory(args.model, attention=args.attention, dtype=args.dtype, dtype_of=_dtype_of(args.dtype_of),
                 gpu=args.gpu, revision=args.revision, transformers_version=args.transformers_version,
                 lora_rank=args.lora_rank, lora_targets=args.lora_targets, **offload_settings(args),
                 **run_settings(args))
    sys.stdout.write(render_memory(est, args.format))
    return 0
