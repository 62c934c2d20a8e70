"""Kaplan's closed-form approximation beside the exact count, for a pipeline's text encoders
(the Kaplan transformer layers of :mod:`flopcalc.formulas.kaplan_transformer`). Each text encoder
declares the shape Kaplan's form reads where it is registered
(``register(kaplan=KaplanShape(...))``); a model without one is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError
from flopcalc.formulas.kaplan_transformer import kaplan_forward_flops

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
    from flopcalc.flops.estimate import estimate
    from flopcalc.engine.config import Config
    from flopcalc.engine.registry import lookup
    from flopcalc.engine.sources import resolve

    source = resolve(model, revision=revision)
    report = estimate(model, revision=revision)
    encoders = [c for c in report.components if c.role == "text_encoder"]
    if not encoders:
        raise FlopcalcError(f"kaplan: {report.model} runs no text encoder ({report.pipeline}); Kaplan's form is "
                            "stated here for text encoders only")
    rows = []
    for c in encoders:
        arch = lookup(c.class_name, component=c.component)
        if arch.kaplan is None:
            raise FlopcalcError(f"kaplan: {c.component} ({c.class_name}) declares no Kaplan shape (layers, attention "
                                "width), so Kaplan's form cannot be computed for it")
        cfg: Mapping[str, Any] = Config(c.component, source.components[c.component], arch.defaults)
        n_layer, d_attn = arch.kaplan.layers(cfg)
        embedding = sum(node.total.params for path, node in c.tree.walk()
                        if path.split(".")[-1] in arch.kaplan.embeddings)
        n = c.tree.total.params - embedding
        n_ctx = c.shape["seq_len"]
        rows.append(KaplanRow(c.component, c.class_name, n_ctx, n_layer, d_attn, n,
                              kaplan_forward_flops(n, n_layer, n_ctx, d_attn), 2 * c.tree.total.macs("torch")))
    return rows
