"""Mutation fuzz of real configs: the corpus, the mutations, and a worker process that runs each case
under a memory limit, with the parent enforcing a time limit.

Corpus: every bundled card (as a pipeline, and each of its components alone) and, when
``../shared/hub-snapshots`` is present, every snapshot whose pipeline is supported (as a pipeline)
and every snapshot component whose class is supported (alone). A case mutates one key of one
component's config or of ``model_index.json`` (a top-level key, a key of a nested dict, one element
of a list, or a key the class defaults) with one of :data:`MUTATIONS` or deletes it, then runs
``estimate_configs`` on it (and on the untouched rest of the pipeline) under one of :data:`SETTINGS`.

A case passes when it raises a :class:`flopcalc.engine.errors.FlopcalcError` whose message is one line,
or returns a report whose every count is an exact ``int``, none negative, the totals positive, and
that renders as a table, JSON and CSV. Anything else (another exception, a hang past the time
limit, the memory limit hit) fails. A verdict says ``net`` when the error came from the last line
of defence (:class:`flopcalc.engine.errors.UnbuildableConfigError`: a formula failed on a value no
declaration caught): clean for a user, and worth a declaration.

Run as a module (``python tests/fuzz_support.py``) it is the worker: one JSON case per stdin line,
one JSON verdict per stdout line.
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = REPO.parent.parent / "shared" / "hub-snapshots"
if not SNAPSHOTS.is_dir():
    SNAPSHOTS = Path("/work/shared/hub-snapshots")

#: The values a key is set to (besides deletion), by kind.
MUTATIONS: tuple[tuple[str, Any], ...] = (
    ("none", None), ("negative", -1), ("zero", 0), ("one", 1), ("large", 100_000), ("million", 10**6),
    ("huge", 10**9), ("astronomic", 10**30), ("negative-huge", -(10**18)),
    ("string", "abc"), ("numeric-string", "64"), ("empty-string", ""), ("float", 1.5), ("whole-float", 64.0),
    ("nan", float("nan")), ("inf", float("inf")), ("true", True), ("false", False), ("list", [1, 2]),
    ("empty-list", []), ("string-list", ["a", "b"]), ("nested-list", [[1], [2]]), ("long-list", list(range(1, 41))),
    ("nested", {"a": 1}), ("empty-object", {}),
)
#: Changes relative to the value there (plausible sizes that may break consistency between keys):
#: ints and lists of ints scaled or shifted, lists grown or shortened by one entry.
RELATIVE = ("double", "halve", "plus-one", "minus-one", "append", "drop-last")

#: Settings a case runs under (the pipeline's defaults, and the options that change which keys are read).
SETTINGS: tuple[dict[str, Any], ...] = (
    {}, {}, {"vae_tiling": True}, {"strength": 0.5}, {"height": 512, "width": 768}, {"num_frames": 9},
    {"negative_prompt": True, "true_cfg_scale": 4.0, "guidance_scale": 5.0}, {"max_sequence_length": 64},
)

TIME_LIMIT_S = 10.0
MEMORY_LIMIT_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class Source:
    """One configuration set of the corpus: a pipeline (``model_index`` given) or one component alone."""

    label: str
    model_index: dict | None
    components: dict[str, dict]


def corpus() -> list[Source]:
    """Every supported configuration set: bundled cards and Hub snapshots, as pipelines and per component."""
    from flopcalc.engine.cards import cards_root, list_cards
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.sources import resolve

    roots = [(f"card:{card.name}", str(Path(str(cards_root())) / card.name)) for card in list_cards()]
    if SNAPSHOTS.is_dir():
        roots += [(f"hub:{p.parent.relative_to(SNAPSHOTS)}", str(p.parent))
                  for p in sorted(SNAPSHOTS.glob("*/*/model_index.json"))]
    # the real component configs the measurements use (validation/configs, each with its PROVENANCE.json)
    roots += [(f"validation:{p.parent.name}", str(p.parent))
              for pattern in ("*/config.json", "*/model_index.json")
              for p in sorted((REPO / "validation" / "configs").glob(pattern))]
    sources: list[Source] = []
    seen: dict[str, str] = {}
    for label, root in roots:
        try:
            src = resolve(root)
        except FlopcalcError:
            continue
        comps = {name: dict(cfg) for name, cfg in src.components.items()}
        if src.model_index is not None and _runs(src.model_index, comps):
            sources.append(Source(label, dict(src.model_index), comps))
        for name, cfg in comps.items():
            key = json.dumps(cfg, sort_keys=True)
            if key in seen:  # the same config under another card: one source, found by either label
                ALIASES[f"{label}/{name}"] = seen[key]
            elif _runs(None, {name: cfg}):
                seen[key] = f"{label}/{name}"
                sources.append(Source(f"{label}/{name}", None, {name: cfg}))
    return sources


#: Label of a component config met again under another card → the label of the source that holds it.
ALIASES: dict[str, str] = {}


def _runs(model_index: dict | None, components: dict[str, dict]) -> bool:
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.pipelines import Settings

    try:
        estimate_configs(model_index, components, Settings())
    except FlopcalcError:
        return False
    return True


def key_paths(config: dict) -> list[tuple]:
    """Mutable places of a config: top-level keys (bookkeeping ``_``-keys aside, but the class name),
    keys of nested dicts one level down, and list elements (first and last)."""
    paths: list[tuple] = []
    for key, value in config.items():
        if key.startswith("_") and key != "_class_name":
            continue
        paths.append((key,))
        if isinstance(value, dict):
            paths += [(key, sub) for sub in value if not str(sub).startswith("_")]
        elif isinstance(value, list) and value:
            paths += sorted({(key, 0), (key, len(value) - 1)})
    return paths


def defaulted_keys(config: dict) -> list[tuple]:
    """Keys the class defaults (so the assembler reads them) that the config leaves out."""
    from flopcalc.engine.config import class_name_of
    from flopcalc.engine.registry import registered

    cls = class_name_of(config)
    keys: set[str] = set()
    for arch in registered():
        if arch.class_name == cls:
            keys |= set(arch.defaults)
    return [(k,) for k in sorted(keys - set(config))]


def make_cases(sources: list[Source], n: int, seed: int) -> list[dict]:
    """``n`` cases drawn with ``seed``: a source, a component, a place, a mutation, settings."""
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        src = rng.choice(sources)
        comp = rng.choice(sorted(src.components) + (["model_index.json"] if src.model_index else []))
        cfg = src.model_index if comp == "model_index.json" else src.components[comp]
        places = key_paths(cfg) + defaulted_keys(cfg)
        path = list(rng.choice(places))
        roll = rng.random()
        if roll < 0.1:
            kind, value = "delete", None
        elif roll < 0.3:
            kind, value = rng.choice(RELATIVE), None
        else:
            kind, value = rng.choice(MUTATIONS)
        cases.append({"source": src.label, "component": comp, "path": path, "kind": kind, "value": value,
                      "settings": rng.choice(SETTINGS)})
    return cases


def mutate(config: dict, path: list, kind: str, value: Any) -> dict:
    out = json.loads(json.dumps(config))
    target = out
    for step in path[:-1]:
        target = target[step]
    last = path[-1]
    if kind == "delete":
        if isinstance(target, list):
            del target[last]
        else:
            target.pop(last, None)
    elif kind in RELATIVE:
        if isinstance(target, dict) and last not in target:
            return out
        target[last] = _relative(kind, target[last])
    else:
        target[last] = value
    return out


def _relative(kind: str, value: Any) -> Any:
    if isinstance(value, list):
        if kind == "append":
            return value + value[-1:]
        if kind == "drop-last":
            return value[:-1]
        return [_relative(kind, v) for v in value]
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return {"double": value * 2, "halve": value // 2, "plus-one": value + 1, "minus-one": value - 1}.get(kind, value)


def describe(case: dict) -> str:
    where = "/".join(str(p) for p in case["path"])
    what = ("deleted" if case["kind"] == "delete" else case["kind"] if case["kind"] in RELATIVE
            else f"= {case['value']!r}")
    return f"{case['source']} {case['component']}.{where} {what} settings={case['settings']}"


# --------------------------------------------------------------------------------------------- checks


def check_report(report) -> str | None:
    """None when every count of ``report`` is an exact, non-negative int and the totals are positive."""
    from dataclasses import fields

    from flopcalc.engine.cost import Cost

    if not report.components:
        return "no component counted"
    for comp in report.components:
        for name, value in (("runs", comp.runs), ("params", comp.params), ("macs_per_run", comp.macs_per_run)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                return f"{comp.component}.{comp.call} {name} = {value!r} (must be a positive int)"
        for path, node in comp.tree.walk():
            for f in fields(Cost):
                v = getattr(node.total, f.name)
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    return f"{comp.component}.{comp.call} {path}.{f.name} = {v!r} (must be a non-negative int)"
            if isinstance(node.count, bool) or not isinstance(node.count, int) or node.count < 0:
                return f"{comp.component}.{comp.call} {path}.count = {node.count!r}"
    return None


# --------------------------------------------------------------------------------------------- worker


def _serve() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    sys.setrecursionlimit(10_000)
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.errors import FlopcalcError, UnbuildableConfigError
    from flopcalc.engine.pipelines import Settings
    from flopcalc.flops.report import render

    sources = {s.label: s for s in corpus()}
    print(json.dumps({"ready": sorted(sources)}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        src = sources[ALIASES.get(case["source"], case["source"])]
        comps, index = dict(src.components), src.model_index
        if case["component"] == "model_index.json":
            index = mutate(index, case["path"], case["kind"], case["value"])
        else:
            comps[case["component"]] = mutate(comps[case["component"]], case["path"], case["kind"], case["value"])
        try:
            report = estimate_configs(index, comps, Settings.make(**case["settings"]))
            problem = check_report(report)
            for fmt in ("table", "json", "csv"):  # every output renders
                render(report, fmt, per_block=True)
            verdict = {"ok": problem is None, "why": problem or "valid report"}
        except FlopcalcError as e:
            msg = str(e)
            one_line = bool(msg.strip()) and "\n" not in msg.strip()
            verdict = {"ok": one_line, "why": f"FlopcalcError: {msg}" if one_line else f"not one line: {msg!r}",
                       "net": isinstance(e, UnbuildableConfigError)}
        except MemoryError:
            verdict = {"ok": False, "why": f"MemoryError (over {MEMORY_LIMIT_BYTES // 2**20} MiB)"}
        except BaseException as e:  # noqa: BLE001 — any other exception is the finding
            import traceback

            tb = traceback.extract_tb(e.__traceback__)[-1]
            verdict = {"ok": False, "why": f"{type(e).__name__}: {e} at {tb.filename}:{tb.lineno}"}
        print(json.dumps(verdict), flush=True)


class Worker:
    """A worker process; a case past ``TIME_LIMIT_S`` kills it (a hang) and the next case starts another."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.labels: list[str] = []

    def _start(self) -> None:
        env = dict(os.environ, PYTHONHASHSEED="0")
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, cwd=REPO, env=env)
        ready = self._read(120.0)
        if ready is None:
            raise RuntimeError("fuzz worker did not start")
        self.labels = ready["ready"]

    def _read(self, timeout: float) -> dict | None:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def run(self, case: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        verdict = self._read(TIME_LIMIT_S)
        if verdict is None:
            died = self.proc.poll() is not None
            self.close()
            return {"ok": False, "why": "worker died (memory limit?)" if died else f"hang: over {TIME_LIMIT_S} s"}
        return verdict

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


if __name__ == "__main__":
    _serve()
