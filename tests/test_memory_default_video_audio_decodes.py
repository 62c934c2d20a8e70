"""``flopcalc memory CARD`` for the decodes measured as their pipelines run them by default (issue 22.2): the video
VAEs whose pipelines never tile them (Allegro's, whose only decode is its tiled one; Cosmos 1.0's, which tiling does not
change; EasyAnimate's Magvit, untiled: its --vae-tiling in tests/test_memory_tiled_video_vaes.py) and the audio
decodes (LTX-2's audio VAE and vocoder, Stable Audio Open's Oobleck), each measured at its pipeline's default frame
count or length (validation/activation_manifest.yaml, cases ``allegro-vae``, ``cosmos-1.0-diffusion-7b-text2world-vae``,
``easyanimate-v5.1-7b-zh-control-vae``, ``ltx-2-audio``, ``stable-audio-open-1.0-vae``) and fitted by
validation/fit_activations.py."""

from __future__ import annotations

import pytest

from flopcalc.cli.main import main
from flopcalc.gpu_memory.estimate import memory

#: (card, the calls now estimated at the card's defaults)
CARDS = [
    ("allegro", ("vae.decode",)),
    ("cosmos-1.0-diffusion-7b-text2world", ("vae.decode",)),
    ("cosmos-1.0-diffusion-7b-video2world", ("vae.decode",)),
    ("easyanimate-v5.1-7b-zh-control", ("vae.decode",)),
    ("ltx-2", ("vae.decode", "audio_vae.decode", "vocoder.forward")),
    ("stable-audio-open-1.0", ("vae.decode",)),
]


@pytest.mark.parametrize("card,calls", CARDS, ids=[c[0] for c in CARDS])
def test_default_decodes_are_estimated_within_the_measured_range(card, calls):
    est = memory(card)
    acts = {f"{a.component}.{a.call}": a for a in est.activations}
    for call in calls:
        assert call not in est.unestimated
        peak = acts[call]
        assert not peak.fused.extrapolated and 0 < peak.fused.elements <= peak.math.elements
        assert peak.fused.loo_max_rel_error < 0.15 and peak.math.loo_max_rel_error < 0.15


def test_the_audio_decodes_follow_the_length():
    """LTX-2's audio latent and mel frames follow the video's frame count: a longer video, a larger peak."""
    short, long = memory("ltx-2", num_frames=49), memory("ltx-2")

    def peak(est, call):
        return next(a for a in est.activations if f"{a.component}.{a.call}" == call).fused.elements

    for call in ("audio_vae.decode", "vocoder.forward"):
        assert peak(short, call) < peak(long, call)


@pytest.mark.parametrize("card,why", [
    ("allegro", "its VAE decodes only in tiles"),
    ("cosmos-1.0-diffusion-7b-text2world", "the VAE runs whole either way"),
    ("cosmos-1.0-diffusion-7b-video2world", "the VAE runs whole either way"),
])
def test_vae_tiling_is_refused_where_it_changes_nothing(card, why, capsys):
    """Allegro's decode is tiled already (its only path) and Cosmos 1.0's enable_tiling() changes no encode or decode:
    --vae-tiling is refused in one line that says so, exit 2."""
    assert main(["memory", card, "--vae-tiling"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0]


def test_a_frame_by_frame_decode_is_fitted_in_one_frames_positions():
    """EasyAnimate's Magvit decodes one latent frame per decoder call: its fit is in one frame's positions, so a
    shorter video keeps the peak of one frame's decode (measured nearly flat in the frames) instead of halving it."""
    from flopcalc.gpu_memory.activations import per_frame, positions

    shape = {"latent_height": 64, "latent_width": 64, "latent_frames": 13}
    assert per_frame("AutoencoderKLMagvit", "decode") and not per_frame("AutoencoderKLWan", "decode")
    assert positions(shape, per_frame=True) == 64 * 64 and positions(shape) == 64 * 64 * 13

    def decode(est):
        return next(a for a in est.activations if (a.component, a.call) == ("vae", "decode")).fused

    short, default = decode(memory("easyanimate-v5.1-7b-zh-control", num_frames=25)), \
        decode(memory("easyanimate-v5.1-7b-zh-control"))
    assert short.n == default.n == 64 * 64 and short.elements == default.elements
