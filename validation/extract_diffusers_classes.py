"""Write ``flopcalc/data/diffusers/<version>.json``: every pipeline and model class the installed
diffusers exports, with each pipeline's model components, for ``flopcalc coverage`` (which then
needs no diffusers at run time).

* **Pipelines**: the names in diffusers' top-level ``_import_structure["pipelines"]`` (and its
  ``utils.dummy_*`` entries, the classes exported as dummies) that are
  :class:`diffusers.DiffusionPipeline` subclasses (``DiffusionPipeline`` itself, the
  ``AutoPipelineFor*`` dispatchers and modular pipelines are not pipeline classes one loads a
  checkpoint with), plus the ones exported as dummies because an optional backend is missing
  (ONNX, librosa, note_seq, sentencepiece: ``requires`` names it). ``deprecated``: defined under
  ``diffusers/pipelines/deprecated/``.
* **Components**: the parameters of the class's ``__init__`` whose type hint names a
  ``torch.nn.Module`` class (a ``ModelMixin`` or a transformers ``PreTrainedModel``: what FLOPs
  are counted for; tokenizers, schedulers and processors are not), each with every class its
  hint allows (a ``Union``), and ``optional`` when the hint allows ``None``, the default is
  ``None`` or the class lists it in ``_optional_components``. A hint naming a family's abstract base
  (``Gemma2PreTrainedModel``) also lists the exported ``subclasses`` a config can name. A dummy's ``__init__`` is read from
  its source file (its module cannot be imported); names its hint uses that diffusers and
  transformers do not export are kept as written.
* **Models**: the names in ``_import_structure["models"]`` that are ``ModelMixin`` subclasses (or
  dummies of them), with ``from_config`` as above.

Run: ``python validation/extract_diffusers_classes.py`` (``--check``: compare, write nothing; exit 1
on a difference). Output is byte-identical across runs on the same diffusers / transformers.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import logging
import sys
import types
import typing
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "flopcalc" / "data" / "diffusers"


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import transformers

    transformers.logging.set_verbosity_error()


def _is_dummy(obj: Any) -> bool:
    from diffusers.utils.import_utils import DummyObject

    return isinstance(obj, DummyObject)


def _hint_names(hint: Any) -> list[Any]:
    """The classes (or, for string hints, the names) a type hint allows; ``None`` for NoneType."""
    if hint is inspect.Parameter.empty:
        return []
    if hint is None or hint is type(None):
        return [None]
    if isinstance(hint, str):
        return _names_in_source(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return [n for arg in typing.get_args(hint) for n in _hint_names(arg)]
    if inspect.isclass(hint):
        return [hint]
    return []


def _names_in_source(text: str) -> list[Any]:
    """Names in a hint written as source (``Optional[CLIPTextModel]``, ``A | B | None``)."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return []
    out: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value is None:
            out.append(None)
        elif isinstance(node, ast.Name) and node.id not in ("Optional", "Union", "List", "Dict", "Tuple", "Any"):
            out.append(node.id)
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
    return out


def _resolve(name: str) -> Any:
    """A class name as diffusers or transformers export it, else the name itself."""
    import diffusers
    import transformers

    for library in (diffusers, transformers):
        try:
            obj = getattr(library, name)
        except Exception:  # noqa: BLE001 - an optional backend missing: not a model we can resolve
            continue
        if inspect.isclass(obj):
            return obj
    return name


def _library(cls: type) -> str:
    return cls.__module__.split(".")[0]


def _is_model_class(cls: Any) -> bool:
    import torch

    return inspect.isclass(cls) and issubclass(cls, torch.nn.Module)


def _component(name: str, allowed: list[Any], default_none: bool, optional_listed: bool) -> dict[str, Any] | None:
    """A model component from the classes its hint allows, or None when none is a torch module."""
    classes = []
    for item in allowed:
        cls = _resolve(item) if isinstance(item, str) else item
        if cls is None:
            continue
        if _is_model_class(cls):
            entry = {"class": cls.__name__, "library": _library(cls), "from_config": _from_config(cls)}
            if entry["from_config"]:
                _CALLS[cls.__name__] = _calls(cls)
            subclasses = _family_subclasses(cls)
            if subclasses:
                entry["subclasses"] = subclasses
            classes.append(entry)
        elif isinstance(cls, str) and cls[:1].isupper() and not cls.endswith(("Tokenizer", "TokenizerFast",
                                                                                 "Scheduler", "Schedulers", "Processor",
                                                                                 "FeatureExtractor")):
            classes.append({"class": cls, "library": "unresolved"})
    if not classes:
        return None
    unique = list({c["class"]: c for c in classes}.values())
    return {"name": name, "classes": unique, "optional": default_none or None in allowed or optional_listed}


#: ``__init__`` parameters of a wrapper that holds other models rather than building its own from a config.
WRAPPED = frozenset({"controlnets", "adapters", "models"})


def _from_config(cls: type) -> bool:
    """Whether the library builds ``cls`` from a config alone: a diffusers ``ConfigMixin`` (``from_config``), or a
    transformers ``PreTrainedModel`` whose ``config_class`` is a concrete config (``cls(config)``); an abstract
    ``*PreTrainedModel`` base is not a model one loads."""
    from diffusers.configuration_utils import ConfigMixin
    from transformers import PretrainedConfig, PreTrainedModel

    if issubclass(cls, ConfigMixin):  # unless a wrapper of other models (QwenImageMultiControlNetModel(controlnets))
        return not WRAPPED & set(inspect.signature(cls.__init__).parameters)
    if issubclass(cls, PreTrainedModel) and not cls.__name__.endswith("PreTrainedModel"):
        config = getattr(cls, "config_class", None)
        return inspect.isclass(config) and issubclass(config, PretrainedConfig) and config is not PretrainedConfig
    return False


#: Class → its :func:`_calls`, for every class built from a config that the list names (filled as it is built).
_CALLS: dict[str, dict[str, list[str]]] = {}

#: The calls a pipeline makes of a component (``forward`` of every model; ``decode`` / ``encode`` of a VAE).
CALLS = ("forward", "decode", "encode")


def _calls(cls: type) -> dict[str, list[str]]:
    """The parameters of each of :data:`CALLS` the class has, by name in order (``**`` last where it takes any
    keyword): what ``estimate --measure`` checks an input builder lent by another class against."""
    out = {}
    for call in CALLS:
        method = getattr(cls, call, None)
        if method is None or (call != "forward" and not callable(method)):
            continue
        try:
            params = list(inspect.signature(method).parameters.values())[1:]
        except (TypeError, ValueError):
            continue
        names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        out[call] = names + (["**"] if any(p.kind is p.VAR_KEYWORD for p in params) else [])
    return out


def _family_subclasses(cls: type) -> list[str]:
    """For a model family's abstract base in a hint (``Gemma2PreTrainedModel``), the classes of its
    modeling module that transformers exports and that subclass it (``Gemma2Model``, ...): the classes a
    checkpoint's config can name. The bare ``PreTrainedModel`` (any model at all) gets none."""
    import transformers

    if not cls.__name__.endswith("PreTrainedModel") or cls.__name__ == "PreTrainedModel":
        return []
    module = sys.modules[cls.__module__]
    out = []
    for name, obj in vars(module).items():
        if inspect.isclass(obj) and obj is not cls and issubclass(obj, cls) and getattr(transformers, name, None) is obj:
            out.append(name)
    return sorted(out)


def _components_of(cls: type) -> list[dict[str, Any]]:
    sig = inspect.signature(cls.__init__)
    optional = set(getattr(cls, "_optional_components", []) or [])
    out = []
    for name, p in sig.parameters.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        comp = _component(name, _hint_names(p.annotation), p.default is None, name in optional)
        if comp is not None:
            out.append(comp)
    return out


def _dummy_source(name: str) -> tuple[Path | None, list[dict[str, Any]]]:
    """A dummy pipeline's source file and components, read from the ``__init__`` there."""
    import diffusers

    root = Path(diffusers.__file__).parent / "pipelines"
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if f"class {name}(" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path.relative_to(root), _ast_init_components(node)
    return None, []


def _ast_init_components(node: ast.ClassDef) -> list[dict[str, Any]]:
    optional: set[str] = set()
    init = None
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            init = item
        if isinstance(item, ast.Assign) and any(getattr(t, "id", "") == "_optional_components" for t in item.targets):
            optional = {e.value for e in getattr(item.value, "elts", []) if isinstance(e, ast.Constant)}
    if init is None:
        return []
    args = init.args.args[1:]
    defaults = [None] * (len(args) - len(init.args.defaults)) + list(init.args.defaults)
    out = []
    for arg, default in zip(args, defaults):
        hint = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        none_default = isinstance(default, ast.Constant) and default.value is None
        comp = _component(arg.arg, _names_in_source(hint) if hint else [], none_default, arg.arg in optional)
        if comp is not None:
            out.append(comp)
    return out


def _pipeline_entry(name: str) -> dict[str, Any] | None:
    import diffusers
    from diffusers import DiffusionPipeline

    obj = getattr(diffusers, name)
    if _is_dummy(obj):
        if not (name.endswith("Pipeline") or "Pipeline" in name and not name.endswith("Output")):
            return None
        path, components = _dummy_source(name)
        return {"deprecated": path is not None and path.parts[0] == "deprecated", "importable": False,
                "requires": sorted(getattr(obj, "_backends", [])), "components": components}
    if not (inspect.isclass(obj) and issubclass(obj, DiffusionPipeline)) or obj is DiffusionPipeline:
        return None
    return {"deprecated": ".deprecated." in obj.__module__, "importable": True, "requires": [],
            "components": _components_of(obj)}


def _model_entry(name: str) -> dict[str, Any] | None:
    import diffusers
    from diffusers import ModelMixin

    obj = getattr(diffusers, name)
    if _is_dummy(obj):
        return {"importable": False, "requires": sorted(getattr(obj, "_backends", [])), "from_config": False}
    if inspect.isclass(obj) and issubclass(obj, ModelMixin) and obj is not ModelMixin:
        entry = {"importable": True, "requires": [], "from_config": _from_config(obj)}
        if entry["from_config"]:
            _CALLS[name] = _calls(obj)
        return entry
    return None


def extract() -> dict[str, Any]:
    import diffusers
    import transformers

    _quiet()
    structure = diffusers._import_structure
    pipelines = {}
    exported = {name for key, names in structure.items() if key == "pipelines" or key.startswith("utils.dummy_")
                for name in names}
    for name in sorted(exported):
        entry = _pipeline_entry(name)
        if entry is not None:
            pipelines[name] = entry
    models = {}
    for name in sorted(set(structure["models"])):
        entry = _model_entry(name)
        if entry is not None:
            models[name] = entry
    return {
        "_source": "validation/extract_diffusers_classes.py (see its docstring for what is listed); do not edit",
        "diffusers_version": diffusers.__version__,
        "transformers_version": transformers.__version__,
        "pipelines": pipelines,
        "models": models,
        "calls": dict(sorted(_CALLS.items())),
    }


def render(data: dict[str, Any]) -> str:
    """JSON with one line per pipeline and per model class (keys sorted): small, and a diff between two
    extractions reads class by class."""
    parts = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(data.items()) if k not in ("models", "pipelines")]
    for key in ("models", "pipelines"):
        body = ",\n".join(f"  {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}"
                          for name, entry in sorted(data[key].items()))
        parts.append(f" {json.dumps(key)}: {{\n{body}\n }}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    args = parser.parse_args(argv)
    data = extract()
    text = render(data)
    target = OUT_DIR / f"{data['diffusers_version']}.json"
    if args.check:
        same = target.exists() and target.read_text(encoding="utf-8") == text
        print(f"{target.relative_to(REPO)}: {'same' if same else 'differs'}")
        return 0 if same else 1
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    n_dep = sum(p["deprecated"] for p in data["pipelines"].values())
    print(f"wrote {target.relative_to(REPO)}: {len(data['pipelines'])} pipelines ({n_dep} deprecated), "
          f"{len(data['models'])} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
