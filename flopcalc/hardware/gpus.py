"""The GPU table: dense tensor peaks per dtype, memory, bandwidth, TDP, idle power and links of common GPUs,
with sources.

The figures live in ``flopcalc/data/gpus.yaml`` (read with ``yaml.safe_load``); every entry cites
the datasheet (or whitepaper, or a reproduction of it) it comes from, and its idle power and links
their own sources. Peaks are dense: datasheets headline the 2:4-sparse figure, which is twice the
dense one, and it is halved in the table.

Link bandwidths are per direction. A PCIe host link's rate is computed from the PCI Express Base
Specification (PCI-SIG; Revision 3.0: 8.0 GT/s per lane, Revision 4.0: 16.0 GT/s, Revision 5.0:
32.0 GT/s; all three use 128b/130b encoding), so one direction of a link carries
``GT/s x lanes x 128/130 / 8`` bytes per second: 15.75 GB/s for Gen3 x16, 31.51 GB/s for Gen4 x16,
63.02 GB/s for Gen5 x16. NVLink, NVLink-C2C and Infinity Fabric are quoted by their vendors as a
bidirectional total per GPU; one direction is half of it.

>>> from flopcalc.hardware.gpus import gpu, resolve
>>> gpu("H100 80GB HBM3").peak_flops["bf16"]
989400000000000.0
>>> round(gpu("h100").host_link_bytes_per_s / 1e9, 2), gpu("h100").gpu_link_bytes_per_s / 1e9
(63.02, 450.0)
>>> resolve("a100").how
'alias a100 → NVIDIA A100 SXM4 40GB (SXM4 40GB; other parts: a100-sxm-80gb, a100-pcie-40gb, a100-pcie-80gb)'
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from flopcalc.engine.errors import FlopcalcError

_DATA = Path(__file__).resolve().parents[1] / "data" / "gpus.yaml"
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")

# PCI Express Base Specification, Revisions 3.0 / 4.0 / 5.0 (PCI-SIG): transfer rate per lane in GT/s;
# every one of these generations encodes 128 bits in 130.
PCIE_GT_PER_S = {3: 8.0, 4: 16.0, 5: 32.0}
PCIE_ENCODING = 128 / 130
PCIE_LANES = (1, 2, 4, 8, 16)

HOST_LINK_KINDS = ("pcie", "nvlink-c2c")
GPU_LINK_KINDS = ("nvlink", "nvlink-bridge", "infinity-fabric", "pcie")


class UnknownGPUError(FlopcalcError):
    """A GPU name matches no key or alias of the table."""


class GPUTableError(FlopcalcError, ValueError):
    """The GPU table (``gpus.yaml``) lacks a figure, or holds one that is not a positive number."""


def pcie_bytes_per_s(generation: int, lanes: int) -> float:
    """One direction of a PCIe link: GT/s per lane x lanes x 128/130 (encoding) / 8 bits per byte.

    >>> round(pcie_bytes_per_s(4, 16) / 1e9, 3)
    31.508
    """
    if generation not in PCIE_GT_PER_S:
        raise ValueError(f"PCIe generation {generation!r} is not one of {sorted(PCIE_GT_PER_S)}")
    if lanes not in PCIE_LANES:
        raise ValueError(f"PCIe lane count {lanes!r} is not one of {PCIE_LANES}")
    return PCIE_GT_PER_S[generation] * 1e9 * lanes * PCIE_ENCODING / 8


@dataclass(frozen=True)
class GPU:
    """One GPU SKU. ``peak_flops`` is dense tensor FLOP/s by dtype ("fp32" is the non-tensor peak).

    ``host_link`` and ``gpu_link`` are the table's raw descriptions (kind, generation, lanes or the
    vendor's bidirectional total, and the source); ``host_link_bytes_per_s`` and
    ``gpu_link_bytes_per_s`` are one direction, per GPU. A ``gpu_link`` of kind ``pcie`` means the
    GPUs talk over their host PCIe links, so its rate is the host link's."""

    key: str
    name: str
    aliases: tuple[str, ...]
    memory_bytes: int
    memory_bandwidth: float
    tdp_w: float
    peak_flops: Mapping[str, float]
    sources: tuple[str, ...]
    idle_w: float
    idle_source: str
    host_link: Mapping[str, Any]
    gpu_link: Mapping[str, Any]
    host_link_bytes_per_s: float
    gpu_link_bytes_per_s: float
    family: str | None = None
    variant: str | None = None
    #: the architecture family (``architectures`` of gpus.yaml) and the CUDA context one process holds on it
    architecture: str | None = None
    context_bytes: int = 0
    context_source: str = ""

    @property
    def host_link_label(self) -> str:
        """A short name of the host link, e.g. ``PCIe4 x16`` or ``NVLink-C2C``."""
        h = self.host_link
        return f"PCIe{h['generation']} x{h['lanes']}" if h["kind"] == "pcie" else "NVLink-C2C"

    @property
    def gpu_link_label(self) -> str:
        """A short name of the GPU-to-GPU link, e.g. ``NVLink4``, ``NVLink3 bridge``, ``PCIe``, ``IF x7``."""
        g = self.gpu_link
        return {"nvlink": lambda: f"NVLink{g['generation']}",
                "nvlink-bridge": lambda: f"NVLink{g['generation']} bridge",
                "infinity-fabric": lambda: f"IF x{g['links']}",
                "pcie": lambda: "PCIe"}[g["kind"]]()

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "name": self.name, "family": self.family, "variant": self.variant,
            "aliases": list(self.aliases),
            "memory_bytes": self.memory_bytes, "memory_bandwidth": self.memory_bandwidth, "tdp_w": self.tdp_w,
            "peak_flops": dict(self.peak_flops),
            "idle_w": self.idle_w, "idle_source": self.idle_source,
            "host_link": dict(self.host_link), "host_link_bytes_per_s": self.host_link_bytes_per_s,
            "gpu_link": dict(self.gpu_link), "gpu_link_bytes_per_s": self.gpu_link_bytes_per_s,
            "sources": list(self.sources),
            "architecture": self.architecture, "context_bytes": self.context_bytes,
            "context_source": self.context_source,
        }


class Resolved(NamedTuple):
    """What :func:`resolve` found: the GPU, and a sentence saying how the name was read."""

    gpu: GPU
    how: str


def _normal(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _positive(raw: Mapping[str, Any], key: str, where: str) -> float:
    """``raw[key]`` as a finite number > 0, or a :class:`GPUTableError` naming ``where`` and the key."""
    if key not in raw or raw[key] is None:
        raise GPUTableError(f"gpus.yaml: {where} lacks {key!r}")
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise GPUTableError(f"gpus.yaml: {where} has {key} = {value!r}; it must be a positive number")
    return float(value)


def _text(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise GPUTableError(f"gpus.yaml: {where} lacks {key!r} (a non-empty text)")
    return value


def _mapping(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = raw.get(key)
    if not isinstance(value, Mapping):
        raise GPUTableError(f"gpus.yaml: {where} lacks {key!r} (a mapping with kind and source)")
    return value


def _host_link(gk: str, link: Mapping[str, Any]) -> float:
    where = f"{gk} host_link"
    _text(link, "source", where)
    kind = link.get("kind")
    if kind == "pcie":
        gen, lanes = _positive(link, "generation", where), _positive(link, "lanes", where)
        try:
            return pcie_bytes_per_s(int(gen), int(lanes))
        except ValueError as exc:
            raise GPUTableError(f"gpus.yaml: {where}: {exc}") from None
    if kind == "nvlink-c2c":
        return _positive(link, "total_gb_s", where) * 1e9 / 2
    raise GPUTableError(f"gpus.yaml: {where} has kind {kind!r}; it must be one of {', '.join(HOST_LINK_KINDS)}")


def _gpu_link(gk: str, link: Mapping[str, Any], host_bytes_per_s: float) -> float:
    where = f"{gk} gpu_link"
    _text(link, "source", where)
    kind = link.get("kind")
    if kind == "pcie":
        return host_bytes_per_s
    if kind in ("nvlink", "nvlink-bridge"):
        _positive(link, "generation", where)
    elif kind == "infinity-fabric":
        _positive(link, "links", where)
    else:
        raise GPUTableError(f"gpus.yaml: {where} has kind {kind!r}; it must be one of {', '.join(GPU_LINK_KINDS)}")
    return _positive(link, "total_gb_s", where) * 1e9 / 2


def _architectures(doc: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    """``architecture -> (context bytes, source)`` of the document's ``architectures`` (each checked)."""
    raw = doc.get("architectures")
    if not isinstance(raw, Mapping) or not raw:
        raise GPUTableError("gpus.yaml: the document has no 'architectures' mapping (context_mib and its source)")
    out = {}
    for name, entry in raw.items():
        where = f"architecture {name}"
        if not isinstance(entry, Mapping):
            raise GPUTableError(f"gpus.yaml: {where} is not a mapping with context_mib and context_source")
        out[str(name)] = (int(_positive(entry, "context_mib", where) * 2**20), _text(entry, "context_source", where))
    return out


def _entry(raw: Mapping[str, Any], architectures: Mapping[str, tuple[int, str]] | None = None) -> GPU:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str) or not raw["key"]:
        raise GPUTableError(f"gpus.yaml: an entry lacks its 'key': {raw!r:.80}")
    gk = raw["key"]
    peaks = _mapping(raw, "peak_tflops", gk)
    unknown = set(peaks) - set(DTYPES)
    if unknown:
        raise GPUTableError(f"gpus.yaml: {gk} has unknown dtypes {sorted(unknown)}")
    if "fp32" not in peaks:
        raise GPUTableError(f"gpus.yaml: {gk} peak_tflops lacks 'fp32'")
    peak_flops = {d: _positive(peaks, d, f"{gk} peak_tflops") * 1e12 for d in DTYPES if d in peaks}
    sources = raw.get("sources")
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise GPUTableError(f"gpus.yaml: {gk} lacks 'sources' (a list of non-empty texts)")
    host_link, gpu_link = _mapping(raw, "host_link", gk), _mapping(raw, "gpu_link", gk)
    host_rate = _host_link(gk, host_link)
    tdp, idle = _positive(raw, "tdp_w", gk), _positive(raw, "idle_w", gk)
    if idle >= tdp:
        raise GPUTableError(f"gpus.yaml: {gk} has idle_w {idle:g} >= tdp_w {tdp:g}")
    family = raw.get("family")
    architecture = _text(raw, "architecture", gk)
    if architectures is not None and architecture not in architectures:
        raise GPUTableError(f"gpus.yaml: {gk} has architecture {architecture!r}; it must be one of "
                            f"{', '.join(architectures)}")
    context = (architectures or {}).get(architecture, (0, ""))
    return GPU(
        key=gk, name=_text(raw, "name", gk), aliases=tuple(str(a) for a in raw.get("aliases", ())),
        memory_bytes=int(_positive(raw, "memory_gib", gk) * 2**30),
        memory_bandwidth=_positive(raw, "memory_bandwidth_gb_s", gk) * 1e9,
        tdp_w=tdp, peak_flops=peak_flops, sources=tuple(sources),
        idle_w=idle, idle_source=_text(raw, "idle_source", gk),
        host_link=dict(host_link), gpu_link=dict(gpu_link),
        host_link_bytes_per_s=host_rate, gpu_link_bytes_per_s=_gpu_link(gk, gpu_link, host_rate),
        family=None if family is None else str(family),
        variant=None if raw.get("variant") is None else str(raw["variant"]),
        architecture=architecture, context_bytes=context[0], context_source=context[1],
    )


def parse_table(doc: Mapping[str, Any]) -> tuple[GPU, ...]:
    """The GPUs of a parsed ``gpus.yaml`` document, each checked (:class:`GPUTableError` names the GPU and key)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("gpus"), list):
        raise GPUTableError("gpus.yaml: the document has no 'gpus' list")
    architectures = _architectures(doc)
    table = tuple(_entry(r, architectures) for r in doc["gpus"])
    keys = [g.key for g in table]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise GPUTableError(f"gpus.yaml: keys listed twice: {', '.join(dup)}")
    return table


@lru_cache(maxsize=1)
def gpus() -> tuple[GPU, ...]:
    """Every GPU of the shipped table, in table order."""
    import yaml

    with _DATA.open(encoding="utf-8") as fh:
        return parse_table(yaml.safe_load(fh))


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[GPU, str, str]]:
    """Normalised label -> (GPU, the label as written, what it is: key, name or alias)."""
    index: dict[str, tuple[GPU, str, str]] = {}
    for g in gpus():
        for label, what in ((g.key, "key"), (g.name, "name"), *((a, "alias") for a in g.aliases)):
            key = _normal(label)
            if key in index and index[key][0] is not g:
                raise GPUTableError(f"gpus.yaml: {label!r} names both {index[key][0].key} and {g.key}")
            index.setdefault(key, (g, label, what))
    return index


def family(name: str) -> tuple[GPU, ...]:
    """The parts of a family (``a100``, ``h100``, ``h200``, ``v100``, ``a800``, ``h800``), in table order."""
    return tuple(g for g in gpus() if g.family is not None and g.family == name)


def _unknown(name: str) -> UnknownGPUError:
    labels = {lab: g.key for g in gpus() for lab in (g.key, *g.aliases)}
    close = difflib.get_close_matches(name.lower(), [lab.lower() for lab in labels], n=4, cutoff=0.5)
    keys = list(dict.fromkeys(labels[next(lab for lab in labels if lab.lower() == c)] for c in close))
    hint = f"; did you mean {', '.join(keys)}?" if keys else ""
    return UnknownGPUError(f"unknown GPU {name!r}{hint} (see `flopcalc gpus` for the table)")


def resolve(name: str) -> Resolved:
    """The GPU ``name`` names and how it was read: a key or full name names one part; a family alias
    (``a100``) picks one of several and says which, and which others there are, so a command can print it.

    >>> resolve("A100-SXM4-80GB").how
    'alias A100-SXM4-80GB → NVIDIA A100 SXM4 80GB'
    """
    found = _index().get(_normal(name))
    if found is None:
        raise _unknown(name)
    g, label, what = found
    if what != "alias":
        return Resolved(g, f"{what} {name} → {g.name}")
    if g.family is not None and _normal(label) == _normal(g.family):
        others = [p.key for p in family(g.family) if p is not g]
        if others:
            return Resolved(g, f"alias {name} → {g.name} ({g.variant or g.key}; other parts: {', '.join(others)})")
    return Resolved(g, f"alias {name} → {g.name}")


def gpu(name: str) -> GPU:
    """The GPU whose key, name or alias matches ``name`` (case, spaces and punctuation ignored)."""
    return resolve(name).gpu
