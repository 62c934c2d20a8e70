"""VisualClozeGenerationPipeline and VisualClozePipeline (diffusers ``pipelines/visualcloze``) on the visualcloze-384
card: the grid geometry (``preprocess_image``'s resize to the area of ``resolution²``), defaults, options, refusals,
the upsampling stage against the flux-fill-dev card's fixtures (the same configs), and both plans against the real
``__call__`` run on tiny random components on the CPU."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

CARD = Card("visualcloze-384")


def _plan(settings: Settings = Settings(), pipeline: str = "VisualClozePipeline", **index):
    return estimate_configs({**CARD.index(), "_class_name": pipeline, **index}, CARD.components(), settings)


def test_cell_size_is_the_processors_resize():
    from flopcalc.engine.pipelines.visualcloze import cell_size

    assert cell_size(384, 384, 384, 16) == (384, 384)
    assert cell_size(1024, 1024, 384, 16) == (384, 384)  # any square image
    assert cell_size(768, 1344, 384, 16) == (288, 496)  # new_h int(290.3) = 290, new_w int(290·1.75) = 507
    assert cell_size(100, 1600, 384, 16) == (96, 1536)


def test_generation_defaults_a_2x2_grid_of_384_cells():
    r = _plan(pipeline="VisualClozeGenerationPipeline")
    s = r.settings
    assert r.pipeline == "VisualClozeGenerationPipeline" and r.passes == 1
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (384, 384, 50, 30.0, 512)
    assert (s.grid_rows, s.grid_columns) == (2, 2)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 2,
                               "transformer.forward": 50, "vae.decode": 1}
    # the grid's 2 · 2 · 24 · 24 tokens, as a 768² latent grid
    assert r.component("transformer").shape == {"latent_height": 96, "latent_width": 96, "text_len": 512}
    assert r.component("vae", "encode").shape == {"height": 384, "width": 768}
    assert r.component("vae", "decode").shape == {"latent_height": 48, "latent_width": 96}


def test_combined_adds_flux_fill_upsampling_equal_to_its_fixtures():
    r = flopcalc.estimate("visualcloze-384", upsampling_height=768, upsampling_width=1344, upsampling_strength=0.5,
                          batch_size=2, grid_rows=3)
    assert r.pipeline == "VisualClozePipeline"
    transformer = [c for c in r.components if c.component == "transformer"]
    assert [c.runs for c in transformer] == [100, 50]  # generation: 50 steps × 2; upsampling: 25 steps × 2
    assert transformer[0].shape == {"latent_height": 144, "latent_width": 96, "text_len": 512}
    fill = Card("flux-fill-dev")
    fx = fill.fixture("transformer-768x1344.json")
    assert 2 * transformer[1].macs_per_run == fx["torch"]["flops"] and transformer[1].params == fx["params"]
    encodes = [c for c in r.components if c.component == "vae" and c.call == "encode"]
    assert [c.runs for c in encodes] == [6, 4]  # 3 rows × 2 prompts; image and masked image × 2
    # the FLUX.1 VAE (the flux-dev card's file, measured there)
    assert 2 * encodes[1].macs_per_run == Card("flux-dev").fixture("vae-encode-768x1344.json")["torch"]["flops"]
    skipped = flopcalc.estimate("visualcloze-384", upsampling_strength=0)
    assert runs_by_call(skipped)["transformer.forward"] == 50


def test_resolution_from_model_index_and_refusals():
    r = _plan(Settings(height=512, width=512), pipeline="VisualClozeGenerationPipeline", resolution=512)
    assert (r.settings.height, r.settings.width) == (512, 512)
    with pytest.raises(FlopcalcError, match="'resolution' must be an integer"):
        _plan(pipeline="VisualClozeGenerationPipeline", resolution="384")
    with pytest.raises(OptionError, match="--strength does not apply to VisualClozeGenerationPipeline"):
        _plan(Settings(strength=0.5), pipeline="VisualClozeGenerationPipeline")
    with pytest.raises(OptionError, match="upsampling_strength must be between 0 and 1"):
        _plan(Settings.make(upsampling_strength=1.5))
    with pytest.raises(OptionError, match="--upsampling-strength does not apply to VisualClozeGenerationPipeline"):
        _plan(Settings.make(upsampling_strength=0.5), pipeline="VisualClozeGenerationPipeline")
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        from flopcalc.flops.symbolic import symbolic_estimate

        symbolic_estimate("visualcloze-384")


@pytest.mark.parametrize("pipeline", ["VisualClozeGenerationPipeline", "VisualClozePipeline"])
def test_the_plans_mirror_the_real_calls(rng, pipeline):
    from PIL import Image
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    import diffusers
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    models = {
        "text_encoder": CLIPTextModel(CLIPTextConfig(hidden_size=8, intermediate_size=16, num_attention_heads=2,
                                                     num_hidden_layers=1, vocab_size=50, max_position_embeddings=80)),
        "text_encoder_2": T5EncoderModel(T5Config(d_model=32, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                  vocab_size=50)),
        "transformer": diffusers.FluxTransformer2DModel(in_channels=288, out_channels=16, num_layers=1,
                                                        num_single_layers=1, attention_head_dim=16,
                                                        num_attention_heads=2, joint_attention_dim=32,
                                                        pooled_projection_dim=8, guidance_embeds=True,
                                                        axes_dims_rope=[4, 6, 6]),
        "vae": diffusers.AutoencoderKL(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                                       down_block_types=["DownEncoderBlock2D"] * 4,
                                       up_block_types=["UpDecoderBlock2D"] * 4, shift_factor=0.1159,
                                       scaling_factor=0.3611),
    }
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "text_encoder_2", "transformer"))
    resolution = 48
    pipe = getattr(diffusers, pipeline)(scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
                                        tokenizer=Tokenizer(model_max_length=77), tokenizer_2=Tokenizer(),
                                        resolution=resolution, **models)
    rows, columns = rng.randint(2, 3), rng.randint(2, 3)
    ih, iw = rng.choice([(48, 48), (40, 72), (96, 64)])
    grid = [[Image.new("RGB", (iw, ih)) for _ in range(columns)] for _ in range(rows)]
    grid[-1][-1] = None
    steps, length = rng.randint(1, 2), rng.choice([8, 20])
    kwargs = dict(task_prompt="a task", content_prompt="a picture", image=grid, num_inference_steps=steps,
                  max_sequence_length=length, output_type="np",
                  generator=torch.Generator().manual_seed(0))  # prepare_latents indexes a None generator otherwise
    options = {}
    if pipeline == "VisualClozePipeline":
        strength = rng.choice([0.0, 0.6, 1.0])
        kwargs.update(upsampling_height=32, upsampling_width=48, upsampling_strength=strength)
        options = dict(upsampling_height=32, upsampling_width=48, upsampling_strength=strength)
    with torch.no_grad():
        pipe(**kwargs)
    index = {"_class_name": pipeline, "resolution": resolution, **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings.make(height=ih, width=iw, steps=steps,
                                                            max_sequence_length=length, grid_rows=rows,
                                                            grid_columns=columns, **options))
    where = f"{pipeline} {rows}×{columns} grid of {ih}×{iw}, {steps} steps, {options}"
    assert planned(report) == dict(calls), where
    h, w = report.settings.height, report.settings.width
    assert (rows * (h // 16) * columns * (w // 16), 288) in shapes["transformer"], where
    assert (h, columns * w) in shapes["vae.encode"] and (h // 8, columns * w // 8) in shapes["vae.decode"], where
