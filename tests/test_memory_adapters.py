"""Adapters in the weights: LoRA adapters as peft adds them and IP-Adapter modules as ``load_ip_adapter`` installs
them, against the real modules on meta (``validation/measure_adapters.py``); ControlNet and T2I-Adapter components
are weighed exactly in ``test_weights_addons.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.pipelines.ip_adapter import PLUS_QUERIES, VIT_H_TOKENS
from flopcalc.gpu_memory.adapters import parse_targets
from flopcalc.gpu_memory.estimate import memory
from flopcalc.gpu_memory.report import render_memory
from flopcalc.gpu_memory.weights import component_weights

REPO = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((REPO / "validation" / "fixtures" / "quantized" / "adapters.json").read_text())


def _config(folder):
    return json.loads((REPO / folder / "config.json").read_text())


@pytest.mark.parametrize("row", FIXTURE["lora"], ids=lambda r: f"{r['folder'].split('/')[1]}-r{r['rank']}")
def test_lora_adapters_equal_peft(row):
    targets = parse_targets(row["targets"])
    w = component_weights(_config(row["folder"]), component="denoiser", dtype="bf16", lora=(row["rank"], targets))
    assert (w.lora_layers, w.lora_params) == (row["lora_layers"], row["lora_params"])
    assert w.lora_bytes == 2 * w.lora_params
    bare = component_weights(_config(row["folder"]), component="denoiser", dtype="bf16")
    assert w.bytes == bare.bytes + w.lora_bytes


@pytest.mark.parametrize("row", FIXTURE["ip_adapter"], ids=lambda r: f"{r['folder'].split('/')[2]}-{r['resampler']}")
def test_ip_adapter_modules_equal_the_loaded_unet(row):
    resampler = None if row["resampler"] is None else (VIT_H_TOKENS, PLUS_QUERIES, row["resampler"],
                                                       row["resampler"] // 64)
    shape = {"ip_image_embed_dim": row["image_embed_dim"], "ip_resampler": resampler}
    w = component_weights(_config(row["folder"]), component="unet", dtype="bf16", shape=shape)
    assert w.params == row["params"]
    assert component_weights(_config(row["folder"]), component="unet", dtype="bf16").params == row["bare_params"]


def test_memory_weighs_the_ip_adapter_and_its_image_encoder():
    plain, ip = memory("sd1.5"), memory("sd1.5", ip_adapter="sd15")
    by = {c.component: c for c in ip.components}
    row = next(r for r in FIXTURE["ip_adapter"] if r["resampler"] is None and "sd1.5" in r["folder"])
    assert by["unet"].params == row["params"]  # the projection and to_k_ip / to_v_ip
    enc = component_weights(_config("validation/configs/sd1.5-ip-adapter/image_encoder"), component="image_encoder",
                            dtype="bf16")
    assert by["image_encoder"].bytes == enc.bytes and any("h94/IP-Adapter" in n for n in ip.notes)
    assert ip.weights_bytes == plain.weights_bytes + enc.bytes + 2 * (row["params"] - row["bare_params"])
    folder = memory(str(REPO / "validation" / "configs" / "sd1.5-ip-adapter"), ip_adapter="sd15")
    assert [c.component for c in folder.components].count("image_encoder") == 1  # the pipeline's own, once


def test_lora_in_memory_cli_equals_api_and_quantized_bases_keep_float32_adapters(capsys):
    est = memory("flux-dev", lora_rank=16)
    t = next(c for c in est.components if c.component == "transformer")
    row = FIXTURE["lora"][0]
    assert (t.lora_layers, t.lora_params) == (row["lora_layers"], row["lora_params"])
    assert all(c.lora_params == 0 for c in est.components if c.component != "transformer")
    assert main(["memory", "flux-dev", "--lora-rank", "16", "--format", "json"]) == 0
    assert capsys.readouterr().out == render_memory(est, "json")
    nf4 = next(c for c in memory("flux-dev", dtype="nf4", lora_rank=16).components if c.component == "transformer")
    assert nf4.lora_bytes == 4 * nf4.lora_params  # peft does not cast to an integer base dtype


@pytest.mark.parametrize("kwargs, match", [
    (dict(lora_rank=0), "from 1 to"), (dict(lora_rank=True), "from 1 to"), (dict(lora_rank=10**6), "from 1 to"),
    (dict(lora_targets="to_q"), "needs --lora-rank"), (dict(lora_rank=4, lora_targets="bogus_name"), "names no module"),
    (dict(lora_rank=4, lora_targets="norm1"), "not a single nn.Linear"),
    (dict(lora_rank=4, lora_targets="a b"), "comma-separated"),
])
def test_lora_refusals(kwargs, match):
    with pytest.raises(FlopcalcError, match=match):
        memory("flux-dev", **kwargs)


def test_a_class_without_default_targets_asks_for_them():
    with pytest.raises(FlopcalcError, match="--lora-targets"):
        memory("wan2.1-t2v-1.3b", lora_rank=4)
