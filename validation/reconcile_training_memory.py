"""Reconcile the GPU memory that trainers publish for diffusion fine-tuning with ``flopcalc train``'s memory.

    python validation/reconcile_training_memory.py [--out validation/TRAINING_MEMORY_RECONCILED.md]

The published side is ``validation/training_memory_published.yaml``: one row per figure found in diffusers'
examples and blog, SimpleTuner, ostris ai-toolkit and kohya sd-scripts, with its quote, source (URL and
repository path), the settings as published, what the source leaves unstated, and the mapping onto
``flopcalc.train()`` keywords (with an optional ``alternative`` mapping). The flopcalc side is
``flopcalc.train(card, **mapping).memory``: ``peak_allocated_bytes`` (what ``torch.cuda.max_memory_allocated``
reads) and ``peak_bytes`` (plus the caching allocator's segments and, with ``gpu``, the CUDA context: what
an nvidia-smi-style "VRAM" reading shows). The difference is (flopcalc − published) / published against the
figure the row names in ``compare_to``. For a "fits in N GB" claim the check is flopcalc's own verdict on
the named GPU; a claim flopcalc does not share must carry ``if_inconsistent`` in the YAML.

Every number in the report is computed here from the YAML and flopcalc; none is typed.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import flopcalc

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "training_memory_published.yaml"
OUT = HERE / "TRAINING_MEMORY_RECONCILED.md"
GIB = 2**30

#: The kinds of published figure (see the YAML's header).
KINDS = ("measured", "estimate", "at_least", "fits")


@dataclass(frozen=True)
class Flopcalc:
    """flopcalc's memory for one mapping, in bytes; ``known`` False when the totals are lower bounds."""

    peak_allocated: int
    peak: int
    weights: int
    activations: int | None
    known: bool
    fits: bool | None
    headroom: int | None


@dataclass(frozen=True)
class Row:
    entry: dict[str, Any]
    main: Flopcalc
    alternative: Flopcalc | None

    @property
    def compared(self) -> int:
        return self.main.peak if self.entry["compare_to"] == "peak" else self.main.peak_allocated

    @property
    def difference(self) -> float | None:
        """(flopcalc − published) / published, for figures (not for fits claims)."""
        if self.entry["published"]["kind"] == "fits":
            return None
        published = float(self.entry["published"]["gib"]) * GIB
        return (self.compared - published) / published

    @property
    def check(self) -> str:
        kind = self.entry["published"]["kind"]
        if kind == "fits":
            if self.main.fits is None:
                return "no verdict (lower bound)"
            return "consistent" if self.main.fits else "flopcalc: does not fit (explained)"
        if not self.main.known:
            return "lower bound"
        if kind == "at_least":
            published = float(self.entry["published"]["gib"]) * GIB
            return "consistent" if self.compared >= published else "below the bound (explained)"
        return kind


def load(path: Path = PUBLISHED) -> dict[str, Any]:
    """The published rows, checked for the fields the report needs."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for entry in data["rows"]:
        for key in ("id", "source", "repo_path", "quote", "card", "flopcalc", "published", "compare_to",
                    "explanation", "settings_published", "not_stated"):
            if key not in entry:
                raise ValueError(f"{entry.get('id')}: missing {key}")
        if entry["published"]["kind"] not in KINDS:
            raise ValueError(f"{entry['id']}: kind {entry['published']['kind']!r} not in {KINDS}")
        if entry["compare_to"] not in ("peak", "peak_allocated"):
            raise ValueError(f"{entry['id']}: compare_to must be peak or peak_allocated")
    return data


def run(card: str, mapping: dict[str, Any]) -> Flopcalc:
    """flopcalc.train(card, **mapping).memory, reduced to what the report shows."""
    kwargs = dict(mapping)
    if isinstance(kwargs.get("lora_targets"), list):
        kwargs["lora_targets"] = tuple(kwargs["lora_targets"])
    memory = flopcalc.train(card, **kwargs).memory
    return Flopcalc(
        peak_allocated=memory.peak_allocated_bytes,
        peak=memory.peak_bytes,
        weights=memory.weights_bytes,
        activations=memory.activations_bytes,
        known=bool(memory.known),
        fits=memory.fits,
        headroom=memory.headroom_bytes,
    )


def measure(entry: dict[str, Any]) -> Row:
    alternative = entry.get("alternative")
    return Row(
        entry=entry,
        main=run(entry["card"], entry["flopcalc"]),
        alternative=run(entry["card"], alternative["flopcalc"]) if alternative else None,
    )


def _gib(value: int | None, known: bool = True) -> str:
    if value is None:
        return "—"
    return f"{'≥ ' if not known else ''}{value / GIB:.2f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.1f}%"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _mapping(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items())


def summary(rows: list[Row]) -> tuple[float, Row] | None:
    """Median |difference| and the worst row, over the figures flopcalc has a full total for."""
    scored = [r for r in rows if r.difference is not None and r.main.known]
    if not scored:
        return None
    worst = max(scored, key=lambda r: abs(r.difference or 0.0))
    return statistics.median(abs(r.difference or 0.0) for r in scored), worst


def render(rows: list[Row], data: dict[str, Any]) -> str:
    lines = [
        "# Published training-memory figures against flopcalc",
        "",
        "Generated by `python validation/reconcile_training_memory.py` from",
        "`validation/training_memory_published.yaml` (quotes, sources, settings, mappings, explanations) and",
        "`flopcalc.train()`; do not edit by hand (`tests/test_reconcile_training_memory.py` regenerates it).",
        "",
        "GiB throughout; published \"GB\" read as GiB (the diffusers scripts print bytes / 1024³ as \"GB\"; cards",
        "are sold in GiB). *peak allocated*: flopcalc's `peak_allocated_bytes` (`torch.cuda.max_memory_allocated`);",
        "*peak*: `peak_bytes` (+ allocator segments + CUDA context of the GPU named): an nvidia-smi-style reading.",
        "*diff*: (flopcalc − published) / published against the column the row compares to (†: peak allocated).",
        "≥: a lower bound (no activation law for this model, mode or LoRA target set).",
        "",
    ]
    stats = summary(rows)
    if stats:
        median, worst = stats
        lines += [
            f"Over the {sum(1 for r in rows if r.difference is not None and r.main.known)} figures with a full "
            f"flopcalc total: median |diff| {median * 100:.1f}%, worst {_pct(worst.difference)} "
            f"(`{worst.entry['id']}`). Fits claims: "
            + ", ".join(f"{sum(1 for r in rows if r.check == c)} {c}" for c in
                        ("consistent", "flopcalc: does not fit (explained)", "no verdict (lower bound)")
                        if any(r.check == c for r in rows))
            + ".",
            "",
        ]
    lines += [
        "| row | card | published | kind | flopcalc peak allocated | flopcalc peak | diff | check | alternative: peak | explanation |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        e = row.entry
        marker = "" if e["compare_to"] == "peak" else " †"
        alt = "—"
        if row.alternative is not None:
            alt = f"{_gib(row.alternative.peak, row.alternative.known)} ({_cell(e['alternative']['label'])})"
        lines.append(
            f"| `{e['id']}` | {e['card']} | {float(e['published']['gib']):g} | {e['published']['kind']} "
            f"| {_gib(row.main.peak_allocated, row.main.known)} | {_gib(row.main.peak, row.main.known)} "
            f"| {_pct(row.difference)}{marker if row.difference is not None else ''} | {row.check} | {alt} "
            f"| {_cell(e['explanation'])} |"
        )
    lines += ["", "## Rows", ""]
    for row in rows:
        e = row.entry
        verdict = ""
        if row.main.fits is not None and row.main.headroom is not None:
            verdict = (f"; on `{e['flopcalc'].get('gpu')}`: {'fits' if row.main.fits else 'does not fit'}, "
                       f"headroom {row.main.headroom / GIB:+.2f} GiB")
        lines += [
            f"### `{e['id']}`",
            "",
            f"- Source: {e['source']} ({_cell(e['repo_path'])}); trainer: {_cell(e.get('trainer', '—'))}",
            f"- Quote: {_cell(e['quote'])}",
            f"- Settings as published: {_cell(e['settings_published'])}",
            f"- Not stated: {_cell(e['not_stated'])}",
            (f"- Published: {float(e['published']['gib']):g} GiB, {e['published']['kind']}: "
             f"{_cell(e['published']['measures'])}"),
            (f"- flopcalc: `flopcalc.train(\"{e['card']}\", {_mapping(e['flopcalc'])})`: weights "
             f"{_gib(row.main.weights)}, activations saved {_gib(row.main.activations)}, peak allocated "
             f"{_gib(row.main.peak_allocated, row.main.known)}, peak {_gib(row.main.peak, row.main.known)}{verdict}"),
            f"- Mapping: {_cell(e.get('mapping_notes', '—'))}",
        ]
        if row.alternative is not None:
            lines.append(
                f"- Alternative ({_cell(e['alternative']['label'])}): `{_mapping(e['alternative']['flopcalc'])}`: "
                f"peak allocated {_gib(row.alternative.peak_allocated, row.alternative.known)}, peak "
                f"{_gib(row.alternative.peak, row.alternative.known)}"
                + ("" if row.alternative.fits is None else
                   f", {'fits' if row.alternative.fits else 'does not fit'}")
            )
        if e.get("if_inconsistent"):
            lines.append(f"- Why flopcalc's verdict differs: {_cell(e['if_inconsistent'])}")
        lines += [f"- Explanation: {_cell(e['explanation'])}", ""]
    lines += ["## Not representable", ""]
    for e in data.get("not_representable", []):
        lines += [
            (f"- `{e['id']}` ({e['card']}): {e['source']} ({_cell(e['repo_path'])}). Quote: {_cell(e['quote'])} "
             f"Why not: {_cell(e['reason'])}"),
        ]
    return "\n".join(lines) + "\n"


def build(path: Path = PUBLISHED) -> str:
    data = load(path)
    return render([measure(entry) for entry in data["rows"]], data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.write_text(build(), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
