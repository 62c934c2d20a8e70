"""``QwenImageLayeredPipeline`` (diffusers ``pipelines/qwenimage/pipeline_qwenimage_layered.py``): an image split
into ``layers`` RGBA layers, generated together as a stack of latents.

``__call__`` (:539-900), for an input image of ``W × H`` (flopcalc assumes the asked size; square by default):

* ``resolution`` 640 (the default; 1024 is the other choice, not modelled): ``calculate_dimensions(640², W/H)`` is
  the size of everything: the input image, its latent, each layer (``height = calculated_height``, :690-697);
* the prompt is encoded as in ``QwenImagePipeline`` (the 34-token template dropped, ``max_sequence_length`` 512;
  without a prompt the pipeline first captions the image with Qwen2.5-VL's ``generate``, not counted here);
* ``prepare_latents`` (:454-515): ``layers + 1`` packed latents (the combined image first) and the input image's
  latent (VAE-encoded once per prompt, 4 channels: RGBA); every transformer pass runs on all of them
  (``torch.cat([latents, image_latents], dim=1)``, ``img_shapes`` lists ``layers + 1`` outputs and the image),
  with ``additional_t_cond`` (``is_rgb``: the ``addition_t_embedding`` lookup); 50 steps, true CFG 4.0 with a
  negative prompt;
* the VAE decodes the ``layers`` generated layers (the first, combined latent is dropped, :880-884): ``layers``
  decoder runs per image.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    pipeline_options,
    register_pipeline,
)
from flopcalc.engine.pipelines.qwen_image import qwen_image_pipeline, qwen_vae_scale_factor
from flopcalc.engine.pipelines.qwen_image_edit import NO_LAW, calculate_dimensions
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, pipeline_option

pipeline_option("layers", kind=COUNT, bound=(64, "layers"),
                help="layered pipelines: layers to generate (default: the pipeline's)",
                refusal="it generates one image, not a stack of layers")

#: ``QwenImageLayeredPipeline.__call__`` defaults.
DEFAULT_LAYERS = 4
RESOLUTION = 640


@register_pipeline("QwenImageLayeredPipeline", guidance="separate", options=(*(o for o in pipeline_options("QwenImagePipeline") if o != "vae_tiling"), "layers"))
def qwen_image_layered_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageLayeredPipeline.__call__`` (module doc)."""
    if s.strength is not None and s.strength < 1:
        raise OptionError("--strength does not apply to QwenImageLayeredPipeline: its __call__ takes no strength "
                          "(every step runs), only 1 means that")
    if s.symbolic:
        raise FlopcalcError(NO_LAW)
    f = qwen_vae_scale_factor(components)
    multiple = 2 * f
    layers = s.layers or DEFAULT_LAYERS
    in_h, in_w = s.height or RESOLUTION, s.width or RESOLUTION
    calc_w, calc_h = calculate_dimensions(RESOLUTION * RESOLUTION, in_w / in_h)
    out_h, out_w = calc_h // multiple * multiple, calc_w // multiple * multiple
    if out_h == 0 or out_w == 0:
        raise FlopcalcError(f"QwenImageLayeredPipeline: {in_h}×{in_w} gives no {multiple}-pixel latent patch")
    base = qwen_image_pipeline(components, replace(s.with_options(layers=None), height=out_h, width=out_w, strength=None),
                               index=None)
    reference = (calc_h // multiple) * (calc_w // multiple)
    runs = []
    for r in base.runs:
        if r.role == "denoiser":
            r = replace(r, shape=replace(r.shape, latent_frames=layers + 1, reference_tokens=reference),
                        why=r.why + f" on {layers + 1} latents + the input image's")
        elif r.role == "vae_decoder":
            r = replace(r, runs=r.runs * layers, why=f"{r.runs} image(s) × {layers} layers")
        runs.append(r)
    if "vae" in components:
        runs.insert(next(i for i, r in enumerate(runs) if r.role == "vae_decoder"),
                    ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=calc_h, width=calc_w), s.batch_size,
                                 f"{s.batch_size} input image(s) at {calc_h}×{calc_w}"))
    notes = [*base.notes,
             f"input image assumed {in_h}×{in_w}: everything at calculate_dimensions(640², W/H) = {calc_h}×{calc_w} "
             f"(resolution 640, the default); {layers} layers",
             "a prompt is given (without one the pipeline first captions the image with Qwen2.5-VL's generate: not "
             "counted)"]
    settings = replace(base.settings, height=out_h, width=out_w, strength=s.strength).with_options(layers=layers)
    return Plan("QwenImageLayeredPipeline", settings, base.passes, tuple(runs), tuple(notes))
