"""The memory command: ``memory``."""

from __future__ import annotations

import argparse
import sys

from flopcalc.cli.common import (
    GENERATION_OPTIONS, add_family_options, add_format, add_model, add_run_options, run_settings,
)


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
    p.add_argument("--offload", choices=("none", "model", "sequential"), default="none",
                   help="none: pipe.to('cuda'); model: enable_model_cpu_offload(), one component at a time; "
                        "sequential: enable_sequential_cpu_offload(), one module at a time")
    p.add_argument("--gpu", help="a GPU of `flopcalc gpus`: whether it fits, with the headroom")
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
    from flopcalc.gpu_memory.estimate import memory
    from flopcalc.gpu_memory.report import render_memory

    est = memory(args.model, attention=args.attention, dtype=args.dtype, dtype_of=_dtype_of(args.dtype_of),
                 offload=args.offload, gpu=args.gpu, revision=args.revision,
                 transformers_version=args.transformers_version, lora_rank=args.lora_rank,
                 lora_targets=args.lora_targets, **run_settings(args))
    sys.stdout.write(render_memory(est, args.format))
    return 0
