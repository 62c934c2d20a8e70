#!/usr/bin/env python
"""Write the training fixtures listed in ``validation/training_manifest.yaml``.

Usage (from anywhere)::

    python validation/build_training_fixtures.py                 # every case
    python validation/build_training_fixtures.py --only flux-dev # one case (repeatable)
    python validation/build_training_fixtures.py --check         # re-measure, compare, write nothing

Fixtures go to ``validation/fixtures/training/<case>/<component>-<mode>-<H>x<W>.json`` (LoRA modes:
``<component>-<mode>-<targets name>-r<rank>-<H>x<W>.json``), rendered and
written exactly as ``build_fixtures.py`` writes the inference fixtures (keys sorted, no timestamps).
Never edit them by hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from build_fixtures import render, settle  # noqa: E402
from measure_training import MODES, measure_training  # noqa: E402

MANIFEST = HERE / "training_manifest.yaml"
FIXTURES = HERE / "fixtures" / "training"


@dataclass(frozen=True)
class TrainingJob:
    case: str
    component: str
    config_dir: Path
    class_name: str
    mode: str
    settings: dict[str, int] = field(hash=False)
    lora: dict | None = field(default=None, hash=False)  # {name, rank, targets} for the lora modes

    @property
    def path(self) -> Path:
        s = self.settings
        adapters = "" if self.lora is None else f"-{self.lora['name']}-r{self.lora['rank']}"
        return Path(self.case) / f"{self.component}-{self.mode}{adapters}-{s['height']}x{s['width']}.json"


def load_jobs(manifest: Path = MANIFEST, only: Sequence[str] | None = None) -> list[TrainingJob]:
    with open(manifest, encoding="utf-8") as fh:
        cases = yaml.safe_load(fh)["cases"]
    missing = [c for c in only or () if c not in cases]
    if missing:
        raise SystemExit(f"unknown case(s) {missing}; manifest has {sorted(cases)}")
    jobs = []
    for case, spec in cases.items():
        if only and case not in only:
            continue
        for entry in spec["components"]:
            for mode in entry["modes"]:
                if mode not in MODES:
                    raise SystemExit(f"{case}: unknown mode {mode!r}; choose from {MODES}")
                if mode.startswith("lora") != ("lora" in entry):
                    raise SystemExit(f"{case}: the lora modes and a lora spec (name, ranks, targets) go together")
                adapters = [None] if "lora" not in entry else [
                    {"name": entry["lora"]["name"], "rank": int(rank), "targets": list(entry["lora"]["targets"])}
                    for rank in entry["lora"]["ranks"]]
                for lora in adapters:
                    for height, width in entry["sizes"]:
                        settings = {**{k: int(v) for k, v in entry["settings"].items()},
                                    "height": int(height), "width": int(width)}
                        config_dir = (REPO_ROOT / entry["path"] if "path" in entry  # a bare config's folder
                                      else REPO_ROOT / spec["root"] / entry["component"])
                        jobs.append(TrainingJob(case, entry["component"], config_dir, entry["class"], mode, settings,
                                                lora))
    return jobs


def build(jobs: Sequence[TrainingJob], out_dir: Path = FIXTURES, *, check: bool = False) -> int:
    """Measure each job and write (``check``: compare) its fixture; the number that differ."""
    differ = 0
    for job in jobs:
        start = time.perf_counter()
        lora = None if job.lora is None else {"rank": job.lora["rank"], "targets": job.lora["targets"]}
        fixture = measure_training(job.config_dir, job.settings, mode=job.mode, class_name=job.class_name, lora=lora)
        fixture["case"] = job.case
        if job.lora is not None:
            fixture["lora"]["name"] = job.lora["name"]
        status = settle(out_dir / job.path, render(fixture), check=check)
        differ += check and status != "same"
        print(f"{time.perf_counter() - start:6.2f}s  {status:7s}  {job.path}", flush=True)
    return differ


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", metavar="CASE", help="build only this case (repeatable)")
    parser.add_argument("--check", action="store_true", help="re-measure and compare; write nothing")
    args = parser.parse_args(argv)
    jobs = load_jobs(only=args.only)
    differ = build(jobs, check=args.check)
    if args.check and differ:
        print(f"{differ} training fixture(s) differ from a fresh measurement", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
