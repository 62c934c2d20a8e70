"""One planned run of a component whose class has no formula, measured: the real module built from
its config on the meta device (no weights, no memory, never remote code) and counted with
``FlopCounterMode`` by :mod:`flopcalc.engine.measure.harness`, on the inputs its class's builder makes from
the run's shape and the plan's settings.

The count is the torch convention (FlopCounterMode's FLOPs / 2 = MACs), split by aten op: ``mm`` /
``addmm`` as linear layers, convolutions as ``conv``, ``bmm`` / ``baddbmm`` / SDPA as attention,
anything else as ``functional``. A measured row has no block tree and no elementwise estimate.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

from flopcalc.engine.cost import Cost, Node
from flopcalc.engine.errors import MeasureError, install_hint

INSTALL = install_hint("measure")
#: The libraries the harness needs (the ``[measure]`` extra).
REQUIRED = ("torch", "diffusers", "transformers")


@dataclass(frozen=True)
class Measured:
    """One call of one component as measured: its cost tree (one node, split by op), parameters,
    the seconds the build and count took, the harness settings its inputs were built from and whose input
    builder made them."""

    tree: Node
    params: int
    seconds: float
    inputs_from: Mapping[str, int]
    builder: str = ""  # the class whose input builder made the inputs (its own, or the one its pipeline expects)


def harness() -> ModuleType:
    """:mod:`flopcalc.engine.measure.harness`, or a :class:`MeasureError` naming what to install."""
    missing = [name for name in REQUIRED if not _importable(name)]
    if missing:
        raise MeasureError(f"--measure needs {', '.join(REQUIRED)} ({', '.join(missing)} missing): {INSTALL}")
    try:
        from flopcalc.engine.measure import harness as module
    except ImportError as exc:
        raise MeasureError(f"--measure could not import {exc.name or 'its harness'} ({exc}): {INSTALL}") from None
    return module


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # sys.modules[name] = None (blocked) or a broken spec
        return False


def role_of(class_name: str | None, component: str) -> str:
    """The role of a bare config of a class with no formula, from its input builder's settings: a
    text encoder (token ids only) can be measured alone; a denoiser or VAE needs its pipeline's plan."""
    builder = harness().INPUT_BUILDERS.get(class_name or "")
    if builder is None:
        raise MeasureError(_no_builder(component, class_name))
    if tuple(builder.settings) == ("seq_len",):
        return "text_encoder"
    raise MeasureError(f"{component}: {class_name} has no formula, and given alone only a text encoder can be "
                       "measured: a denoiser or VAE runs as its pipeline's plan says (give the pipeline folder with "
                       "its model_index.json, under a pipeline flopcalc plans)")


def _no_builder(component: str, class_name: str | None, why: str | None = None) -> str:
    because = f" ({why})" if why else ""
    return (f"{component}: {class_name} has no formula and no input builder{because}, so flopcalc cannot tell what "
            "inputs its pipeline feeds it; add one with @input_builder in flopcalc/engine/measure/inputs/<family>.py "
            "(see validation/README.md)")


def harness_settings(shape: Any, settings: Any) -> dict[str, int]:
    """What an input builder reads, from a run's shape and the plan's resolved settings: ``seq_len``
    (text encoders) and ``text_len`` (``text_len_2``) from the shape; ``height`` / ``width`` (image pixels: the builders
    derive the latent grid the way the pipeline does) and ``num_frames`` from the shape where it has
    them (a VAE encode), else from the settings."""
    out: dict[str, int] = {}
    for key in ("seq_len", "text_len", "text_len_2"):
        if getattr(shape, key, None) is not None:
            out[key] = int(getattr(shape, key))
    for key, fallback in (("height", "height"), ("width", "width"), ("frames", "num_frames")):
        value = getattr(shape, key, None)
        if value is None:
            value = getattr(settings, fallback, None)
        if value is not None:
            out["num_frames" if key == "frames" else key] = int(value)
    return out


def build(config_values: Mapping[str, Any], component: str, class_name: str) -> Any:
    """The real ``class_name`` built from ``config_values`` on the meta device (never remote code), or a
    :class:`MeasureError` saying why it cannot be."""
    h = harness()
    if "auto_map" in config_values:
        raise MeasureError(f"{component}: its config maps {class_name} to remote code (auto_map); flopcalc never runs "
                           "remote code, so it measures library classes only")
    with tempfile.TemporaryDirectory(prefix="flopcalc-measure-") as folder:
        Path(folder, "config.json").write_text(json.dumps(dict(config_values)), encoding="utf-8")
        try:
            model = h.build_model(folder, class_name)
        except ImportError:
            raise MeasureError(f"{component}: {class_name} is in neither diffusers nor transformers (installed "
                               "versions); flopcalc measures library classes only, never remote code") from None
        except Exception as exc:  # noqa: BLE001 - the library's own complaint, on one line
            raise MeasureError(f"{component}: could not build {class_name} from its config on the meta device: "
                               f"{type(exc).__name__}: {_one_line(exc)}") from None
    off_meta = sorted({t.device.type for t in (*model.parameters(), *model.buffers())} - {"meta"})
    if off_meta:
        raise MeasureError(f"{component}: {class_name} put tensors on {', '.join(off_meta)} when built under "
                           "torch.device('meta'); flopcalc measures on the meta device only (no weights, no memory)")
    return model


def measure_call(config_values: Mapping[str, Any], *, component: str, class_name: str, call: str, shape: Any,
                 settings: Any, stand_in: Any = None) -> Measured:
    """Build ``class_name`` from ``config_values`` on meta and count one ``call`` with FlopCounterMode, on the
    inputs of its own input builder, or else (``stand_in``, a :class:`~flopcalc.engine.measure.stand_in.StandIn`)
    of the builder of the class its pipeline expects in its place."""
    h = harness()
    if getattr(shape, "split", None) is not None:
        raise MeasureError(f"{component}.{call}: this call runs in pieces (tiles or chunks); --measure counts a call "
                           "made whole only")
    start = time.perf_counter()
    model = build(config_values, component, class_name)
    built = type(model).__name__
    builder = built if built in h.INPUT_BUILDERS else getattr(stand_in, "expected", None)
    if builder not in h.INPUT_BUILDERS:
        raise MeasureError(_no_builder(component, built, _no_stand_in(stand_in)))
    given = harness_settings(shape, settings)
    missing = [k for k in h.INPUT_BUILDERS[builder].settings if k not in given]
    if missing:
        raise MeasureError(f"{component}: the {builder} input builder needs {', '.join(missing)}, which this plan "
                           "does not give")
    try:
        inputs, used = h.build_inputs(model, given, call, builder_class=builder)
    except KeyError as exc:  # a config key the builder reads
        raise MeasureError(f"{component}: the {builder} input builder reads {exc.args[0]!r} of the config, which "
                           f"{built}'s config does not have") from None
    except Exception as exc:  # noqa: BLE001 - a builder that cannot read this config: say which, on one line
        raise MeasureError(f"{component}: the {builder} input builder cannot make {built}'s inputs: "
                           f"{type(exc).__name__}: {_one_line(exc)}") from None
    if builder != built:
        inputs = adapt_inputs(model, call, inputs, stand_in)
    try:
        fx = h.measure_model(model, inputs, call=call, with_thop=False, module_depth=1)
    except Exception as exc:  # noqa: BLE001 - a module that fails on meta: say which, on one line
        raise MeasureError(f"{component}: measuring {built}.{call} on the meta device failed: "
                           f"{type(exc).__name__}: {_one_line(exc)}") from None
    seconds = time.perf_counter() - start
    cost = cost_of(fx["torch"]["by_op"], fx["params"])
    if 2 * cost.macs("torch") != fx["torch"]["flops"]:
        raise MeasureError(f"{component}: FlopCounterMode's total {fx['torch']['flops']} is not the sum of its ops")
    return Measured(Node(component, cost, formula="measured"), int(fx["params"]), seconds, used, builder)


def _no_stand_in(stand_in: Any) -> str | None:
    if stand_in is None:
        return None
    return f"and {stand_in.pipeline} expects no class with one as its {stand_in.component}"


def cost_of(by_op: Mapping[str, int], params: int) -> Cost:
    """FlopCounterMode's FLOPs per aten op as MACs by kind (see the module doc)."""
    kinds = {"linear": 0, "conv": 0, "attention": 0, "functional": 0}
    for op, flops in by_op.items():
        if flops % 2:
            raise MeasureError(f"FlopCounterMode counted an odd number of FLOPs for {op}: not 2 × MACs")
        name = op.removeprefix("aten.").split(".")[0]
        if name in ("mm", "addmm"):
            kind = "linear"
        elif "convolution" in name:
            kind = "conv"
        elif name in ("bmm", "baddbmm") or "attention" in name:
            kind = "attention"
        else:
            kind = "functional"
        kinds[kind] += flops // 2
    return Cost(params=params, **kinds)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def adapt_inputs(model: Any, call: str, inputs: Mapping[str, Any], stand_in: Any) -> dict[str, Any]:
    """The inputs of ``stand_in.expected``'s builder (a :class:`~flopcalc.engine.measure.stand_in.StandIn`) fitted to the real ``model.<call>``: kept where the real call
    takes them by name; one tensor input it names differently is passed as its first parameter (how the pipelines
    pass a VAE its latent or a vocoder its spectrogram); any other mismatch is refused in one line."""
    method = model.forward if call == "forward" else getattr(model, call, None)
    if method is None:
        raise MeasureError(f"{stand_in.component}: {stand_in.actual} has no {call}, which {stand_in.pipeline} calls "
                           f"on the {stand_in.expected} it expects there")
    params = inspect.signature(method).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(inputs)
    names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [k for k in inputs if k.partition(".")[0] not in names]
    given = [k for k, v in inputs.items() if v is not None]
    if unknown and len(given) == 1 and unknown == given and names:
        return {names[0]: inputs[given[0]], **{k: v for k, v in inputs.items() if k != given[0]}}
    required = [n for n, p in params.items() if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                     p.KEYWORD_ONLY)]
    missing = [n for n in required if n not in {k.partition(".")[0] for k in inputs}]
    if unknown or missing:
        what = "; ".join(filter(None, (f"it does not take {', '.join(unknown)}" if unknown else "",
                                       f"it needs {', '.join(missing)}" if missing else "")))
        raise MeasureError(f"{stand_in.component}: {stand_in.actual}.{call} is not called as the {stand_in.expected} "
                           f"{stand_in.pipeline} expects there ({what}): flopcalc cannot tell what inputs the "
                           "pipeline would feed it")
    return dict(inputs)
