"""Cosmos 2.5 pipelines (diffusers ``pipelines/cosmos/``): ``Cosmos2_5_PredictBasePipeline`` (Text2World, Image2World,
Video2World) and ``Cosmos2_5_TransferPipeline`` (ControlNet, auto-regressive chunks) on the bundled cards: defaults,
the missing text encoder, world inputs, chunks, refusals, the closed forms of the image-context branch and the
ControlNet, the fixtures; and each plan against the real ``__call__`` on tiny random components (skipped without
torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.cosmos2_5 import transfer_chunks
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

PREDICT, TRANSFER = "cosmos-predict2.5-2b", "cosmos-transfer2.5-2b"


def _plan(card: str, settings: Settings, *, index: dict | None = None, drop: tuple[str, ...] = (), **overrides):
    source = resolve(card)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items() if k not in drop}
    components.update({k: v for k, v in overrides.items() if k not in components})  # a config the card lacks
    return estimate_configs({**source.model_index, **(index or {})}, components, settings)


def test_predict_defaults_name_the_missing_text_encoder():
    r = flopcalc.estimate(PREDICT)
    s = r.settings
    # pipeline_cosmos2_5_predict.py:546-568
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (704, 1280, 93, 36, 7.0, 512)
    assert r.pipeline == "Cosmos2_5_PredictBasePipeline" and r.passes == 2
    assert runs_by_call(r) == {"transformer.forward": 72, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 88, "latent_width": 160, "text_len": 512,
                                                "latent_frames": 24, "timestep_tokens": 24}
    assert any(n.startswith("text_encoder (Qwen2_5_VLForConditionalGeneration)") for n in r.notes)
    assert any("Text2World" in n for n in r.notes) and any("CosmosSafetyChecker" in n for n in r.notes)


def test_predict_world_inputs():
    image = flopcalc.estimate(PREDICT, world_input="image", num_frames=33, batch_size=2)
    assert runs_by_call(image) == {"vae.encode": 1, "transformer.forward": 36 * 2 * 2, "vae.decode": 2}
    assert image.component("vae", "encode").shape == {"height": 704, "width": 1280, "frames": 33}
    video = flopcalc.estimate(PREDICT, world_input="video", guidance_scale=1.0)
    assert runs_by_call(video) == {"vae.encode": 1, "transformer.forward": 36, "vae.decode": 1}
    with pytest.raises(OptionError, match="batch_size must be 1 for video input"):
        flopcalc.estimate(PREDICT, world_input="video", batch_size=2)
    with pytest.raises(OptionError, match="last 5 frames"):
        flopcalc.estimate(PREDICT, world_input="video", num_frames=1)
    with pytest.raises(OptionError, match="one of text, image, video"):
        flopcalc.estimate(PREDICT, world_input="audio")


def test_crossattn_projection_closed_form():
    """crossattn_proj: L · 100352 · 1024 MACs (the concatenated Qwen2.5-VL states to the text width)."""
    r = flopcalc.estimate(PREDICT, max_sequence_length=64, height=256, width=256, num_frames=1)
    tree = r.component("transformer").tree
    assert tree.find("crossattn_proj").total.macs("torch") == 64 * 100352 * 1024
    assert tree.find("crossattn_proj").total.params == 100352 * 1024 + 1024


def test_transfer_defaults_and_chunks():
    r = flopcalc.estimate(TRANSFER)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (704, 1280, 93, 36, 3.0)
    assert runs_by_call(r) == {"vae.encode": 2, "controlnet.forward": 72, "transformer.forward": 72, "vae.decode": 1}
    shape = r.component("transformer").shape
    assert shape["image_tokens"] == 256 and shape["timestep_tokens"] == 24
    assert r.component("controlnet").shape == shape
    # 200 control frames: chunks start at 0, 92, 184 (one frame of overlap)
    assert transfer_chunks(200, 93) == 3 and transfer_chunks(93, 93) == 1 and transfer_chunks(94, 93) == 2
    long = flopcalc.estimate(TRANSFER, num_frames=200, steps=2, batch_size=2)
    assert runs_by_call(long) == {"vae.encode": 12, "controlnet.forward": 24, "transformer.forward": 24,
                                  "vae.decode": 6}
    # the latent is always a whole chunk, whatever the control video's length
    assert flopcalc.estimate(TRANSFER, num_frames=17).component("transformer").shape["latent_frames"] == 24
    short = flopcalc.estimate(TRANSFER, chunk_frames=17, num_frames=40)
    assert short.component("transformer").shape["latent_frames"] == 5 and runs_by_call(short)["vae.decode"] == 3
    assert flopcalc.estimate(TRANSFER, chunk_frames=3).component("transformer").shape["latent_frames"] == 2


def test_image_context_branch_closed_form():
    """attn2's image branch: 2 N d² (q_img) + 2 I d² (k_img, v_img) + 2 h N I d_h; img_context_proj: I · 1152 · d."""
    kw = dict(height=256, width=256, num_frames=5, max_sequence_length=64, steps=1)
    r = flopcalc.estimate(TRANSFER, chunk_frames=5, **kw)
    base = _plan(TRANSFER, Settings(**kw), index={"_class_name": "Cosmos2_5_PredictBasePipeline"},
                 transformer={"img_context_dim_in": None}, drop=("controlnet",))
    d, h, dh, n, i = 2048, 16, 128, 2 * 16 * 16, 256
    one = r.component("transformer").tree.find("transformer_blocks.0.attn2").per_item.macs("torch")
    other = base.component("transformer").tree.find("transformer_blocks.0.attn2").per_item.macs("torch")
    assert one - other == n * d * d + 2 * i * d * d + 2 * h * n * i * dh
    assert r.component("transformer").tree.find("img_context_proj").total.macs("torch") == i * 1152 * d


def test_controlnet_closed_form():
    """4 blocks as the transformer's, plus before_proj (block 0) and after_proj (each): N d² each; the two patch
    embeddings: N · 130·4 · d and N · 18·4 · d."""
    r = flopcalc.estimate(TRANSFER, height=256, width=256, num_frames=5, chunk_frames=5, max_sequence_length=64)
    ctrl, tr = r.component("controlnet").tree, r.component("transformer").tree
    d, n = 2048, 2 * 16 * 16
    block = tr.find("transformer_blocks.0").per_item.macs("torch")
    assert ctrl.find("control_blocks.0").per_item.macs("torch") == block + 2 * n * d * d
    assert ctrl.find("control_blocks.1").per_item.macs("torch") == block + n * d * d
    assert ctrl.find("patch_embed").total.macs("torch") == n * 130 * 4 * d
    assert ctrl.find("patch_embed_base").total.macs("torch") == n * 18 * 4 * d


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to Cosmos2_5_PredictBasePipeline"):
        flopcalc.estimate(PREDICT, strength=0.5)
    with pytest.raises(OptionError, match="num_videos_per_prompt > 1 with several prompts"):
        flopcalc.estimate(PREDICT, batch_size=2, num_images_per_prompt=2)
    with pytest.raises(OptionError, match="--batch-size"):
        flopcalc.estimate(TRANSFER, num_images_per_prompt=2)
    with pytest.raises(OptionError, match="makes no chunk"):
        flopcalc.estimate(TRANSFER, num_frames=1)
    with pytest.raises(OptionError, match="too large for the transformer's RoPE"):
        flopcalc.estimate(TRANSFER, chunk_frames=129)
    with pytest.raises(ConfigError, match="use_crossattn_projection is off"):
        _plan(PREDICT, Settings(), transformer={"use_crossattn_projection": False})
    with pytest.raises(ConfigError, match="Cosmos 2.5 transformer"):
        _plan(PREDICT, Settings(), index={"_class_name": "Cosmos2VideoToWorldPipeline"})
    with pytest.raises(ConfigError, match="only Cosmos2_5_TransferPipeline passes"):
        _plan(TRANSFER, Settings(), index={"_class_name": "Cosmos2_5_PredictBasePipeline"}, drop=("controlnet",))
    with pytest.raises(ConfigError, match="disagree on img_context_dim_in"):
        _plan(TRANSFER, Settings(), controlnet={"img_context_dim_in": None})
    with pytest.raises(ConfigError, match="crossattn_proj reads 100352"):
        _plan(PREDICT, Settings(), text_encoder={"architectures": ["Qwen2_5_VLForConditionalGeneration"],
                                                 "text_config": {"hidden_size": 64, "num_hidden_layers": 2}})
    with pytest.raises(ConfigError, match="p_t 1"):
        _plan(PREDICT, Settings(), transformer={"patch_size": [2, 2, 2]})
    with pytest.raises(OptionError, match="--world-input"):
        flopcalc.estimate(TRANSFER, world_input="image")
    with pytest.raises(OptionError, match="--chunk-frames"):
        flopcalc.estimate(PREDICT, chunk_frames=17)


def test_laws():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(PREDICT)
    for h, w, f in ((704, 1280, 93), (256, 512, 17)):
        assert law.at(**{**law.representative(), "H": h, "W": w, "F": f}) == \
            flopcalc.estimate(PREDICT, height=h, width=w, num_frames=f).flops
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(TRANSFER)


@pytest.mark.parametrize("path", fixtures(PREDICT) + fixtures(TRANSFER), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


class _SafetyChecker:
    def to(self, *args, **kwargs):
        return self

    def check_text_safety(self, prompt):
        return True

    def check_video_safety(self, video):
        return video


class _ChatTokenizer:
    """``apply_chat_template(..., padding="max_length", max_length=L)``: L ids."""

    def apply_chat_template(self, conversations, max_length=None, **kwargs):
        return [1] * max_length


def _components(vcs, controlnet: bool):
    import torch
    from diffusers import AutoencoderKLWan, CosmosControlNetModel, CosmosTransformer3DModel
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from flopcalc.engine.measure.inputs.cosmos import _ensure_transforms

    _ensure_transforms()  # the padding-mask resize, without torchvision
    torch.manual_seed(vcs.SEED % 2**31)
    text = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
        text_config=dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
                         num_hidden_layers=2, vocab_size=64, rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=16,
                           fullatt_block_indexes=[0])))
    common = dict(num_attention_heads=2, attention_head_dim=12, mlp_ratio=2.0, text_embed_dim=24, adaln_lora_dim=8,
                  max_size=[16, 32, 32], patch_size=[1, 2, 2], rope_scale=[1.0, 3.0, 3.0], extra_pos_embed_type=None,
                  use_crossattn_projection=True, crossattn_proj_in_channels=32, encoder_hidden_states_channels=24)
    image = dict(img_context_dim_in=12, img_context_dim_out=24) if controlnet else {}
    models = {
        "text_encoder": text,
        "transformer": CosmosTransformer3DModel(in_channels=5, out_channels=4, num_layers=2, concat_padding_mask=True,
                                                controlnet_block_every_n=1 if controlnet else None,
                                                img_context_num_tokens=3, **common, **image),
        "vae": AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                latents_mean=[0.0] * 4, latents_std=[1.0] * 4),
    }
    if controlnet:
        models["controlnet"] = CosmosControlNetModel(n_controlnet_blocks=2, in_channels=8, latent_channels=6,
                                                     model_channels=24, **common, **image)
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    if controlnet:
        rec.forward("controlnet", models["controlnet"], key="latents")
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    return models, configs, rec


@pytest.mark.parametrize("mode", ["text", "image", "video"])
def test_predict_plan_is_the_real_call(rng, mode):
    vcs = pytest.importorskip("video_call_support")
    import torch
    from diffusers import Cosmos2_5_PredictBasePipeline, UniPCMultistepScheduler

    if mode == "image":
        pytest.importorskip("torchvision")  # the pipeline converts the image with torchvision's to_tensor
    models, configs, rec = _components(vcs, controlnet=False)
    pipe = Cosmos2_5_PredictBasePipeline(tokenizer=_ChatTokenizer(), scheduler=UniPCMultistepScheduler(),
                                         safety_checker=_SafetyChecker(), **models)
    h, w = rng.choice([(32, 48), (48, 32), (32, 32)])
    frames = rng.choice([5, 6] if mode == "video" else [1, 5, 6])
    steps, guidance, length = rng.randint(1, 2), rng.choice([1.0, 7.0]), 6
    batch = 1 if mode == "video" else rng.randint(1, 2)
    nv = rng.randint(1, 2) if batch == 1 else 1
    extra = {"video": torch.rand(1, 3, 5, h, w) * 2 - 1} if mode == "video" else {}
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, height=h, width=w, num_frames=frames, num_inference_steps=steps,
             guidance_scale=guidance, max_sequence_length=length, num_videos_per_prompt=nv, output_type="pt",
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31), **extra)
    settings = Settings(height=h, width=w, num_frames=frames, steps=steps, guidance_scale=guidance,
                        max_sequence_length=length, batch_size=batch, num_images_per_prompt=nv).with_options(
                            world_input=mode)
    index = {"_class_name": "Cosmos2_5_PredictBasePipeline", **{name: ["x", "y"] for name in configs}}
    report = estimate_configs(index, configs, settings)
    where = f"seed {vcs.SEED}: {mode} {h}×{w}×{frames}, {steps} steps, guidance {guidance}, batch {batch}×{nv}"
    assert vcs.planned_runs(report) == dict(rec.calls), where
    lat = ((frames - 1) // 4 + 1, h // 8, w // 8)
    assert rec.shapes["transformer"] == {(4, *lat)} and rec.shapes["vae.decode"] == {(4, *lat)}, where
    assert rec.shapes["text_encoder"] == {(length,)}, where
    timesteps = {c["timestep"][1:] for c in rec.inputs["transformer"]}
    assert timesteps == {(1, lat[0], 1, 1)}, where
    if mode != "text":
        assert rec.shapes["vae.encode"] == {(3, frames, h, w)}, where
        assert report.component("vae", "encode").shape == {"height": h, "width": w, "frames": frames}


def test_transfer_plan_is_the_real_call(rng):
    vcs = pytest.importorskip("video_call_support")
    import torch
    from diffusers import Cosmos2_5_TransferPipeline, UniPCMultistepScheduler

    models, configs, rec = _components(vcs, controlnet=True)
    pipe = Cosmos2_5_TransferPipeline(tokenizer=_ChatTokenizer(), scheduler=UniPCMultistepScheduler(),
                                      safety_checker=_SafetyChecker(), **models)
    h, w = rng.choice([(32, 48), (32, 32)])
    chunk, frames = 5, rng.choice([5, 9])
    steps, guidance, length, batch = 1, rng.choice([1.0, 3.0]), 6, rng.randint(1, 2)
    controls = torch.rand(frames, 3, h, w)
    with torch.no_grad():
        pipe(controls=controls, prompt=["a prompt"] * batch, height=h, width=w, num_frames=frames,
             num_frames_per_chunk=chunk, num_inference_steps=steps, guidance_scale=guidance,
             max_sequence_length=length, output_type="pt", generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=steps, guidance_scale=guidance,
                        max_sequence_length=length, batch_size=batch).with_options(chunk_frames=chunk)
    index = {"_class_name": "Cosmos2_5_TransferPipeline", **{name: ["x", "y"] for name in configs}}
    report = estimate_configs(index, configs, settings)
    where = f"seed {vcs.SEED}: {h}×{w}, {frames} frames in chunks of {chunk}, guidance {guidance}, batch {batch}"
    assert vcs.planned_runs(report) == dict(rec.calls), where
    lat = ((chunk - 1) // 4 + 1, h // 8, w // 8)
    assert rec.shapes["transformer"] == rec.shapes["controlnet"] == {(4, *lat)}, where
    assert rec.shapes["vae.encode"] == {(3, chunk, h, w)} and rec.shapes["vae.decode"] == {(4, *lat)}, where
    assert report.component("transformer").shape["image_tokens"] == 3
