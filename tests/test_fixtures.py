"""Every measured fixture in validation/fixtures against flopcalc's estimate of the same run.

Bar: ``torch`` convention MACs × 2 equal FlopCounterMode's FLOPs exactly, for the whole
component and for every module path the harness recorded (depth ≤ 3); parameters exact;
``thop`` convention within 0.5% of thop's MACs (in fact equal: asserted separately so a drift
within the tolerance is still seen).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

import flopcalc
from flopcalc.engine.errors import OptionError

REPO = Path(__file__).resolve().parent.parent
# Folders of other checks' fixtures, not FLOP counts: quantized storage (tests/test_quantized.py), whole-pipeline
# allocator replays (tests/test_memory_allocator.py), sharded training states (tests/test_training_memory.py).
NOT_FLOPS = ("quantized", "allocator_pipelines", "training_sharding")
FIXTURES = sorted(p for p in (REPO / "validation" / "fixtures").glob("*/*.json") if p.parent.name not in NOT_FLOPS)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _model_of(fixture: dict) -> str:
    """The flopcalc input for a fixture: the pipeline folder when there is one, else the config."""
    config_dir = REPO / fixture["config_dir"]
    return str(config_dir.parent if (config_dir.parent / "model_index.json").exists() else config_dir)


@lru_cache(maxsize=None)
def _report(model: str, height: int | None, width: int | None, frames: int | None, convention: str,
            tiling: bool | None = None, ip_adapter: str | None = None, reference_images: int | None = None,
            plan_options: tuple[tuple[str, int], ...] = ()):
    # strength turns on image-to-image so the VAE encoder is planned too; sizes are measured as given. A
    # pipeline that takes no strength (image-to-video: it encodes its image anyway) refuses it.
    kwargs = dict(height=height, width=width, num_frames=frames, resolution_binning=False, vae_tiling=tiling,
                  convention=convention, **({"ip_adapter": ip_adapter} if ip_adapter else {}),
                  **({"reference_images": reference_images} if reference_images else {}), **dict(plan_options))
    try:
        return flopcalc.estimate(model, strength=1.0, **kwargs)
    except OptionError as exc:
        assert "--strength does not apply" in str(exc)
        return flopcalc.estimate(model, **kwargs)


def _ip_adapter(fixture: dict) -> str | None:
    """The IP-Adapter layout (flopcalc.engine.pipelines.ip_adapter) a fixture was measured with: its settings' (the
    image-embedding width ``ip_adapter``, a plus adapter's Resampler width ``ip_adapter_plus``), else that of a
    Stable Diffusion (XL) folder saved after ``load_ip_adapter`` (it holds the adapter's ``image_encoder``)."""
    from flopcalc.engine.pipelines.ip_adapter import layout_for

    folder = Path(_model_of(fixture))
    s = fixture["settings"]
    if "ip_adapter" in s:
        unet = json.loads((folder / "unet" / "config.json").read_text())
        return layout_for(s["ip_adapter"], unet["cross_attention_dim"], s.get("ip_adapter_plus"))
    index = folder / "model_index.json"
    if not index.exists() or not (folder / "image_encoder").is_dir() or json.loads(index.read_text())[
            "_class_name"] not in ("StableDiffusionPipeline", "StableDiffusionXLPipeline"):
        return None
    encoder = json.loads((folder / "image_encoder" / "config.json").read_text())
    unet = json.loads((folder / "unet" / "config.json").read_text())
    return layout_for(encoder["projection_dim"], unet["cross_attention_dim"])


def _tiled(fixture: dict) -> bool:
    """A fixture of a whole tiled call (``vae.enable_tiling()``): flopcalc plans it as one run per
    tile shape, merged into one row whose ``macs`` (runs × per run) is the measured call."""
    return bool(fixture["settings"].get("vae_tiling")) and "num_frames" not in fixture["settings"]


def _call_macs(comp, fixture: dict) -> int:
    """The MACs of the one measured call: a tiled call is all its tiles (one image: ``comp.macs``)."""
    return comp.macs if _tiled(fixture) else comp.macs_per_run


def _module_macs(comp, fixture: dict, module_path: str) -> int:
    """MACs of ``module_path`` over the measured call: summed over the tiles of a tiled call, and over
    the pieces of one run (a PAG denoiser's original and perturbed rows: one batched call)."""
    pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
    calls = comp.runs if _tiled(fixture) else 1
    return calls * sum(p.count * (n.per_item.macs("torch") if (n := p.find(module_path)) else 0) for p in pieces)


def _component(fixture: dict, convention: str = "torch"):
    s = fixture["settings"]
    report = _report(_model_of(fixture), s.get("height"), s.get("width"), s.get("num_frames"), convention,
                     True if _tiled(fixture) else None, _ip_adapter(fixture), s.get("reference_images"),
                   tuple(sorted(fixture.get("plan_options", {}).items())))
    built = fixture.get("built_class", fixture["class_name"])  # legacy Transformer2DModel → PixArt / DiT
    matches = [c for c in report.components if c.class_name == built and c.call == fixture["call"]
               and (c.component == fixture["component"] or len(report.components) == 1)]
    assert len(matches) == 1, [c.component for c in report.components]
    comp = matches[0]
    # The run flopcalc planned is the run that was measured.
    for key in ("seq_len", "text_len", "text_len_2"):
        if key in s:
            assert comp.shape[key] == s[key]
    return comp


def test_fixtures_exist():
    cases = {p.parent.name for p in FIXTURES}
    assert {"flux-dev", "sd3-medium", "sd3.5-large", "sd3.5-medium-transformer"} <= cases
    sizes = {(p.parent.name, p.stem.rsplit("-", 1)[-1]) for p in FIXTURES if "x" in p.stem.rsplit("-", 1)[-1]}
    for case in ("flux-dev", "sd3-medium", "sd3.5-large"):
        assert {(case, s) for s in ("512x512", "1024x1024", "768x1344")} <= sizes


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_torch_convention_is_exact(path):
    fixture = _load(path)
    comp = _component(fixture)
    assert 2 * _call_macs(comp, fixture) == fixture["torch"]["flops"]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_measured_module_is_exact(path):
    fixture = _load(path)
    comp = _component(fixture)
    for module_path, flops in fixture["torch"]["by_module"].items():
        if module_path == "Global":
            assert 2 * _call_macs(comp, fixture) == flops
            continue
        assert 2 * _module_macs(comp, fixture, module_path) == flops, module_path


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_parameters_are_exact(path):
    fixture = _load(path)
    comp = _component(fixture)
    assert comp.params == fixture["params"]
    by_module = fixture["params_by_module"]
    if sum(by_module.values()) > fixture["params"]:
        # Tied weights (T5's ``shared`` is ``encoder.embed_tokens``) count in both modules:
        # per-module parameters overlap there, only the deduplicated total is comparable.
        # (A sum below the total is fine: parameters held by the root itself.)
        pytest.skip("tied parameters: per-module counts overlap")
    pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)  # each piece: the whole model
    for module_path, params in by_module.items():
        for piece in pieces:
            calls_sum = piece.find(module_path)
            if calls_sum is not None:  # the other call's modules (e.g. the encoder when decoding) are absent
                assert calls_sum.total.params == params, module_path


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_thop_convention(path):
    fixture = _load(path)
    measured = fixture["thop"]["macs"]
    ours = _call_macs(_component(fixture, "thop"), fixture)
    assert abs(ours - measured) <= 0.005 * measured
    assert ours == measured  # exact today: thop's rules are modelled, not approximated
