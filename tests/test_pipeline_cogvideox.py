"""CogVideoXPipeline semantics (diffusers ``pipelines/cogvideo/pipeline_cogvideox.py``), the
CogVideoX VAE's frame batches and tiles, and the symbolic law in H, W, F. No torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from flopcalc.formulas import cogvideox_vae as vae

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, ResolutionError
from flopcalc.engine.pipelines import Settings, plan
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/cogvideox-2b"


def _configs() -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, **overrides):
    index, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs(index, components, settings)


def test_defaults_480x720_49_frames_cfg_on_a_doubled_batch():
    r = flopcalc.estimate("cogvideox-2b")
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (480, 720, 49, 50, 6.0, 226)
    assert s.vae_tiling is False
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 226}
    assert r.component("transformer").shape == {"latent_height": 60, "latent_width": 90, "latent_frames": 13,
                                                "text_len": 226}
    assert r.component("vae").shape == {"latent_height": 60, "latent_width": 90, "latent_frames": 13, "frames": 49}
    assert any("6 frame batch(es) (the first of 3" in n and "untiled (the pipeline's default" in n for n in r.notes)


def test_guidance_one_runs_one_pass_and_encodes_the_prompt_once():
    r = flopcalc.estimate("cogvideox-2b", guidance_scale=1.0, batch_size=3)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 3, "transformer.forward": 150, "vae.decode": 3}


def test_num_videos_per_prompt_is_overwritten_with_one():
    r = flopcalc.estimate("cogvideox-2b", num_images_per_prompt=4)
    assert runs_by_call(r)["transformer.forward"] == 100 and runs_by_call(r)["vae.decode"] == 1
    assert any("num_videos_per_prompt 4 is ignored" in n for n in r.notes)


def test_frames_are_4k_plus_1_and_set_the_latent_frames():
    r = flopcalc.estimate("cogvideox-2b", num_frames=9, height=240, width=368)
    assert r.component("transformer").shape["latent_frames"] == 3
    assert r.component("vae").shape["frames"] == 9
    with pytest.raises(ResolutionError, match="num_frames 48 → nearest valid: 45 or 49"):
        flopcalc.estimate("cogvideox-2b", num_frames=48)


def test_sizes_divide_the_vae_and_the_patches():
    with pytest.raises(ResolutionError, match="multiple of 16: height 488 → nearest valid: 480 or 496"):
        flopcalc.estimate("cogvideox-2b", height=488)


def test_the_2b_sincos_table_fixes_the_text_length():
    with pytest.raises(FlopcalcError, match="max_text_seq_length=226"):
        flopcalc.estimate("cogvideox-2b", max_sequence_length=128)
    rotary = _plan(Settings(max_sequence_length=128), transformer={"use_rotary_positional_embeddings": True})
    assert rotary.component("text_encoder").shape == {"seq_len": 128}
    assert rotary.component("transformer").shape["text_len"] == 128


def test_transformer_cost_grows_with_frames_and_tokens():
    small = flopcalc.estimate("cogvideox-2b", num_frames=9).component("transformer")
    big = flopcalc.estimate("cogvideox-2b").component("transformer")
    assert big.macs_per_run > 4 * small.macs_per_run  # 13 vs 3 latent frames, attention quadratic


def test_patch_size_t_pads_the_transformer_frames_only():
    """CogVideoX 1.5 (rotary, ``patch_size_t`` 2): 13 latent frames → 14 for the transformer, the
    VAE decodes the 13 unpadded ones."""
    r = _plan(Settings(), transformer={"use_rotary_positional_embeddings": True, "patch_size_t": 2,
                                       "patch_bias": False})
    assert r.component("transformer").shape["latent_frames"] == 14
    assert r.component("vae").shape["latent_frames"] == 13
    assert any("padded to 14" in n for n in r.notes)
    with pytest.raises(FlopcalcError, match="patch_size_t with a positional table"):
        _plan(Settings(), transformer={"patch_size_t": 2})


def test_image_to_video_transformers_are_refused():
    with pytest.raises(FlopcalcError, match="ofs"):
        _plan(Settings(), transformer={"use_rotary_positional_embeddings": True, "ofs_embed_dim": 512})
    with pytest.raises(FlopcalcError, match="in_channels 32"):
        _plan(Settings(), transformer={"in_channels": 32})
    with pytest.raises(ResolutionError, match="learned positional embeddings"):
        _plan(Settings(height=512, width=512), transformer={"use_rotary_positional_embeddings": True,
                                                            "use_learned_positional_embeddings": True})


def _vae_runs(settings: Settings, call: str = "decode") -> dict[tuple[int, int], int]:
    """``(latent or pixel tile height, width) → runs`` of the card's VAE call, from the plan."""
    index, components = _configs()
    keys = ("latent_height", "latent_width") if call == "decode" else ("height", "width")
    return {tuple(getattr(r.shape, k) for k in keys): r.runs for r in plan(index, components, settings).runs
            if r.component == "vae" and r.call == call}


def _vae_macs(report, call: str = "decode") -> int:
    """All MACs of the VAE call, whether the report shows the tile shapes as rows or as pieces."""
    return sum(c.macs for c in report.components if c.component == "vae" and c.call == call)


def test_vae_tiling_counts_every_overlapping_tile():
    """``enable_tiling()``: 30×45-latent tiles every 25 rows and 36 columns over the 60×90 latent
    (rows 30, 30, 10; columns 45, 45, 18), one run per tile shape, each decoded in full."""
    assert vae.tiles(60, 90, 30, 45, vae.TILE_OVERLAP_HEIGHT, vae.TILE_OVERLAP_WIDTH) == \
        [(30, 45), (30, 45), (30, 18), (30, 45), (30, 45), (30, 18), (10, 45), (10, 45), (10, 18)]
    assert _vae_runs(Settings(vae_tiling=True)) == {(30, 45): 4, (30, 18): 2, (10, 45): 2, (10, 18): 1}
    index, components = _configs()
    shapes = [r.shape for r in plan(index, components, Settings(vae_tiling=True)).runs if r.component == "vae"]
    assert all(sh.latent_frames == 13 and sh.frames == 49 for sh in shapes)
    untiled = flopcalc.estimate("cogvideox-2b")
    tiled = flopcalc.estimate("cogvideox-2b", vae_tiling=True)
    area = (30 + 30 + 10) * (45 + 45 + 18)
    assert _vae_macs(tiled) * 60 * 90 == _vae_macs(untiled) * area  # convolutions only: linear in the tile area
    assert tiled.params == untiled.params
    assert any("9 overlapping tiles (4× 30×45, 2× 30×18, 2× 10×45, 1× 10×18 latent)" in n for n in tiled.notes)
    small = flopcalc.estimate("cogvideox-2b", vae_tiling=True, height=240, width=352)
    assert _vae_macs(small) == _vae_macs(flopcalc.estimate("cogvideox-2b", height=240, width=352))
    assert any("fits one tile" in n for n in small.notes)


def test_tiled_encode_runs_per_pixel_tile_shape():
    assert _vae_runs(Settings(vae_tiling=True, strength=1.0), "encode") == \
        {(240, 360): 4, (240, 144): 2, (80, 360): 2, (80, 144): 1}
    # an edge tile (or a video) that reaches one pixel before the last downsampler cannot be encoded
    with pytest.raises(ValueError, match="1-pixel side"):
        vae.encoder_positions(1, 4, 64, 4, 2)


def test_strength_plans_the_video_encode():
    r = flopcalc.estimate("cogvideox-2b", strength=0.5)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 50, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 720, "frames": 49}


def test_decode_frame_batches_and_parity():
    assert vae.decoded_frames(13, 2, 1) == 49 and vae.decoded_frames(12, 2, 0) == 48
    assert vae.decoded_frames(1, 2, 1) == 1
    assert vae.encode_batches(49) == (9, 8, 8, 8, 8, 8)
    assert vae.encode_batches(13) == (13,)
    assert vae.encode_batches(20) == (12, 8)
    assert vae.encoder_frames(49, 4, 2) == [49, 25, 13, 13]


def test_bare_transformer_runs_under_cogvideox_pipeline():
    r = flopcalc.estimate(str(CARD / "transformer"))
    assert r.pipeline == "CogVideoXPipeline (denoiser only)"
    assert r.component("transformer").shape["latent_frames"] == 13


def test_cli_takes_num_frames_and_vae_tiling(capsys):
    from flopcalc.cli.main import main

    assert main(["estimate", "cogvideox-2b", "--num-frames", "17", "--vae-tiling"]) == 0
    out = capsys.readouterr().out
    assert "× 17 frames" in out and "VAE tiled" in out


sympy = pytest.importorskip("sympy")


@pytest.mark.parametrize("branch_frames, frames", [(49, (9, 17, 33, 49, 65)), (45, (13, 21, 45, 61))])
def test_law_in_h_w_f_equals_the_numeric_estimate(branch_frames, frames):
    """The law holds on its branch: an odd latent frame count (F ≡ 1 mod 8, ``_decode``'s first
    batch of 3) or an even one (F ≡ 5 mod 8, batches of 2)."""
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate("cogvideox-2b", num_frames=branch_frames)
    assert "F" in law.symbols and "L" not in law.symbols  # the 2b text length is fixed at 226
    for f, (h, w) in zip(frames, [(480, 720), (256, 256), (768, 1344), (320, 512), (640, 384)], strict=False):
        exact = flopcalc.estimate("cogvideox-2b", height=h, width=w, num_frames=f, steps=7).flops
        assert law.at(**{**law.representative(), "H": h, "W": w, "F": f, "S": 7}) == exact


def test_symbolic_law_refuses_tiling():
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate("cogvideox-2b", vae_tiling=True)
