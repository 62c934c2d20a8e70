"""``MochiPipeline`` (diffusers ``pipelines/mochi/pipeline_mochi.py``) on the bundled card: defaults, the batched
guidance pass, the latent geometry (temporal 6, spatial 8), the untrimmed sigma schedule, the whole-latent VAE
decode, refusals, the closed forms of the Mochi block and the symbolic law. No torch needed."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import FlopcalcError, OptionError
from card_support import runs_by_call

MODEL = "mochi-1-preview"


def test_defaults():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    # pipeline_mochi.py:446-468 (num_frames 19, 64 steps, guidance 4.5, 256 tokens) and 192-193 (480x848)
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (480, 848, 19, 64, 4.5, 256)
    assert r.pipeline == "MochiPipeline" and r.passes == 2
    # negative prompt encoded too; one batched forward of 2 rows per step (line 647); one decode (line 713)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 128, "vae.decode": 1}
    # latent: (19 - 1) // 6 + 1 = 4 frames of 480/8 x 848/8 (lines 402-404)
    assert r.component("transformer").shape == {"latent_height": 60, "latent_width": 106, "text_len": 256,
                                                "latent_frames": 4}
    assert r.component("vae").shape == {"latent_height": 60, "latent_width": 106, "latent_frames": 4}
    assert any("valid" in n for n in r.notes)


def test_steps_are_not_trimmed_and_frames_floor():
    # linear_quadratic_schedule(steps, 0.025) gives `steps` sigmas, each one timestep
    r = flopcalc.estimate(MODEL, steps=7, num_frames=24, guidance_scale=1.0)
    assert r.passes == 1 and runs_by_call(r)["transformer.forward"] == 7
    assert r.component("transformer").shape["latent_frames"] == (24 - 1) // 6 + 1


def test_block_closed_form():
    """4 d² + 4 d c (norm1, norm1_context) + 4 N d² + 3 T c d + T d c + 2 h (N+T)² d_h + 3 N d f + 3 T c f_c, and the
    last (context_pre_only) block: d c for norm1_context, no to_add_out, no ff_context."""
    r = flopcalc.estimate(MODEL, height=256, width=256, num_frames=7, max_sequence_length=32)
    tree = r.component("transformer").tree
    d, c, h, dh, t = 3072, 1536, 24, 128, 32
    n = 2 * 16 * 16  # 2 latent frames of 32/2 x 32/2 patches
    f, fc = 8 * d // 3, 8 * c // 3
    attention = 2 * h * (n + t) ** 2 * dh
    full = (4 * d * d + 4 * d * c + 4 * n * d * d + 3 * t * c * d + t * d * c + attention
            + 3 * n * d * f + 3 * t * c * fc)
    last = d * d * 4 + d * c + 4 * n * d * d + 3 * t * c * d + attention + 3 * n * d * f
    assert tree.find("transformer_blocks.0").per_item.macs("torch") == full
    assert tree.find("transformer_blocks.47").per_item.macs("torch") == last


def test_vae_decode_closed_form():
    """conv_in + resnets (54 c² P each) + up-block projections + proj_out, on the whole latent."""
    r = flopcalc.estimate(MODEL, height=64, width=64, num_frames=7)
    z, chans, layers, t_exp, s_exp = 12, [128, 256, 512, 768], [3, 3, 4, 6, 3], [1, 2, 3], [2, 2, 2]
    p = 2 * 8 * 8
    expected = z * chans[-1] * p + layers[-1] * 54 * chans[-1] ** 2 * p
    for i in range(3):
        c_in, c_out, te, se = chans[-i - 1], chans[-i - 2], t_exp[-i - 1], s_exp[-i - 1]
        expected += layers[-i - 2] * 54 * c_in ** 2 * p + c_in * c_out * te * se * se * p
        p *= te * se * se
    expected += layers[0] * 54 * chans[0] ** 2 * p + chans[0] * 3 * p
    assert r.component("vae").macs_per_run == expected


def test_refusals():
    with pytest.raises(OptionError):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(OptionError, match="2 steps"):
        flopcalc.estimate(MODEL, steps=1)
    with pytest.raises(FlopcalcError, match="multiple of 8"):
        flopcalc.estimate(MODEL, height=484)


def test_vae_tiling():
    """``enable_tiling()``: 32-latent tiles every 24 (256 / 192 pixels over 8), each decoded with all its frames; a
    latent within one tile decodes whole; no law for a tiled decode."""
    from flopcalc.flops.symbolic import symbolic_estimate

    from flopcalc.engine.pipelines import Settings, plan
    from flopcalc.engine.sources import resolve

    source = resolve(MODEL)
    decodes = [r for r in plan(source.model_index, source.components, Settings(vae_tiling=True)).runs
               if r.call == "decode"]
    # latent 60x106: rows range(0, 60, 24): 32, 32, 12; columns range(0, 106, 24): 32, 32, 32, 32, 10
    assert {(r.shape.latent_height, r.shape.latent_width): r.runs for r in decodes} == {
        (32, 32): 8, (32, 10): 2, (12, 32): 4, (12, 10): 1}
    assert all(r.shape.latent_frames == 4 for r in decodes)
    tiled = flopcalc.estimate(MODEL, vae_tiling=True)
    assert tiled.component("vae").macs > flopcalc.estimate(MODEL).component("vae").macs  # overlaps cost extra
    assert any("15 tiles" in n for n in tiled.notes)
    small = flopcalc.estimate(MODEL, height=256, width=256, vae_tiling=True)
    assert small.component("vae").runs == 1 and any("fits one tile" in n for n in small.notes)
    with pytest.raises(FlopcalcError, match="tiled"):
        symbolic_estimate(MODEL, vae_tiling=True)


def test_symbolic_law():
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(MODEL)
    symbols = {x.name: x for x in law.flops.free_symbols}
    assert {"H", "W", "S", "F", "L"} <= set(symbols)
    values = dict(H=256, W=512, F=13, S=7, P=2, B=1, L=256)
    at = law.flops.subs({symbols[k]: v for k, v in values.items() if k in symbols})
    assert at == 2 * flopcalc.estimate(MODEL, height=256, width=512, num_frames=13, steps=7).macs


@pytest.mark.parametrize("options", [dict(num_frames=13, steps=3), dict(num_frames=7, steps=2, guidance_scale=1.0)])
def test_plan_is_the_real_call(options):
    """The real ``MochiPipeline.__call__`` on a tiny transformer and VAE (prompt embeddings given): every transformer
    forward (its batch rows and latent shape) and every ``vae.decode``, against the plan's runs."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import AutoencoderKLMochi, FlowMatchEulerDiscreteScheduler, MochiPipeline, MochiTransformer3DModel

    torch.manual_seed(0)
    transformer = MochiTransformer3DModel(num_attention_heads=2, attention_head_dim=8, num_layers=1,
                                          pooled_projection_dim=16, text_embed_dim=16, time_embed_dim=16)
    vae = AutoencoderKLMochi(encoder_block_out_channels=[32] * 4, decoder_block_out_channels=[32] * 4,
                             layers_per_block=[1] * 5)  # latent 12 channels, 6x time, 8x space: the pipeline's own
    pipe = MochiPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=None, tokenizer=None,
                         transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    forwards, decodes = [], []
    transformer.register_forward_pre_hook(
        lambda m, args, kwargs: forwards.append(tuple(kwargs["hidden_states"].shape)), with_kwargs=True)
    vae.decoder.register_forward_pre_hook(lambda m, args: decodes.append(tuple(args[0].shape)))
    embeds, mask = torch.zeros(1, 8, 16), torch.ones(1, 8, dtype=torch.bool)
    steps = options.pop("steps")
    guidance = options.pop("guidance_scale", 4.5)
    pipe(prompt_embeds=embeds, prompt_attention_mask=mask, negative_prompt_embeds=embeds,
         negative_prompt_attention_mask=mask, height=32, width=48, num_inference_steps=steps,
         guidance_scale=guidance, output_type="pt", **options)
    r = flopcalc.estimate(MODEL, height=32, width=48, steps=steps, guidance_scale=guidance, **options)
    shape = r.component("transformer").shape
    latent = (12, shape["latent_frames"], shape["latent_height"], shape["latent_width"])
    assert forwards == [(r.passes, *latent)] * steps  # the guidance rows in one batched forward
    assert runs_by_call(r)["transformer.forward"] == steps * r.passes
    vae_shape = r.component("vae").shape
    assert decodes == [(1, 12, vae_shape["latent_frames"], vae_shape["latent_height"], vae_shape["latent_width"])]
