"""The static site command: ``site``."""

from __future__ import annotations

import argparse
import sys

from flopcalc.cli.common import positive_int


def configure_site(p: argparse.ArgumentParser) -> None:
    p.description = ("Write a static web page (HTML, CSS, JavaScript and data; no server, no network, works from "
                     "file://) with every bundled model: its exact FLOPs and law, energy, latency and CO2e on any GPU of "
                     "`flopcalc gpus`, GPU memory under each offload mode and a training sample's FLOPs, all "
                     "computed in the browser from the same laws as the command line (docs/site.md says how to "
                     "publish it).")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="the folder to write index.html and its files into (created if missing)")
    p.add_argument("--models", nargs="+", metavar="CARD", dest="cards",  # bundled cards only, not the four inputs
                   help="only these bundled cards (default: every card of `flopcalc list`)")
    p.add_argument("--jobs", type=positive_int, metavar="N",
                   help="processes exporting the cards (default: the CPUs); each card's export is cached")


def run_site(args: argparse.Namespace) -> int:
    from flopcalc.engine.cards import list_cards
    from flopcalc.render.output import Progress
    from flopcalc.site.writer import write_site

    with Progress("exporting models", len(args.cards or list_cards())) as progress:
        site = write_site(args.out, models=args.cards, jobs=args.jobs, progress=lambda _name: progress.advance())
    sys.stdout.write(site.summary() + "\n")
    return 0
