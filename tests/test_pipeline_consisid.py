"""ConsisID (diffusers ``ConsisIDPipeline``) on the configs built for it (validation/configs/consisid: no ConsisID config
was found, so there is no card): defaults, the face modules once per call, refusals, the fixtures; and the plan against
the real ``__call__`` on tiny random components (skipped without torch)."""

from __future__ import annotations

import pytest

from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines import Settings, plan
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from fixture_support import REPO, assert_fixture, fixtures

FOLDER = str(REPO / "validation" / "configs" / "consisid")


def _plan(settings: Settings, **overrides):
    source = resolve(FOLDER)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    return dict(source.model_index), components, plan(dict(source.model_index), components, settings)


def test_defaults_and_face_once_per_call():
    index, components, p = _plan(Settings())
    s = p.settings
    assert (p.pipeline, s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length, p.passes) \
        == ("ConsisIDPipeline", 480, 720, 49, 50, 6.0, 226, 2)
    assert [(r.component, r.call, r.runs, r.shape.split) for r in p.runs] == [
        ("text_encoder", "forward", 2, None), ("vae", "encode", 1, None), ("transformer", "forward", 50, None),
        ("transformer", "forward", 50, "consisid_later_rows"), ("vae", "decode", 1, None)]
    report = estimate_configs(index, components, Settings(guidance_scale=1.0, steps=2))
    tree = report.component("transformer").tree
    n, d = 13 * 30 * 45, 3072
    # 21 perceiver cross-attentions (42 blocks, one after every 2nd): to_q on the video tokens, to_kv on 32 face tokens
    assert tree.find("perceiver_cross_attention.0.to_q").total.macs("torch") == n * d * 2048
    assert tree.find("perceiver_cross_attention").total.macs("torch") % 21 == 0
    assert tree.find("perceiver_cross_attention.0.to_kv").total.macs("torch") == 32 * 2048 * 4096
    lfe = tree.find("local_facial_extractor")
    assert lfe.find("mapping_0.0").total.macs("torch") == 577 * 1024 * 1024
    # the later rows keep the parameters, none of the once-per-call work
    later = estimate_configs(index, components, Settings(steps=2))
    (first, rest) = later.component("transformer").tree.children
    assert rest.find("local_facial_extractor").total.macs("torch") == 0
    assert rest.find("local_facial_extractor").total.params == first.find("local_facial_extractor").total.params
    without = estimate_configs(index, {**components, "transformer": {**components["transformer"],
                                                                     "is_train_face": False}}, Settings(steps=2))
    assert without.component("transformer").tree.find("local_facial_extractor") is None


def test_refusals():
    with pytest.raises(OptionError, match="use batch size 1"):
        _plan(Settings(batch_size=2))
    with pytest.raises(OptionError, match="--strength does not apply"):
        _plan(Settings(strength=0.5))
    source = resolve(FOLDER)
    for bad, match in (({"num_layers": 41}, "not a multiple of cross_attn_interval"),
                       ({"LFE_output_dim": 1024}, "cross-attention's kv_dim"),
                       ({"LFE_depth": 7}, "not a multiple of LFE_num_scale")):
        with pytest.raises(ConfigError, match=match):
            estimate_configs(dict(source.model_index), {**source.components, "transformer": {
                **source.components["transformer"], **bad}}, Settings(steps=1))


@pytest.mark.parametrize("path", fixtures("consisid"), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


def test_plan_is_the_real_call(rng):
    vcs = pytest.importorskip("video_call_support")
    pytest.importorskip("cv2")  # diffusers exports ConsisIDPipeline only with OpenCV (its keypoint drawing)
    import PIL.Image
    import torch
    from diffusers import AutoencoderKLCogVideoX, CogVideoXDPMScheduler, ConsisIDPipeline, ConsisIDTransformer3DModel
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(vcs.SEED % 2**31)
    face = rng.random() < 0.7
    models = {
        "text_encoder": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1, vocab_size=50)),
        "transformer": ConsisIDTransformer3DModel(
            num_attention_heads=3, attention_head_dim=16, in_channels=8, out_channels=4, time_embed_dim=8,
            text_embed_dim=16, num_layers=2, sample_width=4, sample_height=4, sample_frames=9, patch_size=2,
            max_text_seq_length=6, use_rotary_positional_embeddings=True, is_train_face=face, cross_attn_interval=1,
            cross_attn_dim_head=8, cross_attn_num_heads=2, LFE_id_dim=6, LFE_vit_dim=8, LFE_depth=2, LFE_dim_head=4,
            LFE_num_heads=2, LFE_num_id_token=2, LFE_num_querie=3, LFE_output_dim=32, LFE_ff_mult=2, LFE_num_scale=2),
        "vae": AutoencoderKLCogVideoX(down_block_types=("CogVideoXDownBlock3D",) * 4,
                                      up_block_types=("CogVideoXUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8),
                                      latent_channels=4, layers_per_block=1, norm_num_groups=2,
                                      temporal_compression_ratio=4),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    pipe = ConsisIDPipeline(tokenizer=vcs.Tokenizer(), scheduler=CogVideoXDPMScheduler(), **models)
    h, w = rng.choice([(32, 32), (32, 48)])
    frames, guidance = rng.choice([5, 9]), rng.choice([1.0, 4.0])
    extra = {"id_cond": torch.zeros(1, 6), "id_vit_hidden": [torch.zeros(1, 5, 8)] * 2} if face else {}
    with torch.no_grad():
        pipe(image=PIL.Image.new("RGB", (w, h)), prompt="a prompt", height=h, width=w, num_frames=frames,
             num_inference_steps=2, guidance_scale=guidance, max_sequence_length=6, output_type="pt",
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31), **extra)
    settings = Settings(height=h, width=w, num_frames=frames, steps=2, guidance_scale=guidance, max_sequence_length=6)
    index = {"_class_name": "ConsisIDPipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}, {frames} frames, guidance {guidance}, face {face}"
    assert vcs.plan_runs(index, configs, settings) == dict(rec.calls), where
    t = (frames - 1) // 4 + 1
    assert rec.shapes["transformer"] == {(t, 8, h // 8, w // 8)}, where
    assert rec.shapes["vae.encode"] == {(3, 1, h, w)}, where
