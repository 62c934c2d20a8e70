"""``estimate()``: a model (Hub id, folder, config.json, card) and run settings in, a frozen
:class:`Report` out. Data flows one way: source → plan → per-component cost trees → report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from flopcalc.cost import CONVENTIONS, Cost, Node
from flopcalc.errors import ConfigError, FlopcalcError
from flopcalc.pipelines import Plan, Settings, plan
from flopcalc.registry import assemble, component_params

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
        from flopcalc.report import report_dict

        return report_dict(self, per_block=per_block)


def estimate(
    model: str,
    *,
    height: int | None = None,
    width: int | None = None,
    steps: int | None = None,
    guidance_scale: float | None = None,
    true_cfg_scale: float | None = None,
    negative_prompt: bool = False,
    batch_size: int = 1,
    num_images_per_prompt: int = 1,
    max_sequence_length: int | None = None,
    strength: float | None = None,
    resolution_binning: bool = True,
    num_frames: int | None = None,
    vae_tiling: bool | None = None,
    convention: str = "torch",
    revision: str | None = None,
    token: str | None = None,
) -> Report:
    """Estimate the compute of one generation with ``model``.

    ``model`` is a bundled card name or alias (``flux-dev``), a local diffusers folder, a single
    component ``config.json`` (or its folder), or a Hub repo id (``org/name``; only
    ``model_index.json`` and the components' ``config.json`` are fetched). Unset settings take
    the pipeline's defaults. Raises :class:`flopcalc.errors.FlopcalcError` with an actionable
    message on bad input.
    """
    from flopcalc.sources import resolve

    source = resolve(model, revision=revision, token=token)
    settings = Settings(height, width, steps, guidance_scale, true_cfg_scale, negative_prompt, batch_size,
                        num_images_per_prompt, max_sequence_length, strength, resolution_binning, num_frames,
                        vae_tiling)
    return estimate_configs(source.model_index, source.components, settings, convention=convention,
                            model=source.name, source_kind=source.kind, revision=source.revision,
                            source_notes=source.notes, missing=tuple(source.missing))


def estimate_configs(
    model_index: Mapping[str, Any] | None,
    components: Mapping[str, Mapping[str, Any]],
    settings: Settings,
    *,
    convention: str = "torch",
    model: str = "(configs)",
    source_kind: str = "configs",
    revision: str | None = None,
    source_notes: tuple[str, ...] = (),
    missing: tuple[str, ...] = (),
) -> Report:
    """The same as :func:`estimate` for configs already in memory. ``source_notes`` (what the
    source could not give) lead the report's notes; ``missing`` names listed components without a
    config, whose generic "absent" plan note they replace."""
    if convention not in CONVENTIONS:
        raise FlopcalcError(f"unknown convention {convention!r}; choose one of: {', '.join(CONVENTIONS)}")
    p: Plan = plan(model_index, components, settings)
    params: dict[str, int] = {}
    estimates = []
    for group in _same_call_groups(p.runs):
        run = group[0]
        cfg = components[run.component]
        trees = [assemble(cfg, r.shape, component=r.component, call=r.call, validated=True) for r in group]
        if run.component not in params:
            params[run.component] = component_params(cfg, component=run.component, assembled=trees[0],
                                                     call=run.call)
        shape = {k: v for k, v in vars(run.shape).items() if v is not None}
        if len(group) == 1:
            tree, runs, why = replace(trees[0], name=run.component), run.runs, run.why
        else:
            tree, runs, why = _merge_pieces(run.component, group, trees)
        estimates.append(ComponentEstimate(run.component, run.class_name, run.call, run.role, runs, why,
                                           params[run.component], shape, tree, convention))
        _check_counts(estimates[-1])
    plan_notes = tuple(n for n in p.notes if not any(n.startswith(f"{name} is absent") for name in missing))
    return Report(model, source_kind, revision, p.pipeline, convention, p.settings, p.passes, tuple(estimates),
                  tuple(source_notes) + plan_notes)


def _check_counts(comp: ComponentEstimate) -> None:
    """The last line of defence of every printed number: exact, non-negative, and positive where a
    component runs (a config whose values pass validation but describe no work is refused)."""
    from flopcalc.cost import invalid_count

    where = invalid_count(comp.tree)
    if where is None and isinstance(comp.macs_per_run, int) and comp.macs_per_run <= 0 < comp.runs:
        where = f"{comp.macs_per_run} MACs per run"
    if where is not None:
        raise ConfigError(f"{comp.component}/config.json ({comp.class_name}): its values give {where} for "
                          f"{comp.call}; check the config's sizes and counts, or use the model's original config.json.")


def _same_call_groups(runs) -> list[list]:
    """Consecutive runs of the same component call (e.g. a tiled VAE decode: one run per tile
    shape) form one group."""
    groups: list[list] = []
    for run in runs:
        if groups and (groups[-1][0].component, groups[-1][0].call) == (run.component, run.call):
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def _merge_pieces(name: str, group: list, trees: list[Node]) -> tuple[Node, int, str]:
    """One report row for a call made in pieces (tiles of several shapes): runs = the greatest
    common count, each piece a child node ``piece <i>`` repeated ``runs_i / runs`` times."""
    from math import gcd

    runs = 0
    for r in group:
        runs = gcd(runs, r.runs)
    children = tuple(replace(t, name=f"piece{i}", count=t.count * (r.runs // runs))
                     for i, (r, t) in enumerate(zip(group, trees)))
    why = f"{runs} run(s) of {len(group)} piece shapes: " + "; ".join(r.why for r in group)
    return Node(name, children=children, formula="pieces"), runs, why
