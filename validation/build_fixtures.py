#!/usr/bin/env python
"""Write the measured fixtures listed in ``validation/manifest.yaml``.

Usage (from anywhere; the repository need not be on ``sys.path``)::

    python validation/build_fixtures.py                 # every case
    python validation/build_fixtures.py --only flux-dev # one case (repeatable)
    python validation/build_fixtures.py --check         # re-measure, compare, write nothing

Fixtures go to ``validation/fixtures/<case>/<component>[-<call>]-<H>x<W>.json`` (or ``-L<seq_len>``
for components without image sizes): pretty-printed JSON, keys sorted, trailing newline, no
timestamps, so a re-run on the same software reproduces them byte for byte. Never edit them by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from measure import TORCH_MODULE_DEPTH, measure_component, resolve_class_name  # noqa: E402

MANIFEST = HERE / "manifest.yaml"
FIXTURES = HERE / "fixtures"

_ENTRY_KEYS = {"component", "path", "class", "loaded_as", "calls", "settings", "sizes", "module_depth", "plan_options"}


@dataclass(frozen=True)
class Job:
    """One measurement: one call of one component at one set of settings."""

    case: str
    component: str
    config_dir: Path
    class_name: str
    call: str
    settings: dict[str, int] = field(hash=False)
    module_depth: int = TORCH_MODULE_DEPTH
    loaded_as: str | None = None  # the class the pipeline builds from this config (model_index.json's)
    #: family options (``flopcalc.estimate`` keywords) under which the pipeline runs this call as measured: a plan
    #: whose default runs the component otherwise (Qwen-Image 2.1's key/value-cached steps) is compared with these
    plan_options: dict[str, int] = field(default_factory=dict, hash=False)

    @property
    def filename(self) -> str:
        """``<component>[-<call>]-<H>x<W>.json``, or ``-L<seq_len>`` without image sizes."""
        stem = self.component if self.call == "forward" else f"{self.component}-{self.call}"
        if "height" in self.settings:
            return f"{stem}-{self.settings['height']}x{self.settings['width']}.json"
        if "seq_len" in self.settings:
            return f"{stem}-L{self.settings['seq_len']}.json"
        raise ValueError(f"{self.case}/{self.component}: no sizes and no seq_len to name the fixture")

    @property
    def path(self) -> Path:
        return Path(self.case) / self.filename


def _entry_jobs(case: str, root: Path, entry: dict[str, Any]) -> list[Job]:
    """Expand one manifest component entry over its calls and sizes."""
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise ValueError(f"{case}: unknown manifest keys {sorted(unknown)}")
    component = entry["component"]
    config_dir = REPO_ROOT / entry["path"] if "path" in entry else root / component
    base = {k: int(v) for k, v in (entry.get("settings") or {}).items()}
    sizes = entry.get("sizes") or [None]
    jobs = []
    for call in entry.get("calls", ["forward"]):
        for size in sizes:
            settings = dict(base)
            if size is not None:
                settings.update(height=int(size[0]), width=int(size[1]))
            jobs.append(
                Job(case, component, config_dir, entry["class"], call, settings,
                    int(entry.get("module_depth", TORCH_MODULE_DEPTH)), entry.get("loaded_as"),
                    {k: int(v) for k, v in (entry.get("plan_options") or {}).items()})
            )
    return jobs


def load_cases(manifest: Path | None = None) -> dict[str, Any]:
    """The cases of ``manifest``, or of ``manifest.yaml`` and every ``manifests/*.yaml`` (one file
    per model family) when none is named."""
    files = [manifest] if manifest is not None else [MANIFEST, *sorted((HERE / "manifests").glob("*.yaml"))]
    cases: dict[str, Any] = {}
    for path in files:
        with open(path, encoding="utf-8") as fh:
            more = yaml.safe_load(fh)["cases"]
        clash = sorted(set(cases) & set(more))
        if clash:
            raise SystemExit(f"{path}: case(s) {clash} defined twice")
        cases.update(more)
    return cases


def load_jobs(manifest: Path | None = None, only: Iterable[str] | None = None) -> list[Job]:
    """All jobs of the manifests, restricted to the cases in ``only`` when given."""
    cases = load_cases(manifest)
    only = list(only or [])
    missing = [c for c in only if c not in cases]
    if missing:
        raise SystemExit(f"unknown case(s) {missing}; manifest has {sorted(cases)}")
    jobs = []
    for case, spec in cases.items():
        if only and case not in only:
            continue
        root = REPO_ROOT / spec["root"]
        for entry in spec["components"]:
            jobs.extend(_entry_jobs(case, root, entry))
    return jobs


def measure_job(job: Job) -> dict[str, Any]:
    """Run one job; the fixture dict with its case recorded."""
    named = resolve_class_name(job.config_dir)
    if named != job.class_name:
        raise ValueError(f"{job.config_dir}: config names {named}, manifest says {job.class_name}")
    fixture = measure_component(
        job.config_dir, job.loaded_as or job.class_name, settings=job.settings, call=job.call,
        module_depth=job.module_depth,
    )
    if job.loaded_as:
        fixture["config_class"] = named
        fixture["method"] += (f" Built as {job.loaded_as}, the class model_index.json names for this component "
                              f"(DiffusionPipeline.from_pretrained loads that class from the {named} checkpoint).")
    if job.plan_options:
        fixture["plan_options"] = dict(job.plan_options)
    fixture["case"] = job.case
    return fixture


def render(fixture: dict[str, Any]) -> str:
    """The canonical fixture text: indent 2, keys sorted, trailing newline."""
    return json.dumps(fixture, indent=2, sort_keys=True) + "\n"


def settle(target: Path, text: str, *, check: bool) -> str:
    """Write ``text`` to ``target`` unless it is already there (or ``check``); "same", "new" or "changed"."""
    old = target.read_text(encoding="utf-8") if target.exists() else None
    status = "same" if old == text else ("new" if old is None else "changed")
    if not check and status != "same":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return status


def settle_stale(stale: Iterable[Path], root: Path, *, check: bool) -> int:
    """Remove fixtures no manifest entry writes any more (``check``: only name them); how many there were."""
    count = 0
    for path in sorted(stale):
        count += 1
        if not check:
            path.unlink()
        print(f"{'stale' if check else 'removed stale'}: {path.relative_to(root)}")
    return count


def _stale(jobs: Sequence[Job], out_dir: Path) -> list[Path]:
    """Fixture files in the cases just built that no job produces."""
    wanted = {out_dir / job.path for job in jobs}
    found = {p for case in {job.case for job in jobs} for p in (out_dir / case).glob("*.json")}
    return sorted(found - wanted)


def build(jobs: Sequence[Job], out_dir: Path = FIXTURES, *, check: bool = False) -> int:
    """Measure every job and write (or, with ``check``, compare) its fixture. Returns the number of
    fixtures that differ from what is on disk (``check``) or 0."""
    differ = 0
    for job in jobs:
        start = time.perf_counter()
        status = settle(out_dir / job.path, render(measure_job(job)), check=check)
        differ += check and status != "same"
        print(f"{time.perf_counter() - start:6.2f}s  {status:7s}  {job.path}", flush=True)
    for path in _stale(jobs, out_dir):
        if check:
            differ += 1
            print(f"stale: {path.relative_to(out_dir)}")
        else:
            path.unlink()
            print(f"removed stale {path.relative_to(out_dir)}")
    return differ


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", metavar="CASE", help="build only this case (repeatable)")
    parser.add_argument("--check", action="store_true", help="re-measure and compare; write nothing")
    parser.add_argument("--manifest", type=Path, default=None,
                        help="one manifest (default: manifest.yaml and manifests/*.yaml)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="fixtures folder")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    jobs = load_jobs(args.manifest, args.only)
    differ = build(jobs, args.out, check=args.check)
    print(f"{len(jobs)} fixtures in {time.perf_counter() - start:.1f}s", flush=True)
    if args.check and differ:
        print(f"{differ} fixture(s) differ from a fresh measurement", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
