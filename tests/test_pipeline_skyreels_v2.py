"""SkyReels V2 pipelines (diffusers ``pipelines/skyreels_v2/``): ``SkyReelsV2Pipeline``,
``SkyReelsV2DiffusionForcingPipeline`` and ``SkyReelsV2ImageToVideoPipeline`` on the bundled cards: defaults,
guidance passes, shapes, the diffusion-forcing schedule (the closed form of ``generate_timestep_matrix``'s rows
against diffusers' own function, and the whole plan against the real pipeline run on a tiny transformer, counting
its forwards and their frames), long videos, refusals, the symbolic law."""

from __future__ import annotations

import random

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.skyreels_v2 import forcing_windows, timestep_matrix_rows
from card_support import runs_by_call


# --------------------------------------------------------------------------- defaults


def test_t2v_defaults_are_the_pipelines():
    r = flopcalc.estimate("skyreels-v2-t2v-14b-720p")
    s = r.settings
    # pipeline_skyreels_v2.py:380-398
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == (
        544, 960, 97, 50, 6.0, 512)
    assert r.pipeline == "SkyReelsV2Pipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 68, "latent_width": 120, "text_len": 512,
                                                 "latent_frames": 25}
    assert r.component("vae").shape == {"latent_height": 68, "latent_width": 120, "latent_frames": 25}


def test_diffusion_forcing_defaults_run_every_frame_every_step():
    """ar_step 0, causal_block_size None (num_frame_per_block 1), no overlap: 50 synchronous forwards per pass on
    all 25 latent frames, each with 25 timesteps; the 14B DF transformer is the T2V one but for the per-frame
    time embedder (25 rows instead of 1)."""
    df = flopcalc.estimate("skyreels-v2-df-14b-720p")
    assert df.pipeline == "SkyReelsV2DiffusionForcingPipeline" and df.passes == 2
    assert runs_by_call(df) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    shape = df.component("transformer").shape
    assert shape["latent_frames"] == shape["timestep_tokens"] == 25
    t2v = flopcalc.estimate("skyreels-v2-t2v-14b-720p")
    emb = df.component("transformer").tree.find("condition_embedder")
    emb_t2v = t2v.component("transformer").tree.find("condition_embedder")
    d = 40 * 128
    assert emb.per_item.macs("torch") - emb_t2v.per_item.macs("torch") == 24 * (256 * d + d * d + 6 * d * d)


def test_fps_projection_only_with_inject_sample_info():
    r = flopcalc.estimate("skyreels-v2-df-1.3b-540p")
    tree = r.component("transformer").tree
    d = 12 * 128
    assert tree.find("fps_projection").per_item.macs("torch") == d * d + 6 * d * d
    assert tree.find("fps_embedding").total.params == 2 * d
    assert flopcalc.estimate("skyreels-v2-df-14b-720p").component("transformer").tree.find("fps_projection") is None


def test_i2v_defaults():
    r = flopcalc.estimate("skyreels-v2-i2v-14b-720p")
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (544, 960, 97, 50, 5.0)  # i2v.py:486-490
    assert r.pipeline == "SkyReelsV2ImageToVideoPipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "image_encoder.forward": 1, "vae.encode": 1,
                        "transformer.forward": 100, "vae.decode": 1}
    assert r.component("transformer").shape["image_tokens"] == 257
    assert r.component("vae", "encode").shape == {"height": 544, "width": 960, "frames": 97}


def test_guidance_off_is_one_pass():
    r = flopcalc.estimate("skyreels-v2-t2v-14b-720p", guidance_scale=1.0)
    assert r.passes == 1 and runs_by_call(r)["transformer.forward"] == 50 and runs_by_call(r)["text_encoder.forward"] == 1


def test_frames_rounded_and_sizes_checked():
    r = flopcalc.estimate("skyreels-v2-t2v-14b-720p", num_frames=19)  # 19 // 4 · 4 + 1
    assert r.settings.num_frames == 17 and any("rounded to 17" in n for n in r.notes)
    with pytest.raises(FlopcalcError, match="multiple of 16"):
        flopcalc.estimate("skyreels-v2-t2v-14b-720p", height=540)


# --------------------------------------------------------------------------- options and refusals


def test_forcing_options_are_refused_elsewhere():
    with pytest.raises(OptionError):
        flopcalc.estimate("skyreels-v2-t2v-14b-720p", ar_step=5)
    with pytest.raises(OptionError):
        flopcalc.estimate("wan2.1", overlap_history=17)
    with pytest.raises(OptionError):
        flopcalc.estimate("skyreels-v2-df-14b-720p", strength=0.5)


@pytest.mark.parametrize("kwargs", [dict(ar_step=-1), dict(causal_block_size=0), dict(base_num_frames=True),
                                    dict(overlap_history=10 ** 6)])
def test_forcing_options_are_validated(kwargs):
    with pytest.raises(FlopcalcError):
        flopcalc.estimate("skyreels-v2-df-14b-720p", **kwargs)


def test_long_video_needs_overlap_history():
    """check_inputs (before the frames are rounded): num_frames > base_num_frames needs overlap_history."""
    with pytest.raises(OptionError, match="overlap_history"):
        flopcalc.estimate("skyreels-v2-df-14b-720p", num_frames=98)
    with pytest.raises(OptionError, match="shorter than"):
        flopcalc.estimate("skyreels-v2-df-14b-720p", num_frames=257, overlap_history=97)


def test_wrong_transformer_for_the_pipeline_is_refused():
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.sources import resolve

    df = resolve("skyreels-v2-df-1.3b-540p")
    index = {**df.model_index, "_class_name": "SkyReelsV2Pipeline"}
    with pytest.raises(ConfigError, match="inject_sample_info"):
        estimate_configs(index, dict(df.components), Settings())
    i2v = resolve("skyreels-v2-i2v-14b-720p")
    with pytest.raises(ConfigError, match="image_dim"):
        estimate_configs({**i2v.model_index, "_class_name": "SkyReelsV2Pipeline"}, dict(i2v.components),
                         Settings())


def test_long_video_windows():
    """257 frames (65 latent), base 97 (25), overlap 17 (5), ar_step 5, blocks of 5: three iterations on 25 latent
    frames; the first runs 50 + 4·5 rows, the next two have a pre-finished 5-frame prefix block: 50 + 3·5; the
    decoded latent is 25 + 20 + 20 frames."""
    r = flopcalc.estimate("skyreels-v2-df-14b-720p", num_frames=257, overlap_history=17, ar_step=5,
                          causal_block_size=5)
    assert runs_by_call(r)["transformer.forward"] == (70 + 65 + 65) * 2
    assert r.component("vae").shape["latent_frames"] == 65
    windows = forcing_windows(65, 50, ar_step=5, causal_block_size=5, base_latent_frames=25, overlap_latent_frames=5)
    assert [(w.frames, w.forwards, w.kept) for w in windows] == [(25, 70, 25), (25, 65, 20), (25, 65, 20)]


def test_symbolic_law_at_the_defaults_only():
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate("skyreels-v2-df-14b-720p")
    symbols = {s.name: s for s in law.flops.free_symbols}
    assert {"S", "F", "H", "W"} <= set(symbols)
    for h, w, f, steps in [(256, 512, 33, 7), (512, 384, 17, 3)]:  # the law is the numeric plan elsewhere too
        values = dict(H=h, W=w, F=f, S=steps, P=2, B=1, L=512)
        at = law.flops.subs({symbols[k]: v for k, v in values.items() if k in symbols})
        assert at == 2 * flopcalc.estimate("skyreels-v2-df-14b-720p", height=h, width=w, num_frames=f, steps=steps).macs
    with pytest.raises(FlopcalcError, match="closed-form"):
        symbolic_estimate("skyreels-v2-df-14b-720p", ar_step=5, causal_block_size=5)


# --------------------------------------------------------------------------- against diffusers itself


def test_timestep_matrix_rows_are_diffusers():
    """The closed form of the rows (and the valid interval: always all whole blocks) against diffusers'
    ``generate_timestep_matrix`` on random block counts, steps, ar_step, prefixes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import SkyReelsV2DiffusionForcingPipeline

    rng = random.Random(13)
    for _ in range(150):
        steps, block, blocks = rng.randint(1, 30), rng.randint(1, 6), rng.randint(1, 12)
        frames, ar_step, ready = blocks * block + rng.randint(0, block - 1), rng.randint(0, 40), rng.randint(0, blocks - 1)
        matrix, _, _, intervals = SkyReelsV2DiffusionForcingPipeline.generate_timestep_matrix(
            None, frames, torch.arange(steps, 0, -1) * 10, frames, ar_step, ready * block, block)
        where = (steps, block, frames, ar_step, ready)
        assert len(matrix) == timestep_matrix_rows(blocks, steps, ar_step, ready), where
        assert set(intervals) == {(0, blocks * block)}, where


def _tiny_pipeline(image: bool = False):
    """The real diffusion-forcing pipeline (image-to-video: with a tiny Wan VAE of the same 8×/4× factors to
    encode the image) around a one-layer transformer, and the list its forwards append
    ``(latent frames, timestep shape)`` to."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import (AutoencoderKLWan, SkyReelsV2DiffusionForcingImageToVideoPipeline,
                           SkyReelsV2DiffusionForcingPipeline, SkyReelsV2Transformer3DModel, UniPCMultistepScheduler)

    torch.manual_seed(0)
    transformer = SkyReelsV2Transformer3DModel(num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                               out_channels=4, text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1,
                                               inject_sample_info=True)  # as the DF-1.3B card: fps is passed
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=8.0)
    vae = None
    if image:
        vae = AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1, attn_scales=[],
                               temperal_downsample=[False, True, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    cls = SkyReelsV2DiffusionForcingImageToVideoPipeline if image else SkyReelsV2DiffusionForcingPipeline
    pipe = cls(tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=scheduler)
    pipe.set_progress_bar_config(disable=True)
    calls = []
    transformer.register_forward_pre_hook(
        lambda m, args, kwargs: calls.append((kwargs["hidden_states"].shape[2], tuple(kwargs["timestep"].shape))),
        with_kwargs=True)
    return pipe, calls


FORCING_OPTIONS = [
    dict(num_frames=17, steps=3),
    dict(num_frames=41, steps=4, ar_step=2, causal_block_size=3),
    dict(num_frames=57, steps=3, guidance_scale=1.0, ar_step=1, causal_block_size=2, base_num_frames=25,
         overlap_history=9),
    dict(num_frames=45, steps=2, ar_step=3, causal_block_size=2, base_num_frames=21, overlap_history=5),
    dict(num_frames=53, steps=2, ar_step=1, causal_block_size=2, base_num_frames=21, overlap_history=5),
]


@pytest.mark.parametrize("image", [False, True], ids=["t2v", "i2v"])
@pytest.mark.parametrize("options", FORCING_OPTIONS)
def test_forcing_plan_is_the_real_loop(options, image):  # noqa: C901
    """The real ``SkyReelsV2DiffusionForcingPipeline.__call__`` on a tiny transformer (prompt embeddings given,
    latent output): every transformer forward and its latent frames, against the plan's runs; the returned latent's
    frames against the plan's decode."""
    torch = pytest.importorskip("torch")
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.pipelines import plan
    from flopcalc.engine.sources import resolve

    pipe, calls = _tiny_pipeline(image)
    source = resolve("skyreels-v2-df-1.3b-540p")
    index = dict(source.model_index)
    if image:
        index["_class_name"] = "SkyReelsV2DiffusionForcingImageToVideoPipeline"
    kwargs = {k: v for k, v in options.items() if k != "steps"}
    if image:
        kwargs["image"] = torch.zeros(1, 3, 32, 32)
    embeds = torch.zeros(1, 8, 16)
    try:
        r = estimate_configs(index, dict(source.components), Settings.make(height=32, width=32, **options))
    except OptionError:  # refused where diffusers fails: it must fail
        with pytest.raises((IndexError, RuntimeError, ValueError)):
            pipe(prompt=None, prompt_embeds=embeds, negative_prompt_embeds=embeds, height=32, width=32,
                 num_inference_steps=options["steps"], output_type="latent", **kwargs)
        assert image and options.get("overlap_history")  # only the image-to-video long video with a short tail
        return
    out = pipe(prompt=None, prompt_embeds=embeds, negative_prompt_embeds=embeds, height=32, width=32,
               num_inference_steps=options["steps"], output_type="latent", **kwargs).frames
    planned = {}
    for run in plan(index, source.components, r.settings).runs:  # the report folds windows into pieces
        if run.component == "transformer":
            planned[run.shape.latent_frames] = planned.get(run.shape.latent_frames, 0) + run.runs
            assert run.shape.timestep_tokens == run.shape.latent_frames
    measured = {}
    for frames, timestep in calls:
        assert timestep == (1, frames)
        measured[frames] = measured.get(frames, 0) + 1
    assert planned == measured
    assert r.component("vae", "decode").shape["latent_frames"] == out.shape[2]
    if image:
        assert r.component("vae", "encode").shape == {"height": 32, "width": 32, "frames": 1}


@pytest.mark.parametrize("options", [
    dict(num_frames=21, steps=2, overlap_history=5, base_num_frames=17),
    dict(num_frames=33, steps=3, ar_step=1, causal_block_size=2, overlap_history=9, base_num_frames=25),
    dict(num_frames=13, steps=2, overlap_history=5),
])
def test_video_to_video_plan_is_the_real_loop(options):
    """The real ``SkyReelsV2DiffusionForcingVideoToVideoPipeline.__call__`` (tiny transformer and Wan VAE, a
    9-frame input video): its forwards and their frames, the encoded prefix, the decoded latent."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import (AutoencoderKLWan, SkyReelsV2DiffusionForcingVideoToVideoPipeline,
                           SkyReelsV2Transformer3DModel, UniPCMultistepScheduler)

    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.pipelines import plan
    from flopcalc.engine.sources import resolve

    torch.manual_seed(0)
    transformer = SkyReelsV2Transformer3DModel(num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                               out_channels=4, text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1,
                                               inject_sample_info=True)
    vae = AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1, attn_scales=[],
                           temperal_downsample=[False, True, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=8.0)
    pipe = SkyReelsV2DiffusionForcingVideoToVideoPipeline(tokenizer=None, text_encoder=None, transformer=transformer,
                                                          vae=vae, scheduler=scheduler)
    pipe.set_progress_bar_config(disable=True)
    calls, encoded = [], []
    transformer.register_forward_pre_hook(lambda m, a, kw: calls.append(kw["hidden_states"].shape[2]),
                                          with_kwargs=True)
    vae.encoder.register_forward_pre_hook(lambda m, a: encoded.append(a[0].shape))
    embeds = torch.zeros(1, 8, 16)
    kwargs = {k: v for k, v in options.items() if k != "steps"}
    out = pipe(video=torch.zeros(1, 9, 3, 32, 32), prompt=None, prompt_embeds=embeds, negative_prompt_embeds=embeds,
               height=32, width=32, num_inference_steps=options["steps"], output_type="latent", **kwargs).frames

    source = resolve("skyreels-v2-df-1.3b-540p")
    index = {**source.model_index, "_class_name": "SkyReelsV2DiffusionForcingVideoToVideoPipeline"}
    r = estimate_configs(index, dict(source.components), Settings.make(height=32, width=32, **options))
    planned: dict[int, int] = {}
    for run in plan(index, source.components, r.settings).runs:
        if run.component == "transformer":
            planned[run.shape.latent_frames] = planned.get(run.shape.latent_frames, 0) + run.runs
    measured: dict[int, int] = {}
    for frames in calls:
        measured[frames] = measured.get(frames, 0) + 1
    assert planned == measured
    assert r.component("vae", "decode").shape["latent_frames"] == out.shape[2]
    assert r.component("vae", "encode").shape["frames"] == options["overlap_history"]
    assert encoded  # the encoder ran (chunk by chunk: the plan's encode formula sums the chunks)


def test_video_to_video_needs_overlap_history():
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.sources import resolve

    source = resolve("skyreels-v2-df-14b-720p")
    index = {**source.model_index, "_class_name": "SkyReelsV2DiffusionForcingVideoToVideoPipeline"}
    with pytest.raises(OptionError, match="overlap-history"):
        estimate_configs(index, dict(source.components), Settings())
    r = estimate_configs(index, dict(source.components), Settings.make(overlap_history=17))
    assert r.settings.num_frames == 121 and r.settings.guidance_scale == 6.0  # v2v.py:693-695, 120 rounded
    # L = 31, B = 25, O = 5: windows of 25 and min(31 − 25 + 5, 25) = 11 frames, 5 prefix frames each, 50 rows each
    from flopcalc.engine.pipelines import plan

    runs = [(run.shape.latent_frames, run.runs) for run in plan(index, source.components, r.settings).runs
            if run.component == "transformer"]
    assert runs == [(25, 100), (11, 100)]
    assert r.component("vae", "decode").shape["latent_frames"] == 25 + 11 - 5


def test_diffusion_forcing_image_to_video_defaults():
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.sources import resolve

    source = resolve("skyreels-v2-df-14b-720p")
    index = {**source.model_index, "_class_name": "SkyReelsV2DiffusionForcingImageToVideoPipeline"}
    r = estimate_configs(index, dict(source.components), Settings())
    assert r.settings.guidance_scale == 5.0 and r.passes == 2  # df_i2v.py:655
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 544, "width": 960, "frames": 1}
