"""Live re-measurement of the FLUX.1 variants' transformer runs (Kontext, Fill, Control): the run
each pipeline plans, at a random size and on randomized configs, against the real
``FluxTransformer2DModel`` counted now on the meta device (``validation/measure.py``). Kontext is
measured with its input image's tokens appended, at the reference size the plan chose (resized
to a preferred Kontext resolution, or as given). Bar: exact, parameters exact, thop exact."""

from __future__ import annotations

import json

import pytest

from live_support import REPO, SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.flux_kontext import preferred_resolution  # noqa: E402

pytestmark = [pytest.mark.live,
              # diffusers' FluxControlNetModel imports FluxPosEmbed from its deprecated location
              pytest.mark.filterwarnings("ignore:`FluxPosEmbed` is deprecated:FutureWarning")]


def _transformer(pipeline: str, config: dict, settings: Settings):
    report = estimate_configs({"_class_name": pipeline}, {"transformer": config}, settings, convention="torch")
    return report.component("transformer")


def _random_config(rng, in_channels: int) -> dict:
    head_dim = rng.choice([16, 32])
    return {
        "_class_name": "FluxTransformer2DModel",
        "num_attention_heads": rng.randint(1, 4),
        "attention_head_dim": head_dim,
        "num_layers": rng.randint(0, 2),
        "num_single_layers": rng.randint(0, 2),
        "in_channels": in_channels,
        "out_channels": rng.choice([None, 16]),
        "joint_attention_dim": rng.choice([24, 40]),
        "pooled_projection_dim": rng.choice([8, 24]),
        "guidance_embeds": rng.random() < 0.5,
        "axes_dims_rope": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
    }


def _kontext_case(rng, folder, binning: bool, thop: bool, pipeline: str = "FluxKontextPipeline") -> None:
    """A Kontext plan at a random asked size: the transformer run it plans against a measurement
    with the generated and the reference latents' tokens in one sequence (the inpainting pipeline:
    the image's own latent, at the output size)."""
    cfg = json.loads((folder / "config.json").read_text())
    h, w, t = random_size(rng, 16, 256, 2048), random_size(rng, 16, 256, 2048), rng.randint(1, 512)
    comp = _transformer(pipeline, cfg, Settings(height=h, width=w, max_sequence_length=t, resolution_binning=binning))
    out_h, out_w = 16 * comp.shape["latent_height"] // 2, 16 * comp.shape["latent_width"] // 2
    if pipeline == "FluxKontextInpaintPipeline":
        ref_h, ref_w = out_h, out_w
    else:
        ref_h, ref_w = preferred_resolution(h, w, 16) if binning else (h, w)
    assert comp.shape["reference_tokens"] == (ref_h // 16) * (ref_w // 16)
    fx = measure.measure_component(folder, settings={"height": out_h, "width": out_w, "text_len": t,
                                                     "reference_height": ref_h, "reference_width": ref_w},
                                   with_thop=thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, Kontext {h}×{w} (binning {binning}): {cfg}", thop=thop)


def test_kontext_card_at_random_size(rng):
    _kontext_case(rng, REPO / "model_cards/flux-kontext-dev/transformer", binning=rng.random() < 0.5, thop=False)


@pytest.mark.parametrize("pipeline", ["FluxKontextPipeline", "FluxKontextInpaintPipeline"])
def test_random_kontext_configs(rng, tmp_path, pipeline):
    for i in range(2):
        folder = write_config(tmp_path, f"kontext{i}", _random_config(rng, 4 * rng.choice([4, 16])))
        _kontext_case(rng, folder, binning=rng.random() < 0.5, thop=True, pipeline=pipeline)


@pytest.mark.parametrize("pipeline", ["FluxFillPipeline", "FluxControlPipeline", "FluxInpaintPipeline",
                                      "FluxControlImg2ImgPipeline"])
def test_random_channel_conditioned_configs(rng, tmp_path, pipeline):
    """Fill, Control and plain inpainting: the conditioning joins on channels, which only the
    transformer's ``in_channels`` carries (FLUX.1-Fill 384, Depth 128, plain 64); random widths and sizes."""
    for i in range(2):
        cfg = _random_config(rng, rng.choice([16, 64, 128, 384]))
        folder = write_config(tmp_path, f"{pipeline}{i}", cfg)
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        comp = _transformer(pipeline, cfg, Settings(height=h, width=w, max_sequence_length=t))
        fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": t})
        assert_matches_measurement(comp, fx, f"seed {SEED}, {pipeline} {h}×{w}: {cfg}")


def test_random_flux_controlnet_configs(rng, tmp_path):
    """``FluxControlNetModel`` on random configs: InstantX style (VAE latent condition), Union
    (``num_mode``: one more text token) and XLabs style (``input_hint_block`` on the pixels,
    ``patch_size`` 2 so that 16 embedding channels × 2² = in_channels 64), at random sizes, as
    FluxControlNetPipeline plans it (alone: the ControlNet's own row)."""
    for i in range(4):
        cfg = {**_random_config(rng, 64), "_class_name": "FluxControlNetModel"}
        del cfg["out_channels"]  # FluxControlNetModel has none
        style = ("instantx", "union", "xlabs", "xlabs")[i]
        if style == "xlabs":
            embed = rng.choice([4, 16])
            cfg.update(conditioning_embedding_channels=embed, patch_size=2, in_channels=4 * embed)
        else:
            cfg["in_channels"] = rng.choice([16, 64])
        if style == "union":
            cfg["num_mode"] = rng.randint(2, 10)
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        report = estimate_configs(None, {"controlnet": cfg}, Settings(height=h, width=w, max_sequence_length=t))
        fx = measure.measure_component(write_config(tmp_path, f"controlnet{i}", cfg),
                                       settings={"height": h, "width": w, "text_len": t})
        assert_matches_measurement(report.component("controlnet"), fx, f"seed {SEED}, {style} {h}×{w}: {cfg}")
