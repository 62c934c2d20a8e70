"""``flopcalc estimate --measure``: a component whose class has no formula, built on the meta device
and counted with FlopCounterMode by the validation harness (flopcalc/engine/measure/), its runs from the plan;
analytic and measured rows in one report; the symbolic path refuses; without torch, one line and exit 2."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flopcalc.flops.estimate import estimate
from flopcalc.engine.errors import FlopcalcError, MeasureError, UnknownArchitectureError, UnplannedPipelineError
from flopcalc.engine.registry import has_formula
from flopcalc.flops.report import render

REPO = Path(__file__).resolve().parent.parent

#: A small ``XLMRobertaModel`` (the text tower of AltDiffusion-style encoders): a class flopcalc counts
#: only by measuring.
XLMR = {"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
         "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1}


def _flux_with_xlmr(tmp_path: Path) -> Path:
    """FLUX.1-dev's folder with its CLIP text encoder swapped for a XLMRobertaModel (no formula)."""
    folder = tmp_path / "flux-xlmr"
    shutil.copytree(REPO / "model_cards/flux-dev", folder)
    (folder / "text_encoder/config.json").write_text(json.dumps(XLMR))
    return folder


def _xlmr_alone(tmp_path: Path) -> Path:
    folder = tmp_path / "xlmr"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(XLMR))
    return folder


def test_the_measured_class_has_no_formula():
    """The premise of the tests below; if XLMRobertaModel gains a formula, pick another class for them."""
    assert not has_formula("XLMRobertaModel")


def _harness():
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(REPO / "validation"))
    import measure

    return measure


def test_a_planned_pipeline_measures_the_component_it_has_no_formula_for(tmp_path, rng):
    """FluxPipeline with an XLM-RoBERTa text encoder: the plan still says it runs once per prompt on 77 tokens;
    its row equals FlopCounterMode on the real module exactly; the other rows are the formulas' rows."""
    measure = _harness()
    folder = _flux_with_xlmr(tmp_path)
    height, width = 16 * rng.randint(8, 40), 16 * rng.randint(8, 40)
    report = estimate(str(folder), height=height, width=width, steps=4, measure=True)
    plain = estimate("flux-dev", height=height, width=width, steps=4)
    row = report.component("text_encoder")
    assert (row.method, row.runs, dict(row.shape)) == ("measured", 1, {"seq_len": 77})
    assert row.measure_seconds > 0
    fx = measure.measure_component(folder / "text_encoder", settings={"seq_len": 77}, with_thop=False)
    assert 2 * row.macs_per_run == fx["torch"]["flops"]
    assert row.params == fx["params"]
    for other in ("text_encoder_2", "transformer", "vae"):
        assert report.component(other).method == "formula"
        assert report.component(other).macs == plain.component(other).macs
    assert report.macs == plain.macs - plain.component("text_encoder").macs + row.macs
    assert any(n.startswith("measured: text_encoder (XLMRobertaModel)") for n in report.notes)

    data = json.loads(render(report, "json"))
    methods = {c["component"]: (c["method"], "measure_seconds" in c) for c in data["components"]}
    assert methods["text_encoder"] == ("measured", True) and methods["vae"] == ("formula", False)
    assert data["total"]["macs"] == report.macs
    rows = list(csv.DictReader(io.StringIO(render(report, "csv", per_block=True))))
    assert {r["path"]: r["method"] for r in rows if "." not in r["path"]}["text_encoder"] == "measured"
    assert "XLMRobertaModel (measured, " in render(report, "table")


def test_a_text_encoder_alone_is_measured_from_the_cli(tmp_path, rng):
    measure = _harness()
    from flopcalc.cli.main import main

    folder = _xlmr_alone(tmp_path)
    seq = rng.randint(1, 300)
    out = io.StringIO()
    stdout, sys.stdout = sys.stdout, out
    try:
        assert main(["estimate", str(folder / "config.json"), "--measure", "--max-sequence-length", str(seq),
                     "--format", "json"]) == 0
    finally:
        sys.stdout = stdout
    (row,) = json.loads(out.getvalue())["components"]
    fx = measure.measure_component(folder, settings={"seq_len": seq}, with_thop=False)
    assert (row["method"], row["runs"], 2 * row["macs_per_run"]) == ("measured", 1, fx["torch"]["flops"])


def test_a_class_without_an_input_builder_says_how_to_add_one(tmp_path):
    _harness()
    folder = tmp_path / "dinov2"  # XLMRobertaModel has an input builder now, SiglipVisionModel a formula
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["Dinov2Model"], "model_type": "dinov2"}))
    with pytest.raises(MeasureError, match=r"no formula and no input builder.*flopcalc/engine/measure/inputs/"):
        estimate(str(folder), measure=True)


def test_remote_code_is_never_run(tmp_path):
    folder = _flux_with_xlmr(tmp_path)
    remote = {**XLMR, "auto_map": {"AutoModel": "modeling_evil.XLMRobertaModel"}}
    (folder / "text_encoder/config.json").write_text(json.dumps(remote))
    with pytest.raises(MeasureError, match="never runs remote code"):
        estimate(str(folder), measure=True)


def test_without_measure_the_error_points_to_it(tmp_path):
    with pytest.raises(UnknownArchitectureError, match=r"XLMRobertaModel.*--measure.*flopcalc\[measure\]"):
        estimate(str(_flux_with_xlmr(tmp_path)))


def test_an_unplanned_pipeline_cannot_be_measured(tmp_path):
    folder = _flux_with_xlmr(tmp_path)
    index = json.loads((folder / "model_index.json").read_text())
    # (ZImagePipeline, HiDreamImagePipeline and AllegroPipeline, the pipelines this test named before, have plans now)
    (folder / "model_index.json").write_text(json.dumps({**index, "_class_name": "MotifVideoPipeline"}))
    with pytest.raises(UnplannedPipelineError, match=r"MotifVideoPipeline.*no plan.*--measure counts components of a "
                                                     r"planned pipeline only"):
        estimate(str(folder), measure=True)


def test_a_vae_with_no_formula_is_planned_as_the_class_the_pipeline_expects(tmp_path):
    """FLUX's plan takes the latent grid from the VAE's config as AutoencoderKL's formula reads it: a VAE of a
    class with no formula (AutoencoderTiny, as diffusers runs taef1 in FluxPipeline) is read the same way on its
    own built config and measured (tests/test_measure_stand_in.py checks the count)."""
    folder = _flux_with_xlmr(tmp_path)
    vae = json.loads((folder / "vae/config.json").read_text())
    (folder / "vae/config.json").write_text(json.dumps({**vae, "_class_name": "AutoencoderTiny"}))
    row = estimate(str(folder), measure=True).component("vae")
    assert (row.class_name, row.method, row.shape) == ("AutoencoderTiny", "measured",
                                                       {"latent_height": 128, "latent_width": 128})


def test_the_symbolic_path_names_the_rows_it_cannot_express(tmp_path):
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match=r"cannot express text_encoder \(XLMRobertaModel\).*--measure"):
        symbolic_estimate(str(_flux_with_xlmr(tmp_path)))


@pytest.mark.parametrize("command", [["symbolic"], ["sweep", "--height", "512,1024"], ["plot", "--out", "{tmp}/f.svg"],
                                     ["report", "--html", "{tmp}/r.html"]])
def test_every_symbolic_command_refuses_with_the_reason(tmp_path, command):
    folder = str(_flux_with_xlmr(tmp_path))
    args = [command[0], folder, *(a.format(tmp=tmp_path) for a in command[1:])]
    done = subprocess.run([sys.executable, "-m", "flopcalc", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "cannot express text_encoder (XLMRobertaModel)" in done.stderr and done.stderr.count("\n") == 1


def test_measured_rows_are_the_torch_convention_only(tmp_path):
    with pytest.raises(MeasureError, match="torch convention"):
        estimate(str(_flux_with_xlmr(tmp_path)), convention="thop", measure=True)


def test_without_torch_one_line_says_what_to_install(tmp_path):
    """torch blocked in a fresh interpreter: exit 2 and one line naming the extra."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from flopcalc.cli.main import main\n"
            f"sys.exit(main(['estimate', {str(_xlmr_alone(tmp_path) / 'config.json')!r}, '--measure']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert 'torch missing' in done.stderr and "pip install 'flopcalc[measure]'" in done.stderr and "pip install -e '.[measure]'" in done.stderr
