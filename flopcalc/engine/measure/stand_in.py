"""A component of a planned pipeline whose class has no formula, counted by the real module (``estimate
--measure``): which class stands in for it in the plan, and whose input builder makes its inputs.

A pipeline's ``__call__`` reads what it needs of a component from ``component.config`` (the VAE's
``block_out_channels`` for ``vae_scale_factor``, the transformer's ``in_channels`` and ``patch_size`` for the
latent geometry) and calls it as it calls the class its ``__init__`` hint names. So does the plan here:

* the **expected class** of a component is the first class the pipeline's ``__init__`` hint allows there (the
  shipped class list, :mod:`flopcalc.engine.class_list`) that has a formula and an input builder;
* the plan reads the component as that class would be read (the registry's scale factor, latent geometry and
  branches), on the values of the **real class's whole config** as diffusers / transformers build it on the meta
  device (the class defaults applied, and what ``__init__`` registers, e.g. ``AutoencoderTiny``'s
  ``block_out_channels``): :func:`plan_view`. A key the plan reads that the real config lacks, or holds with a
  value the expected class could not take, is refused when read, never filled with the expected class's default;
* the component is measured with its own input builder, or else the expected class's: the inputs the pipeline
  feeds that role. A single input that the real call names differently (a VAE's latent, a vocoder's
  spectrogram) is passed positionally, as the pipelines pass it (``self.vae.decode(latents, ...)``); any other
  input the real call does not take is refused (:func:`flopcalc.engine.measure.component.adapt_inputs`).

A pipeline whose ``__call__`` branches on the class of a component (:data:`CLASS_BRANCHES`) takes a path the plan
cannot know for another class there: no stand-in is made for it.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Any, Mapping

from flopcalc.engine.class_list import builds_from_config, class_calls, class_list, slot_classes
from flopcalc.engine.config import class_name_of, declared_keys
from flopcalc.engine.errors import MeasureError
from flopcalc.engine.registry import config_of, has_formula

#: ``(pipeline, component)`` → where the pipeline's ``__call__`` branches on the class of that component
#: (diffusers 0.42.1): another class there takes a path the plan does not mirror, so none stands in.
CLASS_BRANCHES: dict[tuple[str, str], str] = {
    ("StableDiffusionInpaintPipeline", "vae"):
        "pipeline_stable_diffusion_inpaint.py:1333 encodes the image again and decodes with image and mask for an "
        "AsymmetricAutoencoderKL",
    ("StableDiffusionPAGInpaintPipeline", "vae"):
        "pag/pipeline_pag_sd_inpaint.py:1368 encodes the image again and decodes with image and mask for an "
        "AsymmetricAutoencoderKL",
    ("SanaVideoPipeline", "vae"): "sana_video/pipeline_sana_video.py:227-230 and 993-997 branch on the VAE class",
    ("SanaImageToVideoPipeline", "vae"):
        "sana_video/pipeline_sana_video_i2v.py:217-220, 701-704 and 1046-1050 branch on the VAE class",
    ("AudioLDM2Pipeline", "text_encoder_2"): "audioldm2/pipeline_audioldm2.py:432 calls a VitsModel another way",
}

#: Classes a planned pipeline's hint allows whose call cannot run on the meta device (found by measuring them in
#: their pipeline's place, transformers 5.23.0): class → why. ``estimate --measure`` refuses them up front.
FAILS_ON_META: dict[str, str] = {
    "Gemma4UnifiedForConditionalGeneration": "its forward calls Tensor.item(), which meta tensors cannot run",
}

#: Classes diffusers documents as drop-in replacements of a class with an input builder in pipelines it does not
#: name them in (their ``__init__`` hints name only the class replaced): ``flopcalc coverage`` counts them
#: measurable. Class → (the class it replaces, where diffusers says so).
DROP_INS: dict[str, tuple[str, str]] = {
    "AutoencoderTiny": ("AutoencoderKL", "diffusers docs/source/en/api/models/autoencoder_tiny.md: "
                                         "pipe.vae = AutoencoderTiny.from_pretrained('madebyollin/taesd') in a "
                                         "StableDiffusionPipeline or StableDiffusionXLPipeline"),
}


def builder_classes() -> frozenset[str]:
    """Classes with an input builder, read from ``flopcalc/engine/measure/inputs/*.py`` (and the harness) without
    importing torch: the string arguments of each ``input_builder(...)`` call."""
    return frozenset(builder_inputs())


@lru_cache(maxsize=1)
def builder_inputs() -> dict[str, frozenset[str]]:
    """Class with an input builder → every input name its builder may pass (the outer name of a nested
    ``outer.inner``), read from the sources without importing torch: the string keys of the dicts the builder
    function and the functions it calls by name build (``{"z": ...}``, ``inputs["guidance"] = ...``). An upper
    bound of what one call passes, which :func:`lends_builder` checks a real class's parameters against."""
    folder = files("flopcalc").joinpath("engine", "measure")
    sources = [folder.joinpath("harness.py")]
    sources += [e for e in folder.joinpath("inputs").iterdir() if e.name.endswith(".py")]
    functions: dict[str, list[ast.FunctionDef]] = {}
    registrations: list[tuple[list[str], str | None, ast.AST]] = []
    for source in sources:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                functions.setdefault(node.name, []).append(node)
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "input_builder":
                        registrations.append((_names(deco), node.name, node))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Call)
                  and getattr(node.func.func, "id", "") == "input_builder" and node.args):
                registrations.append((_names(node.func), getattr(node.args[0], "id", None), node))
    out: dict[str, frozenset[str]] = {}
    for classes, function, _node in registrations:
        keys = frozenset(_keys(function, functions, set()))
        for cls in classes:
            out[cls] = out.get(cls, frozenset()) | keys
    return out


def buildable(class_name: str) -> bool:
    """Whether the harness can build ``class_name`` (:func:`flopcalc.engine.measure.harness.build_model`): a model
    class diffusers exports, a transformers class a pipeline's hint names, or one with a model builder."""
    data = class_list()
    if data["models"].get(class_name, {}).get("importable"):
        return True
    if class_name in model_builder_classes():
        return True
    return any(c["class"] == class_name and c["library"] == "transformers"
               for entry in data["pipelines"].values() for comp in entry["components"] for c in comp["classes"])


@lru_cache(maxsize=1)
def model_builder_classes() -> frozenset[str]:
    """Classes with a ``@model_builder`` in ``flopcalc/engine/measure/inputs/*.py``, read without importing torch."""
    folder = files("flopcalc").joinpath("engine", "measure", "inputs")
    found: set[str] = set()
    for source in (e for e in folder.iterdir() if e.name.endswith(".py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "model_builder":
                found.update(_names(node))
    return frozenset(found)


def _names(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def _keys(function: str | None, functions: Mapping[str, list[ast.FunctionDef]], seen: set[str]) -> set[str]:
    """The input names ``function`` (and, transitively, the module functions it calls) puts in a dict."""
    if function is None or function in seen:
        return set()
    seen.add(function)
    found: set[str] = set()
    for node in (n for fn in functions.get(function, []) for n in ast.walk(fn)):
        if isinstance(node, ast.Dict):
            found.update(k.value.partition(".")[0] for k in node.keys
                         if isinstance(k, ast.Constant) and isinstance(k.value, str))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            found.add(node.slice.value.partition(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            found |= _keys(node.func.id, functions, seen)
    return found


def lends_builder(expected: str, actual: str, call: str) -> str | None:
    """Why the input builder of ``expected`` cannot feed ``actual.<call>`` (None: it can): ``actual`` lacks the
    call, or (``forward``) a parameter for an input the builder may pass (one input alone goes positionally, as a
    VAE's ``decode`` / ``encode`` takes its one tensor), by the parameters the class list records."""
    calls = class_calls(actual)
    if calls is None:
        return None  # not in the class list: measuring it checks the real signature
    params = calls.get(call)
    if params is None:
        return f"{actual} has no {call}"
    keys = builder_inputs().get(expected, frozenset())
    if call != "forward" or "**" in params or len(keys) <= 1:
        return None  # a VAE's decode / encode takes its one tensor positionally, as the pipelines pass it
    missing = sorted(keys - set(params))
    return f"{actual}.{call} takes no {', '.join(missing)}, which the {expected} input builder passes" if missing \
        else None


def has_any_formula(class_name: str | None) -> bool:
    """Whether some registered call (``forward`` or a VAE's ``decode``) counts ``class_name``."""
    return has_formula(class_name) or has_formula(class_name, "decode")


def expected_class(pipeline: str, component: str) -> str | None:
    """The class ``pipeline`` expects as ``component``: the first its ``__init__`` hint allows there that has a
    formula and an input builder (None: no such class)."""
    for entry in slot_classes(pipeline, component):
        if has_any_formula(entry["class"]) and entry["class"] in builder_classes():
            return entry["class"]
    return None


def why_not(pipeline: str, component: str, actual: str | None) -> str | None:
    """Why ``actual`` (a class with no formula) cannot be measured as ``pipeline``'s ``component``; None: it can,
    as far as can be told without building it (it builds from its config, and it has an input builder, or the
    expected class lends it one whose inputs its call takes: :func:`lends_builder`)."""
    if not actual:
        return f"{component}/config.json names no class"
    if (pipeline, component) in CLASS_BRANCHES:
        return f"{pipeline} branches on the class of its {component} ({CLASS_BRANCHES[pipeline, component]})"
    if actual in builder_classes():
        return None
    if actual in FAILS_ON_META:
        return f"{actual} cannot be measured on the meta device: {FAILS_ON_META[actual]}"
    if not buildable(actual):
        return (f"{actual} is defined in a pipeline's own module, which diffusers does not export, and flopcalc "
                "builds such a class only with a model builder (flopcalc/engine/measure/inputs)")
    if not builds_from_config(actual):
        return f"{actual} is not a diffusers or transformers class built from a config alone"
    expected = expected_class(pipeline, component)
    if expected is None:
        return (f"{pipeline} expects no class with a formula and an input builder as its {component}, so nothing "
                "says what inputs it feeds one")
    return lends_builder(expected, actual, main_call(expected))


def main_call(class_name: str) -> str:
    """The call a pipeline makes of a component of ``class_name``: a VAE's ``decode``, else ``forward``."""
    return "forward" if has_formula(class_name) else "decode"


def measurable_in_slot(pipeline: str, component: str, actual: str | None) -> bool:
    """Whether ``estimate --measure`` would count ``actual`` as ``pipeline``'s ``component``: what the refusal
    without ``--measure`` and ``flopcalc coverage`` say."""
    return not has_any_formula(actual) and why_not(pipeline, component, actual) is None


@dataclass(frozen=True)
class StandIn:
    """A component of a planned pipeline whose class (``actual``) has no formula: its whole config as the library
    builds it (``config``), the class the pipeline expects there (``expected``; None where the hint names none
    with a formula), and the class whose input builder makes its inputs (``builder``)."""

    component: str
    pipeline: str
    actual: str
    expected: str | None
    config: Mapping[str, Any]

    @property
    def builder(self) -> str | None:
        return self.actual if self.actual in builder_classes() else self.expected

    @property
    def borrowed(self) -> bool:
        """Whether the inputs come from the expected class's builder (the real class has none of its own)."""
        return self.builder is not None and self.builder != self.actual


def stand_ins(pipeline: str, components: Mapping[str, Mapping[str, Any]]) -> dict[str, StandIn]:
    """A :class:`StandIn` for each component of ``pipeline`` (a planned one) whose class has no formula and that the
    pipeline's hint lists or an input builder knows; each real class built once on the meta device for its whole
    config (a class that cannot be built keeps its config.json: measuring it says why)."""
    out = {}
    for name, values in components.items():
        actual = class_name_of(values)
        if not actual or has_any_formula(actual):
            continue
        if not slot_classes(pipeline, name) and actual not in builder_classes():
            continue  # not a component the pipeline's __init__ takes: the plan never runs it
        if (pipeline, name) in CLASS_BRANCHES:
            raise MeasureError(f"{name}: {actual} has no formula, and {why_not(pipeline, name, actual)}: the plan "
                               f"cannot mirror the path {pipeline} takes for another class there")
        out[name] = StandIn(name, pipeline, actual, expected_class(pipeline, name), whole_config(values, name))
    return out


def whole_config(values: Mapping[str, Any], component: str) -> dict[str, Any]:
    """The config the real class holds once built on the meta device (its ``__init__`` defaults applied, what it
    registers itself), as plain JSON values; ``values`` unchanged where it cannot be built (remote code, not a
    library class, a failing build: measuring it gives that reason)."""
    from flopcalc.engine.measure.component import build

    if "auto_map" in values:
        return dict(values)
    try:
        model = build(values, component, class_name_of(values) or "")
    except MeasureError:
        return dict(values)
    config = model.config
    raw = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    whole = json.loads(json.dumps(raw, default=_plain))
    return {**whole, **{k: v for k, v in values.items() if k in ("_class_name", "architectures")}}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (tuple, set, frozenset)) else str(value)


class PlanView(dict):
    """A stand-in's config as the plan reads it: the real class's values under the expected class's name.

    A key the expected class declares or defaults that the real config lacks, or holds with a value the
    expected class's declaration refuses, is refused when the plan reads it (:class:`MeasureError`), never
    filled with the expected class's default; validation sees only the values it can check."""

    def __init__(self, values: Mapping[str, Any], stand_in: StandIn, guarded: Mapping[str, str]) -> None:
        super().__init__(values)
        self.stand_in = stand_in
        self.guarded = dict(guarded)

    def _refuse(self, key: str) -> MeasureError:
        s = self.stand_in
        why = self.guarded[key]
        return MeasureError(f"{s.component}: the {s.pipeline} plan reads {key!r} of the {s.expected} it expects there, "
                            f"and {s.actual}'s config {why}")

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.guarded and not dict.__contains__(self, key):
            raise self._refuse(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        if key in self.guarded and not dict.__contains__(self, key):
            raise self._refuse(key)
        return super().__getitem__(key)


def plan_view(stand_in: StandIn) -> Mapping[str, Any]:
    """What the plan reads as ``stand_in``'s component: its whole config under the expected class's name (the
    plan's lookups and branches follow that class), guarded as :class:`PlanView` says; the config unchanged where
    no class is expected (a plan that needs a formula for it then says which)."""
    if stand_in.expected is None:
        return stand_in.config
    expected = stand_in.expected
    keys = declared_keys(expected) or {}
    defaults = config_of({"_class_name": expected}, component=stand_in.component).defaults
    values = {k: v for k, v in stand_in.config.items() if k not in ("_class_name", "architectures")}
    guarded: dict[str, str] = {}
    for key in set(keys) | set(defaults):
        if key not in values:
            guarded[key] = "has no such key"
        elif key in keys and keys[key].problem(values[key]) is not None:
            guarded[key] = f"holds {values.pop(key)!r} there, not {keys[key].what}"
    library = next((c["library"] for c in slot_classes(stand_in.pipeline, stand_in.component)
                    if c["class"] == expected), "diffusers")
    named = {"_class_name": expected} if library == "diffusers" else {"architectures": [expected]}
    return PlanView({**values, **named}, stand_in, guarded)
