"""The command line as a user runs it: output formats, the card list, and errors that are one
actionable line with exit status 2, never a traceback."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import flopcalc
from flopcalc.engine.config import Config
from flopcalc.engine.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flopcalc", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def test_table_shows_components_totals_and_convention():
    out = run("estimate", "flux-dev").stdout
    for word in ("text_encoder_2", "T5EncoderModel", "FluxTransformer2DModel", "AutoencoderKL.decode", "total",
                 "GFLOPs/run", "TFLOPs", "share", "config", "verbatim", "torch convention", "FLOPs = 2 × MACs", "elementwise"):
        assert word in out
    report = flopcalc.estimate("flux-dev")
    assert f"{report.flops / 1e12:,.3f}" in out


def test_json_matches_api_and_keeps_the_tree():
    res = run("estimate", "sd3-medium", "--height", "768", "--width", "1344", "--format", "json", "--per-block")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    api = flopcalc.estimate("sd3-medium", height=768, width=1344)
    assert data["total"]["flops"] == api.flops
    transformer = next(c for c in data["components"] if c["component"] == "transformer")
    blocks = transformer["blocks"]
    groups = next(b for b in blocks["children"] if b["name"] == "transformer_blocks")["children"]
    assert [(g["name"], g.get("count", 1)) for g in groups] == [("0-22", 23), ("23", 1)]


def test_csv_rows_add_up():
    res = run("estimate", "sd3.5-large", "--format", "csv", "--convention", "thop", "--per-block")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    components = [r for r in rows if r["depth"] == "0"]
    assert all("." not in r["path"] for r in components)
    total = flopcalc.estimate("sd3.5-large", convention="thop").macs
    assert sum(int(r["macs"]) for r in components) == total
    assert {r["convention"] for r in rows} == {"thop"}
    assert any(r["path"] == "transformer.transformer_blocks" for r in rows)


def test_per_block_table():
    out = run("estimate", "flux-dev", "--per-block").stdout
    assert "transformer per block" in out and "single_transformer_blocks" in out and "0-37" in out


def test_list_shows_cards():
    out = run("list").stdout
    for name in ("flux-dev", "sd3-medium", "sd3.5-large", "black-forest-labs/FLUX.1-dev"):
        assert name in out


def test_kaplan_table():
    res = run("kaplan", "sd3-medium")
    assert res.returncode == 0, res.stderr
    assert "T5EncoderModel" in res.stdout and "Kaplan/exact" in res.stdout


def _assert_user_error(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flopcalc: error:"), res.stderr
    for w in words:
        assert w in lines[0]


def test_error_unknown_model():
    _assert_user_error(run("estimate", "no-such-card"), "no-such-card")


def test_error_non_divisible_resolution():
    _assert_user_error(run("estimate", "flux-dev", "--height", "1000"), "nearest valid", "992 or 1008")


def test_error_unknown_architecture(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"_class_name": "MyNewTransformer", "num_layers": 3}))
    _assert_user_error(run("estimate", str(tmp_path / "config.json")), "MyNewTransformer", "no formula", "flopcalc coverage")


def test_error_malformed_json(tmp_path):
    (tmp_path / "config.json").write_text('{"_class_name": "FluxTransformer2DModel",')
    _assert_user_error(run("estimate", str(tmp_path / "config.json")), "config.json")


def test_error_bad_config_value(tmp_path):
    cfg = json.loads((REPO / "model_cards/flux-dev/transformer/config.json").read_text())
    cfg["num_attention_heads"] = None
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    _assert_user_error(run("estimate", str(tmp_path / "config.json")), "num_attention_heads", "positive integer")


def test_config_key_without_default_is_named():
    cfg = Config("transformer", {"_class_name": "X"}, defaults={"a": 1})
    assert cfg["a"] == 1
    with pytest.raises(ConfigError, match="transformer/config.json \\(X\\) has no 'depth'"):
        cfg["depth"]


def test_single_config_and_folder_inputs(tmp_path):
    res = run("estimate", str(REPO / "model_cards/flux-dev/transformer/config.json"), "--steps", "4")
    assert res.returncode == 0, res.stderr
    assert "denoiser only" in res.stdout and "FluxTransformer2DModel" in res.stdout
    res = run("estimate", str(REPO / "model_cards/sd3-medium"), "--format", "json")
    assert json.loads(res.stdout)["source"] == "folder"


@pytest.mark.parametrize("model, encoder", [("sana-600m-512", "Gemma2Model"),
                                            ("qwen-image", "Qwen2_5_VLForConditionalGeneration"),
                                            ("hunyuandit", "BertModel"), ("hunyuanvideo", "LlamaModel")])
def test_kaplan_computes_every_encoder_that_declares_its_shape(model, encoder):
    res = run("kaplan", model)
    assert res.returncode == 0, res.stderr
    assert encoder in res.stdout and "Kaplan/exact" in res.stdout


def test_kaplan_refuses_a_model_without_a_text_encoder():
    _assert_user_error(run("kaplan", str(REPO / "model_cards" / "sd1.5" / "vae")), "kaplan", "no text encoder")


@pytest.mark.parametrize("args, words", [
    (("sdxl-base", "--num-frames", "81"), ("--num-frames", "StableDiffusionXLPipeline", "images, not videos")),
    (("sd1.5", "--max-sequence-length", "100"), ("--max-sequence-length", "StableDiffusionPipeline")),
    (("sd1.5", "--true-cfg-scale", "4", "--negative-prompt"), ("--true-cfg-scale", "StableDiffusionPipeline")),
    (("kolors", "--vae-tiling"), ("--vae-tiling", "KolorsPipeline", "tiled decode")),
    (("wan2.1-t2v-1.3b", "--true-cfg-scale", "3"), ("--true-cfg-scale", "WanPipeline")),
    (("sd1.5", "--guidance-scale", "nan"), ("guidance_scale", "finite")),
    (("sd1.5", "--guidance-scale", "inf"), ("guidance_scale", "finite")),
    (("sd1.5", "--guidance-scale", "-1"), ("guidance_scale", ">= 0")),
    (("flux-dev", "--true-cfg-scale", "nan"), ("true_cfg_scale", "finite")),
])
def test_an_option_a_pipeline_does_not_apply_is_refused(args, words):
    _assert_user_error(run("estimate", *args), *words)


@pytest.mark.parametrize("config, args, words", [
    ("vae", ("--num-frames", "81"), ("--num-frames", "a VAE given alone")),
    ("text_encoder", ("--steps", "3"), ("--steps", "a text encoder given alone", "--max-sequence-length")),
])
def test_an_option_a_component_given_alone_does_not_apply_is_refused(config, args, words):
    _assert_user_error(run("estimate", str(REPO / "model_cards" / "sd1.5" / config), *args), *words)


def test_every_help_text_renders():
    """argparse formats help lazily: a stray % in a help string is a traceback on --help."""
    import argparse

    from flopcalc.cli.main import _parser

    parser = _parser()
    parser.format_help()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in subparsers:
        for name, command in sub.choices.items():
            assert command.format_help(), name


def _commands():
    import argparse

    from flopcalc.cli.main import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices.items()


def test_every_option_and_positional_has_a_help_line():
    import argparse

    missing = [f"{name} {action.option_strings or action.dest}" for name, command in _commands()
               for action in command._actions
               if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()]
    assert not missing, "options without a help line: " + ", ".join(missing)


def test_the_model_positional_names_the_four_input_forms():
    for name, command in _commands():
        for action in command._actions:
            if action.dest in ("model", "models"):
                text = action.help.lower()
                assert all(word in text for word in ("card", "folder", "config.json", "hub")), name


def test_install_hints_work_from_a_clone_and_from_an_index():
    from flopcalc.engine.errors import install_hint

    assert install_hint("plot") == "pip install 'flopcalc[plot]' (from a clone of the repository: pip install -e '.[plot]')"


@pytest.mark.parametrize("flag, words", [("--no-resolution-binning", ("PixArt", "SANA", "HunyuanDiT")),
                                         ("--vae-tiling", ("video", "AutoencoderKL"))])
def test_help_names_every_pipeline_an_option_applies_to(flag, words):
    (command,) = [c for name, c in _commands() if name == "estimate"]
    (action,) = [a for a in command._actions if flag in a.option_strings]
    assert all(w in action.help for w in words)


def _renamed(tmp_path: Path, field: str, value) -> Path:
    """The FLUX.1-dev card with one value changed (``_class_name`` of the index, or a component's class)."""
    import json
    import shutil

    folder = tmp_path / "card"
    shutil.copytree(REPO / "model_cards" / "flux-dev", folder)
    file, key = field.split(":")
    path = folder / file
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize("args, words", [
    (("estimate", "{unplanned}"), ("MotifVideoPipeline", "no plan", "MotifVideoTransformer3DModel", "flopcalc coverage")),
    (("estimate", "{unknown_class}"), ("transformer", "FooTransformer3D", "no formula", "flopcalc coverage")),
    (("train", "sana-600m-512"), ("SanaTransformer2DModel", "not validated", "docs/training.md")),
    (("formulas", "resnet_blok"), ("resnet_blok", "did you mean resnet_block")),
    (("estimate", "no-such-card-at-all"), ("no-such-card-at-all",)),
    (("energy", "flux-dev", "--gpu", "no-such-gpu"), ("no-such-gpu",)),
])
def test_refusals_are_one_short_line_naming_what_is_missing(tmp_path, args, words):
    """Every refusal is one line of at most 300 characters, naming what is missing for this input and where to
    look, never the whole list of what flopcalc supports."""
    folders = {"{unplanned}": _renamed(tmp_path / "a", "model_index.json:_class_name", "MotifVideoPipeline"),
               "{unknown_class}": _renamed(tmp_path / "b", "transformer/config.json:_class_name", "FooTransformer3D")}
    unplanned = folders["{unplanned}"]
    for component, cls in (("transformer", "MotifVideoTransformer3DModel"), ("vae", "AutoencoderKLWan")):
        import json

        path = unplanned / component / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "_class_name": cls}))
    res = run(*(str(folders.get(a, a)) for a in args))
    _assert_user_error(res, *words)
    assert len(res.stderr.strip()) <= 300, res.stderr
