"""Command line: ``flopcalc estimate MODEL``, ``flopcalc list``, ``flopcalc symbolic MODEL``,
``flopcalc formulas``, ``flopcalc kaplan MODEL``.

User errors print one line (``flopcalc: error: …``) and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from flopcalc import __version__
from flopcalc.errors import FlopcalcError

#: Budgets: a sweep grid's points (each a row of exact integers) and a plot's sides.
SWEEP_MAX_POINTS = 2_000_000
PLOT_MAX_SIDES = 10_000


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_branch_options(p: argparse.ArgumentParser) -> None:
    """Settings that pick the law's branch (the size and steps only set representative values)."""
    p.add_argument("--height", type=_positive_int)
    p.add_argument("--width", type=_positive_int)
    p.add_argument("--steps", type=_positive_int)
    p.add_argument("--guidance-scale", type=float)
    p.add_argument("--true-cfg-scale", type=float)
    p.add_argument("--negative-prompt", action="store_true")
    p.add_argument("--max-sequence-length", type=_positive_int)
    p.add_argument("--strength", type=float)
    p.add_argument("--num-frames", type=_positive_int)


#: Examples printed at the end of each command's --help (a test runs every one of them).
EXAMPLES = {
    "estimate": ["flopcalc estimate flux-dev", "flopcalc estimate sd3-medium --height 768 --width 1344 --per-block",
                 "flopcalc estimate sdxl-base --strength 0.3 --steps 28 --format json",
                 "flopcalc estimate wan2.1-t2v-1.3b --num-frames 33 --format csv"],
    "list": ["flopcalc list"],
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
    "kaplan": ["flopcalc kaplan sd3-medium"],
}


def _examples(command: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="flopcalc",
        description="Weight-free FLOP calculator for diffusion pipelines (exact against torch's FLOP counter).",
    )
    p.add_argument("--version", action="version", version=f"flopcalc {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("estimate", epilog=_examples("estimate"), formatter_class=argparse.RawDescriptionHelpFormatter, help="MACs/FLOPs of one generation, per component and per block",
                       description="MODEL: a bundled card (see `flopcalc list`), a local diffusers folder, "
                                   "a component config.json, or a Hub repo id (org/name; configs only).")
    e.add_argument("model")
    e.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    e.add_argument("--height", type=_positive_int)
    e.add_argument("--width", type=_positive_int)
    e.add_argument("--steps", "--num-inference-steps", dest="steps", type=_positive_int)
    e.add_argument("--guidance-scale", type=float)
    e.add_argument("--true-cfg-scale", type=float, help="FLUX true CFG; needs --negative-prompt to take effect")
    e.add_argument("--negative-prompt", action="store_true", help="a negative prompt is given")
    e.add_argument("--batch-size", type=_positive_int, default=1, help="number of prompts")
    e.add_argument("--num-images-per-prompt", type=_positive_int, default=1)
    e.add_argument("--max-sequence-length", type=_positive_int, help="T5 tokens (FLUX 512, SD3 256)")
    e.add_argument("--strength", type=float, help="image-to-image: encode the input image and run the last "
                                                  "steps of the schedule (SD, SDXL, Kolors, CogVideoX, Wan: int(steps × strength); FLUX, SD3: "
                                                  "steps − int(steps − steps × strength))")
    e.add_argument("--num-frames", type=_positive_int, help="video: frames to generate (default: the pipeline's)")
    e.add_argument("--reference-images", type=_positive_int,
                   help="Stable Cascade: images given to the prior (CLIP vision encoded, default none)")
    tiling = e.add_mutually_exclusive_group()
    tiling.add_argument("--vae-tiling", dest="vae_tiling", action="store_true", default=None,
                        help="video: decode in tiles and temporal chunks")
    tiling.add_argument("--no-vae-tiling", dest="vae_tiling", action="store_false",
                        help="video: decode the whole latent in one pass (default: as the pipeline does)")
    e.add_argument("--no-resolution-binning", dest="resolution_binning", action="store_false",
                   help="PixArt: estimate the size as given instead of snapping it to the pipeline's aspect-ratio bins")
    e.add_argument("--convention", choices=("torch", "thop"), default="torch")
    e.add_argument("--per-block", action="store_true", help="break each component down by block")
    e.add_argument("--depth", type=_positive_int, default=4, help="levels of the block tree shown (default 4)")
    e.add_argument("--format", choices=("table", "json", "csv"), default="table")
    e.add_argument("--measure", action="store_true",
                   help="count a component whose class has no formula by building it on the meta device and "
                        'running FlopCounterMode (needs pip install "flopcalc[measure]")')

    sub.add_parser("list", epilog=_examples("list"), formatter_class=argparse.RawDescriptionHelpFormatter, help="the bundled model cards")

    v = sub.add_parser("coverage", help="which diffusers pipeline and model classes flopcalc counts",
                       description="Every pipeline class diffusers exports: planned / components-only / missing; "
                                   "every model class: formula / measurable / missing (from a shipped class list).")
    v.add_argument("--diffusers-version", help="the diffusers release whose classes to list (default: the newest "
                                               "shipped)")
    v.add_argument("--format", choices=("table", "json", "markdown"), default="table")

    y = sub.add_parser("symbolic", epilog=_examples("symbolic"), formatter_class=argparse.RawDescriptionHelpFormatter, help="the exact FLOP law in H, W, steps, passes, batch, text length",
                       description="FLOPs of one generation as exact expressions in image height H and width W "
                                   "(pixels), steps S, denoiser passes P, batch B and text tokens L.")
    y.add_argument("model")
    y.add_argument("--revision")
    _add_branch_options(y)
    y.add_argument("--convention", choices=("torch", "thop"), default="torch")
    y.add_argument("--format", choices=("text", "latex", "json"), default="text")
    y.add_argument("--ratio", metavar="A:B", help="exact ratio of total FLOPs, e.g. 1024x1024:512x512, steps=50:28 or frames=81:49")
    y.add_argument("--crossover", action="store_true",
                   help="square side where attention overtakes the linear layers, per component")
    y.add_argument("--shares", metavar="SIDES", help="component shares at square sides, e.g. 256,512,1024,2048")

    f = sub.add_parser("formulas", epilog=_examples("formulas"), formatter_class=argparse.RawDescriptionHelpFormatter, help="the block formulas as closed forms (text or LaTeX)")
    f.add_argument("name", nargs="?", help="one block (default: all)")
    f.add_argument("--latex", action="store_true")
    f.add_argument("--convention", choices=("torch", "thop"), default="torch")

    w = sub.add_parser("sweep", epilog=_examples("sweep"), formatter_class=argparse.RawDescriptionHelpFormatter, help="FLOPs over a grid of settings (the law compiled once to numpy)",
                       description="Values are lists and inclusive ranges: 512,768 or 256:2048:64.")
    w.add_argument("model")
    w.add_argument("--revision")
    for flag, what in (("height", "image heights (pixels)"), ("width", "image widths (pixels)"),
                       ("steps", "denoising steps"), ("batch-size", "prompts"),
                       ("max-sequence-length", "text tokens"), ("num-frames", "video frames")):
        w.add_argument(f"--{flag}", dest=f"sweep_{flag.replace('-', '_')}", metavar="VALUES", help=what)
    w.add_argument("--guidance-scale", type=float)
    w.add_argument("--true-cfg-scale", type=float)
    w.add_argument("--negative-prompt", action="store_true")
    w.add_argument("--convention", choices=("torch", "thop"), default="torch")
    w.add_argument("--format", choices=("csv", "json", "table"), default="csv")
    w.add_argument("--max-points", type=_positive_int, default=SWEEP_MAX_POINTS, metavar="N",
                   help=f"refuse a grid of more points (default {SWEEP_MAX_POINTS:,})")

    c = sub.add_parser("compare", epilog=_examples("compare"), formatter_class=argparse.RawDescriptionHelpFormatter, help="several models side by side at one setting")
    c.add_argument("models", nargs="+")
    _add_branch_options(c)
    c.add_argument("--convention", choices=("torch", "thop"), default="torch")
    c.add_argument("--format", choices=("table", "json"), default="table")

    g = sub.add_parser("plot", epilog=_examples("plot"), formatter_class=argparse.RawDescriptionHelpFormatter, help="FLOPs against resolution per component, and their shares (needs flopcalc[plot])")
    g.add_argument("models", nargs="+")
    g.add_argument("--out", required=True, help="a .png or .svg file")
    g.add_argument("--sides", default="256:4096:64", help="square sides in pixels (default 256:4096:64)")
    g.add_argument("--max-points", type=_positive_int, default=PLOT_MAX_SIDES, metavar="N",
                   help=f"refuse more sides than this (default {PLOT_MAX_SIDES:,})")
    _add_branch_options(g)
    g.add_argument("--convention", choices=("torch", "thop"), default="torch")

    r = sub.add_parser("report", epilog=_examples("report"), formatter_class=argparse.RawDescriptionHelpFormatter, help="one self-contained HTML page: tables, the law, the plot")
    r.add_argument("models", nargs="+")
    r.add_argument("--html", required=True, help="the HTML file to write")
    _add_branch_options(r)
    r.add_argument("--convention", choices=("torch", "thop"), default="torch")

    from flopcalc.cli_energy import add_parsers as add_energy_parsers

    add_energy_parsers(sub)

    from flopcalc.cli_training import add_parsers as add_training_parsers

    add_training_parsers(sub)

    k = sub.add_parser("kaplan", epilog=_examples("kaplan"), formatter_class=argparse.RawDescriptionHelpFormatter, help="Kaplan's C≈2N+2·n_layer·n_ctx·d_attn beside the exact text-encoder count")
    k.add_argument("model")
    k.add_argument("--revision")
    return p


_COMMANDS = {}


def command(name: str):
    """Register ``fn(args) -> exit status`` as the command ``name`` (every command then runs
    under :func:`flopcalc.output.run_guarded`)."""

    def deco(fn):
        _COMMANDS[name] = fn
        return fn

    return deco


def main(argv: Sequence[str] | None = None) -> int:
    from flopcalc.output import guard_streams, run_guarded

    guard_streams()  # before argparse: --help and errors print on any terminal encoding
    args = _parser().parse_args(argv)
    handler = getattr(args, "handler", None) or _COMMANDS[args.command]  # energy commands bring their own
    return run_guarded(lambda: handler(args))


@command("estimate")
def _estimate(args: argparse.Namespace) -> int:
    from flopcalc.api import estimate
    from flopcalc.report import render

    report = estimate(
        args.model, height=args.height, width=args.width, steps=args.steps, guidance_scale=args.guidance_scale,
        true_cfg_scale=args.true_cfg_scale, negative_prompt=args.negative_prompt, batch_size=args.batch_size,
        num_images_per_prompt=args.num_images_per_prompt, max_sequence_length=args.max_sequence_length,
        strength=args.strength, resolution_binning=args.resolution_binning, num_frames=args.num_frames,
        vae_tiling=args.vae_tiling, reference_images=args.reference_images, convention=args.convention,
        revision=args.revision, measure=args.measure,
    )
    sys.stdout.write(render(report, args.format, per_block=args.per_block, depth=args.depth))
    return 0


@command("coverage")
def _coverage(args: argparse.Namespace) -> int:
    from flopcalc.coverage import coverage, render

    sys.stdout.write(render(coverage(args.diffusers_version), args.format))
    return 0


@command("list")
def _list(args: argparse.Namespace) -> int:
    from flopcalc.cards import list_cards

    cards = list_cards()
    rows = [("card", "title", "hub id", "aliases")]
    rows += [(c.name, c.title, c.hub_id, ", ".join(c.aliases)) for c in cards]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def _branch_settings(args: argparse.Namespace) -> dict:
    keys = ("height", "width", "steps", "guidance_scale", "true_cfg_scale", "negative_prompt", "max_sequence_length",
            "strength", "num_frames")
    return {k: getattr(args, k) for k in keys if getattr(args, k) not in (None, False)}


@command("symbolic")
def _symbolic(args: argparse.Namespace) -> int:
    import json

    from flopcalc import symbolic_report as sr
    from flopcalc.symbolic import symbolic_estimate

    sides = sr.parse_sides(args.shares) if args.shares else None  # options checked before any output
    if args.ratio:
        sr.parse_ratio(args.ratio)
    report = symbolic_estimate(args.model, convention=args.convention, revision=args.revision,
                               **_branch_settings(args))
    if args.ratio:
        a, b, q = sr.ratio(report, args.ratio)
    if sides and not {"H", "W"} <= set(report.symbols):
        raise FlopcalcError(f"--shares: the FLOPs of {report.model} do not depend on the image size")
    if args.format == "json":
        out = sr.report_dict(report)
    else:
        sys.stdout.write(sr.render_text(report, latex=args.format == "latex"))
    if args.ratio:
        if args.format == "json":
            out["ratio"] = {"a": a, "b": b, "exact": str(q), "value": float(q)}
        else:
            print(f"\nratio {args.ratio}: {q} = {float(q):.6g}")
    if args.crossover:
        rows = sr.crossover(report)
        if args.format == "json":
            out["crossover"] = [{"component": c.component, "side_pixels": c.side} for c in rows]
        else:
            print("\nattention overtakes the linear layers (square images, other symbols as represented):")
            for c in rows:
                where = f"at {c.side:,.0f}×{c.side:,.0f} pixels" if c.side else "never (for any size)"
                print(f"  {c.component}: {where}")
    if args.shares:
        rows = sr.shares(report, sides)
        if args.format == "json":
            out["shares"] = [{"side": side, "shares": sh} for side, sh in rows]
        else:
            names = list(rows[0][1])
            print("\nshare of total FLOPs by component (square images):")
            print("  " + "side".rjust(6) + "".join(n.rjust(18) for n in names))
            for side, sh in rows:
                print("  " + str(side).rjust(6) + "".join(f"{100 * sh[n]:17.1f}%" for n in names))
    if args.format == "json":
        print(json.dumps(out, indent=2))
    return 0


_SWEEP_SYMBOLS = {"height": "H", "width": "W", "steps": "S", "batch_size": "B", "max_sequence_length": "L",
                  "num_frames": "F"}


@command("sweep")
def _sweep(args: argparse.Namespace) -> int:
    import json

    from flopcalc.api import estimate
    from flopcalc.output import Progress
    from flopcalc.sweep import grid_size, parse_values, rows, run_sweep, sizes_to_verify, write_columns
    from flopcalc.symbolic import symbolic_estimate

    values = {sym: parse_values(getattr(args, f"sweep_{key}"), key.replace("_", "-"), max_count=args.max_points)
              for key, sym in _SWEEP_SYMBOLS.items() if getattr(args, f"sweep_{key}")}
    branch = {k: getattr(args, k) for k in ("guidance_scale", "true_cfg_scale", "negative_prompt")
              if getattr(args, k) not in (None, False)}
    first = {key: values[sym][0] for key, sym in _SWEEP_SYMBOLS.items() if sym in values}
    law = symbolic_estimate(args.model, convention=args.convention, revision=args.revision, **branch, **first)
    grid_size(law, values)  # symbols the law lacks are refused before the budget is counted

    def exact(**varied: int) -> int:
        return estimate(args.model, convention=args.convention, revision=args.revision, resolution_binning=False,
                        **branch, **{**first, **varied}).flops

    with Progress("checking the law against the exact estimate", sizes_to_verify(values)) as progress:
        result = run_sweep(law, values, verify=exact, max_points=args.max_points, progress=progress.advance)
    if args.format == "json":
        print(json.dumps({"model": law.model, "convention": law.convention,
                          "unit": "FLOPs (exact integers; FLOPs = 2 × MACs)", "rows": rows(result)}))
    else:
        with Progress("writing rows", len(result)) as progress:
            write_columns(result, sys.stdout, sep="," if args.format == "csv" else "  ", progress=progress.advance)
    return 0


@command("compare")
def _compare(args: argparse.Namespace) -> int:
    import json

    from flopcalc.api import estimate
    from flopcalc.output import each
    from flopcalc.report import compare_dict, compare_table

    reports = [estimate(m, convention=args.convention, **_branch_settings(args))
               for m in each(args.models, "estimating")]
    if args.format == "json":
        print(json.dumps(compare_dict(reports), indent=2))
    else:
        sys.stdout.write(compare_table(reports))
    return 0


@command("plot")
def _plot(args: argparse.Namespace) -> int:
    from flopcalc.output import check_writable, each, write_file
    from flopcalc.plots import SUFFIXES, figure_bytes, resolution_figure
    from flopcalc.sweep import parse_values
    from flopcalc.symbolic import symbolic_estimate

    check_writable(args.out, "--out", SUFFIXES)
    sides = parse_values(args.sides, "sides", max_count=args.max_points)
    laws = [symbolic_estimate(m, convention=args.convention, **_branch_settings(args))
            for m in each(args.models, "building the laws")]
    write_file(args.out, figure_bytes(resolution_figure(laws, sides), args.out), "--out", SUFFIXES)
    print(f"wrote {args.out}")
    return 0


@command("report")
def _html(args: argparse.Namespace) -> int:
    from flopcalc.html_report import build
    from flopcalc.output import check_writable, write_file

    check_writable(args.html, "--html")
    write_file(args.html, build(args.models, convention=args.convention, **_branch_settings(args)), "--html")
    print(f"wrote {args.html}")
    return 0


@command("formulas")
def _formulas(args: argparse.Namespace) -> int:
    from flopcalc.formulas.catalog import CATALOG, render

    if args.name is not None and args.name not in CATALOG:
        raise FlopcalcError(f"no block formula {args.name!r}; known: {', '.join(CATALOG)}")
    for name in [args.name] if args.name else list(CATALOG):
        print(render(name, args.convention, latex=args.latex))
    return 0


@command("kaplan")
def _kaplan(args: argparse.Namespace) -> int:
    from flopcalc.kaplan import kaplan_rows

    rows = [("component", "class", "n_ctx", "n_layer", "d_attn", "N (non-emb.)", "Kaplan GFLOPs", "exact GFLOPs",
             "Kaplan/exact")]
    for r in kaplan_rows(args.model, revision=args.revision):
        rows.append((r.component, r.class_name, str(r.n_ctx), str(r.n_layer), str(r.d_attn),
                     f"{r.non_embedding_params:,}", f"{r.kaplan_flops / 1e9:,.2f}", f"{r.exact_flops / 1e9:,.2f}",
                     f"{r.kaplan_flops / r.exact_flops:.4f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.rjust(w) if i > 1 else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    print("\nKaplan et al. 2020: C_fwd ≈ 2N + 2·n_layer·n_ctx·d_attn FLOPs per token; it counts one of the two "
          "attention matmuls (QKᵀ) and treats biases and norm gains as multiplied weights.")
    return 0
