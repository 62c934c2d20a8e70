"""Flux2Pipeline / Flux2KleinPipeline semantics (diffusers ``pipelines/flux2``) and the FLUX.2 formulas'
closed forms. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent


def _configs(card: str) -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(card)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, card: str = "flux2-dev", index: dict | None = None, **overrides):
    model_index, components = _configs(card)
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs({**model_index, **(index or {})}, components, settings)


# --------------------------------------------------------------------------- Flux2Pipeline


def test_dev_defaults_one_embedded_guidance_pass():
    r = flopcalc.estimate("flux2-dev")
    s = r.settings
    assert r.pipeline == "Flux2Pipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 4.0, 512)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 512}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert r.component("vae").shape == {"latent_height": 128, "latent_width": 128}
    assert not r.notes


def test_dev_guidance_and_negative_prompt_add_no_pass():
    r = _plan(Settings(guidance_scale=7.0, negative_prompt=True))
    assert r.passes == 1 and runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}
    assert any("takes no negative prompt" in n for n in r.notes)


@pytest.mark.parametrize("card", ["flux2-dev", "flux2-klein-9b"])
def test_true_cfg_scale_is_refused(card):
    pipeline = _configs(card)[0]["_class_name"]
    with pytest.raises(OptionError, match=f"--true-cfg-scale does not apply to {pipeline}: .*guidance_scale"):
        _plan(Settings(true_cfg_scale=4.0), card)


def test_batch_images_per_prompt_and_text_length():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=10, max_sequence_length=128))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 10 * 6, "vae.decode": 6}
    assert r.component("transformer").shape["text_len"] == 128 and r.component("text_encoder").shape == {"seq_len": 128}


def test_sizes_must_divide_by_16():
    with pytest.raises(ResolutionError, match="1000 → nearest valid: 992 or 1008"):
        _plan(Settings(height=1000, width=1024))
    r = _plan(Settings(height=768, width=1344))
    assert r.component("transformer").shape == {"latent_height": 96, "latent_width": 168, "text_len": 512}


def test_strength_is_estimated_as_image_to_image_with_a_note():
    r = _plan(Settings(strength=0.5))
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 1, "transformer.forward": 25, "vae.decode": 1}
    assert any("no image-to-image mode" in n for n in r.notes)


def test_transformer_alone_runs_under_flux2_pipeline():
    _, components = _configs("flux2-dev")
    r = estimate_configs(None, {"transformer": components["transformer"]}, Settings())
    assert r.pipeline == "Flux2Pipeline (denoiser only)"
    assert r.passes == 1 and r.component("transformer").runs == 50


def test_parameters_match_the_measured_modules():
    """``sum(p.numel())`` on the real modules (fixtures ``flux2-dev/*``): the transformer's
    32,223,281,152 and the text encoder's 23,340,272,640 (``lm_head`` tied to the token embedding, as
    ``Mistral3Config``'s default ``tie_word_embeddings`` builds it from this config)."""
    r = flopcalc.estimate("flux2-dev")
    for component, fixture in (("transformer", "transformer-512x512"), ("text_encoder", "text_encoder-L512"),
                               ("vae", "vae-decode-512x512")):
        measured = json.loads((REPO / f"validation/fixtures/flux2-dev/{fixture}.json").read_text())
        assert r.component(component).params == measured["params"]
    assert r.component("transformer").params == 32_223_281_152


def test_rotary_axes_must_fill_the_head():
    with pytest.raises(ConfigError, match="axes_dims_rope"):
        _plan(Settings(), transformer={"axes_dims_rope": [32, 32, 32]})


# --------------------------------------------------------------------------- Flux2KleinPipeline


def test_klein_distilled_defaults_four_steps_one_pass():
    r = flopcalc.estimate("flux2-klein-9b")
    assert r.pipeline == "Flux2KleinPipeline"
    assert (r.settings.steps, r.settings.max_sequence_length) == (4, 512) and r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 4, "vae.decode": 1}
    assert r.component("text_encoder").class_name == "Qwen3ForCausalLM"
    assert any("step-distilled" in n for n in r.notes)


def test_klein_base_runs_cfg_as_two_forwards_and_encodes_the_empty_negative_prompt():
    r = _plan(Settings(), "flux2-klein-9b", index={"is_distilled": False})
    assert (r.settings.steps, r.settings.guidance_scale, r.passes) == (50, 4.0, 2)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    r = _plan(Settings(guidance_scale=1.0), "flux2-klein-9b", index={"is_distilled": False})
    assert r.passes == 1 and runs_by_call(r)["text_encoder.forward"] == 1


def test_klein_refuses_what_it_cannot_count_exactly():
    with pytest.raises(ConfigError, match="guidance_embeds"):
        _plan(Settings(), "flux2-klein-9b", transformer={"guidance_embeds": True})
    with pytest.raises(ConfigError, match="is_distilled"):
        _plan(Settings(), "flux2-klein-9b", index={"is_distilled": "yes"})


# --------------------------------------------------------------------------- closed forms


def test_block_closed_forms():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.flux2 import flux2_double_block, flux2_modulation, flux2_single_block

    n, t = sp.symbols("N T", positive=True, integer=True)
    h, dh, ratio = 6, 128, 3.0
    d, f = h * dh, int(h * dh * ratio)
    double = flux2_double_block(dim=d, heads=h, head_dim=dh, image_tokens=n, text_tokens=t, mlp_ratio=ratio).total
    assert sp.expand(double.macs("torch") - (4 * (n + t) * d**2 + 2 * h * (n + t) ** 2 * dh + 3 * (n + t) * d * f)) == 0
    assert double.params == 8 * d**2 + 6 * d * f + 4 * dh  # no biases; four RMSNorm(d_h)
    single = flux2_single_block(dim=d, heads=h, head_dim=dh, tokens=n + t, mlp_ratio=ratio).total
    big_l = n + t
    assert sp.expand(single.macs("torch") - (big_l * d * (3 * d + 2 * f) + 2 * h * big_l**2 * dh
                                             + big_l * (d + f) * d)) == 0
    assert flux2_modulation("m", d, 2).total.macs("torch") == 6 * d**2


# --------------------------------------------------------------------------- reference images (image=)


@pytest.mark.parametrize("card", ["flux2-dev", "flux2-klein-9b"])
def test_references_are_encoded_once_each_and_extend_every_transformer_forward(card):
    """``prepare_image_latents`` (pipeline_flux2.py:654-687) encodes each reference once at batch 1 and repeats the
    packed latents over the batch; every forward sees ``R·(h/16)(w/16)`` more tokens; the rest is unchanged."""
    plain = _plan(Settings(batch_size=2, num_images_per_prompt=2), card)
    r = _plan(Settings.make(batch_size=2, num_images_per_prompt=2, reference_images=3), card)
    assert runs_by_call(r) == {**runs_by_call(plain), "vae.encode": 3}
    assert [c.component + "." + c.call for c in r.components][:2] == ["text_encoder.forward", "vae.encode"]
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
    assert r.component("transformer").shape == {**plain.component("transformer").shape, "reference_tokens": 3 * 4096}
    assert r.component("vae", "decode").shape == plain.component("vae", "decode").shape
    assert r.component("text_encoder").macs == plain.component("text_encoder").macs
    assert any("3 reference image(s), assumed 1024×1024" in n for n in r.notes)


def test_klein_negative_pass_also_sees_the_references():
    """Under classifier-free guidance the negative forward runs on the same ``latent_model_input`` and
    ``latent_image_ids`` (pipeline_flux2_klein.py:866-876): both passes carry the reference tokens."""
    r = _plan(Settings.make(reference_images=1), "flux2-klein-9b", index={"is_distilled": False})
    assert r.passes == 2 and runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1,
                                                 "transformer.forward": 100, "vae.decode": 1}
    assert r.component("transformer").shape["reference_tokens"] == 4096


@pytest.mark.parametrize("size, encoded", [
    ((1024, 1024), (1024, 1024)),   # at the cap: as given
    ((768, 1344), (768, 1344)),     # below it
    ((2048, 2048), (1024, 1024)),   # scale 1/2
    ((1024, 1040), (1008, 1024)),   # int(1024·0.99228) = 1016 → 1008, int(1040·0.99228) = 1031 → 1024
    ((1536, 2048), (880, 1168)),    # int(886.8) = 886 → 880, int(1182.4) = 1182 → 1168
])
def test_reference_size_follows_the_call_resize_rule(size, encoded):
    from flopcalc.engine.pipelines.flux2 import reference_size

    assert reference_size(*size, 16) == encoded
    r = _plan(Settings.make(height=size[0], width=size[1], reference_images=2))
    assert r.component("vae", "encode").shape == {"height": encoded[0], "width": encoded[1]}
    assert r.component("transformer").shape["reference_tokens"] == 2 * (encoded[0] // 16) * (encoded[1] // 16)


def test_reference_size_is_the_image_processors():
    """``reference_size`` against the pipeline's own ``Flux2ImageProcessor._resize_to_target_area`` (then floored to
    16, as ``__call__`` does), over random sizes around and above the cap. The image is a stand-in with PIL's
    ``size`` and ``resize`` (the rule reads only the size; no pixels to resample)."""
    import random

    processor = pytest.importorskip("diffusers.pipelines.flux2.image_processor")
    from flopcalc.engine.pipelines.flux2 import REFERENCE_MAX_AREA, reference_size

    class Image:
        def __init__(self, size):
            self.size = size

        def resize(self, size, resample):
            return Image(size)

    rng = random.Random(0)
    for _ in range(500):
        h, w = 16 * rng.randint(4, 400), 16 * rng.randint(4, 400)
        if max(h / w, w / h) > 8:
            continue
        img = Image((w, h))
        if w * h > REFERENCE_MAX_AREA:
            img = processor.Flux2ImageProcessor._resize_to_target_area(img, REFERENCE_MAX_AREA)
        iw, ih = img.size
        assert reference_size(h, w, 16) == (ih // 16 * 16, iw // 16 * 16), (h, w)


def test_references_the_pipeline_refuses_are_refused():
    """``check_image_input`` (flux2/image_processor.py:68-105): sides of at least 64 px, aspect ratio at most 8."""
    with pytest.raises(ResolutionError, match="at least 64 px"):
        _plan(Settings.make(height=48, width=256, reference_images=1))
    with pytest.raises(ResolutionError, match="aspect ratio at most 8"):
        _plan(Settings.make(height=64, width=576, reference_images=1))
    assert _plan(Settings(height=48, width=256)).component("transformer")  # without references: fine


def test_references_refuse_strength_and_other_pipelines_refuse_references():
    with pytest.raises(OptionError, match="--strength does not apply to Flux2Pipeline with reference images"):
        _plan(Settings.make(strength=0.5, reference_images=1))
    with pytest.raises(OptionError, match="--reference-images does not apply to FluxPipeline"):
        flopcalc.estimate("flux-dev", reference_images=1)


def test_symbolic_law_with_references():
    """A law in ``R`` (reference images) as well, for references of at most 1024² pixels (no resize: each is
    H × W): R encodes, and (N + R·N)-token transformer forwards; above the cap the resize's square root and
    ``int()`` have no closed form and the law is refused."""
    sp = pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate("flux2-dev", reference_images=2, height=512, width=768)
    symbols = {x.name: x for x in law.flops.free_symbols}
    assert {"H", "W", "S", "B", "L", "R"} <= set(symbols) and law.representative()["R"] == 2
    for h, w, steps, refs in ((512, 768, 50, 2), (1024, 1024, 7, 1), (256, 1024, 3, 3), (64, 64, 2, 5)):
        values = {"H": h, "W": w, "S": steps, "P": 1, "B": 1, "L": 512, "R": refs}
        at = law.flops.subs({symbols[k]: v for k, v in values.items() if k in symbols})
        assert at == 2 * flopcalc.estimate("flux2-dev", height=h, width=w, steps=steps, reference_images=refs).macs
    assert sp.Poly(law.flops, symbols["R"]).degree() == 2  # attention over (N + R·N)²
    assert {(c.component, c.call): c.runs for c in law.components}[("vae", "encode")] == symbols["R"]
    assert "R" not in symbolic_estimate("flux2-dev").symbols
    with pytest.raises(OptionError, match="no closed-form law for FLUX.2 references above"):
        symbolic_estimate("flux2-dev", reference_images=1, height=2048, width=1024)


def _tiny_pipeline(klein: bool):
    """A tiny Flux2 / Flux2Klein pipeline (8× VAE, no text encoder: prompt embeddings are given) with hooks
    recording every transformer forward's ``hidden_states`` and ``img_ids``, every VAE encode and decode."""
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    transformer = diffusers.Flux2Transformer2DModel(
        in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, timestep_guidance_channels=16, axes_dims_rope=(4, 4, 4, 4), guidance_embeds=not klein)
    vae = diffusers.AutoencoderKLFlux2(block_out_channels=(8, 8, 8, 8), layers_per_block=1, latent_channels=4,
                                       norm_num_groups=4)
    cls = diffusers.Flux2KleinPipeline if klein else diffusers.Flux2Pipeline
    pipe = cls(scheduler=diffusers.FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=None, tokenizer=None,
               transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    seen = {"forward": [], "ids": [], "encode": [], "decode": []}

    def forward_hook(module, args, kwargs):
        seen["forward"].append(tuple(kwargs["hidden_states"].shape))
        seen["ids"].append(kwargs["img_ids"])

    transformer.register_forward_pre_hook(forward_hook, with_kwargs=True)
    vae.encoder.register_forward_pre_hook(lambda m, a: seen["encode"].append(tuple(a[0].shape)))
    vae.decoder.register_forward_pre_hook(lambda m, a: seen["decode"].append(tuple(a[0].shape)))
    components = {name: json.loads(json.dumps({"_class_name": type(model).__name__, **model.config}))
                  for name, model in (("transformer", transformer), ("vae", vae))}  # as config.json holds them
    return torch, pipe, seen, {"_class_name": cls.__name__}, components


@pytest.mark.parametrize("klein, refs, batch", [(False, 1, 1), (False, 2, 2), (True, 2, 1)])
def test_plan_is_the_real_call_with_references(klein, refs, batch):
    """The real ``Flux2Pipeline`` / ``Flux2KleinPipeline.__call__`` (klein: base model, classifier-free
    guidance) on a tiny transformer and VAE with ``refs`` reference images of the generated size: the VAE
    encodes each reference once at batch 1, every transformer forward (both guidance passes) runs on the
    generated tokens plus ``refs`` references' tokens with each reference's time offset, one decode."""
    torch, pipe, seen, index, components = _tiny_pipeline(klein)
    height, width, steps = 64, 96, 2
    pil = pytest.importorskip("PIL.Image")
    embeds = torch.zeros(batch, 8, 32)
    extra = {"negative_prompt_embeds": embeds} if klein else {}
    pipe(prompt_embeds=embeds, image=[pil.new("RGB", (width, height))] * refs, height=height, width=width,
         num_inference_steps=steps, output_type="pt", **extra)
    r = estimate_configs(index, components, Settings.make(height=height, width=width, steps=steps, batch_size=batch,
                                                          max_sequence_length=8, reference_images=refs))
    counts = runs_by_call(r)
    shape = r.component("transformer").shape
    tokens = (shape["latent_height"] // 2) * (shape["latent_width"] // 2) + shape["reference_tokens"]
    assert seen["forward"] == [(batch, tokens, 16)] * (steps * r.passes)
    assert counts["transformer.forward"] == steps * r.passes * batch
    assert r.passes == (2 if klein else 1)
    assert seen["encode"] == [(1, 3, r.component("vae", "encode").shape["height"],
                               r.component("vae", "encode").shape["width"])] * refs == [(1, 3, height, width)] * refs
    assert counts["vae.encode"] == refs
    # each reference's ids: T = 10 + 10·i after the generated tokens' T = 0 (_prepare_image_ids)
    reference_t = seen["ids"][0][0, tokens - shape["reference_tokens"]:, 0]
    per = shape["reference_tokens"] // refs
    assert [set(reference_t[i * per:(i + 1) * per].tolist()) for i in range(refs)] == [{10 + 10 * i} for i in range(refs)]
    decode = r.component("vae", "decode").shape
    assert seen["decode"] == [(batch, 4, decode["latent_height"], decode["latent_width"])]
    assert counts["vae.decode"] == batch


def test_capped_reference_in_the_real_call():
    """A reference above 1024² pixels, through the real ``__call__`` up to the VAE (``_encode_vae_image`` replaced
    by a recorder returning the latent of the image it is given, so the tiny models need not run at 1M pixels):
    the image the VAE would encode and the tokens every forward sees are the plan's."""
    torch, pipe, seen, index, components = _tiny_pipeline(False)
    pil = pytest.importorskip("PIL.Image")
    height, width = 1024, 1040
    encoded = []

    def record(image, generator):
        encoded.append(tuple(image.shape))
        return torch.zeros(1, 16, image.shape[2] // 16, image.shape[3] // 16)

    pipe._encode_vae_image = record
    pipe(prompt_embeds=torch.zeros(1, 8, 32), image=pil.new("RGB", (width, height)), height=height, width=width,
         num_inference_steps=1, output_type="latent")
    r = estimate_configs(index, components, Settings.make(height=height, width=width, steps=1, max_sequence_length=8,
                                                          reference_images=1))
    enc = r.component("vae", "encode").shape
    assert encoded == [(1, 3, enc["height"], enc["width"])] == [(1, 3, 1008, 1024)]
    shape = r.component("transformer").shape
    assert seen["forward"] == [(1, (shape["latent_height"] // 2) * (shape["latent_width"] // 2)
                                + shape["reference_tokens"], 16)]
