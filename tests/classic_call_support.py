"""Shared pieces of the tests that run a real diffusers pipeline's ``__call__`` on CPU with tiny random components
and compare what ran against flopcalc's plan (DeepFloyd IF, unCLIP, LEdits++, Kandinsky 2.1, the UNet2DModel
classics, audio): a stand-in tokenizer that pads to the length asked for, and hooks that count each component's
batch-1 forwards (the rows of every call) and record their shapes. Importing it skips the importing module
without torch / diffusers / transformers."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

# The tiny components' forwards are a few microseconds of work each: one thread avoids the pool's overhead, which on a
# small shared machine costs more than the work (the LEDITS++ call ran 2-3x slower with the default threads).
torch.set_num_threads(1)


class Batch(dict):
    __getattr__ = dict.__getitem__


class Tokenizer:
    """Pads every prompt to ``max_length`` (``padding="max_length"``), else to 3 tokens (``"longest"``): the counts
    depend on the length only. ``model_max_length`` is what CLIP-style pipelines read as their length."""

    eos_token = "</s>"
    pad_token = "<pad>"
    pad_token_id = 0
    eos_token_id = 2
    bos_token_id = 1

    def __init__(self, model_max_length: int = 77) -> None:
        self.model_max_length = model_max_length

    def __call__(self, prompt, padding=None, max_length=None, return_tensors=None, **kwargs):
        import torch

        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        length = (max_length or self.model_max_length) if padding == "max_length" else 3
        ids = torch.ones(len(prompts), length, dtype=torch.long)
        out = Batch(input_ids=ids, attention_mask=torch.ones(len(prompts), length, dtype=torch.long))
        if kwargs.get("return_length"):  # the unpadded lengths (LEDITS++ reads them): BOS, one word, EOS
            out["length"] = torch.full((len(prompts),), 3, dtype=torch.long)
        return out

    def batch_decode(self, ids, **kwargs):  # pragma: no cover - nothing is truncated
        return [""] * len(ids)

    #: what diffusers' textual-inversion loader reads (``maybe_convert_prompt``): no added tokens
    added_tokens_encoder: dict = {}

    def tokenize(self, prompt):
        return prompt.split()


class Recorder:
    """Counts batch rows per component call and records the shapes (without the batch) each call saw."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.shapes: dict[str, set] = {}

    def add(self, name: str, tensor: Any, shape: tuple | None = None) -> None:
        self.calls[name] += tensor.shape[0]
        self.shapes.setdefault(name, set()).add(tuple(tensor.shape[1:]) if shape is None else shape)

    def hook(self, module, name: str, pick: Callable[[tuple, dict], Any] | None = None) -> None:
        """Count ``module``'s forwards by the rows of its first input (or of ``pick(args, kwargs)``)."""
        def record(mod, args, kwargs):
            first = pick(args, kwargs) if pick else (args[0] if args else next(iter(kwargs.values())))
            self.add(name, first)
        module.register_forward_pre_hook(record, with_kwargs=True)

    def wrap(self, obj, method: str, name: str, argument: int = 0) -> None:
        """Count calls of ``obj.method`` (``vae.decode``) by the rows of its ``argument``-th input."""
        original = getattr(obj, method)

        def counted(*args, **kwargs):
            x = args[argument] if len(args) > argument else next(iter(kwargs.values()))
            self.add(name, x)
            return original(*args, **kwargs)
        setattr(obj, method, counted)


def planned_runs(report) -> dict[str, int]:
    """``{component: runs}`` (``component.call`` for calls other than forward) of a flopcalc report."""
    return {f"{c.component}.{c.call}" if c.call != "forward" else c.component: c.runs for c in report.components}


def tiny_t5(d_model: int = 32):
    """A 1-layer T5 encoder and its config dict (``architectures`` set, as a saved config has it)."""
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(d_model=d_model, d_ff=37, d_kv=8, num_heads=2, num_layers=1, vocab_size=50)
    model = T5EncoderModel(cfg).eval()
    return model, {**cfg.to_dict(), "architectures": ["T5EncoderModel"]}


def diffusers_config(model) -> dict:
    """A diffusers model's config as ``save_pretrained`` writes it (``_class_name`` set)."""
    return {**dict(model.config), "_class_name": type(model).__name__}


def check_assembly(folder, class_name: str, shape, measure_settings: dict, *, call: str = "forward",
                   module_depth: int | None = None, component: str = "model") -> None:
    """The assembler of ``class_name`` on the config in ``folder`` at ``shape`` (a ``RunShape``), against a fresh
    measurement of the real module at ``measure_settings``: total, every measured module path, parameters, thop.
    For a class checked at shapes no plan runs it at (any text length)."""
    import json

    from live_support import SEED, assert_matches_measurement, measure
    from flopcalc.engine.registry import config_of, lookup

    cfg = json.loads((folder / "config.json").read_text())
    tree = lookup(class_name, call, component=component).assemble(config_of(cfg, component=component), shape)

    class _Estimate:
        pass

    est = _Estimate()
    est.tree, est.macs_per_run, est.params = tree, tree.total.macs("torch"), tree.total.params
    depth = {} if module_depth is None else {"module_depth": module_depth}
    fx = measure.measure_component(folder, settings=measure_settings, call=call, **depth)
    assert_matches_measurement(est, fx, f"seed {SEED}, {measure_settings}: {cfg}")
