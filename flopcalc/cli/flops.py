"""The FLOPs commands: ``estimate``, ``list``, ``coverage``, ``symbolic``, ``formulas``, ``sweep``, ``compare``,
``plot``, ``report``, ``kaplan``. Each has a ``configure_*`` (its parser) and a ``run_*`` (its work, imported on
use)."""

from __future__ import annotations

import argparse
import sys

from flopcalc.cli.common import (
    BRANCH_OPTIONS, GENERATION_OPTIONS, add_convention, add_family_options, add_format, add_model, add_run_options,
    positive_int, run_settings,
)

#: Budgets: a sweep grid's points (each a row of exact integers) and a plot's sides.
SWEEP_MAX_POINTS = 2_000_000
PLOT_MAX_SIDES = 10_000


def configure_estimate(p: argparse.ArgumentParser) -> None:
    add_model(p)
    add_run_options(p, GENERATION_OPTIONS)
    add_family_options(p)
    add_convention(p)
    p.add_argument("--per-block", action="store_true",
                   help="break each component down by module (identical consecutive blocks grouped), with a summary "
                        "by block kind")
    p.add_argument("--depth", type=positive_int, default=4, help="levels of the block tree shown (default 4)")
    add_format(p, ("table", "json", "csv"))
    from flopcalc.engine.errors import install_hint

    p.add_argument("--measure", action="store_true",
                   help="count a component whose class has no formula by building the real class from its config on "
                        "the meta device and running FlopCounterMode (any pipeline flopcalc plans; needs "
                        f"{install_hint('measure')})")


def run_estimate(args: argparse.Namespace) -> int:
    from flopcalc.flops.estimate import estimate
    from flopcalc.flops.report import render

    report = estimate(args.model, convention=args.convention, revision=args.revision, measure=args.measure,
                      **run_settings(args))
    sys.stdout.write(render(report, args.format, per_block=args.per_block, depth=args.depth))
    return 0


def configure_list(p: argparse.ArgumentParser) -> None:
    pass


def run_list(args: argparse.Namespace) -> int:
    from flopcalc.engine.cards import list_cards

    rows = [("card", "title", "hub id", "aliases")]
    # a card assembled from several repos has no hub id (None)
    rows += [(c.name, c.title, c.hub_id or "—", ", ".join(c.aliases)) for c in list_cards()]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def configure_coverage(p: argparse.ArgumentParser) -> None:
    p.description = ("Every pipeline class diffusers exports: planned / components-only / missing; every model class: "
                     "formula / measurable / missing (from a class list shipped in the package).")
    p.add_argument("--diffusers-version", help="the diffusers release whose classes to list (default: the newest "
                                               "shipped)")
    add_format(p, ("table", "json", "markdown"))


def run_coverage(args: argparse.Namespace) -> int:
    from flopcalc.flops.coverage import coverage, render

    sys.stdout.write(render(coverage(args.diffusers_version), args.format))
    return 0


def configure_symbolic(p: argparse.ArgumentParser) -> None:
    p.description = ("FLOPs of one generation as exact expressions in image height H and width W (pixels), steps S, "
                     "denoiser passes P, batch B, text tokens L and frames F; the settings given choose the branch "
                     "the law holds on and the representative values.")
    add_model(p)
    add_run_options(p, BRANCH_OPTIONS + ("resolution_binning",))
    add_convention(p)
    add_format(p, ("text", "latex", "json"))
    p.add_argument("--ratio", metavar="A:B",
                   help="the exact ratio of total FLOPs between two settings, e.g. 1024x1024:512x512, steps=50:28 or "
                        "frames=81:49")
    p.add_argument("--crossover", action="store_true",
                   help="the square side where attention overtakes the linear layers, per component")
    p.add_argument("--shares", metavar="SIDES", help="component shares at square sides, e.g. 256,512,1024,2048")


def run_symbolic(args: argparse.Namespace) -> int:
    import json

    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.flops import symbolic_report as sr
    from flopcalc.flops.symbolic import symbolic_estimate

    sides = sr.parse_sides(args.shares) if args.shares else None  # options checked before any output
    if args.ratio:
        sr.parse_ratio(args.ratio)
    report = symbolic_estimate(args.model, convention=args.convention, revision=args.revision, **run_settings(args))
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


def configure_formulas(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="one block formula, e.g. resnet_block (default: every one)")
    p.add_argument("--latex", action="store_true", help="print the closed forms as LaTeX instead of text")
    add_convention(p)


def run_formulas(args: argparse.Namespace) -> int:
    from flopcalc.engine.errors import FlopcalcError, close_to
    from flopcalc.formulas.catalog import CATALOG, render

    if args.name is not None and args.name not in CATALOG:
        raise FlopcalcError(f"no block formula {args.name!r}{close_to(args.name, CATALOG)}; `flopcalc formulas` "
                            f"lists all {len(CATALOG)}")
    for name in [args.name] if args.name else list(CATALOG):
        print(render(name, args.convention, latex=args.latex))
    return 0


#: The settings a sweep varies: flag → (the symbol of the law, what its values are).
_SWEEP_SYMBOLS = {"height": ("H", "image heights in pixels"), "width": ("W", "image widths in pixels"),
                  "steps": ("S", "denoising steps"), "batch_size": ("B", "prompts in one call"),
                  "max_sequence_length": ("L", "text tokens of the long text encoder"),
                  "num_frames": ("F", "video frames (video pipelines)")}


def configure_sweep(p: argparse.ArgumentParser) -> None:
    p.description = "Values are lists and inclusive ranges: 512,768 or 256:2048:64."
    add_model(p)
    for key, (_symbol, what) in _SWEEP_SYMBOLS.items():
        p.add_argument(f"--{key.replace('_', '-')}", dest=f"sweep_{key}", metavar="VALUES",
                       help=f"{what}: a list or an inclusive range START:STOP:STEP")
    add_run_options(p, ("guidance_scale", "true_cfg_scale", "negative_prompt", "resolution_binning"))
    add_convention(p)
    add_format(p, ("csv", "json", "table"))
    p.add_argument("--max-points", type=positive_int, default=SWEEP_MAX_POINTS, metavar="N",
                   help=f"refuse a grid of more points (default {SWEEP_MAX_POINTS:,})")


def run_sweep(args: argparse.Namespace) -> int:
    import json

    from flopcalc.flops.estimate import estimate
    from flopcalc.flops.sweep import grid_size, parse_values, rows, run_sweep, sizes_to_verify, write_columns
    from flopcalc.flops.symbolic import refuse_binned_sizes, symbolic_estimate
    from flopcalc.render.output import Progress

    values = {sym: parse_values(getattr(args, f"sweep_{key}"), key.replace("_", "-"), max_count=args.max_points)
              for key, (sym, _what) in _SWEEP_SYMBOLS.items() if getattr(args, f"sweep_{key}")}
    branch = run_settings(args)
    first = {key: values[sym][0] for key, (sym, _what) in _SWEEP_SYMBOLS.items() if sym in values}
    law = symbolic_estimate(args.model, convention=args.convention, revision=args.revision, **branch, **first)
    grid_size(law, values)  # symbols the law lacks are refused before the budget is counted
    if "H" in values or "W" in values:  # every size swept, resolved as estimate resolves it
        sizes = [(h, w) for h in values.get("H", [first.get("height")]) for w in values.get("W", [first.get("width")])]
        refuse_binned_sizes(args.model, sizes, revision=args.revision, **branch)

    def exact(**varied: int) -> int:
        return estimate(args.model, convention=args.convention, revision=args.revision,
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


def configure_compare(p: argparse.ArgumentParser) -> None:
    add_model(p, many=True)
    add_run_options(p, BRANCH_OPTIONS + ("resolution_binning",))
    add_convention(p)
    add_format(p, ("table", "json"))


def run_compare(args: argparse.Namespace) -> int:
    import json

    from flopcalc.flops.estimate import estimate
    from flopcalc.flops.report import compare_dict, compare_table
    from flopcalc.render.output import each

    reports = [estimate(m, convention=args.convention, revision=args.revision, **run_settings(args))
               for m in each(args.models, "estimating")]
    if args.format == "json":
        print(json.dumps(compare_dict(reports), indent=2))
    else:
        sys.stdout.write(compare_table(reports))
    return 0


def configure_plot(p: argparse.ArgumentParser) -> None:
    add_model(p, many=True)
    p.add_argument("--out", required=True, help="the figure to write: a .png or .svg file")
    p.add_argument("--sides", default="256:4096:64",
                   help="square image sides in pixels, a list or an inclusive range (default 256:4096:64)")
    p.add_argument("--max-points", type=positive_int, default=PLOT_MAX_SIDES, metavar="N",
                   help=f"refuse more sides than this (default {PLOT_MAX_SIDES:,})")
    add_run_options(p, BRANCH_OPTIONS + ("resolution_binning",))
    add_convention(p)


def run_plot(args: argparse.Namespace) -> int:
    from flopcalc.flops.plots import resolution_figure
    from flopcalc.flops.sweep import parse_values
    from flopcalc.flops.symbolic import refuse_binned_sizes, symbolic_estimate
    from flopcalc.render.figures import SUFFIXES, figure_bytes
    from flopcalc.render.output import check_writable, each, write_file

    check_writable(args.out, "--out", SUFFIXES)
    sides = parse_values(args.sides, "sides", max_count=args.max_points)
    laws = [symbolic_estimate(m, convention=args.convention, revision=args.revision, **run_settings(args))
            for m in each(args.models, "building the laws")]
    for law, m in zip(laws, args.models):  # every side, resolved as estimate resolves it
        if "H" in law.symbols or "W" in law.symbols:
            refuse_binned_sizes(m, [(x, x) for x in sides], revision=args.revision, **run_settings(args))
    write_file(args.out, figure_bytes(resolution_figure(laws, sides), args.out), "--out", SUFFIXES)
    print(f"wrote {args.out}")
    return 0


def configure_report(p: argparse.ArgumentParser) -> None:
    add_model(p, many=True)
    p.add_argument("--html", required=True, help="the HTML file to write")
    add_run_options(p, BRANCH_OPTIONS + ("resolution_binning",))
    add_convention(p)


def run_report(args: argparse.Namespace) -> int:
    from flopcalc.html.page import build
    from flopcalc.render.output import check_writable, write_file

    check_writable(args.html, "--html")
    write_file(args.html, build(args.models, convention=args.convention, revision=args.revision,
                                **run_settings(args)), "--html")
    print(f"wrote {args.html}")
    return 0


def configure_kaplan(p: argparse.ArgumentParser) -> None:
    add_model(p)


def run_kaplan(args: argparse.Namespace) -> int:
    from flopcalc.flops.kaplan import kaplan_rows

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
