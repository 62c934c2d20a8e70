"""``flopcalc memory CARD --vae-tiling`` for the video VAEs measured tiled after CogVideoX / Wan 2.1 / HunyuanVideo
(issue 22.2): Wan 2.1's VAE under every card that loads it (their configs spell out the class defaults the 1.3B's
leaves out: one fit key), Wan 2.2 TI2V 5B's VAE, LTX-Video's two VAE configs, LTX-2's video VAE, Mochi's and
HunyuanVideo 1.5's, each measured at ``enable_tiling()``'s defaults (validation/activation_manifest.yaml, cases
``*-tiled``) and fitted by validation/fit_activations.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.cli.main import main
from flopcalc.gpu_memory.activations import config_key
from flopcalc.gpu_memory.estimate import memory

REPO = Path(__file__).resolve().parents[1]

#: (card, the VAE's class, a size at which the decode is split into tiles)
CARDS = [
    ("wan2.1-t2v-14b", "AutoencoderKLWan", (720, 1280)),
    ("wan2.2-t2v-a14b", "AutoencoderKLWan", (720, 1280)),
    ("wan2.2-i2v-a14b", "AutoencoderKLWan", (720, 1280)),
    ("skyreels-v2-t2v-14b-720p", "AutoencoderKLWan", (720, 1280)),
    ("skyreels-v2-df-1.3b-540p", "AutoencoderKLWan", (720, 1280)),
    ("wan2.2-ti2v-5b", "AutoencoderKLWan", (704, 1280)),
    ("ltx-video", "AutoencoderKLLTXVideo", (768, 1280)),
    ("ltx-video-0.9.5", "AutoencoderKLLTXVideo", (768, 1280)),
    ("ltx-video-0.9.7-dev", "AutoencoderKLLTXVideo", (768, 1280)),
    ("ltx-2", "AutoencoderKLLTX2Video", (768, 1344)),
    ("mochi-1-preview", "AutoencoderKLMochi", (720, 1280)),
    ("hunyuanvideo-1.5-480p", "AutoencoderKLHunyuanVideo15", (720, 1280)),
]


def _decode(report):
    return next(a for a in report.activations if (a.component, a.call) == ("vae", "decode"))


@pytest.mark.parametrize("card,class_name,size", CARDS, ids=[c[0] for c in CARDS])
def test_tiled_decode_is_estimated_and_below_the_untiled_one(card, class_name, size):
    height, width = size
    whole = memory(card, height=height, width=width)
    tiled = memory(card, height=height, width=width, vae_tiling=True)
    assert next(c for c in tiled.components if c.component == "vae").class_name == class_name
    assert "vae.decode" not in tiled.unestimated
    assert not any(n.startswith("vae.decode") and "not measured in tiles" in n for n in tiled.notes)  # the decode's
    dec = {"whole": _decode(whole), "tiled": _decode(tiled)}
    assert dec["tiled"].fused.n == dec["whole"].fused.n  # the fit is in the whole latent's positions
    assert 0 < dec["tiled"].fused.elements < dec["whole"].fused.elements
    assert not dec["tiled"].fused.extrapolated  # the size lies within the measured grid
    assert dec["tiled"].fused.loo_max_rel_error < 0.15 and dec["tiled"].math.loo_max_rel_error < 0.15


@pytest.mark.parametrize("card", ["wan2.2-t2v-a14b", "ltx-video-0.9.7-dev", "mochi-1-preview"])
def test_cli_prints_an_estimated_tiled_decode(card, capsys):
    assert main(["memory", card, "--vae-tiling", "--offload", "model", "--gpu", "h100"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("vae.decode ") for line in out.splitlines())
    assert "not measured in tiles" not in out
    assert not any("not estimated" in line and "vae.decode" in line for line in out.splitlines())


def test_wan_configs_equal_once_defaults_are_applied_share_a_key():
    """Wan 2.2 A14B's VAE config writes out ``is_residual: false``, ``patch_size: null``, ... which Wan 2.1 T2V
    1.3B's leaves to the class defaults: the same VAE, one fit key; the 5B VAE (z_dim 48, patch_size 2) another."""
    def key(card):
        return config_key(json.loads((REPO / "model_cards" / card / "vae" / "config.json").read_text("utf-8")))

    raw = {card: json.loads((REPO / "model_cards" / card / "vae" / "config.json").read_text("utf-8"))
           for card in ("wan2.1-t2v-1.3b", "wan2.2-t2v-a14b")}
    assert "is_residual" not in raw["wan2.1-t2v-1.3b"] and raw["wan2.2-t2v-a14b"]["is_residual"] is False
    assert key("wan2.1-t2v-1.3b") == key("wan2.2-t2v-a14b") == key("skyreels-v2-t2v-14b-720p")
    assert key("wan2.2-ti2v-5b") != key("wan2.1-t2v-1.3b")
    # a key the config sets to a value other than the default still tells the configs apart
    assert config_key({**raw["wan2.1-t2v-1.3b"], "z_dim": 48}) != key("wan2.1-t2v-1.3b")


def test_a_tiled_decode_without_a_fit_is_named_not_estimated(monkeypatch):
    """Where a tiled decode has no fit (here LTX-Video's, its fit removed from the table), the verdict says so
    rather than "fits"."""
    import flopcalc.gpu_memory.activations as activations

    table = {k: v for k, v in activations._fits().items() if not k.startswith("AutoencoderKLLTXVideo.decode:tiled")}
    monkeypatch.setattr(activations, "_fits", lambda: table)
    est = memory("ltx-video", vae_tiling=True, gpu="h100")
    assert "vae.decode" in est.unestimated and est.fits is not True and "not estimated" in est.verdict


@pytest.mark.parametrize("card,why", [
    ("hunyuanvideo-1.5-480p-i2v", "does not model a tiled decode"),
    ("ltx-2-latent-upsampler", "not the tiled encode of its input images or videos"),
])
def test_vae_tiling_where_flopcalc_does_not_model_it_is_refused(card, why, capsys):
    """HunyuanVideo 1.5 image-to-video's tiled encode of its input image and the LTX-2 latent upsampler's of its input
    video (enable_tiling() tiles the encode too; only LTX2Pipeline's tiled decode is planned) have no FLOP count, so no
    memory either: one line, exit 2."""
    assert main(["memory", card, "--vae-tiling"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0]


def test_easyanimate_tiled_decode_and_encode_are_estimated():
    """EasyAnimate's Magvit with ``--vae-tiling`` at 1024×1792 (cases ``easyanimate-v5.1-7b-zh-control-vae-tiled``
    and ``-encode-tiled``): the tiled decode is fitted in all the latent's positions (the decoded tiles it holds; the
    untiled decode, one latent frame at a time, in one frame's), the control video's tiled encode in one frame's
    pixels; both estimated within the measured grid, below the untiled peaks, and nothing left unestimated."""
    card = "easyanimate-v5.1-7b-zh-control"
    whole = memory(card, height=1024, width=1792)
    tiled = memory(card, height=1024, width=1792, vae_tiling=True)
    peaks = {(est is tiled, a.call): a.fused for est in (whole, tiled) for a in est.activations if a.component == "vae"}
    assert peaks[(True, "decode")].n == 13 * 128 * 224 and peaks[(False, "decode")].n == 128 * 224
    assert peaks[(True, "encode")].n == peaks[(False, "encode")].n == 1024 * 1792
    for call in ("decode", "encode"):
        assert 0 < peaks[(True, call)].elements < peaks[(False, call)].elements
        assert not peaks[(True, call)].extrapolated and peaks[(True, call)].loo_max_rel_error < 0.15
    assert tiled.unestimated == ()


def test_the_largest_video_tile_fits_and_the_next_step_does_not():
    """``--vae-tiling --gpu`` on EasyAnimate's Magvit (``VIDEO_TILING``; its tile-size law checked at 768-px tiles):
    the proposed tile fits by the tool's own numbers, the next step does not, and the derived law gives back the
    default tile's peak; each tile over all 13 latent frames the plan decodes."""
    from flopcalc.gpu_memory.vae_tiles import _with_tile

    est = memory("easyanimate-v5.1-7b-zh-control", height=576, width=1024, vae_tiling=True, offload="sequential",
                 gpu="rtx-4080")
    advice, law = est.vae_tile, est.tile_law
    assert advice.tile is not None and advice.tile % law.step == 0 and advice.tile > law.default_tile
    assert law.latent_frames == 13 and advice.tile_law_error is not None and advice.tile_law_error <= 0.15
    at, bigger = _with_tile(est, law, advice.tile), advice.tile + law.step
    assert at.fits is True and at.peak_bytes == advice.peak_bytes <= est.gpu_memory_bytes
    assert bigger <= law.largest_measured and _with_tile(est, law, bigger).fits is False
    assert _with_tile(est, law, law.default_tile).peak_bytes == est.peak_bytes


@pytest.mark.parametrize("card,size", [("wan2.1-t2v-1.3b", (720, 1280)), ("ltx-video", (1280, 1536))])
def test_no_tile_size_where_the_tile_size_law_is_off(card, size):
    """Wan's and LTX-Video's tile-size laws, checked at 384- and 768-px tiles, over-state the peak beyond the bound:
    the advice proposes no size and says by how much the law is off."""
    from flopcalc.gpu_memory.vae_tiles import TILE_LAW_BOUND

    est = memory(card, height=size[0], width=size[1], vae_tiling=True, offload="sequential", gpu="rtx-3060")
    assert est.tile_law.error > TILE_LAW_BOUND and est.vae_tile.tile is None
    assert f"off by up to {100 * est.tile_law.error:.0f}%" in est.vae_tile.text
