#!/usr/bin/env python
"""Write the training-memory fixtures listed in ``validation/training_memory_manifest.yaml``.

Usage (from anywhere)::

    python validation/build_training_memory_fixtures.py                  # every case (skips fixtures that exist)
    python validation/build_training_memory_fixtures.py --only flux-dev  # one case (repeatable)
    python validation/build_training_memory_fixtures.py --redo           # measure again, overwrite
    python validation/build_training_memory_fixtures.py --check          # re-measure, compare, write nothing
    python validation/build_training_memory_fixtures.py --only qwen-image --mode full-nockpt-fp32-fused --redo

One job is one mode of one case, measured at every size of the case on one model build. Fixtures go to
``validation/fixtures/training_memory/<case>/<component>-<mode>-<H>x<W>.json`` with ``<mode>`` =
``<full|lora-r16>-<ckpt|nockpt>-<fp32|bf16>-<fused|math>`` (a case measured at several frame counts adds
``-F<frames>``), rendered and written exactly as ``build_fixtures.py`` writes the inference fixtures (keys sorted, no
timestamps). Never edit them by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from build_fixtures import render  # noqa: E402

MANIFEST = HERE / "training_memory_manifest.yaml"
FIXTURES = HERE / "fixtures" / "training_memory"


@dataclass(frozen=True)
class MemoryJob:
    """One mode of one case, measured at each of its sizes on one model build."""

    case: str
    component: str
    config_dir: Path
    class_name: str | None
    trainable: str
    checkpointing: bool
    master: str
    attention: str
    sizes: tuple[dict[str, int], ...] = field(hash=False)
    lora: dict | None = field(default=None, hash=False)
    optimizers: bool = False
    frames_in_name: bool = False

    @property
    def mode(self) -> str:
        who = "full" if self.lora is None else f"lora-r{self.lora['rank']}"
        return f"{who}-{'ckpt' if self.checkpointing else 'nockpt'}-{self.master}-{self.attention}"

    def path(self, s: dict[str, int]) -> Path:
        frames = f"-F{s['num_frames']}" if self.frames_in_name else ""
        return Path(self.case) / f"{self.component}-{self.mode}{frames}-{s['height']}x{s['width']}.json"

    @property
    def paths(self) -> list[Path]:
        return [self.path(s) for s in self.sizes]


def load_jobs(manifest: Path = MANIFEST, only: Sequence[str] | None = None) -> list[MemoryJob]:
    with open(manifest, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    cases, rank = doc["cases"], int(doc["lora_rank"])
    missing = [c for c in only or () if c not in cases]
    if missing:
        raise SystemExit(f"unknown case(s) {missing}; manifest has {sorted(cases)}")
    jobs = []
    for case, spec in cases.items():
        if only and case not in only:
            continue
        points = []
        for h, w in spec["sizes"]:
            extra = {"reference_height": h, "reference_width": w} if spec.get("reference_at_size") else {}
            for frames in spec.get("frame_counts") or [None]:
                points.append({**{k: int(v) for k, v in spec["settings"].items()}, "height": int(h), "width": int(w),
                               **extra, **({"num_frames": int(frames)} if frames else {})})
        lora = {"rank": rank, "targets": list(spec["lora"])} if spec.get("lora") else None
        trainables = [t for t in ("full", "lora") if t == "full" or lora]
        modes = [(t, ck, m, "fused") for m in ("fp32", "bf16") for t in trainables for ck in (False, True)]
        if spec.get("math"):
            modes += [(t, False, "fp32", "math") for t in trainables]
        for trainable, ckpt, master, attention in modes:
            jobs.append(MemoryJob(case, spec["component"], REPO_ROOT / spec["root"] / spec["component"],
                                  spec.get("class"), trainable, ckpt, master, attention, tuple(points),
                                  lora if trainable == "lora" else None,
                                  optimizers=(not ckpt and attention == "fused"),
                                  frames_in_name=bool(spec.get("frame_counts"))))
    return jobs


def run(job: MemoryJob) -> list[dict]:
    from measure_training_memory import measure_sizes

    fixtures = measure_sizes(job.config_dir, list(job.sizes), trainable=job.trainable,
                             checkpointing=job.checkpointing, master=job.master, attention=job.attention,
                             lora=job.lora, class_name=job.class_name, optimizers=job.optimizers)
    for f in fixtures:
        f["case"] = job.case
    return fixtures


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="measure only this case (repeatable)")
    ap.add_argument("--redo", action="store_true", help="measure fixtures that exist again")
    ap.add_argument("--check", action="store_true", help="re-measure and compare; write nothing")
    ap.add_argument("--mode", action="append", help="only this mode, as in the file names (repeatable)")
    ap.add_argument("--shard", default="0/1", metavar="I/K", help="run every K-th job from the I-th (parallel workers)")
    args = ap.parse_args(argv)
    i, k = (int(x) for x in args.shard.split("/"))
    jobs = [j for j in load_jobs(only=args.only) if not args.mode or j.mode in args.mode][i::k]
    bad = 0
    for job in jobs:
        if all((FIXTURES / p).exists() for p in job.paths) and not (args.redo or args.check):
            continue
        t0 = time.time()
        try:
            fixtures = run(job)
        except Exception as exc:  # report and go on: one family's failure must not stop the others
            print(f"FAIL {job.case} {job.mode}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            bad += 1
            continue
        for path, fixture in zip(job.paths, fixtures):
            text, target = render(fixture), FIXTURES / path
            if args.check:
                same = target.exists() and json.loads(target.read_text()) == json.loads(text)
                print(f"{'same' if same else 'DIFFERS'} {path}", flush=True)
                bad += not same
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        verb = "checked" if args.check else "wrote"
        print(f"{verb} {job.case} {job.mode} × {len(fixtures)} ({time.time() - t0:.0f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
