"""FLUX.2 pipelines (diffusers ``pipelines/flux2``): ``Flux2Pipeline`` (FLUX.2-dev) and
``Flux2KleinPipeline`` (FLUX.2 [klein]), text-to-image and reference-image conditioned.

Both encode the prompt once, padded (``padding="max_length"``) to ``max_sequence_length`` (512)
tokens, run the whole text encoder on it and stack three intermediate layers' hidden states as the
transformer's text tokens (so the transformer sees all ``max_sequence_length`` of them); both
patchify the ``in_channels/4 × H/8 × W/8`` latent 2×2 (sides floor to multiples of
``vae_scale_factor · 2`` = 16 with a warning; flopcalc asks for a size that divides) and decode it
once.

Reference images (``image=``, one or a list; ``--reference-images R``), as ``__call__`` handles them
(pipeline_flux2.py:883-905, pipeline_flux2_klein.py:762-784; line numbers of diffusers 0.42.1):

* each must be at least 64 px a side with an aspect ratio of at most 8 (``check_image_input``,
  flux2/image_processor.py:68-105); one above 1024² pixels is resized to about 1024² pixels
  (``_resize_to_target_area``, image_processor.py:108-115: ``scale = sqrt(1024² / (w·h))``, each side
  ``int(side · scale)``), then each side floored to ``vae_scale_factor · 2`` = 16 and cropped to it.
  flopcalc assumes every reference has the generated size (what ``__call__`` also generates when no
  height and width are given: the first reference's size) and applies these rules to it;
* ``prepare_image_latents`` (pipeline_flux2.py:654-687) VAE-encodes each reference on its own, at
  batch 1 (``_encode_vae_image``: ``vae.encode``, ``sample_mode="argmax"``, 2×2 patchify and the
  ``bn`` running-statistics normalisation, elementwise), whatever the batch: the packed latents are
  concatenated along the sequence and repeated over the batch (``repeat(batch_size, 1, 1)``);
* each reference's ids carry its own time offset (``_prepare_image_ids``, :407-454: ``T = 10 + 10·i``);
  every transformer forward, the guided and (klein's classifier-free guidance) the negative one
  alike, runs on ``torch.cat([latents, image_latents], dim=1)`` (:971, klein :847 and :866-876) and
  keeps the first ``latents.size(1)`` outputs; the decode is unchanged.

Caption upsampling (``caption_upsample_temperature``: a ``generate`` call of the text encoder, which
sees the references) is not modelled.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import stable_cascade  # noqa: F401  (declares the reference_images option)
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.pipelines.flux_kontext import _with_reference_tokens
from flopcalc.engine.registry import RunShape

#: ``Flux2Pipeline.default_sample_size`` (and Klein's): 128 latent pixels → 1024² with the 8× VAE.
DEFAULT_SAMPLE_SIZE = 128
#: ``__call__``'s ``max_sequence_length`` default (both pipelines).
MAX_SEQUENCE_LENGTH = 512
#: ``Flux2Pipeline.__call__``: ``num_inference_steps=50``, ``guidance_scale=4.0`` (embedded).
DEV_STEPS, DEV_GUIDANCE = 50, 4.0
#: ``Flux2KleinPipeline.__call__``: ``num_inference_steps=50``, ``guidance_scale=4.0`` (the base models').
KLEIN_STEPS, KLEIN_GUIDANCE = 50, 4.0
#: FLUX.2 [klein] 4B / 9B (``is_distilled: true``) are step-distilled to 4 steps (Black Forest Labs'
#: release notes and the flux2 repository's model table); the pipeline ignores guidance for them.
KLEIN_DISTILLED_STEPS = 4
#: The options both pipelines apply beyond the common ones.
OPTIONS = ("max_sequence_length", "reference_images")
#: ``__call__`` resizes a reference image above this many pixels to about this many (pipeline_flux2.py:895-896).
REFERENCE_MAX_AREA = 1024 * 1024
#: ``check_image_input`` defaults (flux2/image_processor.py:68-70): a reference's smallest side and largest aspect.
REFERENCE_MIN_SIDE, REFERENCE_MAX_ASPECT = 64, 8
NO_TRUE_CFG = {"true_cfg_scale": "its __call__ takes no true_cfg_scale (FLUX.2-dev's guidance is embedded; "
                                 "klein runs classifier-free guidance through guidance_scale)"}
IMAGE_TO_IMAGE_NOTE = ("{name} has no image-to-image mode (a given image conditions as reference tokens: "
                       "--reference-images): strength is estimated as the image-to-image pipelines run it (the "
                       "input image VAE-encoded once, the last `strength` of the schedule)")


def _size(components: Mapping[str, Any], s: Settings) -> tuple[int, Settings]:
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * f, width=s.width or DEFAULT_SAMPLE_SIZE * f,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    check_divisible(s.height, s.width, f * 2, "FLUX.2 height and width (patchified 2×2 latents)")
    return f, s


def reference_size(height: int, width: int, multiple_of: int) -> tuple[int, int]:
    """A reference image of ``height × width`` pixels as ``__call__`` encodes it (pipeline_flux2.py:893-902):
    above :data:`REFERENCE_MAX_AREA` pixels resized by ``_resize_to_target_area`` (image_processor.py:108-115:
    ``scale = math.sqrt(target_area / (w·h))``, ``int(w·scale)``, ``int(h·scale)``), then each side floored to
    ``multiple_of`` (``vae_scale_factor · 2``). Refused where ``check_image_input`` refuses the image."""
    if min(height, width) < REFERENCE_MIN_SIDE or max(height / width, width / height) > REFERENCE_MAX_ASPECT:
        raise ResolutionError(f"a FLUX.2 reference image of {height}×{width} (the generated size, as flopcalc assumes "
                              f"it) is refused by the pipeline's check_image_input: each side at least "
                              f"{REFERENCE_MIN_SIDE} px, aspect ratio at most {REFERENCE_MAX_ASPECT}:1")
    if width * height > REFERENCE_MAX_AREA:
        scale = math.sqrt(REFERENCE_MAX_AREA / (width * height))
        width, height = int(width * scale), int(height * scale)
    return height // multiple_of * multiple_of, width // multiple_of * multiple_of


def _with_references(plan: Plan, components: Mapping[str, Any], s: Settings, f: int) -> Plan:
    """``plan`` conditioned on ``s.reference_images`` references of the generated size: each VAE-encoded
    once at batch 1 (``prepare_image_latents``, before the denoising loop), and their packed latents'
    tokens appended to every transformer forward (every step and guidance pass)."""
    refs = s.reference_images
    if not refs:
        return plan
    if s.vae_tiling:
        raise OptionError("--vae-tiling with reference images: the tiled encode of the FLUX.2 VAE is not planned by "
                          "flopcalc (only its tiled decode); leave --vae-tiling off")
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {plan.pipeline} with reference images: it has no "
                          "image-to-image mode (--strength alone estimates one); a given image is a reference")
    if s.symbolic and s.height * s.width > REFERENCE_MAX_AREA:
        raise OptionError(f"no closed-form law for FLUX.2 references above {REFERENCE_MAX_AREA} pixels: "
                          "__call__ resizes them by a square root and int() (_resize_to_target_area); use the "
                          "numeric estimate, or a size of at most 1024² pixels")
    ref_h, ref_w = reference_size(s.height, s.width, f * 2)
    tokens = refs * ((ref_h // (f * 2)) * (ref_w // (f * 2)))
    encodes = [ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                            RunShape(height=ref_h, width=ref_w), refs,
                            f"{refs} reference image(s) at {ref_h}×{ref_w}, once each at batch 1")
               ] if "vae" in components else []
    plan = _with_reference_tokens(plan, tokens)
    at = next((i for i, r in enumerate(plan.runs) if r.role != "text_encoder"), len(plan.runs))
    resized = (ref_h, ref_w) != (s.height, s.width)
    notes = [f"{refs} reference image(s), assumed {s.height}×{s.width} (the generated size), encoded at "
             f"{ref_h}×{ref_w}" + (f" (resized to about {REFERENCE_MAX_AREA} pixels)" if resized else "")
             + f": {tokens} reference tokens in every transformer forward"
             + ("" if resized else f" (a symbolic law in H, W holds up to H·W = {REFERENCE_MAX_AREA}: larger "
                                   "references are resized)")]
    return replace(plan, runs=plan.runs[:at] + tuple(encodes) + plan.runs[at:], notes=plan.notes + tuple(notes))


@register_pipeline("Flux2Pipeline", denoisers=("Flux2Transformer2DModel",), options=(*OPTIONS, "vae_tiling"),
                   refuses=NO_TRUE_CFG)
def flux2_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                   index: Mapping[str, Any] | None = None) -> Plan:
    """``Flux2Pipeline.__call__`` (diffusers ``pipelines/flux2/pipeline_flux2.py``): 1024² default
    (``default_sample_size`` 128 × ``vae_scale_factor``), 50 steps, ``guidance_scale`` 4.0 passed as
    the transformer's guidance embedding: FLUX.2-dev is guidance-distilled, so every step is one
    transformer forward and no negative prompt is ever encoded. The Mistral-3 text encoder
    (``Mistral3ForConditionalGeneration``) runs on the prompt in its chat template with the system
    message, padded to ``max_sequence_length`` (512) tokens; ``hidden_states[10, 20, 30]`` are stacked
    (3 × 5120 = ``joint_attention_dim``), but all layers and ``lm_head`` run. ``--reference-images R``: see the
    module docstring (:func:`_with_references`)."""
    f, s = _size(components, s)
    s = replace(s, steps=s.steps or DEV_STEPS,
                guidance_scale=DEV_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    passes = cfg_passes(s, False)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.negative_prompt:
        notes.append("Flux2Pipeline takes no negative prompt (guidance is embedded): ignored")
    if s.strength is not None:
        notes.append(IMAGE_TO_IMAGE_NOTE.format(name="Flux2Pipeline"))
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size, f"{s.batch_size} prompt(s)")
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return _with_references(Plan("Flux2Pipeline", s, passes, tuple(runs), tuple(notes)), components, s, f)


def _is_distilled(index: Mapping[str, Any] | None) -> bool:
    """``Flux2KleinPipeline``'s ``is_distilled`` (a model_index.json entry; False when absent)."""
    value = (index or {}).get("is_distilled", False)
    if not isinstance(value, bool):
        raise ConfigError(f"model_index.json: 'is_distilled' must be true or false, got {value!r}")
    return value


@register_pipeline("Flux2KleinPipeline", guidance="separate", options=(*OPTIONS, "vae_tiling"), refuses=NO_TRUE_CFG)
def flux2_klein_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``Flux2KleinPipeline.__call__`` (``pipelines/flux2/pipeline_flux2_klein.py``): 1024² default, the
    Qwen3 text encoder on the prompt in its chat template, padded to ``max_sequence_length`` (512)
    tokens (``hidden_states[9, 18, 27]`` stacked; every layer runs, and ``lm_head`` too: the
    ``Qwen3ForCausalLM`` model_index.json loads). The transformer gets no guidance embedding
    (``guidance=None``). Classifier-free guidance (``guidance_scale > 1`` and not ``is_distilled``) encodes
    the negative prompt "" too and runs a second, separate transformer forward per step. Defaults: for a
    step-distilled checkpoint (model_index.json ``is_distilled: true``: FLUX.2 [klein] 4B / 9B) 4 steps,
    guidance ignored (one pass); for the base models ``__call__``'s 50 steps and ``guidance_scale`` 4.0
    (two passes). ``--reference-images R`` as for ``Flux2Pipeline``; the negative forward runs on the same
    reference tokens (pipeline_flux2_klein.py:866-876)."""
    distilled = _is_distilled(index)
    transformer = components.get("transformer")
    if transformer is not None and transformer["guidance_embeds"]:
        raise ConfigError("transformer/config.json: guidance_embeds is true, but Flux2KleinPipeline passes no "
                          "guidance, so its guidance_embedder would not run; flopcalc counts it whenever the "
                          "model has one: use Flux2Pipeline for a guidance-embedding FLUX.2 transformer")
    f, s = _size(components, s)
    s = replace(s, steps=s.steps or (KLEIN_DISTILLED_STEPS if distilled else KLEIN_STEPS),
                guidance_scale=KLEIN_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    cfg = s.guidance_scale > 1 and not distilled
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if distilled:
        notes.append(f"step-distilled checkpoint (is_distilled): {KLEIN_DISTILLED_STEPS} steps by default "
                     "(Black Forest Labs' FLUX.2 [klein] release), guidance_scale ignored (one pass), as in "
                     "Flux2KleinPipeline")
    if s.negative_prompt:
        notes.append("Flux2KleinPipeline always uses \"\" as its negative prompt (under classifier-free guidance): "
                     "a negative prompt changes nothing counted")
    if s.strength is not None:
        notes.append(IMAGE_TO_IMAGE_NOTE.format(name="Flux2KleinPipeline"))
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative \"\"" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return _with_references(Plan("Flux2KleinPipeline", s, passes, tuple(runs), tuple(notes)), components, s, f)


#: ``Flux2KleinInpaintPipeline.__call__`` defaults (pipeline_flux2_klein_inpaint.py): ``strength`` 0.8,
#: ``guidance_scale`` 8.0 (steps as ``Flux2KleinPipeline``: 50, 4 for a step-distilled checkpoint).
KLEIN_INPAINT_STRENGTH, KLEIN_INPAINT_GUIDANCE = 0.8, 8.0


@register_pipeline("Flux2KleinInpaintPipeline", options=OPTIONS, refuses=NO_TRUE_CFG, guidance="separate")
def flux2_klein_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``Flux2KleinInpaintPipeline.__call__`` (``pipelines/flux2/pipeline_flux2_klein_inpaint.py``): Klein's plan
    (the Qwen3 encoder on ``max_sequence_length`` 512 tokens, the negative prompt "" and a second forward per step
    under classifier-free guidance: ``guidance_scale > 1`` and not ``is_distilled``; 50 steps, 4 for a
    step-distilled checkpoint) with ``strength`` 0.8 and ``guidance_scale`` 8.0, and an image to inpaint
    (flopcalc takes it at the asked ``height × width``, 1024² by default):

    * the output takes the image's size: above 1024² pixels it is resized to about 1024² (as a reference), each side
      floored to ``vae_scale_factor · 2`` (``__call__``: ``width = image_width``, the asked size is not used);
    * the image is VAE-encoded once per input image (``prepare_latents`` → ``_encode_vae_image``), and only the last
      ``strength`` of the schedule runs (``get_timesteps``); the mask blends outside the transformer (no encode);
    * the image's own packed latent is the first reference (``ref_images = [image_latents_encoded]``, already
      encoded): its N tokens follow the generated ones in every transformer forward, the negative one too;
    * ``image_reference`` (``--reference-images R``; flopcalc assumes each at the generated size): R more images,
      encoded at batch 1 each (``prepare_image_latents``), their tokens appended as well."""
    f = vae_scale_factor(components)
    height, width = s.height or DEFAULT_SAMPLE_SIZE * f, s.width or DEFAULT_SAMPLE_SIZE * f
    check_divisible(height, width, f * 2, "FLUX.2 [klein] inpainting image height and width (patchified 2×2 latents)")
    if s.symbolic and height * width > REFERENCE_MAX_AREA:
        raise OptionError(f"no closed-form law for a FLUX.2 [klein] inpainting image above {REFERENCE_MAX_AREA} "
                          "pixels: __call__ resizes it by a square root and int(); use the numeric estimate, or a size "
                          "of at most 1024² pixels")
    out_h, out_w = reference_size(height, width, f * 2)
    base = flux2_klein_pipeline(components, replace(
        s, height=out_h, width=out_w, strength=KLEIN_INPAINT_STRENGTH if s.strength is None else s.strength,
        guidance_scale=KLEIN_INPAINT_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
    ).with_options(reference_images=None), index=index)
    st = base.settings
    refs = s.reference_images or 0
    tokens = (out_h // (f * 2)) * (out_w // (f * 2)) * (1 + refs)
    plan = _with_reference_tokens(base, tokens)
    inputs = st.batch_size + refs
    encodes = [ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                            RunShape(height=out_h, width=out_w), inputs,
                            f"{st.batch_size} input image(s)" + (f" + {refs} reference image(s)" if refs else "")
                            + f" at {out_h}×{out_w}, each encoded at batch 1")] if "vae" in components else []
    kept = [r for r in plan.runs if r.role != "vae_encoder"]
    at = next((i for i, r in enumerate(kept) if r.role == "denoiser"), len(kept))
    notes = [n for n in plan.notes if "no image-to-image mode" not in n]
    if (out_h, out_w) != (height, width):
        notes.append(f"the {height}×{width} image is resized to about {REFERENCE_MAX_AREA} pixels and floored to "
                     f"{out_h}×{out_w}, the generated size (as __call__ does)")
    notes.append(f"the image's own latent is the first reference: {tokens} reference tokens in every transformer "
                 f"forward ({1 + refs} image(s) of {out_h}×{out_w})")
    return replace(plan, pipeline="Flux2KleinInpaintPipeline",
                   settings=st.with_options(reference_images=s.reference_images),
                   runs=tuple(kept[:at] + encodes + kept[at:]), notes=tuple(notes))


#: ``Flux2KleinKVPipeline.__call__``: ``num_inference_steps=4`` (a step-distilled [klein]); no guidance.
KLEIN_KV_STEPS = 4


@register_pipeline("Flux2KleinKVPipeline", options=OPTIONS, refuses=NO_TRUE_CFG)
def flux2_klein_kv_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``Flux2KleinKVPipeline.__call__`` (``pipelines/flux2/pipeline_flux2_klein_kv.py``): FLUX.2 [klein] with the
    references' attention keys and values cached. 1024² default, 4 steps, no guidance at all (no
    ``guidance_scale``, no negative prompt: one pass), the Qwen3 encoder once per prompt on ``max_sequence_length``
    (512) tokens, as ``Flux2KleinPipeline``. ``__init__`` installs the KV attention processors
    (``_set_kv_attn_processors``). With reference images (``--reference-images R``, each as ``Flux2KleinPipeline``
    takes them: at most 1024² pixels, floored to 16; flopcalc assumes the generated size), encoded once each at
    batch 1 (``prepare_image_latents``):

    * step 0 runs the references' tokens first, then the latent (``kv_cache_mode="extract"``): the references attend
      only to themselves and their keys and values are cached (``RunShape.kv_cache`` ``"extract"``);
    * every later step runs the latent alone, its attention reading the cached keys and values
      (``kv_cache_mode="cached"``).

    Without references every step is a plain forward on the latent. ``strength`` does not apply."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to Flux2KleinKVPipeline: its __call__ has no image-to-image mode "
                          "(a given image conditions as a cached reference: --reference-images)")
    if s.guidance_scale is not None:
        raise OptionError("--guidance-scale does not apply to Flux2KleinKVPipeline: its __call__ takes no "
                          "guidance_scale (no classifier-free guidance, no guidance embedding)")
    transformer = components.get("transformer")
    if transformer is not None and transformer["guidance_embeds"]:
        raise ConfigError("transformer/config.json: guidance_embeds is true, but Flux2KleinKVPipeline passes no "
                          "guidance, so its guidance_embedder would not run; flopcalc counts it whenever the "
                          "model has one")
    f, s = _size(components, s)
    s = replace(s, steps=s.steps or KLEIN_KV_STEPS)
    passes = cfg_passes(s, False)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.negative_prompt:
        notes.append("Flux2KleinKVPipeline takes no negative prompt (no guidance): ignored")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size, f"{s.batch_size} prompt(s)")
    refs = s.reference_images
    denoiser = denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    if refs and denoiser:
        if s.symbolic and s.height * s.width > REFERENCE_MAX_AREA:
            raise OptionError(f"no closed-form law for FLUX.2 references above {REFERENCE_MAX_AREA} pixels: "
                              "__call__ resizes them by a square root and int(); use the numeric estimate, or a size "
                              "of at most 1024² pixels")
        ref_h, ref_w = reference_size(s.height, s.width, f * 2)
        tokens = refs * ((ref_h // (f * 2)) * (ref_w // (f * 2)))
        (run,) = denoiser
        images = s.batch_size * s.num_images_per_prompt
        extract = replace(run, shape=replace(run.shape, reference_tokens=tokens, kv_cache="extract"), runs=images,
                          why=f"step 0 × {images} image(s): the {tokens} reference tokens run and their keys and "
                              "values are cached")
        denoiser = [extract]
        if s.steps > 1:
            denoiser.append(replace(run, shape=replace(run.shape, reference_tokens=tokens, kv_cache="cached"),
                                    runs=(s.steps - 1) * images,
                                    why=f"{s.steps - 1} later steps × {images} image(s): the latent alone, "
                                        f"attending to the {tokens} cached reference keys and values too"))
        if "vae" in components:
            runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                     RunShape(height=ref_h, width=ref_w), refs,
                                     f"{refs} reference image(s) at {ref_h}×{ref_w}, once each at batch 1"))
        notes.append(f"{refs} reference image(s), assumed {s.height}×{s.width} (the generated size), encoded at "
                     f"{ref_h}×{ref_w}: {tokens} reference tokens run at step 0 and are read from the key/value cache "
                     "at every later step")
    runs += denoiser
    runs += image_runs(components, s, f)
    return Plan("Flux2KleinKVPipeline", s, passes, tuple(runs), tuple(notes))
