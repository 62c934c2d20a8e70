"""Kandinsky 3 pipeline semantics, as diffusers' ``Kandinsky3Pipeline`` / ``Kandinsky3Img2ImgPipeline``
run them (no torch needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.kandinsky3 import downscale_height_and_width, img2img_steps
from card_support import runs_by_call

CARD = Path(__file__).resolve().parent.parent / "model_cards" / "kandinsky-3"


def _components() -> dict[str, dict]:
    return {name: json.loads((CARD / name / "config.json").read_text()) for name in ("text_encoder", "unet", "movq")}


def _index() -> dict:
    return json.loads((CARD / "model_index.json").read_text())


def test_defaults_cfg_on_a_doubled_batch_without_encoding_a_negative_prompt():
    r = flopcalc.estimate("kandinsky-3")
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 25, 3.0)
    assert r.pipeline == "Kandinsky3Pipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 1, "unet.forward": 50, "movq.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 128}
    assert r.component("unet").shape == {"latent_height": 128, "latent_width": 128, "text_len": 128}
    assert r.component("movq").shape == {"latent_height": 128, "latent_width": 128}
    assert any("zero negative embeddings" in n for n in r.notes)


def test_negative_prompt_is_encoded_and_no_cfg_is_one_pass():
    r = flopcalc.estimate("kandinsky-3", negative_prompt=True)
    assert runs_by_call(r)["text_encoder.forward"] == 2
    one = flopcalc.estimate("kandinsky-3", guidance_scale=1.0, negative_prompt=True)
    assert one.passes == 1
    assert runs_by_call(one) == {"text_encoder.forward": 1, "unet.forward": 25, "movq.decode": 1}


def test_sizes_round_up_to_a_multiple_of_64_as_the_pipeline_does():
    assert downscale_height_and_width(1000, 1344) == (128, 168)
    assert downscale_height_and_width(512, 513) == (64, 72)
    r = flopcalc.estimate("kandinsky-3", height=1000, width=700)
    assert (r.settings.height, r.settings.width) == (1024, 704)
    assert r.component("unet").shape["latent_height"] == 128 and r.component("unet").shape["latent_width"] == 88
    assert any("rounds the size up" in n for n in r.notes)
    same = flopcalc.estimate("kandinsky-3", height=1024, width=704)
    assert same.flops == r.flops


def test_the_unet_sees_the_cut_context_the_encoder_always_128():
    r = flopcalc.estimate("kandinsky-3", max_sequence_length=20)
    assert r.component("unet").shape["text_len"] == 20
    assert r.component("text_encoder").shape == {"seq_len": 128}
    assert r.component("unet").macs_per_run < flopcalc.estimate("kandinsky-3").component("unet").macs_per_run
    with pytest.raises(FlopcalcError, match="128"):
        flopcalc.estimate("kandinsky-3", max_sequence_length=129)


def test_batch_and_images_per_prompt():
    r = flopcalc.estimate("kandinsky-3", batch_size=3, num_images_per_prompt=2, steps=10, negative_prompt=True)
    assert runs_by_call(r) == {"text_encoder.forward": 6, "unet.forward": 10 * 2 * 6, "movq.decode": 6}


def test_image_to_image_defaults_and_step_rule():
    assert img2img_steps(25, 0.3) == 7  # int(7.5), not 25 - int(17.5)
    assert img2img_steps(25, 1.0) == 25
    comps = _components()
    r = estimate_configs({**_index(), "_class_name": "Kandinsky3Img2ImgPipeline"}, comps, Settings(height=768, width=1344))
    assert r.pipeline == "Kandinsky3Img2ImgPipeline" and r.settings.strength == 0.3
    assert runs_by_call(r) == {"text_encoder.forward": 1, "unet.forward": 7 * 2, "movq.encode": 1, "movq.decode": 1}
    assert r.component("unet").shape["latent_height"] == 96 and r.component("unet").shape["latent_width"] == 168
    enc = next(c for c in r.components if c.call == "encode")
    assert enc.shape == {"height": 768, "width": 1344}


def test_image_to_image_sizes_must_reach_the_unet_grid():
    comps = _components()
    index = {**_index(), "_class_name": "Kandinsky3Img2ImgPipeline"}
    # resized down to a multiple of the MoVQ factor 8 first: 1030 → 1024 is fine
    r = estimate_configs(index, comps, Settings(height=1030, width=1024))
    assert r.settings.height == 1024 and any("resized" in n for n in r.notes)
    with pytest.raises(ResolutionError, match="nearest valid: 960 or 1024"):
        estimate_configs(index, comps, Settings(height=1000, width=1024))


def test_strength_on_the_text_to_image_pipeline_plans_the_encoder():
    r = flopcalc.estimate("kandinsky-3", height=512, width=512, strength=1.0)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "unet.forward": 50, "movq.encode": 1, "movq.decode": 1}


def test_bare_unet_and_movq_configs():
    comps = _components()
    unet = estimate_configs(None, {"unet": comps["unet"]}, Settings(height=512, width=512))
    assert unet.pipeline == "Kandinsky3Pipeline (denoiser only)"
    assert unet.component("unet").runs == 50 and unet.component("unet").shape["latent_height"] == 64
    vae = estimate_configs(None, {"vae": comps["movq"]}, Settings(height=512, width=512))
    assert [(c.call, c.shape) for c in vae.components] == [("decode", {"latent_height": 64, "latent_width": 64})]


def test_movq_params_are_the_whole_model_and_thop_misses_attention():
    r = flopcalc.estimate("kandinsky-3", height=512, width=512)
    movq = r.component("movq")
    # encoder + quant_conv + codebook + post_quant_conv + decoder, as the harness measured the whole VQModel
    fixture = Path(__file__).resolve().parent.parent / "validation/fixtures/kandinsky-3/movq-decode-512x512.json"
    assert movq.params == json.loads(fixture.read_text())["params"]
    thop = flopcalc.estimate("kandinsky-3", height=512, width=512, convention="thop").component("movq")
    # the spatial norms' 1×1 convolutions are nn.Conv2d: thop counts them; attention matmuls it does not
    assert thop.macs_per_run < movq.macs_per_run
    decoder = movq.tree.find("decoder.up_blocks.3.resnets.1.norm1")
    width = _components()["movq"]["block_out_channels"][0]
    # SpatialNorm's conv_y and conv_b: 1×1 from the 4 latent channels to the block width, at full size
    assert decoder is not None and decoder.total.conv == 2 * 512 * 512 * 4 * width


def test_unsupported_configs_say_why():
    comps = _components()
    five = {**comps["unet"], "block_out_channels": [64, 64, 64, 64, 64]}
    with pytest.raises(ConfigError, match="at most 4"):
        estimate_configs(None, {"unet": five}, Settings(height=512, width=512))
    one_layer = {**comps["unet"], "layers_per_block": 1}
    with pytest.raises(ConfigError, match="layers_per_block"):
        estimate_configs(None, {"unet": one_layer}, Settings(height=512, width=512))
    odd_heads = {**comps["unet"], "attention_head_dim": 200}
    with pytest.raises(ConfigError, match="heads"):
        estimate_configs(None, {"unet": odd_heads}, Settings(height=512, width=512))
    bad_vq = {**comps["movq"], "vq_embed_dim": 3}
    with pytest.raises(ConfigError, match="spatial"):
        estimate_configs(None, {"vae": bad_vq}, Settings(height=512, width=512))


# --------------------------------------------------------------------------- closed forms (docstrings)


def test_block_closed_forms_match_the_code():
    """The closed forms stated in formulas/kandinsky3.py and formulas/vq_model.py, on symbolic
    sizes and token counts (widths are numbers: they pick heads and hidden widths)."""
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas import kandinsky3 as k3
    from flopcalc.formulas import vq_model as vq

    H, W, m = sp.symbols("H W m", positive=True, integer=True)
    n, d_t = H * W, 96

    def torch(node):
        return sp.expand(node.total.macs("torch"))

    assert torch(k3.conditional_group_norm("norm", 64, d_t, n)) == 2 * d_t * 64
    ci, co = 64, 96
    c = max(ci, co) // 2
    plain = n * (ci * c + 18 * c * c + c * co) + 2 * d_t * (ci + 3 * c) + n * ci * co
    assert torch(k3.resnet_block(ci, co, d_t, H, W)) == sp.expand(plain)
    c = ci // 2
    up = (n * ci * c + 4 * n * c * c + 4 * n * (9 * c * c + 9 * c * c + c * ci)
          + 2 * d_t * (ci + 3 * c) + 4 * n * ci * ci)
    assert torch(k3.resnet_block(ci, ci, d_t, H, W, (None, True, None, None))) == sp.expand(up)
    thop_up = k3.resnet_block(ci, ci, d_t, H, W, (None, True, None, None)).total.thop_extra
    assert sp.expand(thop_up) == sp.expand(3 * 4 * n * (c * c + ci * ci))  # thop: 4× each ConvTranspose2d
    C, d_k = 128, 256
    cross = 2 * n * C**2 + 2 * m * d_k * C + 2 * n * m * C + 8 * n * C**2 + 4 * d_t * C
    assert torch(k3.attention_block(C, d_t, H, W, head_dim=64, context_dim=d_k, context_tokens=m)) == sp.expand(cross)
    d_c = 256
    pooling = d_c * d_t + 2 * m * d_c * d_t + 2 * m * d_t + d_t**2
    assert torch(k3.attention_pooling(d_t, d_c, 32, m)) == sp.expand(pooling)

    cz, f = 4, 64
    assert torch(vq.spatial_norm("norm", f, cz, H, W)) == 2 * n * cz * f
    cond = 9 * n * co * (ci + co) + 2 * n * cz * (ci + co) + n * ci * co
    assert torch(vq.cond_resnet_block(ci, co, cz, H, W)) == sp.expand(cond)
    assert torch(vq.pixel_attention(C, H, W)) == sp.expand(4 * n * C**2 + 2 * n**2 * C)
    assert torch(vq.pixel_attention(C, H, W, cz)) == sp.expand(4 * n * C**2 + 2 * n**2 * C + 2 * n * cz * C)


def test_symbolic_sizes_give_the_numbers():
    sp = pytest.importorskip("sympy")
    from flopcalc.engine.registry import RunShape, assemble

    h, w, t = sp.symbols("h w t", positive=True, integer=True)
    comps = _components()
    unet = assemble(comps["unet"], RunShape(latent_height=h, latent_width=w, text_len=t), component="unet")
    number = assemble(comps["unet"], RunShape(latent_height=96, latent_width=168, text_len=77), component="unet")
    assert unet.total.macs("torch").subs({h: 96, w: 168, t: 77}) == number.total.macs("torch")
    for call, sym, num in (("decode", RunShape(latent_height=h, latent_width=w), RunShape(latent_height=96, latent_width=168)),
                           ("encode", RunShape(height=h, width=w), RunShape(height=768, width=1344))):
        expr = assemble(comps["movq"], sym, component="movq", call=call).total.macs("thop")
        value = assemble(comps["movq"], num, component="movq", call=call).total.macs("thop")
        sizes = {h: num.latent_height or num.height, w: num.latent_width or num.width}
        assert expr.subs(sizes) == value
