"""``flopcalc memory --vae-tiling`` on image VAEs: every bundled card whose VAE class has ``enable_tiling`` in diffusers
(its architecture module declares ``IMAGE_TILING``) and whose pipeline offers ``--vae-tiling`` gets a measured tiled
decode peak; with ``--gpu``, the largest tile side that fits (``flopcalc.gpu_memory.vae_tiles``) really fits by the
tool's own numbers and the next step does not."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from flopcalc.cli.main import main
from flopcalc.engine.image_tiling import image_tiling
from flopcalc.engine.errors import OptionError
from flopcalc.gpu_memory.estimate import memory
from flopcalc.gpu_memory.vae_tiles import _with_tile

SIZE = 2048  # above every default tile of the bundled image VAEs (at most 1024 px)


@lru_cache(maxsize=1)
def tiled_image_cards() -> tuple[tuple[str, str], ...]:
    """``(card, VAE class)`` for every bundled card whose VAE declares image tiling, whose pipeline offers
    ``--vae-tiling`` and decodes images (no latent frames)."""
    from flopcalc.engine.cards import list_cards
    from flopcalc.flops.estimate import estimate

    out = []
    for card in list_cards():
        vae = card.path.joinpath("vae", "config.json")
        if not vae.is_file():
            continue
        cls = json.loads(vae.read_text(encoding="utf-8"))["_class_name"]
        if image_tiling(cls) is None:
            continue
        try:  # the pipeline the card plans offers --vae-tiling
            estimate(card.name, height=SIZE, width=SIZE, resolution_binning=False, vae_tiling=True)
        except OptionError:
            continue
        decode = estimate(card.name, height=SIZE, width=SIZE, resolution_binning=False).component("vae", "decode")
        if decode.shape.get("latent_frames") is None:
            out.append((card.name, cls))
    return tuple(out)


def test_the_image_vaes_with_tiling_are_found():
    classes = {cls for _, cls in tiled_image_cards()}
    assert {"AutoencoderKL", "AutoencoderKLFlux2", "AutoencoderDC", "AutoencoderKLQwenImage"} <= classes


@pytest.mark.parametrize("card", [c for c, _ in tiled_image_cards()])
def test_every_tiled_image_vae_decode_is_estimated(card):
    whole = memory(card, height=SIZE, width=SIZE, resolution_binning=False)
    tiled = memory(card, height=SIZE, width=SIZE, resolution_binning=False, vae_tiling=True)
    assert "vae.decode" not in tiled.unestimated, tiled.notes
    assert not any(n.startswith("vae.decode") and "not measured in tiles" in n for n in tiled.notes)  # the decode's
    assert tiled.tile_law is not None  # the decode really ran in tiles, and its untiled law is known
    dec = next(a for a in tiled.activations if (a.component, a.call) == ("vae", "decode"))
    assert 0 <= dec.fused.loo_max_rel_error <= 0.15 and 0 <= dec.math.loo_max_rel_error <= 0.15
    untiled = next((a for a in whole.activations if (a.component, a.call) == ("vae", "decode")), None)
    if untiled is not None:
        assert dec.fused.elements < untiled.fused.elements


#: (card, size, GPU, other settings, whether the answer is below the largest measured tile): a DC-AE decode and a
#: Qwen-Image one that fit up to the largest measured tile (the interior answer, where the next step does not fit:
#: EasyAnimate's video decode, tests/test_memory_tiled_video_vaes.py).
CASES = [("sana-1.5-1.6b", 4096, "rtx4060", {}, False),
         ("qwen-image", 2048, "rtx-4090", {"dtype_of": {"transformer": "bnb-nf4", "text_encoder": "bnb-nf4"}}, False)]


@pytest.mark.parametrize("card,size,gpu,more,interior", CASES)
def test_the_largest_tile_fits_and_the_next_step_does_not(card, size, gpu, more, interior):
    est = memory(card, height=size, width=size, resolution_binning=False, vae_tiling=True, offload="model", gpu=gpu,
                 **more)
    advice, law = est.vae_tile, est.tile_law
    assert advice is not None and advice.tile is not None, advice
    assert advice.tile % law.step == 0 and advice.stride == int(advice.tile * law.stride)
    at = _with_tile(est, law, advice.tile)
    assert at.fits is True and at.peak_bytes == advice.peak_bytes <= est.gpu_memory_bytes
    bigger = advice.tile + law.step
    assert (bigger <= law.largest_measured) is interior
    if interior:
        assert _with_tile(est, law, bigger).fits is False and at.peak_at == "vae.decode"
    else:
        assert "not estimated" in advice.reason and "larger tiles not estimated" in advice.text
    # the derived law reproduces the default tile's measured peak there
    assert _with_tile(est, law, law.default_tile).peak_bytes == est.peak_bytes


def test_no_tile_helps_where_the_peak_is_elsewhere():
    est = memory("qwen-image", height=2048, width=2048, vae_tiling=True, offload="model", gpu="rtx-4090")
    assert est.fits is False and est.vae_tile.tile is None
    assert est.vae_tile.reason == f"no tile size makes it fit: the peak is at {est.peak_at}, not the VAE decode"


def test_a_class_whose_enable_tiling_takes_no_sizes_says_so():
    est = memory("flux2-dev", height=SIZE, width=SIZE, vae_tiling=True, offload="model", gpu="h100")
    assert est.vae_tile is not None and est.vae_tile.tile is None and "takes no tile sizes" in est.vae_tile.reason


def test_cli_prints_the_largest_tile_in_the_table_json_and_fit(capsys):
    args = ["memory", "sana-1.5-1.6b", "--height", "4096", "--width", "4096", "--no-resolution-binning",
            "--vae-tiling", "--offload", "model", "--gpu", "rtx4060"]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("vae tiles: the largest that fits is "))
    est = memory("sana-1.5-1.6b", height=4096, width=4096, resolution_binning=False, vae_tiling=True,
                 offload="model", gpu="rtx4060")
    assert line == est.vae_tile.text
    assert main([*args, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"]["vae_tile"] == est.vae_tile.to_dict()


def test_fit_proposes_the_largest_tile_with_the_tiling():
    from flopcalc.gpu_memory.fit import fit, render_fit

    result = fit("sana-1.5-1.6b", gpu="rtx4060", height=4096, width=4096, resolution_binning=False)
    tiled = [c for c in result.candidates if "--vae-tiling" in c.flags and c.vae_tile is not None]
    assert tiled and all(c.vae_tile.tile is not None for c in tiled)
    text = render_fit(result)
    assert f"vae tiles up to {tiled[0].vae_tile.tile} px" in text
    assert result.to_dict()["fits"][result.candidates.index(tiled[0])]["vae_tile"]["largest_fitting_tile_px"] \
        == tiled[0].vae_tile.tile


@pytest.mark.parametrize("args,words", [
    (["memory", "qwen-image-edit", "--vae-tiling"], "--vae-tiling"),
    (["memory", "flux2-dev", "--vae-tiling", "--reference-images", "1"], "tiled encode"),
])
def test_refusals_are_one_line(capsys, args, words):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err


def test_tile_law_error_is_measured_and_within_bound():
    """validation/tile_size_error.py's figures (flopcalc/data/vae_tile_error.json) for the classes taking sizes: the
    image VAEs' and EasyAnimate's within the bound at which a size is proposed (Wan's and LTX-Video's are not:
    tests/test_memory_tiled_video_vaes.py)."""
    from flopcalc.gpu_memory.vae_tiles import TILE_LAW_BOUND, _errors

    errors = _errors()
    assert {"AutoencoderDC", "AutoencoderKLQwenImage", "AutoencoderKLMagvit"} <= set(errors)
    assert all(errors[c]["max_rel_error"] <= TILE_LAW_BOUND
               for c in ("AutoencoderDC", "AutoencoderKLQwenImage", "AutoencoderKLMagvit"))
    assert all(e["max_rel_error"] >= 0 and len(e["points"]) >= 6 for e in errors.values())


def test_stride_keeps_the_default_proportion():
    for cls in ("AutoencoderDC", "AutoencoderKLQwenImage"):
        t = image_tiling(cls)
        assert t.takes_sizes and t.stride_px(t.default_tile({})) in (448, 192)
    assert not image_tiling("AutoencoderKLFlux2").takes_sizes and not image_tiling("AutoencoderKL").takes_sizes


def test_the_planned_tiled_decode_is_exact_against_flop_counter_mode():
    """The tiles the plan runs for a DC-AE decode (``ImageTiling.decode_split``) count what FlopCounterMode counts on
    the real module with ``enable_tiling()`` on meta."""
    import flopcalc
    from flopcalc.engine.card_files import cards_dir
    from flopcalc.engine.measure.harness import measure_component

    measured = measure_component(cards_dir() / "sana-600m-512" / "vae", call="decode", with_thop=False,
                                 settings={"height": 768, "width": 1024, "vae_tiling": 1})
    planned = flopcalc.estimate("sana-600m-512", height=768, width=1024, vae_tiling=True, resolution_binning=False)
    assert planned.component("vae", "decode").flops == measured["torch"]["flops"]
