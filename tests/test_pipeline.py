"""Pipeline semantics: which component runs how often on what, as the diffusers pipelines do."""

from __future__ import annotations

from pathlib import Path

import pytest

import flopcalc
from flopcalc.engine.errors import FlopcalcError, ResolutionError
from card_support import runs_by_call


def test_flux_defaults_guidance_distilled_single_pass():
    r = flopcalc.estimate("flux-dev")
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 28, 3.5, 512)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "transformer.forward": 28,
                        "vae.decode": 1}
    t = r.component("transformer")
    assert t.shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert r.component("text_encoder").shape == {"seq_len": 77}


def test_flux_true_cfg_needs_a_negative_prompt():
    without = flopcalc.estimate("flux-dev", true_cfg_scale=4.0)
    assert without.passes == 1 and any("no effect" in n for n in without.notes)
    with_neg = flopcalc.estimate("flux-dev", true_cfg_scale=4.0, negative_prompt=True)
    assert with_neg.passes == 2
    assert runs_by_call(with_neg)["transformer.forward"] == 56
    assert runs_by_call(with_neg)["text_encoder_2.forward"] == 2


def test_sd3_cfg_doubles_denoiser_and_encodes_negative_prompt():
    r = flopcalc.estimate("sd3-medium")
    assert r.settings.guidance_scale == 7.0 and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "text_encoder_3.forward": 2,
                        "transformer.forward": 56, "vae.decode": 1}
    assert r.component("transformer").shape["text_len"] == 77 + 256
    assert r.component("text_encoder_3").shape["seq_len"] == 256
    no_cfg = flopcalc.estimate("sd3-medium", guidance_scale=1.0)
    assert no_cfg.passes == 1 and runs_by_call(no_cfg)["transformer.forward"] == 28


def test_batch_and_images_per_prompt():
    r = flopcalc.estimate("sd3.5-large", batch_size=3, num_images_per_prompt=2, steps=10)
    runs = runs_by_call(r)
    assert runs["text_encoder.forward"] == 3 * 2  # prompts × (prompt + negative)
    assert runs["transformer.forward"] == 10 * 2 * 6
    assert runs["vae.decode"] == 6


def test_totals_are_runs_times_per_run():
    r = flopcalc.estimate("sd3-medium", height=768, width=1344)
    assert r.macs == sum(c.runs * c.macs_per_run for c in r.components)
    assert r.flops == 2 * r.macs
    one = flopcalc.estimate("sd3-medium", height=768, width=1344, steps=1, guidance_scale=1.0)
    assert r.component("transformer").macs_per_run == one.component("transformer").macs_per_run


def test_max_sequence_length_changes_t5_and_denoiser_text():
    r = flopcalc.estimate("flux-dev", max_sequence_length=256)
    assert r.component("text_encoder_2").shape["seq_len"] == 256
    assert r.component("transformer").shape["text_len"] == 256
    with pytest.raises(FlopcalcError, match="greater than 512"):
        flopcalc.estimate("flux-dev", max_sequence_length=513)


def test_image_to_image_runs_encoder_and_strength_steps():
    r = flopcalc.estimate("flux-dev", strength=0.6, steps=28)
    runs = runs_by_call(r)
    assert runs["vae.encode"] == 1
    # FluxImg2ImgPipeline.get_timesteps: t_start = int(max(28 − 28·0.6, 0)) = 11 → 17 steps run.
    assert runs["transformer.forward"] == 17


@pytest.mark.parametrize("model, height, width, multiple", [
    ("flux-dev", 1000, 1024, 16),
    ("sd3-medium", 1024, 1030, 16),
])
def test_non_divisible_size_names_nearest_valid(model, height, width, multiple):
    with pytest.raises(ResolutionError) as info:
        flopcalc.estimate(model, height=height, width=width)
    bad = height if height % multiple else width
    lo = bad // multiple * multiple
    assert f"{lo} or {lo + multiple}" in str(info.value)
    assert f"multiple of {multiple}" in str(info.value)


def test_sd3_pos_embed_limit():
    # pos_embed_max_size 192 patches of 2 latent pixels of 8 image pixels: at most 3072 per side.
    flopcalc.estimate("sd3-medium", height=3072, width=512, steps=1)
    with pytest.raises(ResolutionError, match="pos_embed_max_size=192"):
        flopcalc.estimate("sd3-medium", height=3088, width=512, steps=1)


def test_conventions_differ_by_attention_and_layernorm():
    torch_r = flopcalc.estimate("flux-dev", convention="torch")
    thop_r = flopcalc.estimate("flux-dev", convention="thop")
    t = torch_r.component("transformer").per_run
    assert torch_r.component("transformer").macs_per_run - thop_r.component("transformer").macs_per_run == \
        t.attention - t.thop_extra
    with pytest.raises(FlopcalcError, match="unknown convention"):
        flopcalc.estimate("flux-dev", convention="fvcore")


def test_bad_settings_are_user_errors():
    with pytest.raises(FlopcalcError, match="positive integer"):
        flopcalc.estimate("flux-dev", steps=0)
    with pytest.raises(FlopcalcError, match="strength"):
        flopcalc.estimate("flux-dev", strength=1.5)


def test_report_is_frozen_and_serialisable():
    import dataclasses
    import json

    r = flopcalc.estimate("sd3-medium", height=512, width=512)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.model = "x"
    d = json.loads(json.dumps(r.to_dict()))
    assert d["convention"] == "torch" and d["total"]["flops"] == r.flops
    t = next(c for c in d["components"] if c["component"] == "transformer")
    blocks = t["blocks"]["children"]
    assert [b["name"] for b in blocks][:3] == ["pos_embed", "time_text_embed", "context_embedder"]
    assert sum(b["macs"] for b in blocks) == t["macs_per_run"]


# --------------------------------------------------------------------------- UNet and DiT families


def test_sd_cfg_concatenates_uncond_and_encodes_empty_negative():
    r = flopcalc.estimate("sd1.5")
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (512, 512, 50, 7.5)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 100, "vae.decode": 1}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 77}


def test_sdxl_zero_negative_embeddings_unless_a_negative_prompt_is_given():
    r = flopcalc.estimate("sdxl-base")
    assert (r.settings.height, r.settings.guidance_scale, r.passes) == (1024, 5.0, 2)
    assert runs_by_call(r)["text_encoder.forward"] == 1 and runs_by_call(r)["text_encoder_2.forward"] == 1
    assert any("force_zeros_for_empty_prompt" in n for n in r.notes)
    neg = flopcalc.estimate("sdxl-base", negative_prompt=True)
    assert runs_by_call(neg)["text_encoder.forward"] == 2 and runs_by_call(neg)["text_encoder_2.forward"] == 2
    assert runs_by_call(neg)["unet.forward"] == runs_by_call(r)["unet.forward"] == 100


def test_pixart_resolution_binning_as_the_pipeline_does():
    r = flopcalc.estimate("pixart-alpha-512", height=768, width=1344)
    assert (r.settings.height, r.settings.width) == (384, 672)  # ASPECT_RATIO_512_BIN["0.57"]
    assert any("resolution binning" in n for n in r.notes)
    exact = flopcalc.estimate("pixart-alpha-512", height=768, width=1344, resolution_binning=False)
    assert (exact.settings.height, exact.settings.width) == (768, 1344)
    big = flopcalc.estimate("pixart-alpha-1024", height=768, width=1344)
    assert (big.settings.height, big.settings.width) == (768, 1344) and not big.notes
    d = flopcalc.estimate("pixart-alpha-1024")
    assert (d.settings.steps, d.settings.guidance_scale, d.settings.max_sequence_length) == (20, 4.5, 120)
    assert runs_by_call(d) == {"text_encoder.forward": 2, "transformer.forward": 40, "vae.decode": 1}


def test_legacy_transformer2d_configs_resolve_as_diffusers_remaps_them():
    assert flopcalc.estimate("pixart-alpha-512").component("transformer").class_name == "PixArtTransformer2DModel"
    dit = flopcalc.estimate("validation/configs/dit-xl-2-512-transformer")
    (comp,) = dit.components
    assert comp.class_name == "DiTTransformer2DModel" and dit.pipeline.startswith("DiTPipeline")
    assert (dit.settings.height, dit.settings.steps, dit.passes, comp.runs) == (512, 50, 2, 100)


def test_dit_is_square_only():
    with pytest.raises(ResolutionError, match="square"):
        flopcalc.estimate("validation/configs/dit-xl-2-512-transformer", height=512, width=256)


def test_unet_tree_keeps_down_mid_up_and_block_kinds_add_up():
    from flopcalc.flops.report import by_block_kind

    unet = flopcalc.estimate("sdxl-base").component("unet")
    names = [c.name for c in unet.tree.children]
    assert names[names.index("down_blocks"):] == ["down_blocks", "mid_block", "up_blocks", "conv_norm_out", "conv_out"]
    assert [c.formula for c in unet.tree.find("down_blocks").children] == [
        "DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"]
    kinds = by_block_kind(unet.tree, "torch")
    assert sum(m for _, _, m in kinds) == unet.macs_per_run
    counts = {f: n for f, n, _ in kinds}
    # SDXL: 2+2+2 down, 2 mid, 3+3+3 up ResNets; transformer_layers_per_block [1, 2, 10] → 2+2 down, 1 mid, 3+3 up
    assert counts["resnet_block"] == 6 + 2 + 9 and counts["spatial_transformer"] == 4 + 1 + 6
    assert counts["downsample"] == 2 and counts["upsample"] == 2


def _variant(tmp_path, card: str, pipeline: str, **index_changes):
    import json
    import shutil

    folder = tmp_path / pipeline
    shutil.copytree(f"model_cards/{card}", folder)
    index = json.loads((folder / "model_index.json").read_text())
    index.update(_class_name=pipeline, **index_changes)
    (folder / "model_index.json").write_text(json.dumps(index))
    return str(folder)


def test_sdxl_refiner_style_img2img_pipeline(tmp_path):
    r = flopcalc.estimate(_variant(tmp_path, "sdxl-base", "StableDiffusionXLImg2ImgPipeline", text_encoder=[None, None]))
    assert r.settings.strength == 0.3  # the pipeline's default
    # 50 steps at strength 0.3: t_start = int(50 − 15) = 35 → 15 steps, × 2 CFG passes
    assert runs_by_call(r) == {"text_encoder_2.forward": 1, "unet.forward": 30, "vae.encode": 1, "vae.decode": 1}
    assert any("text_encoder is absent" in n for n in r.notes)


def test_pixart_sigma_defaults(tmp_path):
    r = flopcalc.estimate(_variant(tmp_path, "pixart-alpha-1024", "PixArtSigmaPipeline"))
    assert r.settings.max_sequence_length == 300
    assert r.component("transformer").shape["text_len"] == 300


def test_every_pipeline_declares_only_known_options_and_refuses_the_rest_in_one_place():
    from flopcalc.engine.pipelines import base
    from flopcalc.engine.pipelines.base import COMMON_OPTIONS, OPTIONAL, Settings

    base._load()
    option_fields = set(Settings().options())
    assert COMMON_OPTIONS | set(OPTIONAL) == option_fields  # every option is common or declared per pipeline
    from flopcalc.engine.settings import declared, known

    family = set(declared())
    assert family == set(known())  # the discovery index lists every declaration (the CLI's flags)
    assert not family & option_fields  # a family option is no Settings field
    for name in base._PIPELINES:
        assert base.pipeline_options(name) <= set(OPTIONAL) | family
    # every declared option is applied by some pipeline, and refused by the others with its own reason
    assert family <= set().union(*(base.pipeline_options(n) for n in base._PIPELINES))
    with pytest.raises(FlopcalcError, match="--pag-scale does not apply to StableDiffusionPipeline: it has no "
                                            "perturbed-attention guidance"):
        flopcalc.estimate("sd1.5", pag_scale=1.0)
    # a denoiser given alone runs under its pipeline and is refused the same way
    with pytest.raises(FlopcalcError, match="--num-frames does not apply to StableDiffusionPipeline"):
        flopcalc.estimate(str(Path(__file__).resolve().parent.parent / "model_cards" / "sd1.5" / "unet"), num_frames=9)


def test_image_to_image_variants_apply_the_options_of_their_base_pipeline():
    from flopcalc.engine.pipelines.base import pipeline_options

    assert pipeline_options("FluxImg2ImgPipeline") == pipeline_options("FluxPipeline") == {"true_cfg_scale",
                                                                                          "max_sequence_length",
                                                                                          "vae_tiling"}
    assert pipeline_options("StableDiffusionImg2ImgPipeline") == pipeline_options("StableDiffusionPipeline") == {
        "vae_tiling", "ip_adapter"}


def test_register_pipeline_refuses_a_second_registration():
    from flopcalc.engine.pipelines.base import register_pipeline

    with pytest.raises(RuntimeError, match="registered twice"):
        register_pipeline("StableDiffusionPipeline")(lambda components, s, index=None: None)


def test_settings_are_keyword_only():
    from flopcalc.engine.pipelines import Settings

    with pytest.raises(TypeError):
        Settings(512, 512)  # type: ignore[misc]


def test_plans_import_neither_the_symbolic_path_nor_the_report():
    """Imports run one way: plans know nothing of symbolic laws (they ask ``Settings.counting``),
    and rendering imports none of the computation."""
    import subprocess
    import sys

    code = ("import sys, flopcalc.engine.pipelines as p; p.base._load(); import flopcalc.flops.report; "
            "print(sorted(m for m in ('flopcalc.flops.estimate', 'flopcalc.flops.symbolic', 'sympy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_no_plan_inspects_the_type_of_its_numbers():
    """A plan asks ``s.symbolic`` (the counting the symbolic path declares), never ``type(x)``."""
    import re

    import flopcalc.engine.pipelines as package

    for path in Path(package.__file__).parent.glob("*.py"):
        assert not re.search(r"\btype\([^)]*\) is (not )?int\b", path.read_text()), path.name
