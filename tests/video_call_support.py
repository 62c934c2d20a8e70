"""Shared pieces of the tests that run a real video pipeline's ``__call__`` (diffusers 0.42.1) on CPU with tiny
random components and compare what ran with flopcalc's plan: a tokenizer stand-in that pads to the length asked for,
and a recorder of every call of the components (batch rows, input shapes). Importing it skips the importing module
without torch/diffusers/transformers (through :mod:`live_support`)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from live_support import SEED  # noqa: F401  (skips without torch)

__all__ = ["Recorder", "Tokenizer", "config_dict", "plan_runs", "planned_runs"]


class _Batch(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, *args, **kwargs) -> "_Batch":
        return _Batch({k: v.to(*args, **kwargs) for k, v in self.items()})


class Tokenizer:
    """Pads every prompt to ``max_length`` (``padding="max_length"``), else to ``longest`` tokens; ``encode`` of a
    text gives ``encode_length`` ids (SANA's complex human instruction is measured that way)."""

    model_max_length = 100_000
    eos_token = "</s>"
    pad_token = "<pad>"
    padding_side = "right"

    def __init__(self, longest: int = 3, encode_length: int = 7) -> None:
        self.longest, self.encode_length = longest, encode_length

    def __call__(self, prompt=None, padding=None, max_length=None, return_tensors=None, text=None, **kwargs):
        import torch

        prompt = text if prompt is None else prompt
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        length = max_length if padding == "max_length" else self.longest
        return _Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long),
                      attention_mask=torch.ones(len(prompts), length, dtype=torch.long))

    def apply_chat_template(self, conversation, tokenize: bool = True, max_length=None, **kwargs):
        """The chat template: a string (``tokenize=False``), or ``max_length`` ids (padded)."""
        return "a prompt" if not tokenize else [1] * (max_length or self.longest)

    def encode(self, text, **kwargs) -> list[int]:
        return [1] * self.encode_length

    def batch_decode(self, ids, **kwargs):  # pragma: no cover - never reached (nothing is truncated)
        return [""] * len(ids)


class Recorder:
    """Every call of the hooked components: ``calls[name]`` the batch rows, ``shapes[name]`` the set of
    per-row shapes of the recorded input, ``inputs[name]`` each call's ``(args, kwargs)`` shapes."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.shapes: dict[str, set] = {}
        self.inputs: dict[str, list] = {}

    def _record(self, name: str, first, args, kwargs) -> None:
        self.calls[name] += first.shape[0]
        self.shapes.setdefault(name, set()).add(tuple(first.shape[1:]))
        shapes = {k: tuple(v.shape) for k, v in kwargs.items() if hasattr(v, "shape")}
        shapes.update({i: tuple(a.shape) for i, a in enumerate(args) if hasattr(a, "shape")})
        self.inputs.setdefault(name, []).append(shapes)

    def forward(self, name: str, module, key: str | None = None) -> None:
        """Record ``module``'s forward: its first positional tensor, or the keyword ``key``."""
        def hook(mod, args, kwargs):
            first = kwargs[key] if key is not None and key in kwargs else (args[0] if args else next(
                v for v in kwargs.values() if hasattr(v, "shape")))
            self._record(name, first, args, kwargs)
        module.register_forward_pre_hook(hook, with_kwargs=True)

    def method(self, name: str, obj, attr: str) -> None:
        """Record ``obj.<attr>(x, ...)`` (a VAE's ``decode`` / ``encode``) by its first argument."""
        real: Callable = getattr(obj, attr)

        def wrapped(*args, **kwargs):
            first = args[0] if args else next(iter(kwargs.values()))
            self._record(name, first, args[1:], kwargs)
            return real(*args, **kwargs)
        setattr(obj, attr, wrapped)


def planned_runs(report) -> dict[str, int]:
    """``{"<component>" or "<component>.<call>": runs}`` of a report, as :class:`Recorder` names the calls
    (``forward`` bare)."""
    out: dict[str, int] = {}
    for c in report.components:
        key = c.component if c.call == "forward" else f"{c.component}.{c.call}"
        out[key] = out.get(key, 0) + c.runs
    return out


def plan_runs(index, configs, settings) -> dict[str, int]:
    """The same, from the plan's runs (before the report folds a call made on several shapes into one row)."""
    from flopcalc.engine.pipelines import plan

    out: dict[str, int] = {}
    for r in plan(index, configs, settings).runs:
        key = r.component if r.call == "forward" else f"{r.component}.{r.call}"
        out[key] = out.get(key, 0) + r.runs
    return out


def config_dict(model, class_name: str | None = None) -> dict[str, Any]:
    """A built model's config as flopcalc reads a config.json: diffusers' ``config`` with ``_class_name``, or
    transformers' ``to_dict()`` with ``architectures``."""
    import json

    config = model.config
    if hasattr(config, "to_dict"):
        values = {**config.to_dict(), "architectures": [class_name or type(model).__name__]}
    else:
        values = {**dict(config), "_class_name": class_name or type(model).__name__}
    return json.loads(json.dumps(values, default=str))  # as a config.json reads: tuples become lists


def without_ftfy(*modules) -> None:
    """Prompt cleaning without ftfy (an optional dependency of diffusers' Wan-family pipelines, which call
    ``ftfy.fix_text`` only to clean the prompt): text passes unchanged."""
    from types import SimpleNamespace

    for module in modules:
        if not hasattr(module, "ftfy"):
            module.ftfy = SimpleNamespace(fix_text=lambda text: text)
