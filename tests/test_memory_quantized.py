"""``flopcalc memory`` with the quantizations people use: every format exact per component (the layouts are checked
in ``test_quantized.py`` and ``test_weights.py``), GGUF files against diffusers' loader, the transformers release's
keep-in-float32 rule, and the CLI equal to the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.estimate import memory
from flopcalc.gpu_memory.gguf import FILE_TYPES
from flopcalc.gpu_memory.report import render_memory
from flopcalc.gpu_memory.transformers_versions import OTHER, PINNED, keeps_fp32, parse_version
from flopcalc.gpu_memory.weights import component_weights

REPO = Path(__file__).resolve().parents[1]
GGUF_FIXTURE = REPO / "validation" / "fixtures" / "quantized" / "gguf" / "flux.json"
T5 = json.loads((REPO / "model_cards" / "flux-dev" / "text_encoder_2" / "config.json").read_text())


def test_gguf_files_equal_what_diffusers_loads():
    data = json.loads(GGUF_FIXTURE.read_text())
    assert {r["file_type"] for r in data["files"]} == set(FILE_TYPES) - {"f16"}
    for row in data["files"]:
        ours = component_weights(data["config"], component="transformer", dtype=f"gguf-{row['file_type']}")
        assert ours.bytes == row["bytes"], row["file_type"]


def test_gguf_wan_files_equal_what_diffusers_loads():
    """Wan: the ``.v`` counter of Q3_K_M / Q4_K_S, ``.ffn.2``, and K-type rows of 384 falling back to F16."""
    data = json.loads((GGUF_FIXTURE.parent / "wan.json").read_text())
    assert len(data["cases"]) == 2
    for case in data["cases"]:
        for row in case["files"]:
            ours = component_weights(case["config"], component="transformer", dtype=f"gguf-{row['file_type']}")
            assert ours.bytes == row["bytes"], (case["config"]["attention_head_dim"], row["file_type"])


def test_gguf_mixtures_follow_the_file_type():
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    size = {t: component_weights(cfg, component="transformer", dtype=f"gguf-{t}").bytes for t in FILE_TYPES}
    assert size["q4_k_s"] < size["q4_k_m"] < size["q5_k_s"] < size["q5_k_m"] < size["q6_k"] < size["q8_0"]
    assert size["q2_k"] < size["q3_k_s"] < size["q3_k_m"] == size["q3_k_l"]  # FLUX: only the fused qkv rule applies
    assert size["f16"] == size["bf16"] == component_weights(cfg, component="transformer", dtype="bf16").bytes


def test_the_pinned_release_is_the_validate_extra_pin():
    text = (REPO / "pyproject.toml").read_text()
    assert f'"transformers=={PINNED}"' in text.split("validate = [", 1)[1].split("]", 1)[0]


@pytest.mark.parametrize("version, dtype, library, kept", [
    ("5.23.0", "bf16", "bitsandbytes", False), ("5.23.0", "fp16", None, True), ("5.1", "bf16", None, False),
    ("5.0.0", "bf16", None, True), ("5.0.2", "bf16", "quanto", True), ("4.57.6", "bf16", "bitsandbytes", True),
    ("4.57.6", "bf16", "torchao", False), ("4.57.6", "bf16", None, False), ("4.50.3", "bf16", None, True),
    ("4.40.0", "bf16", "bitsandbytes", True), ("4.40.0", "fp32", "quanto", False),
])
def test_keep_in_fp32_rule_per_release(version, dtype, library, kept):
    assert keeps_fp32(version, dtype, library) is kept


def test_t5_under_bitsandbytes_by_release():
    new = component_weights(T5, component="t", dtype="bnb-nf4", transformers_version=PINNED)
    old = component_weights(T5, component="t", dtype="bnb-nf4", transformers_version=OTHER)
    wo = 24 * 4096 * 10240  # T5-XXL's 24 wo layers (d_ff 10240 → d_model 4096), never converted
    assert new.params_fp32 == 0 and old.params_fp32 == wo
    assert old.bytes - new.bytes == 2 * wo  # float32 instead of bf16
    assert new.quantized_params == old.quantized_params
    plain = component_weights(T5, component="t", dtype="bf16", transformers_version="4.50.0")
    assert plain.params_fp32 == wo  # 4.50 kept them in float32 for every dtype


def test_memory_notes_the_other_release_and_the_cli_equals_the_api(capsys):
    est = memory("flux-dev", dtype="nf4")
    assert est.settings["transformers_version"] == PINNED
    note = next(n for n in est.notes if n.startswith("text_encoder_2:"))
    assert OTHER in note and "float32" in note
    other = memory("flux-dev", dtype="nf4", transformers_version=OTHER)
    assert other.weights_bytes > est.weights_bytes
    assert main(["memory", "flux-dev", "--dtype", "NF4", "--transformers-version", OTHER, "--format", "json"]) == 0
    assert capsys.readouterr().out == render_memory(other, "json")
    assert main(["memory", "flux-dev", "--dtype-of", "transformer=gguf-q4_k_m", "--dtype", "torchao-int8wo"]) == 0
    out = capsys.readouterr().out
    assert out == render_memory(memory("flux-dev", dtype="torchao-int8wo",
                                       dtype_of={"transformer": "gguf-q4_k_m"}), "table")
    assert "gguf-q4_k_m" in out and "torchao-int8wo" in out


@pytest.mark.parametrize("argv, match", [
    (["--dtype", "q4_k_m"], "gguf-<type>"),
    (["--dtype", "gguf-q4_k_m"], "no GGUF file layout known for CLIPTextModel"),
    (["--dtype-of", "vae=gguf-q8_0"], "no GGUF file layout known for AutoencoderKL"),
    (["--transformers-version", "banana"], "expected a release"),
    (["--transformers-version", "3.9.0"], "4.30 to 5.x"),
    (["--offload", "sequential", "--dtype", "quanto-int4"], "sequential with quanto-int4"),
])
def test_refusals_are_one_line(capsys, argv, match):
    assert main(["memory", "flux-dev", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err and "Traceback" not in err


def test_bad_version_strings_are_refused():
    for bad in ("", "5", "x" * 100, "5.1.2.3.4.5.6.7.8.9.0.1.2.3.4.5.6.7.8.9.0.1.2.3.4"):
        with pytest.raises(FlopcalcError):
            parse_version(bad)


def test_reading_layer_shapes_leaves_the_flop_path_plain():
    """The quantized formats assemble trees whose linear_weights hold shapes; the formulas' caches are cleared
    around that pass, so an estimate afterwards sees plain integers only."""
    from flopcalc.flops.estimate import estimate

    cfg = json.loads((REPO / "model_cards" / "sd1.5" / "unet" / "config.json").read_text())
    before = estimate("sd1.5")
    component_weights(cfg, component="unet", dtype="quanto-int4")
    after = estimate("sd1.5")
    for comp in after.components:
        for _, node in comp.tree.walk():
            assert type(node.cost.linear_weights) is int
    assert after.to_dict() == before.to_dict()
