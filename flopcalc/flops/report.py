"""The :class:`Report` of one generation (what :func:`flopcalc.flops.estimate.estimate` returns: frozen, one
:class:`ComponentEstimate` per component run) and its renderings: a table for people, JSON (with the whole
block tree) and CSV for programs. Every output names its convention and unit."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from flopcalc.engine.cost import WEIGHT_FIELDS, Cost, Node, declared_block_kinds
from flopcalc.engine.settings import Settings
from flopcalc.render.text_tables import columns

@dataclass(frozen=True)
class ComponentEstimate:
    """One component's share: ``runs`` forwards of ``macs_per_run`` each."""

    component: str
    class_name: str
    call: str
    role: str
    runs: int
    why: str
    params: int
    shape: Mapping[str, Any]
    tree: Node
    convention: str
    #: "formula" (the closed forms) or "measured" (``measure=True``: the real module counted with
    #: FlopCounterMode on the meta device, in ``measure_seconds``; torch convention, no block tree).
    method: str = "formula"
    measure_seconds: float | None = None

    @property
    def measured(self) -> bool:
        return self.method == "measured"

    @property
    def per_run(self) -> Cost:
        return self.tree.total

    @property
    def macs_per_run(self) -> int:
        return self.tree.total.macs(self.convention)

    @property
    def macs(self) -> int:
        return self.runs * self.macs_per_run

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def elementwise(self) -> int:
        return self.runs * self.tree.total.elementwise


@dataclass(frozen=True)
class Report:
    model: str
    source_kind: str
    revision: str | None
    pipeline: str
    convention: str
    settings: Settings
    passes: int
    components: tuple[ComponentEstimate, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: component → where its config came from (:class:`flopcalc.engine.sources.ConfigOrigin`)
    config_origins: Mapping[str, Any] = field(default_factory=dict)
    #: component → its config values, as read (what predictors need beyond the counts: attention heads)
    configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    #: whether a step's guidance passes run as one forward of the concatenated batch (else one forward each)
    batched_passes: bool = True

    @property
    def macs(self) -> int:
        return sum(c.macs for c in self.components)

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def elementwise(self) -> int:
        return sum(c.elementwise for c in self.components)

    @property
    def params(self) -> int:
        """Parameters of the components counted (each component once)."""
        seen: dict[str, int] = {}
        for c in self.components:
            seen[c.component] = c.params
        return sum(seen.values())

    def component(self, name: str, call: str | None = None) -> ComponentEstimate:
        for c in self.components:
            if c.component == name and (call is None or c.call == call):
                return c
        raise KeyError(name)

    def to_dict(self, *, per_block: bool = True) -> dict[str, Any]:
        return report_dict(self, per_block=per_block)


FORMATS = ("table", "json", "csv")

#: What each convention counts, said in every report.
CONVENTION_TEXT = {
    "torch": "multiply-accumulates of matmuls (nn.Linear), convolutions and attention (QKᵀ, A·V), "
             "exactly as torch.utils.flop_counter.FlopCounterMode counts them; FLOPs = 2 × MACs",
    "thop": "multiply-accumulates as thop 0.1.1 counts them: nn.Linear and nn.Conv modules plus its "
            "nn.LayerNorm rule, no functional attention (the convention of published diffusion tables); "
            "FLOPs = 2 × MACs",
}
ELEMENTWISE_TEXT = ("elementwise ops (norms, activations, softmax, upsampling; flopcalc's estimate, "
                    "counted by neither convention)")


def render(report: Report, fmt: str = "table", *, per_block: bool = False, depth: int = 4) -> str:
    if fmt == "table":
        return table(report, per_block=per_block, depth=depth)
    if fmt == "json":
        return json.dumps(report_dict(report, per_block=per_block), indent=2) + "\n"
    if fmt == "csv":
        return to_csv(report, per_block=per_block, depth=depth)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def by_block_kind(tree: Node, convention: str) -> list[tuple[str, int, int]]:
    """``(formula, instances, MACs)`` per block kind of one run, largest first; work outside
    every block kind the package declares (:func:`flopcalc.engine.cost.block_kinds`, all of them, from the
    discovery index, whichever modules this process imported) is ``other``. The rows add up to the component's
    total."""
    from flopcalc.engine.discovery import index

    kinds = frozenset(index().block_kinds) | declared_block_kinds()
    acc: dict[str, list[int]] = {}

    def visit(node: Node, k: int) -> None:
        k *= node.count
        if node.formula in kinds:
            entry = acc.setdefault(node.formula, [0, 0])
            entry[0] += k
            entry[1] += k * node.per_item.macs(convention)
            return
        own = node.cost.macs(convention)
        if own:
            entry = acc.setdefault("other", [0, 0])
            entry[1] += k * own
        for child in node.children:
            visit(child, k)

    visit(tree, 1)
    return sorted(((f, n, m) for f, (n, m) in acc.items()), key=lambda r: -r[2])


# --------------------------------------------------------------------------- dict / JSON


def report_dict(report: Report, *, per_block: bool = True) -> dict[str, Any]:
    from flopcalc.engine.version import __version__

    total = report.macs
    return {
        "flopcalc_version": __version__,
        "model": report.model,
        "source": report.source_kind,
        "revision": report.revision,
        "pipeline": report.pipeline,
        "convention": report.convention,
        "counted": CONVENTION_TEXT[report.convention],
        "unit": "MACs (multiply-accumulates); flops = 2 × macs",
        "settings": report.settings.options(),
        "guidance_passes": report.passes,
        "components": [_component_dict(c, total, per_block, report.config_origins) for c in report.components],
        "total": {"macs": total, "flops": report.flops, "params": report.params,
                  "elementwise_ops": report.elementwise},
        "elementwise": ELEMENTWISE_TEXT,
        "notes": list(report.notes),
    }


def _origin_dict(origin: Any) -> dict[str, Any]:
    if origin is None:
        return {"status": "unknown", "detail": "not recorded", "correction": None}
    return {"status": origin.status, "detail": origin.detail, "correction": origin.correction}


def _component_dict(c: ComponentEstimate, total: int, per_block: bool, origins: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        "component": c.component,
        "class_name": c.class_name,
        "call": c.call,
        "role": c.role,
        "method": c.method,
        "runs": c.runs,
        "runs_from": c.why,
        "params": c.params,
        "shape": dict(c.shape),
        "macs_per_run": c.macs_per_run,
        "macs": c.macs,
        "flops": c.flops,
        "share": c.macs / total if total else 0.0,
        "per_run": {k: v for k, v in c.per_run.as_dict().items() if k not in WEIGHT_FIELDS},
        "config": _origin_dict(origins.get(c.component)),
    }
    if c.per_run.idle_params:  # a mixture of experts: the parameters one token uses
        out["active_params"] = c.params - c.per_run.idle_params
    if c.measured:
        out["measure_seconds"] = c.measure_seconds
    if per_block:
        out["blocks"] = _node_dict(c.tree, c.convention)
        out["by_block_kind"] = [{"formula": f, "instances": n, "macs": m}
                                for f, n, m in by_block_kind(c.tree, c.convention)]
    return out


def _node_dict(node: Node, convention: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": node.name}
    if node.count != 1:
        d["count"] = node.count
    if node.span is not None:
        d["span"] = list(node.span)
    if node.formula:
        d["formula"] = node.formula
    d["macs"] = node.total.macs(convention)
    d["params"] = node.total.params
    if node.children:
        d["children"] = [_node_dict(c, convention) for c in node.children]
    return d


# --------------------------------------------------------------------------- table


def format_params(n: int) -> str:
    for unit, scale in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def settings_line(report: Report) -> str:
    s = report.settings
    parts = []
    if s.height and s.width:
        parts.append(f"{s.height}×{s.width}" + (f" × {s.num_frames} frames" if s.num_frames else ""))
    if s.steps:
        parts.append(f"{s.steps} steps" + (f" (strength {s.strength})" if s.strength is not None else ""))
    if s.guidance_scale is not None:
        parts.append(f"guidance {s.guidance_scale:g}")
    if s.true_cfg_scale not in (None, 1.0):
        parts.append(f"true CFG {s.true_cfg_scale:g}" + (" + negative prompt" if s.negative_prompt else ""))
    parts.append(f"{report.passes} denoiser pass(es) per step")
    parts.append(f"batch {s.batch_size} × {s.num_images_per_prompt} {'video(s)' if s.num_frames else 'image(s)'}")
    if s.max_sequence_length:
        parts.append(f"max_sequence_length {s.max_sequence_length}")
    if s.vae_tiling is not None:
        parts.append("VAE tiled" if s.vae_tiling else "VAE untiled")
    return " · ".join(parts)


def origin_status(report: Report, component: str) -> str:
    origin = report.config_origins.get(component)
    return origin.status if origin is not None else "unknown"


def component_rows(report: Report) -> list[tuple[str, ...]]:
    """The component table (one unit family: FLOPs = 2 × MACs), header first, total last."""
    total = report.macs
    rows = [("component", "class", "config", "runs", "params", "GFLOPs/run", "TFLOPs", "share")]
    for c in report.components:
        cls = c.class_name + (f".{c.call}" if c.call != "forward" else "")
        if c.measured:
            cls += f" (measured, {c.measure_seconds:.2f} s)"
        params = format_params(c.params) + (f" ({format_params(c.params - c.per_run.idle_params)} active)"
                                            if c.per_run.idle_params else "")
        rows.append((c.component, cls, origin_status(report, c.component), str(c.runs), params,
                     f"{2 * c.macs_per_run / 1e9:,.2f}", f"{c.flops / 1e12:,.3f}",
                     f"{100 * c.macs / total if total else 0:.1f}%"))
    rows.append(("total", "", "", "", format_params(report.params), "", f"{report.flops / 1e12:,.3f}", "100.0%"))
    return rows


#: Right-aligned (numeric) columns of :func:`component_rows`.
COMPONENT_NUMERIC = (3, 4, 5, 6, 7)


def provenance_lines(report: Report) -> list[str]:
    """Where the configs came from: verbatim Hub copies in one line, each reconstructed config on
    its own line with its source, and every correction a card makes to a file."""
    origins: dict[str, Any] = {}
    for c in report.components:
        origins.setdefault(c.component, report.config_origins.get(c.component))
    lines = []
    verbatim = [name for name, o in origins.items() if o is not None and o.status == "verbatim"]
    if verbatim:
        lines.append(f"configs of {', '.join(verbatim)}: verbatim copies of the Hub files"
                     + (" (sources in the card's PROVENANCE.json)" if report.source_kind == "card" else ""))
    by_detail: dict[str, list[str]] = {}
    for name, o in origins.items():
        if o is None or o.status != "verbatim":
            by_detail.setdefault(o.detail if o is not None else "origin not recorded", []).append(name)
    lines += [f"config{'s' if len(names) > 1 else ''} of {', '.join(names)}: {detail}"
              for detail, names in by_detail.items()]
    lines += [f"corrected by flopcalc in {name}/config.json: {o.correction}"
              for name, o in origins.items() if o is not None and o.correction]
    return lines


def table(report: Report, *, per_block: bool = False, depth: int = 4) -> str:
    head = f"{report.model} ({report.source_kind}"
    head += f" @ {report.revision[:12]}" if report.revision else ""
    head += f") · {report.pipeline}"
    lines = [head, settings_line(report), ""]
    lines += columns(component_rows(report), right=COMPONENT_NUMERIC, rule_before_last=True)
    lines.append(f"elementwise (not in the total): {report.elementwise / 1e12:,.3f} T ops")
    lines.append("")
    lines.append(f"counted ({report.convention} convention): {CONVENTION_TEXT[report.convention]}.")
    lines.append("runs = batch-1 forwards: " + "; ".join(f"{c.component}{'.' + c.call if c.call != 'forward' else ''}"
                                                      f" {c.why}" for c in report.components) + ".")
    lines += provenance_lines(report)
    for note in report.notes:
        lines.append(f"note: {note}")
    if per_block:
        for c in report.components:
            lines += ["", f"{c.component}{'.' + c.call if c.call != 'forward' else ''} per block "
                          f"(one run; GFLOPs = 2 × GMACs; attn = share of attention):"]
            lines += columns(block_rows(c, depth), right=(1, 2, 3, 4))
            whole = c.macs_per_run or 1
            lines.append("by block kind: " + ", ".join(
                f"{f} ×{n} {100 * m / whole:.1f}%" if f != "other" else f"other {100 * m / whole:.1f}%"
                for f, n, m in by_block_kind(c.tree, c.convention)))
    return "\n".join(lines) + "\n"


def block_rows(c: ComponentEstimate, depth: int) -> list[tuple[str, ...]]:
    rows = [("module", "×", "GFLOPs", "share", "attn", "block")]
    whole = c.macs_per_run or 1
    for path, level, node in _walk(c.tree, depth):
        macs = node.total.macs(c.convention)
        attn = node.total.attention if c.convention == "torch" else 0
        rows.append(("  " * level + path, str(node.count) if node.count != 1 else "",
                     f"{2 * macs / 1e9:,.2f}", f"{100 * macs / whole:.1f}%", f"{100 * attn / macs:.0f}%" if macs else "-",
                     node.formula))
    return rows


def _walk(node: Node, depth: int, level: int = 0) -> Iterator[tuple[str, int, Node]]:
    yield node.name, level, node
    if level + 1 < depth:
        for child in node.children:
            yield from _walk(child, depth, level + 1)


# --------------------------------------------------------------------------- CSV


#: Per-block CSV columns: ``depth`` 0 is a component's row (those add up to the total); a block's
#: row at depth d is part of its parent's at d − 1, so only rows of one component and one depth
#: may be summed, never rows of several depths.
CSV_COLUMNS = ["component", "path", "depth", "class_name", "call", "runs", "count", "params", "macs_per_run", "macs",
               "flops", "share", "convention", "config", "config_correction", "method"]


def to_csv(report: Report, *, per_block: bool = False, depth: int = 4) -> str:
    buf = io.StringIO()
    import csv

    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    total = report.macs
    for c in report.components:
        origin = report.config_origins.get(c.component)
        config = [origin_status(report, c.component), (origin.correction or "") if origin else ""]
        w.writerow([c.component, c.component, 0, c.class_name, c.call, c.runs, 1, c.params, c.macs_per_run, c.macs,
                    c.flops, f"{c.macs / total if total else 0:.6f}", report.convention, *config, c.method])
        if per_block:
            for path, node in c.tree.walk():
                level = path.count(".")
                if path == c.tree.name or level >= depth:
                    continue
                macs = node.total.macs(c.convention)
                w.writerow([c.component, path, level, "", c.call, c.runs, node.count, node.total.params, macs,
                            c.runs * macs, 2 * c.runs * macs, f"{c.runs * macs / total if total else 0:.6f}",
                            report.convention, *config, c.method])
    return buf.getvalue()


# --------------------------------------------------------------------------- comparison


def _role_flops(report: Report, role: str) -> int:
    return sum(c.flops for c in report.components if c.role == role)


def compare_dict(reports: list[Report]) -> dict[str, Any]:
    return {
        "convention": reports[0].convention,
        "unit": "FLOPs (= 2 × MACs)",
        "models": [
            {
                "model": r.model,
                "pipeline": r.pipeline,
                "settings": r.settings.options(),
                "guidance_passes": r.passes,
                "params": r.params,
                "flops": r.flops,
                "text_encoders_flops": _role_flops(r, "text_encoder"),
                "denoiser_flops": _role_flops(r, "denoiser"),
                "vae_flops": _role_flops(r, "vae_decoder") + _role_flops(r, "vae_encoder"),
                "configs": {c.component: _origin_dict(r.config_origins.get(c.component)) for c in r.components},
            }
            for r in reports
        ],
    }


def _origins_summary(report: Report) -> str:
    """``verbatim``, or ``reconstructed: unet, movq`` when not every config is the Hub's file."""
    statuses = {c.component: origin_status(report, c.component) for c in report.components}
    unsure = [name for name, status in statuses.items() if status not in ("verbatim", "hub")]
    if not unsure:
        return "Hub" if "hub" in statuses.values() else "verbatim"
    kinds = sorted({statuses[n] for n in unsure})
    return f"{'/'.join(kinds)}: {', '.join(unsure)}"


def compare_rows(reports: Sequence[Report]) -> list[tuple[str, ...]]:
    """The side-by-side summary (``flopcalc compare``'s table, and ``flopcalc report``'s with several models): a
    header row of the models, then one row per quantity."""
    def t(v: int) -> str:
        return f"{v / 1e12:,.3f}"

    return [
        ("", *[r.model for r in reports]),
        ("pipeline", *[r.pipeline for r in reports]),
        ("size", *[f"{r.settings.height}×{r.settings.width}" for r in reports]),
        ("steps × passes", *[f"{r.settings.steps} × {r.passes}" for r in reports]),
        ("params", *[format_params(r.params) for r in reports]),
        ("text encoders TFLOPs", *[t(_role_flops(r, "text_encoder")) for r in reports]),
        ("denoiser TFLOPs", *[t(_role_flops(r, "denoiser")) for r in reports]),
        ("VAE TFLOPs", *[t(_role_flops(r, "vae_decoder") + _role_flops(r, "vae_encoder")) for r in reports]),
        ("total TFLOPs", *[t(r.flops) for r in reports]),
        ("configs", *[_origins_summary(r) for r in reports]),
    ]


def compare_table(reports: list[Report]) -> str:
    lines = columns(compare_rows(reports), right=tuple(range(1, len(reports) + 1)))
    lines.append(f"counted ({reports[0].convention} convention): {CONVENTION_TEXT[reports[0].convention]}.")
    for r in reports:
        lines += [f"{r.model}: {line}" for line in provenance_lines(r) if line.startswith("corrected")]
    return "\n".join(lines) + "\n"
