"""``flopcalc memory --vae-tiling`` on video VAEs: the tiled decode has its own measured fit
(validation/fixtures/activations/<card>-tiled/, fitted by validation/fit_activations.py), and the peak follows it."""

from __future__ import annotations

import pytest

from flopcalc.cli.main import main
from flopcalc.gpu_memory.estimate import memory

#: (card, the decode's class): the video VAEs whose tiled decode is measured.
TILED_VIDEO = [("cogvideox-2b", "AutoencoderKLCogVideoX"), ("wan2.1-t2v-1.3b", "AutoencoderKLWan"),
               ("hunyuanvideo", "AutoencoderKLHunyuanVideo")]


def _decode(report):
    return next(a for a in report.activations if (a.component, a.call) == ("vae", "decode"))


@pytest.mark.parametrize("card,class_name", TILED_VIDEO)
def test_tiled_video_decode_is_estimated_below_the_untiled_one(card, class_name):
    whole, tiled = memory(card, dtype="fp16"), memory(card, dtype="fp16", vae_tiling=True)
    assert "vae.decode" not in tiled.unestimated
    assert not any(n.startswith("vae.decode") and "not measured in tiles" in n for n in tiled.notes)  # the decode's
    dec = {"whole": _decode(whole), "tiled": _decode(tiled)}
    assert next(c for c in tiled.components if c.component == "vae").class_name == class_name
    assert dec["tiled"].fused.n == dec["whole"].fused.n  # in the whole latent's positions
    assert dec["tiled"].fused.elements < dec["whole"].fused.elements
    assert not dec["tiled"].fused.extrapolated
    assert 0 < dec["tiled"].fused.loo_max_rel_error < 0.15


def test_cogvideox_tiled_peak_is_the_tiled_decode():
    whole, tiled = memory("cogvideox-2b", dtype="fp16"), memory("cogvideox-2b", dtype="fp16", vae_tiling=True)
    assert whole.peak_at == tiled.peak_at == "vae.decode"
    assert tiled.peak_allocated_bytes < whole.peak_allocated_bytes
    decode_bytes = _decode(tiled).bytes("fused")
    assert tiled.peak_allocated_bytes >= decode_bytes > 0
    # with model offload and a GPU named, every running call is estimated: an unqualified verdict
    offloaded = memory("cogvideox-2b", dtype="fp16", vae_tiling=True, offload="model", gpu="rtx4090")
    assert offloaded.unestimated == () and offloaded.fits is True and offloaded.verdict == "fits"


def test_cli_prints_the_tiled_decode_row(capsys):
    assert main(["memory", "cogvideox-2b", "--vae-tiling", "--offload", "model", "--dtype", "fp16"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("vae.decode ") for line in out.splitlines())
    assert "not estimated" not in out and "not measured in tiles" not in out
