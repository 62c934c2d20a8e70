"""Live LoRA training measurement: random small FLUX transformers with peft adapters on random targets, ranks and
sizes, with and without gradient checkpointing, counted now by FlopCounterMode (forward + backward on the meta
device, ``validation/measure_training.py``) against ``flopcalc train``'s LoRA backward. Bar: exact."""

from __future__ import annotations

import json

import pytest

from live_support import SEED, random_size, write_config  # noqa: E402
from test_live_flux_variants import _random_config  # noqa: E402
from flopcalc.api import estimate_configs  # noqa: E402
from flopcalc.backprop import graph_of  # noqa: E402
from flopcalc.pipelines import Settings  # noqa: E402
from flopcalc.training import lora_training  # noqa: E402

pytest.importorskip("peft")
from measure_training import measure_training  # noqa: E402

pytestmark = pytest.mark.live

#: Names peft matches in FluxTransformer2DModel (a layer's name or a dotted suffix of it).
NAMES = ("to_q", "to_k", "to_v", "attn.to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
         "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2", "proj_mlp", "proj_out",
         "x_embedder", "context_embedder")


def test_random_flux_lora_runs_are_exact(rng, tmp_path):
    graph = graph_of("FluxTransformer2DModel")
    for i in range(3):
        cfg = {**_random_config(rng, 64), "num_layers": rng.randint(1, 2)}
        folder = write_config(tmp_path, f"flux{i}", cfg)
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        targets = tuple(rng.sample(NAMES, rng.randint(1, 5)))
        rank, checkpointing = rng.randint(1, 8), rng.random() < 0.5
        report = estimate_configs({"_class_name": "FluxPipeline"}, {"transformer": cfg},
                                  Settings(height=h, width=w, max_sequence_length=t), convention="torch")
        comp = report.component("transformer")
        back, lora = lora_training(comp.tree, graph, rank, targets, checkpointing)
        fx = measure_training(folder, {"height": h, "width": w, "text_len": t},
                              mode="lora_checkpointing" if checkpointing else "lora",
                              class_name="FluxTransformer2DModel", lora={"rank": rank, "targets": list(targets)})
        where = (f"seed {SEED}: {h}×{w}, {t} text tokens, rank {rank}, targets {targets}, checkpointing "
                 f"{checkpointing}: {json.dumps(cfg)}")
        assert 2 * (comp.macs_per_run + lora.adapter_forward) == fx["forward"]["flops"], where
        assert 2 * back.macs == fx["backward"]["flops"], where
        assert lora.trainable_params == fx["trainable_params"] and lora.layers == fx["lora"]["layers"], where
