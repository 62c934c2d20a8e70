"""Live re-measurement of ``AutoencoderKL`` with ``vae.enable_tiling()`` (``--vae-tiling`` on the image
pipelines): the real module built on the meta device, tiled, and counted now, against flopcalc's
plan (one run per tile shape, each tile's decode / encode in full): the bundled cards' VAEs at random
sizes above their tile, a card's VAE at a size within one tile (decoded whole), randomized configs
with small tiles (any ``sample_size``, edge tiles of any extent, with and without the quant convs),
and the tiled plan inside a whole pipeline.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module, summed over the tiles), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
import random

import pytest

from live_support import REPO, SEED, assert_runs_match, measure, random_size, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.errors import ResolutionError  # noqa: E402
from flopcalc.engine.pipelines import Settings, plan  # noqa: E402
from flopcalc.engine.registry import assemble, component_params  # noqa: E402

pytestmark = pytest.mark.live

CARDS = ("sd1.5", "sd2.1-base", "sdxl-base", "sd3-medium", "flux-dev", "pixart-alpha-512", "hunyuandit-v1.2")


def _check(config_dir, height: int, width: int, call: str, expect_tiles: bool | None = None) -> None:
    """The tiled ``call`` of the VAE in ``config_dir`` at ``height × width`` image pixels, as flopcalc
    plans it alone (a bare VAE config with ``vae_tiling``), against one fresh measurement; where
    flopcalc refuses (an edge tile too thin to encode), the real module must fail too."""
    cfg = json.loads((config_dir / "config.json").read_text())
    settings = Settings(height=height, width=width, vae_tiling=True, strength=1.0 if call == "encode" else None)
    measured = {"height": height, "width": width, "vae_tiling": 1}
    runs = [r for r in plan(None, {"vae": cfg}, settings).runs if r.call == call]
    if expect_tiles is not None:
        assert (len(runs) > 1 or "tile(s)" in runs[0].why) == expect_tiles, [r.why for r in runs]
    try:
        trees = [(r.runs, assemble(cfg, r.shape, component="vae", call=call)) for r in runs]
    except ResolutionError:
        with pytest.raises(RuntimeError):
            measure.measure_component(config_dir, settings=measured, call=call, with_thop=False)
        return
    fx = measure.measure_component(config_dir, settings=measured, call=call)
    assert fx["settings"].get("vae_tiling") == 1
    assert_runs_match(trees, component_params(cfg, component="vae"), fx,
                      f"seed {SEED}, {config_dir} {call} {height}x{width}: {cfg}")


def test_card_vae_tiled_at_a_random_size(rng):
    """A random card's VAE, one side above the tile (up to 2 tiles), the other up to 2 tiles: decode
    and encode split into overlapping tiles, edge tiles included."""
    card = rng.choice(CARDS)
    tile = json.loads((REPO / "model_cards" / card / "vae" / "config.json").read_text())["sample_size"]
    h = random_size(rng, 8, tile + 8, 2 * tile)
    w = random_size(rng, 8, 64, 2 * tile)
    if rng.random() < 0.5:
        h, w = w, h
    for call in ("decode", "encode"):
        _check(REPO / "model_cards" / card / "vae", h, w, call, expect_tiles=True)


def test_card_vae_within_one_tile_is_decoded_whole(rng):
    card = rng.choice(CARDS)
    tile = json.loads((REPO / "model_cards" / card / "vae" / "config.json").read_text())["sample_size"]
    h, w = random_size(rng, 8, 64, min(tile, 512)), random_size(rng, 8, 64, min(tile, 512))
    _check(REPO / "model_cards" / card / "vae", h, w, "decode", expect_tiles=False)


def _random_config(rng: random.Random) -> dict:
    groups = rng.choice([4, 8])
    levels = rng.randint(1, 4)
    return {
        "_class_name": "AutoencoderKL",
        "in_channels": 3,
        "out_channels": 3,
        "down_block_types": ["DownEncoderBlock2D"] * levels,
        "up_block_types": ["UpDecoderBlock2D"] * levels,
        # at least two channels a group: a 1×1 edge tile of a one-channel group has one value per group, which
        # GroupNorm refuses in the real module too
        "block_out_channels": [groups * rng.randint(2, 4) for _ in range(levels)],
        "layers_per_block": rng.randint(1, 2),
        "latent_channels": rng.choice([4, 16]),
        "norm_num_groups": groups,
        "sample_size": rng.randint(2 ** (levels - 1) * 2, 96),  # any tile, multiple of the VAE factor or not
        "use_quant_conv": rng.random() < 0.5,
        "use_post_quant_conv": rng.random() < 0.5,
        "mid_block_add_attention": rng.random() < 0.5,
    }


@pytest.mark.parametrize("i", range(3))
def test_random_config_tiled(i, rng, tmp_path):
    """Small tiles on images a few tiles wide: edge tiles of every extent, quant convs on and off."""
    cfg = _random_config(rng)
    folder = write_config(tmp_path, f"vae{i}", cfg)
    f = 2 ** (len(cfg["block_out_channels"]) - 1)
    h = random_size(rng, f, cfg["sample_size"] + 1, 3 * cfg["sample_size"])
    w = random_size(rng, f, f, 3 * cfg["sample_size"])
    for call in ("decode", "encode"):
        _check(folder, h, w, call)


def test_tiled_decode_inside_the_pipeline(rng):
    """The SD1.5 pipeline with ``vae_tiling``: the VAE row is the measured tiled call, the rest unchanged."""
    card = REPO / "model_cards" / "sd1.5"
    index = json.loads((card / "model_index.json").read_text())
    comps = {name: json.loads((card / name / "config.json").read_text()) for name in ("text_encoder", "unet", "vae")}
    h, w = random_size(rng, 8, 520, 768), random_size(rng, 8, 256, 768)
    tiled = estimate_configs(index, comps, Settings(height=h, width=w, vae_tiling=True))
    whole = estimate_configs(index, comps, Settings(height=h, width=w))
    vae = tiled.component("vae", "decode")
    fx = measure.measure_component(card / "vae", settings={"height": h, "width": w, "vae_tiling": 1}, call="decode")
    assert 2 * vae.macs == fx["torch"]["flops"], f"seed {SEED}: {h}x{w}"
    assert vae.params == fx["params"]
    assert tiled.macs - vae.macs == whole.macs - whole.component("vae", "decode").macs
