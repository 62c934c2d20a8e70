"""Running a real diffusers pipeline's ``__call__`` on tiny random components on the CPU, and recording what
each component ran: how many batch rows each forward saw and on what shapes (the way
``tests/test_live_hidream_pipeline.py`` checks HiDream), to compare with flopcalc's plan of the same configs.
Importing it skips the importing test module when torch or diffusers is missing.

* :class:`Tokenizer`: a stand-in that pads to the length asked for (``padding="max_length"``) or gives
  ``PROMPT_TOKENS`` tokens (``padding="longest"`` / none); the counts depend on those lengths only. No Hub access.
* :func:`record`: forward pre-hooks on the named modules (rows summed, shapes kept) and wrappers of
  ``vae.encode`` / ``vae.decode`` (``vae.encode`` / ``vae.decode`` rows; an encode's shape is its pixels, a decode's
  its latent), so that ``calls`` reads like flopcalc's ``runs_by_call`` (component names, ``vae.encode``...).
* :func:`planned`: the same view of a flopcalc report.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

#: Tokens of an unpadded prompt (``padding="longest"``).
PROMPT_TOKENS = 3


class _Batch(dict):
    __getattr__ = dict.__getitem__

    def to(self, device):
        return _Batch({k: v.to(device) for k, v in self.items()})


class Tokenizer:
    """Pads every prompt to ``max_length`` with ``padding="max_length"``; otherwise ``unpadded`` tokens
    (``PROMPT_TOKENS`` by default; at most ``max_length`` when truncating)."""

    def __init__(self, unpadded: int = PROMPT_TOKENS, model_max_length: int = 100_000) -> None:
        self.unpadded = unpadded
        self.model_max_length = model_max_length

    eos_token = "</s>"
    pad_token = "<pad>"
    pad_token_id = 0
    added_tokens_encoder: dict = {}

    def tokenize(self, text: str) -> list[str]:
        return text.split()

    def apply_chat_template(self, messages, tokenize=False, **kwargs) -> str:
        return " ".join(m["content"] if isinstance(m["content"], str) else "x" for m in messages)

    def __call__(self, prompt, padding=None, max_length=None, return_tensors=None, **kwargs):
        import torch

        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        length = max_length if padding == "max_length" else self.unpadded
        if kwargs.get("truncation") and max_length is not None:
            length = min(length, max_length)
        return _Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long),
                      attention_mask=torch.ones(len(prompts), length, dtype=torch.long))

    def batch_decode(self, ids, **kwargs):  # pragma: no cover - never reached (nothing is truncated)
        return [""] * len(ids)


def record(models: dict[str, Any], names: Iterable[str], *, vae: str | None = "vae") -> tuple[Counter, dict]:
    """Hook the modules ``names`` of ``models`` and the VAE's ``encode`` / ``decode``: ``(calls, shapes)``, where
    ``calls[name]`` sums the batch rows of every forward and ``shapes[name]`` holds each forward's first input
    shape without the batch (a list of tensors, as Z-Image passes them: one row per element, their shapes)."""
    calls: Counter = Counter()
    shapes: dict[str, set] = {}

    def note(name: str, first: Any) -> None:
        if isinstance(first, (list, tuple)):
            calls[name] += len(first)
            for t in first:
                shapes.setdefault(name, set()).add(tuple(t.shape))
            return
        calls[name] += first.shape[0]
        shapes.setdefault(name, set()).add(tuple(first.shape[1:]))

    def hook(name: str):
        def pre(module, args, kwargs):
            note(name, args[0] if args else next(v for v in kwargs.values() if v is not None))
        return pre

    for name in names:
        models[name].register_forward_pre_hook(hook(name), with_kwargs=True)
    if vae is not None:
        model = models[vae]
        for call in ("encode", "decode"):
            original = getattr(model, call)

            def wrapped(x, *args, _original=original, _name=f"{vae}.{call}", **kwargs):
                calls[_name] += x.shape[0]
                shapes.setdefault(_name, set()).add(tuple(x.shape[2:]))
                return _original(x, *args, **kwargs)

            setattr(model, call, wrapped)
    return calls, shapes


def planned(report) -> dict[str, int]:
    """A flopcalc report's runs keyed as :func:`record` keys them (``transformer``, ``vae.decode``...)."""
    out: Counter = Counter()
    for c in report.components:
        out[c.component if c.call == "forward" else f"{c.component}.{c.call}"] += c.runs
    return dict(out)


def configs_of(models: dict[str, Any]) -> dict[str, dict]:
    """flopcalc's view of tiny models: diffusers ``_class_name`` configs, transformers ``architectures`` ones, as
    a ``config.json`` holds them (tuples become lists)."""
    import json

    out = {}
    for name, model in models.items():
        config = model.config
        if isinstance(config, dict):
            out[name] = {**config, "_class_name": type(model).__name__}
        else:
            out[name] = {**config.to_dict(), "architectures": [type(model).__name__]}
        out[name] = json.loads(json.dumps(out[name], default=str))
    return out


def index_of(pipeline: str, models: dict[str, Any]) -> dict:
    """A ``model_index.json`` for ``pipeline`` naming each tiny model's library and class."""
    return {"_class_name": pipeline, **{name: [type(m).__module__.split(".")[0], type(m).__name__]
                                        for name, m in models.items()}}
