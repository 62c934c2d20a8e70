"""Activation peaks: the fits in flopcalc/data/activation_fit.json reproduce the measured peaks within their
stated leave-one-out error, through the same latent positions flopcalc plans, and are rebuilt by the script."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flopcalc.activations import activation_peak
from flopcalc.api import estimate

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "validation" / "fixtures" / "activations").glob("*/*.json"))
#: The largest leave-one-out error of any fit (README: "up to 46.1%"); most fits are exact quadratics.
STATED_ERROR = 0.47


def test_fits_are_what_the_script_writes():
    sys.path.insert(0, str(REPO / "validation"))
    from fit_activations import OUT, build

    assert json.loads(OUT.read_text(encoding="utf-8")) == json.loads(json.dumps(build(), sort_keys=True))


def test_every_fit_has_its_error_within_the_stated_bound():
    data = json.loads((REPO / "flopcalc" / "data" / "activation_fit.json").read_text(encoding="utf-8"))
    families = {v["measured_on"] for v in data.values()}
    assert {"flux-dev/transformer", "sd3-medium/transformer", "sd1.5/unet", "sdxl-base/unet",
            "wan2.1-t2v-1.3b/transformer", "flux-dev/vae", "sd1.5/vae"} <= families
    for entry in data.values():
        for attention in ("fused", "math"):
            assert entry[attention]["loo_max_rel_error"] <= STATED_ERROR


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_estimate_reproduces_the_measured_peak(path):
    sys.path.insert(0, str(REPO / "validation"))
    from fit_activations import card_of

    fx = json.loads(path.read_text(encoding="utf-8"))
    s, card = fx["settings"], card_of(fx["case"])
    cfg = json.loads((REPO / "model_cards" / card / fx["component"] / "config.json").read_text())
    if "height" in s:  # the shape flopcalc plans for that size
        report = estimate(card, height=s["height"], width=s["width"], num_frames=s.get("num_frames"),
                          resolution_binning=False)
        comp = report.component(fx["component"], fx["call"])
        class_name, shape = comp.class_name, comp.shape
    else:  # a text encoder at one sequence length, as the card's plan loads it
        class_name = estimate(card).component(fx["component"], fx["call"]).class_name
        shape = {"seq_len": s["seq_len"]}
    peak = activation_peak(class_name, fx["call"], cfg, shape, fx["attention"], tiled=bool(s.get("vae_tiling")))
    assert peak is not None and not peak.extrapolated
    assert abs(peak.elements - fx["peak_elements"]) <= max(peak.loo_max_rel_error, 1e-6) * fx["peak_elements"]


def test_math_path_holds_the_score_matrix_and_fused_does_not():
    """FLUX at 1024²: the math path's extra peak is the score matrix and its softmax, 2 × 24 heads × 4608²
    tokens, less what the fused path holds at its own peak (the MLP's hidden states)."""
    shape = {"latent_height": 128, "latent_width": 128}
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    math = activation_peak("FluxTransformer2DModel", "forward", cfg, shape, "math")
    fused = activation_peak("FluxTransformer2DModel", "forward", cfg, shape, "fused")
    scores = 24 * (64 * 64 + 512) ** 2
    assert 2 * scores > math.elements - fused.elements > scores


def test_one_config_fed_other_inputs_has_its_own_fit():
    """SkyReels V2's T2V and DF 14B transformers share a config; the diffusion-forcing pipeline feeds one timestep
    per latent frame (RunShape.timestep_tokens), whose per-token modulation tensors the fused peak holds: two fits,
    each found from the plan's shape."""
    from flopcalc.activations import config_key, fit_key, form

    cfgs = [json.loads((REPO / "model_cards" / c / "transformer" / "config.json").read_text())
            for c in ("skyreels-v2-t2v-14b-720p", "skyreels-v2-df-14b-720p")]
    assert config_key(cfgs[0]) == config_key(cfgs[1])
    shapes = [estimate(c).component("transformer", "forward").shape
              for c in ("skyreels-v2-t2v-14b-720p", "skyreels-v2-df-14b-720p")]
    assert [form(s) for s in shapes] == [(), ("timestep_tokens",)]
    assert fit_key("SkyReelsV2Transformer3DModel", "forward", cfgs[0]) != \
        fit_key("SkyReelsV2Transformer3DModel", "forward", cfgs[1], fed=form(shapes[1]))
    t2v, df = (activation_peak("SkyReelsV2Transformer3DModel", "forward", c, s, "fused") for c, s in zip(cfgs, shapes))
    assert t2v.measured_on == "skyreels-v2-t2v-14b-720p/transformer"
    assert df.measured_on == "skyreels-v2-df-14b-720p/transformer"
    assert df.elements > 2 * t2v.elements


def test_a_call_at_one_size_is_fitted_over_its_frame_count():
    """CogVideoX-5b-I2V's learned positional table runs at 480x720 only: its fit varies the frames, holds no frame
    count, and so a run at another frame count gets no frame note."""
    from flopcalc.memory import memory

    data = json.loads((REPO / "flopcalc" / "data" / "activation_fit.json").read_text(encoding="utf-8"))
    entry = next(v for v in data.values() if v["measured_on"] == "cogvideox-5b-i2v/transformer")
    assert "num_frames" not in entry["settings"]
    assert entry["fused"]["n_range"] == [60 * 90 * 3, 60 * 90 * 13]  # 9 and 49 frames
    m = memory("cogvideox-5b-i2v", num_frames=25)
    assert not [n for n in m.notes if n.startswith("transformer")]
    assert next(a for a in m.activations if a.component == "transformer").fused.n == 60 * 90 * 7


def test_a_temporal_decoder_fit_counts_the_frames_it_decodes():
    """Stable Video Diffusion decodes every frame in one chunk (no temporal compression): n is latent height ×
    width × frames, so img2vid's 14-frame decode uses the 25-frame fit of the config it shares with img2vid-xt, at
    its own n, with a note on the frame count."""
    from flopcalc.memory import memory

    m = memory("svd-img2vid")
    dec = next(a for a in m.activations if a.call == "decode")
    assert dec.fused.n == 72 * 128 * 14 and dec.fused.num_frames == 25
    assert any(n.startswith("vae.decode: fitted at 25 frames, run with 14") for n in m.notes)
