"""Kaplan's closed-form approximation beside the exact count, for a pipeline's text encoders
(the Kaplan transformer layers of :mod:`flopcalc.formulas.kaplan_transformer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from flopcalc.formulas.kaplan_transformer import kaplan_forward_flops

#: Per architecture: (number of layers, attention width d_attn) read from its config.
_SHAPE = {
    "CLIPTextModel": lambda c: (c["num_hidden_layers"], c["hidden_size"]),
    "CLIPTextModelWithProjection": lambda c: (c["num_hidden_layers"], c["hidden_size"]),
    "T5EncoderModel": lambda c: (c["num_layers"], c["num_heads"] * c["d_kv"]),
    "UMT5EncoderModel": lambda c: (c["num_layers"], c["num_heads"] * c["d_kv"]),
}
#: Embedding tables (excluded from Kaplan's N): nodes of these names.
_EMBEDDINGS = ("embeddings", "shared")


@dataclass(frozen=True)
class KaplanRow:
    component: str
    class_name: str
    n_ctx: int
    n_layer: int
    d_attn: int
    non_embedding_params: int
    kaplan_flops: int
    exact_flops: int


def kaplan_rows(model: str, *, revision: str | None = None) -> list[KaplanRow]:
    from flopcalc.api import estimate
    from flopcalc.config import Config
    from flopcalc.registry import lookup
    from flopcalc.sources import resolve

    source = resolve(model, revision=revision)
    report = estimate(model, revision=revision)
    rows = []
    for c in report.components:
        if c.class_name not in _SHAPE:
            continue
        arch = lookup(c.class_name, component=c.component)
        cfg: Mapping[str, Any] = Config(c.component, source.components[c.component], arch.defaults)
        n_layer, d_attn = _SHAPE[c.class_name](cfg)
        embedding = sum(node.total.params for path, node in c.tree.walk() if path.split(".")[-1] in _EMBEDDINGS)
        n = c.tree.total.params - embedding
        n_ctx = c.shape["seq_len"]
        rows.append(KaplanRow(c.component, c.class_name, n_ctx, n_layer, d_attn, n,
                              kaplan_forward_flops(n, n_layer, n_ctx, d_attn), 2 * c.tree.total.macs("torch")))
    return rows
