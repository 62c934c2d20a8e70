"""One path for every command: ``estimate``, ``energy``, ``memory`` and ``train`` take every option of a pipeline
family through the same declaration, print exactly what the Python API returns for it (rendered by the same
function), and refuse an option the pipeline does not take with the same line.

Every declared family option is run, with each of its sample values, on a bundled card or validation config
whose pipeline applies it; a new family option is covered without editing this file (its declaration's
``examples``, or a sample value of its kind)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

import flopcalc
from flopcalc.cli.main import main
from flopcalc.engine.cards import list_cards
from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.pipelines.base import pipeline_modules, pipeline_options
from flopcalc.engine.settings import NAMES, PAIRS, known, pair

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "validation" / "configs"
GPU = "h100-sxm"
OPTIONS = known()


@lru_cache(maxsize=None)
def _sources_by_pipeline() -> dict[str, list[str]]:
    """Pipeline → the bundled cards and validation config folders that plan it by default."""
    out: dict[str, list[str]] = {}
    sources = [c.name for c in list_cards()] + sorted(str(p) for p in CONFIGS.iterdir() if p.is_dir())
    planned = pipeline_modules()
    for source in sources:
        try:
            pipeline = flopcalc.estimate(source).pipeline
        except FlopcalcError:
            continue
        if pipeline in planned:  # not a lone component ("... (denoiser only)")
            out.setdefault(pipeline, []).append(source)
    return out


def _source_applying(name: str, tmp: Path) -> str | None:
    """A card or validation config planning a pipeline that takes option ``name``; else a card's folder relabelled
    (``model_index.json``'s ``_class_name``) as such a pipeline, where one plans under it (variants that share their
    base's components: LTX-2's condition and in-context pipelines)."""
    for pipeline, sources in sorted(_sources_by_pipeline().items()):
        if name in pipeline_options(pipeline):
            return sources[0]
    wanted = sorted(p for p in pipeline_modules() if name in pipeline_options(p))
    for pipeline in wanted:
        for card in list_cards():
            folder = tmp / f"{card.name}-as-{pipeline}"
            folder.mkdir()
            index = json.loads(Path(card.path, "model_index.json").read_text(encoding="utf-8"))
            (folder / "model_index.json").write_text(json.dumps({**index, "_class_name": pipeline}), encoding="utf-8")
            for entry in Path(card.path).iterdir():
                if entry.is_dir():
                    (folder / entry.name).symlink_to(entry)
            try:
                if flopcalc.estimate(str(folder)).pipeline == pipeline:
                    return str(folder)
            except FlopcalcError:
                pass
    return None


def _api_value(spec, text: str):
    if spec.kind == NAMES:
        return (text,)
    if spec.kind == PAIRS:
        return [pair(text)]
    return float(text) if spec.kind == "scale" else int(text)


def _cli(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out if code == 0 else out.err.strip()


def _api(command: str, source: str, settings: dict) -> tuple[int, str]:
    """What the command prints for the API's result, or the API's refusal."""
    from flopcalc.energy_laws.render import render as render_energy
    from flopcalc.flops.report import render as render_flops
    from flopcalc.gpu_memory.report import render_memory
    from flopcalc.training.report import render_training

    try:
        if command == "estimate":
            return 0, render_flops(flopcalc.estimate(source, **settings), "json")
        if command == "energy":
            return 0, render_energy(flopcalc.energy(source, gpu=GPU, **settings), "json")
        if command == "memory":
            return 0, render_memory(flopcalc.memory(source, gpu=GPU, **settings), "json")
        return 0, render_training(flopcalc.train(source, **settings), "json")
    except FlopcalcError as exc:
        return 2, f"flopcalc: error: {exc}"


def _argv(command: str, source: str, flags: list[str]) -> list[str]:
    gpu = ["--gpu", GPU] if command in ("energy", "memory") else []
    return [command, source, *gpu, *flags, "--format", "json"]


COMMANDS = ("estimate", "energy", "memory", "train")


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_family_option_is_the_same_in_every_command_and_the_api(name, capsys, tmp_path):
    spec = OPTIONS[name]
    source = _source_applying(name, tmp_path)
    assert source is not None, f"{spec.flag}: no bundled card or validation config plans a pipeline that takes it"
    worked = 0
    for text in spec.sample_values:
        settings = {name: _api_value(spec, text)}
        for command in COMMANDS:
            cli = _cli(capsys, _argv(command, source, [spec.flag, text]))
            api = _api(command, source, settings)
            assert cli == api, f"{command} {source} {spec.flag} {text}: the CLI and the API differ"
            if command == "estimate" and cli[0] == 0:
                worked += 1
                base = flopcalc.estimate(source)
                assert json.loads(cli[1])["settings"] != base.to_dict()["settings"], "the option did not arrive"
    assert worked, f"{spec.flag}: none of its sample values {spec.sample_values} runs on {source}; declare examples"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_a_pipeline_that_does_not_take_an_option_refuses_it_in_every_command(name, capsys):
    spec = OPTIONS[name]
    source = next(s for p, ss in sorted(_sources_by_pipeline().items()) for s in ss if name not in pipeline_options(p))
    text = spec.sample_values[0]
    lines = set()
    for command in COMMANDS:
        code, cli = _cli(capsys, _argv(command, source, [spec.flag, text]))
        assert (code, cli) == _api(command, source, {name: _api_value(spec, text)})
        assert code == 2 and "\n" not in cli
        lines.add(cli)
    assert len(lines) == 1, f"{spec.flag} on {source}: the commands refuse it differently: {lines}"


@pytest.mark.parametrize("flags, settings", [
    (["--steps", "7", "--height", "512", "--width", "768"], {"steps": 7, "height": 512, "width": 768}),
    (["--guidance-scale", "1", "--batch-size", "2", "--num-images-per-prompt", "2"],
     {"guidance_scale": 1.0, "batch_size": 2, "num_images_per_prompt": 2}),
    (["--max-sequence-length", "256", "--negative-prompt", "--true-cfg-scale", "3"],
     {"max_sequence_length": 256, "negative_prompt": True, "true_cfg_scale": 3.0}),
])
def test_the_generation_options_are_the_same_in_every_command_and_the_api(flags, settings, capsys):
    for command in COMMANDS:
        assert _cli(capsys, _argv(command, "flux-dev", flags)) == _api(command, "flux-dev", settings), command
