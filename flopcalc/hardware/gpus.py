"""The GPU table: dense tensor peaks per dtype, memory, bandwidth and TDP of common GPUs, with sources.

The figures live in ``flopcalc/data/gpus.yaml`` (read with ``yaml.safe_load``); every entry cites
the datasheet (or whitepaper, or a reproduction of it) it comes from. Peaks are dense: datasheets
headline the 2:4-sparse figure, which is twice the dense one, and it is halved in the table.

>>> from flopcalc.hardware.gpus import gpu
>>> gpu("H100 80GB HBM3").peak_flops["bf16"]
989400000000000.0
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError

_DATA = Path(__file__).resolve().parents[1] / "data" / "gpus.yaml"
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


class UnknownGPUError(FlopcalcError):
    """A GPU name matches no key or alias of the table."""


@dataclass(frozen=True)
class GPU:
    """One GPU SKU. ``peak_flops`` is dense tensor FLOP/s by dtype ("fp32" is the non-tensor peak)."""

    key: str
    name: str
    aliases: tuple[str, ...]
    memory_bytes: int
    memory_bandwidth: float
    tdp_w: float
    peak_flops: Mapping[str, float]
    sources: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "name": self.name, "aliases": list(self.aliases),
            "memory_bytes": self.memory_bytes, "memory_bandwidth": self.memory_bandwidth, "tdp_w": self.tdp_w,
            "peak_flops": dict(self.peak_flops), "sources": list(self.sources),
        }


def _normal(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _entry(raw: Mapping[str, Any]) -> GPU:
    peaks = raw["peak_tflops"]
    unknown = set(peaks) - set(DTYPES)
    if unknown:
        raise ValueError(f"gpus.yaml: {raw['key']} has unknown dtypes {sorted(unknown)}")
    return GPU(
        key=str(raw["key"]), name=str(raw["name"]), aliases=tuple(str(a) for a in raw.get("aliases", ())),
        memory_bytes=int(raw["memory_gib"]) * 2**30, memory_bandwidth=float(raw["memory_bandwidth_gb_s"]) * 1e9,
        tdp_w=float(raw["tdp_w"]), peak_flops={d: float(peaks[d]) * 1e12 for d in DTYPES if d in peaks},
        sources=tuple(str(s) for s in raw["sources"]),
    )


@lru_cache(maxsize=1)
def gpus() -> tuple[GPU, ...]:
    """Every GPU of the shipped table, in table order."""
    import yaml

    with _DATA.open(encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    return tuple(_entry(r) for r in raw["gpus"])


@lru_cache(maxsize=1)
def _index() -> dict[str, GPU]:
    index: dict[str, GPU] = {}
    for g in gpus():
        for label in (g.key, g.name, *g.aliases):
            key = _normal(label)
            if key in index and index[key] is not g:
                raise ValueError(f"gpus.yaml: {label!r} names both {index[key].key} and {g.key}")
            index[key] = g
    return index


def gpu(name: str) -> GPU:
    """The GPU whose key, name or alias matches ``name`` (case, spaces and punctuation ignored)."""
    found = _index().get(_normal(name))
    if found is not None:
        return found
    labels = {lab: g.key for g in gpus() for lab in (g.key, *g.aliases)}
    close = difflib.get_close_matches(name.lower(), [lab.lower() for lab in labels], n=4, cutoff=0.5)
    keys = list(dict.fromkeys(labels[next(lab for lab in labels if lab.lower() == c)] for c in close))
    hint = f"; did you mean {', '.join(keys)}?" if keys else ""
    raise UnknownGPUError(f"unknown GPU {name!r}{hint} (see `flopcalc gpus` for the table)")
