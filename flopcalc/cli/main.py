"""The command line: ``flopcalc COMMAND …``.

:data:`COMMANDS` lists every command with its one-line help and where its parser and its work live. Only the
parser of the command asked for is built (``flopcalc estimate …`` builds ``estimate``'s alone); ``flopcalc
--help`` lists them all without building any. User errors print one line (``flopcalc: error: …``) and exit
with status 2, never a traceback (:func:`flopcalc.render.output.run_guarded`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib import import_module

from flopcalc.engine.version import __version__


class Command:
    """A command's one-line help and the module of :mod:`flopcalc.cli` that holds its ``configure_<name>`` (the
    parser) and ``run_<name>`` (the work), imported only when that command is asked for."""

    __slots__ = ("help", "module")

    def __init__(self, help: str, module: str) -> None:
        self.help, self.module = help, module

    def part(self, name: str, what: str) -> Callable:
        return getattr(import_module(f"flopcalc.cli.{self.module}"), f"{what}_{name.replace('-', '_')}")


COMMANDS: dict[str, Command] = {
    "estimate": Command("MACs/FLOPs of one generation, per component and per block", "flops"),
    "list": Command("the bundled model cards", "flops"),
    "coverage": Command("which diffusers pipeline and model classes flopcalc counts", "flops"),
    "symbolic": Command("the exact FLOP law in H, W, steps, passes, batch, text length, frames", "flops"),
    "formulas": Command("the block formulas as closed forms (text or LaTeX)", "flops"),
    "sweep": Command("FLOPs over a grid of settings (the law compiled once to numpy)", "flops"),
    "compare": Command("several models side by side at one setting", "flops"),
    "plot": Command("FLOPs against resolution per component, and their shares (needs matplotlib)", "flops"),
    "report": Command("one self-contained HTML page: tables, the law, the plot, memory, training, energy", "flops"),
    "gpus": Command("the GPU table: dense tensor peaks, memory, bandwidth, TDP, sources", "energy"),
    "energy": Command("energy (J, Wh), latency and CO2e per image/video on a named GPU, with 90% intervals", "energy"),
    "energy-fit": Command("fit the energy/latency laws on your own measurements", "energy"),
    "energy-plot": Command("measured vs predicted energy and latency of every validation record (needs matplotlib)",
                           "energy"),
    "parallel": Command("multi-GPU inference layouts (xDiT): memory per GPU, communication per step, latency",
                        "energy"),
    "train": Command("FLOPs and memory of a training step (forward + backward), MFU, setups that fit a GPU",
                     "training"),
    "memory": Command("weights per component in bytes, resident under offload, fit on a GPU", "memory"),
    "kaplan": Command("Kaplan's C≈2N+2·n_layer·n_ctx·d_attn beside the exact text-encoder count", "flops"),
    "site": Command("a static offline web page with every model: FLOPs, law, energy, memory, computed in the browser",
                    "site"),
}

#: Examples printed at the end of each command's --help (a test runs every one of them).
EXAMPLES = {
    "estimate": ["flopcalc estimate flux-dev", "flopcalc estimate sd3-medium --height 768 --width 1344 --per-block",
                 "flopcalc estimate sdxl-base --strength 0.3 --steps 28 --format json",
                 "flopcalc estimate wan2.1-t2v-1.3b --num-frames 33 --format csv"],
    "list": ["flopcalc list"],
    "coverage": ["flopcalc coverage", "flopcalc coverage --format markdown"],
    "symbolic": ["flopcalc symbolic sd3-medium", "flopcalc symbolic flux-dev --format latex",
                 "flopcalc symbolic sd3-medium --ratio 1024x1024:512x512", "flopcalc symbolic sd3-medium --ratio steps=50:28",
                 "flopcalc symbolic wan2.1-t2v-1.3b --ratio frames=81:49", "flopcalc symbolic sd1.5 --crossover",
                 "flopcalc symbolic sd3-medium --shares 256,512,1024,2048"],
    "formulas": ["flopcalc formulas", "flopcalc formulas resnet_block --latex"],
    "sweep": ["flopcalc sweep sd1.5 --height 512,768 --width 512:1024:256 --steps 20,50",
              "flopcalc sweep flux-dev --height 256:2048:64 --width 1024 --format json"],
    "compare": ["flopcalc compare flux-dev sd3-medium sdxl-base --height 1024 --width 1024"],
    "plot": ["flopcalc plot flux-dev sd3-medium --out flops.png", "flopcalc plot sd1.5 --sides 256:2048:128 --out sd.svg"],
    "report": ["flopcalc report flux-dev sd1.5 --html report.html"],
    "gpus": ["flopcalc gpus"],
    "energy": ["flopcalc energy flux-dev --gpu h100 --steps 28", "flopcalc energy sdxl-base --gpu a100 --format json"],
    "parallel": ["flopcalc parallel flux-dev --gpu h100 --num-gpus 2,4,8",
                 "flopcalc parallel wan2.1-t2v-1.3b --gpu l40s --num-gpus 2 --vae-tiling --format json"],
    "energy-plot": ["flopcalc energy-plot --out energy.png"],
    "train": ["flopcalc train flux-dev --gradient-checkpointing --step-time 2.1 --gpu h100-sxm --num-gpus 8",
              "flopcalc train flux-dev --trainable lora:16 --height 512 --width 512",
              "flopcalc train flux-dev --trainable lora:16 --gradient-checkpointing --optimizer adamw8bit "
              "--gpu rtx-4090",
              "flopcalc train flux-dev --gpu h100-sxm --num-gpus 8 --sharding fsdp --gradient-checkpointing",
              "flopcalc train wan2.1-t2v-1.3b --gpu rtx-4090 --fit"],
    "memory": ["flopcalc memory flux-dev --gpu rtx-4090 --offload model",
               "flopcalc memory wan2.1-t2v-1.3b --dtype-of text_encoder=nf4 --format json"],
    "kaplan": ["flopcalc kaplan sd3-medium"],
    "site": ["flopcalc site --out site --models flux-dev sd1.5 wan2.1-t2v-1.3b"],
}


def _examples(command: str) -> str | None:
    lines = EXAMPLES.get(command)
    return "examples:\n" + "\n".join(f"  {line}" for line in lines) if lines else None


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line: the error and where the usage is (not the usage itself, which
    is as long as the options). ``defer_family_options``: the pipeline families' options are left out (see
    :func:`flopcalc.cli.common.add_family_options`)."""

    def __init__(self, *args, defer_family_options: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.defer_family_options = defer_family_options

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _parser(only: str | None = None, *, family_options: bool = True) -> argparse.ArgumentParser:
    """The parser: every command listed, each with its own options (``only``: that command alone, the one asked
    for, so that nothing else is built; ``family_options=False``: without the pipeline families' options, and
    without abbreviated options, so that anything it does not know is left over)."""
    p = _Parser(
        prog="flopcalc",
        description="Weight-free FLOP calculator for diffusion pipelines (exact against torch's FLOP counter): "
                    "FLOPs and laws, energy and latency, GPU memory and training compute, from config files alone.",
    )
    p.add_argument("--version", action="version", version=f"flopcalc {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of:", parser_class=_Parser)
    for name, command in COMMANDS.items():
        if only is None or name == only:
            q = sub.add_parser(name, help=command.help.replace("%", "%%"), epilog=_examples(name),
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               defer_family_options=not family_options, allow_abbrev=family_options)
            command.part(name, "configure")(q)
    return p


def _command_of(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (its first word that is no option), if it is one of :data:`COMMANDS`."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed. The family options (dozens, read from the discovery index) are added only when the command
    line may use them: a first parse without them that leaves nothing over is the answer; anything left over, or
    a request for help, is parsed again by the whole parser, which accepts the option or says why not."""
    name = _command_of(argv)
    if name is not None and not any(word in ("-h", "--help") for word in argv):
        args, rest = _parser(name, family_options=False).parse_known_args(argv)
        if not rest:
            return args
    return _parser(name).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    import sys

    from flopcalc.render.output import guard_streams, run_guarded

    guard_streams()  # before argparse: --help and errors print on any terminal encoding
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse(argv)
    run = COMMANDS[args.command].part(args.command, "run")
    return run_guarded(lambda: run(args))
