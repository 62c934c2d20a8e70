"""Adapters held in GPU memory beside a pipeline's own weights: LoRA adapters and an IP-Adapter's image encoder.

**LoRA** (``pipe.load_lora_weights(...)`` unfused, or ``model.add_adapter(LoraConfig(r=rank,
target_modules=[...]))``): peft wraps every ``nn.Linear`` whose module name equals a target or ends with
``"." + target`` (``peft/tuners/tuners_utils.py`` ``check_target_module_exists``) and gives it ``lora_A``
(``Linear(in, r, bias=False)``) and ``lora_B`` (``Linear(r, out, bias=False)``, ``peft/tuners/lora/layer.py``
``update_layer``): :math:`r·(in + out)` parameters a layer, in the base layer's dtype when that is a floating dtype
and float32 otherwise (``tuners_utils.py:2182-2186`` casts to a floating base dtype only: a bitsandbytes or GGUF
layer's integer storage keeps the adapter in float32; quanto's and torchao's weights report the loading dtype).
The targets default to those of diffusers' LoRA training script for the class (the same as ``flopcalc train
--trainable lora:R``); a target naming no single linear layer is refused. Measured against peft 0.21.2 on the
meta device: ``validation/measure_adapters.py``.

**IP-Adapter image encoder**: ``load_ip_adapter`` loads h94/IP-Adapter's ``image_encoder`` when the pipeline
has none; its config (ViT-H-14 or ViT-bigG-14 as ``CLIPVisionModelWithProjection``, reconstructed, see the
provenance in ``data/ip_adapter_image_encoders.json``) is weighed then. The UNet's own IP-Adapter modules (the
image projection, ``to_k_ip`` / ``to_v_ip``) are in its cost tree at the run's shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from flopcalc.engine.cost import Node
from flopcalc.engine.errors import FlopcalcError

#: The largest LoRA rank accepted (as ``flopcalc train --trainable lora:RANK``).
MAX_RANK = 4096
IMAGE_ENCODERS = Path(__file__).resolve().parent.parent / "data" / "ip_adapter_image_encoders.json"


@dataclass(frozen=True)
class LoraAdapters:
    """The LoRA adapters of one component: ``layers`` adapted ``nn.Linear`` and their ``params``."""

    rank: int
    targets: tuple[str, ...]
    layers: int
    params: int


def check_rank(rank: Any) -> int:
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_RANK:
        raise FlopcalcError(f"--lora-rank {rank!r}: a whole number from 1 to {MAX_RANK}")
    return rank


def parse_targets(targets: Any) -> tuple[str, ...] | None:
    """``"attn.to_q,attn.to_v"`` or a sequence of names → a tuple; None stays None (the class's defaults)."""
    if targets is None:
        return None
    items = targets.split(",") if isinstance(targets, str) else list(targets)
    names = tuple(dict.fromkeys(str(t).strip() for t in items))
    if not names or any(not n or len(n) > 200 or not all(p.isidentifier() or p.isdigit() for p in n.split("."))
                        for n in names):
        raise FlopcalcError(f"--lora-targets {str(targets)[:80]!r}: comma-separated module names such as "
                            "attn.to_q,attn.to_v")
    return names


def default_targets(class_name: str) -> tuple[str, ...] | None:
    """diffusers' LoRA training script's ``target_modules`` for the class (None: it has none)."""
    from flopcalc.engine.gradients import declared_graphs

    graph = declared_graphs().get(class_name)
    return graph.lora.default_targets or None if graph is not None and graph.lora is not None else None


def _walk(node: Node, path: str, k: int) -> Iterator[tuple[str, Node, int]]:
    k *= node.count
    yield path, node, k
    for child in node.children:
        yield from _walk(child, f"{path}.{child.name}" if path else child.name, k)


def lora_adapters(tree: Node, class_name: str, rank: int, targets: tuple[str, ...] | None) -> LoraAdapters:
    """The adapters peft adds to ``tree``'s layers named by ``targets`` (default: the class's)."""
    names = targets if targets is not None else default_targets(class_name)
    if not names:
        raise FlopcalcError(f"{class_name}: diffusers has no LoRA training script to take default targets from; "
                            "name them with --lora-targets (e.g. to_q,to_k,to_v,to_out.0)")
    layers = params = 0
    for target in names:
        hits = [(p, n, k) for p, n, k in _walk(tree, "", 1) if p == target or p.endswith("." + target)]
        if not hits:
            raise FlopcalcError(f"--lora-targets {target!r} names no module of {class_name}")
        for path, node, k in hits:
            c = node.cost
            if c.linear_layers != 1 or node.children or not c.linear_rows:
                raise FlopcalcError(f"--lora-targets {target!r}: {path} is not a single nn.Linear (peft adapts "
                                    "linear layers; name them one by one)")
            d_out = c.linear_rows
            d_in = c.linear_weights // d_out
            layers += k
            params += k * rank * (d_in + d_out)
    return LoraAdapters(rank, tuple(names), layers, params)


def ip_adapter_image_encoder(folder: str) -> tuple[dict[str, Any], str]:
    """The bundled config of an IP-Adapter layout's image encoder (``IPAdapterLayout.image_encoder``) and its
    provenance."""
    data = json.loads(IMAGE_ENCODERS.read_text())[folder]
    return data["config"], data["provenance"]
