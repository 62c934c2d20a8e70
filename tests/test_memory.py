"""``flopcalc memory``: weights per component, resident under offload, fit on a GPU of the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.hardware.gpus import gpu
from flopcalc.gpu_memory.estimate import memory
from flopcalc.gpu_memory.weights import component_weights

REPO = Path(__file__).resolve().parents[1]


def test_weights_follow_the_dtype_and_the_exact_parameter_counts():
    from flopcalc.flops.estimate import estimate

    report = estimate("flux-dev")
    bf16, fp32 = memory("flux-dev"), memory("flux-dev", dtype="fp32")
    params = {c.component: c.params for c in report.components}
    for c16, c32 in zip(bf16.components, fp32.components):
        assert c16.params == c32.params == params[c16.component]
        assert c16.param_bytes == 2 * c16.params and c32.param_bytes == 4 * c32.params
    assert bf16.weights_bytes == sum(c.bytes for c in bf16.components)


def test_offload_modes_and_gpu_fit():
    none = memory("flux-dev", gpu="h100-sxm")
    model = memory("flux-dev", offload="model", gpu="rtx-4090")
    assert none.resident_bytes == none.weights_bytes
    biggest = max(model.components, key=lambda c: c.bytes)
    assert model.resident_bytes == biggest.bytes and model.resident_components == ("transformer",)
    # the peak adds the largest activation peak (no offload) / each component's own (model offload)
    acts = {a.component: a.bytes("fused") for a in none.activations}
    assert set(acts) == {"text_encoder", "text_encoder_2", "transformer", "vae"}
    assert none.peak_allocated_bytes == none.weights_bytes + max(acts.values())
    assert model.peak_allocated_bytes == max(c.bytes + acts.get(c.component, 0) for c in model.components)
    assert none.fits and none.headroom_bytes == gpu("h100-sxm").memory_bytes - none.peak_bytes
    assert model.fits is (model.peak_bytes <= gpu("rtx-4090").memory_bytes)
    assert not memory("flux-dev", gpu="rtx-4090").fits
    assert memory("flux-dev").fits is None


def test_sequential_offload_holds_the_buffers_and_one_module():
    seq = memory("wan2.1-t2v-1.3b", offload="sequential", gpu="rtx-4090")
    by = {c.component: c for c in seq.components}
    # the largest module of Wan 2.1 1.3B is UMT5's 256,384 × 4,096 token embedding (tests/test_weights.py checks
    # each component's largest module against the real module)
    assert seq.resident_components == ("text_encoder",)
    assert by["text_encoder"].largest_module_params == 1_050_148_864
    assert seq.resident_bytes == seq.buffer_bytes + 2 * 1_050_148_864
    acts = {a.component: a.bytes("fused") for a in seq.activations}
    assert seq.peak_allocated_bytes == seq.buffer_bytes + max(c.largest_module_bytes + acts.get(c.component, 0)
                                                    for c in seq.components)
    assert seq.peak_bytes < memory("wan2.1-t2v-1.3b", offload="model").peak_bytes < memory("wan2.1-t2v-1.3b").peak_bytes
    assert seq.to_dict()["resident"]["what"].startswith("every component's buffers")


def test_activations_scale_with_batch_and_attention_path():
    one = memory("flux-dev", height=1024, width=1024)
    two = memory("flux-dev", height=1024, width=1024, batch_size=2, attention="math")
    a1, a2 = (next(a for a in m.activations if a.component == "transformer") for m in (one, two))
    assert a2.bytes("fused") == 2 * a1.bytes("fused") and a2.bytes("math") > a2.bytes("fused")
    assert a1.bytes_per_element == 2 and all(
        a.bytes_per_element == 4 for a in memory("flux-dev", dtype="fp32").activations)
    assert two.peak_allocated_bytes == two.weights_bytes + max(a.bytes("math") for a in two.activations)
    notes = " ".join(memory("flux-dev", max_sequence_length=256, height=2048, width=2048).notes)
    assert "does not follow the text length" in notes and "extrapolated" in notes
    assert "not measured" in " ".join(memory(str(REPO / "validation/configs/sd3.5-medium-transformer")).notes)


def test_text_encoders_and_tiled_decodes_have_activation_estimates():
    est = memory("flux-dev")
    calls = {(a.component, a.call) for a in est.activations}
    assert {("text_encoder", "forward"), ("text_encoder_2", "forward"), ("transformer", "forward"),
            ("vae", "decode")} <= calls
    t5 = next(a for a in est.activations if a.component == "text_encoder_2")
    assert t5.fused.n == 512  # a text encoder's fit is in its sequence length
    assert next(a for a in memory("flux-dev", max_sequence_length=256).activations
                if a.component == "text_encoder_2").fused.n == 256
    # tiled: the decode's own fit (all decoded tiles are held until blended), in the whole latent's positions
    whole = memory("sdxl-base", height=2048, width=2048)
    tiled = memory("sdxl-base", height=2048, width=2048, vae_tiling=True)
    dec = {e: next(a for a in m.activations if a.call == "decode") for e, m in (("whole", whole), ("tiled", tiled))}
    assert dec["tiled"].fused.n == dec["whole"].fused.n == 256 * 256
    assert dec["tiled"].fused.elements < dec["whole"].fused.elements
    assert not dec["tiled"].fused.extrapolated


def test_dtype_of_one_component():
    mixed = memory("flux-dev", dtype_of={"text_encoder_2": "fp32"})
    t5 = next(c for c in mixed.components if c.component == "text_encoder_2")
    assert t5.dtype == "fp32" and t5.param_bytes == 4 * t5.params
    assert next(c for c in mixed.components if c.component == "transformer").dtype == "bf16"


def test_quantized_memory_counts_each_component_in_its_format():
    q = memory("flux-dev", dtype="nf4", dtype_of={"text_encoder": "int8"})
    by = {c.component: c for c in q.components}
    assert by["transformer"].dtype == "bnb-nf4" and by["text_encoder"].dtype == "bnb-int8"  # the canonical names
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    assert by["transformer"].bytes == component_weights(cfg, component="transformer", dtype="nf4").bytes
    assert q.weights_bytes < memory("flux-dev").weights_bytes
    assert all(a.bytes_per_element == 2 for a in q.activations)  # computed in bf16


@pytest.mark.parametrize("kwargs, match", [
    (dict(dtype="int4"), "bnb-int8/nf4/fp4"),
    (dict(dtype_of={"unet": "fp16"}), "not components"),
    (dict(offload="sequential", dtype="nf4"), "--offload sequential with nf4"),
    (dict(offload="disk"), "none, model, group-block, group-leaf, sequential"),
    (dict(gpu="nope-9000"), "unknown GPU"),
    (dict(attention="flash"), "fused, math"),
    (dict(batch_size=0), "batch_size must be a positive integer"),  # estimate's keyword, as the API is called
    (dict(batch_size=10**8), "batch_size 100000000 is beyond"),
])
def test_bad_options(kwargs, match):
    with pytest.raises(FlopcalcError, match=match):
        memory("flux-dev", **kwargs)


def test_cli(capsys):
    assert main(["memory", "flux-dev", "--gpu", "h100-sxm", "--offload", "model", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["resident"]["bytes"] == memory("flux-dev", offload="model").resident_bytes
    assert out["gpu"]["fits"] is True
    assert main(["memory", "flux-dev", "--dtype-of", "text_encoder_2"]) == 2
    assert "COMPONENT=DTYPE" in capsys.readouterr().err
    assert main(["memory", "sd1.5", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("total,")


def test_html_sections():
    from flopcalc.gpu_memory.html import section as memory_section
    from flopcalc.training.html import section as training_section

    assert "Memory: weights" in memory_section("flux-dev", height=512, width=512)
    assert "Activation peaks" in memory_section("flux-dev", height=512, width=512)
    assert "Training: FLOPs per sample" in training_section("flux-dev", height=512, width=512)
    assert "not validated" in training_section("sana-600m-512")


def test_a_component_loaded_but_not_run_is_resident_only_without_offload():
    """HunyuanImage 2.1 loads its byT5 glyph encoder, which runs only on a prompt with quoted text (none by
    default): pipe.to('cuda') holds it, enable_model_cpu_offload() never moves it."""
    none = memory("hunyuanimage-2.1")
    byt5 = next(c for c in none.components if c.component == "text_encoder_2")
    assert not byt5.runs and byt5.params > 0
    assert none.weights_bytes == sum(c.bytes for c in none.components)
    assert "text_encoder_2" in none.resident_components
    assert any(n.startswith("text_encoder_2 (T5EncoderModel): loaded by from_pretrained") for n in none.notes)
    model = memory("hunyuanimage-2.1", offload="model")
    assert model.resident_bytes == max(c.bytes for c in model.components if c.runs)
    assert byt5.component not in model.resident_components
    assert memory("hunyuanimage-2.1", dtype_of={"text_encoder_2": "fp32"}).weights_bytes > none.weights_bytes


def test_a_listed_component_without_its_config_makes_every_total_a_lower_bound(capsys):
    """HiDream-I1 lists its two CLIPs in model_index.json, but no config.json of theirs is known: from_pretrained
    would load them, so the weights, the peak and the fit are said to be lower bounds, in every format."""
    est = memory("hidream-i1-full", gpu="h100-sxm")
    assert est.uncounted == ("text_encoder", "text_encoder_2")
    assert not {"text_encoder", "text_encoder_2"} & {c.component for c in est.components}
    assert sum("config.json is not there" in n for n in est.notes) == 2
    assert est.to_dict()["uncounted_components"] == ["text_encoder", "text_encoder_2"]
    assert main(["memory", "hidream-i1-full", "--gpu", "h100-sxm"]) == 0
    text = capsys.readouterr().out
    assert "weights resident: at least " in text
    assert "peak of live tensors (peak_allocated_bytes), fused attention: at least " in text
    assert "fits without text_encoder, text_encoder_2" in text
    assert memory("flux-dev").uncounted == ()
    from flopcalc.gpu_memory.html import section

    assert "Peak without offload: at least " in section("hidream-i1-full")


def test_each_forward_holds_the_samples_the_pipeline_batches():
    """SD1.5 runs the UNet's two guidance passes in one forward of two samples (pipeline_stable_diffusion.py
    ``torch.cat([latents] * 2)``): its activation peak is counted at 2 samples; Wan runs one forward per pass
    (pipeline_wan.py: ``self.transformer`` twice per step), at 1; the VAE decodes every image of the batch at once,
    the text encoders see the prompts."""
    sd = memory("sd1.5", attention="math")
    batch = {a.component: a.batch for a in sd.activations}
    assert batch["unet"] == 2 and batch["vae"] == 1 and batch["text_encoder"] == 1
    assert {a.component: a.batch for a in memory("wan2.1").activations}["transformer"] == 1
    four = memory("sd1.5", batch_size=2, num_images_per_prompt=2)
    batch = {a.component: a.batch for a in four.activations}
    assert batch == {"text_encoder": 2, "unet": 8, "vae": 4}
    assert memory("flux-dev").settings["guidance_passes"] == 1  # guidance embedded


def test_pipeline_options_decide_what_runs(capsys):
    """The families' own options, as estimate takes them: HunyuanImage's byT5 runs on a prompt with quoted
    text (--glyph-prompts), so model offload moves it; FLUX.2's reference images feed the transformer tokens
    whose activations were not measured, which is said; a pipeline without the option refuses it."""
    plain = memory("hunyuanimage-2.1")
    glyph = memory("hunyuanimage-2.1", glyph_prompts=1)
    assert not next(c for c in plain.components if c.component == "text_encoder_2").runs
    assert next(c for c in glyph.components if c.component == "text_encoder_2").runs
    refs = memory("flux2-klein-9b", reference_images=2)
    assert "transformer" not in {a.component for a in refs.activations}
    assert "transformer.forward: no activation estimate (this config was not measured)" in refs.notes
    with pytest.raises(FlopcalcError, match="--reference-images does not apply to StableDiffusionPipeline"):
        memory("sd1.5", reference_images=1)
    assert main(["memory", "hunyuanimage-2.1", "--glyph-prompts", "1", "--offload", "model", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert next(c for c in out["components"] if c["component"] == "text_encoder_2")["runs"] is True
