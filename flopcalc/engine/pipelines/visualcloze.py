"""VisualCloze (diffusers ``pipelines/visualcloze``): ``VisualClozeGenerationPipeline`` (in-context generation on an
image grid with a FLUX.1 Fill transformer) and ``VisualClozePipeline`` (that, then ``FluxFillPipeline`` upsampling of
each generated image).

The grid (``image=``): ``grid_rows`` rows (the in-context examples and the query, last) of ``grid_columns`` images,
the query row's target(s) ``None``. ``VisualClozeProcessor.preprocess_image`` (visualcloze_utils.py:41-124) resizes
every image of a row to the area of ``resolution²`` (the pipeline's ``resolution``, 384 by default, a
``model_index.json`` entry when saved) at the row's first image's aspect ratio (``new_h = int((r² / aspect) ** 0.5)``,
``new_w = int(new_h · aspect)``, each floored to ``vae_scale_factor · 2`` = 16). flopcalc takes every input image at
``height × width`` (square by default) and one target image: every cell is then ``h × w`` after that resize.
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
    denoising_steps,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.flux import flux_pipeline
from flopcalc.engine.pipelines.flux_conditioned import flux_fill_pipeline
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, SCALE, pipeline_option

pipeline_option("grid_rows", kind=COUNT, bound=(64, "rows"),
                help="VisualCloze: rows of the image grid, the in-context examples and the query (default 2)",
                refusal="it takes no image grid (VisualCloze's)", examples=("3",))
pipeline_option("grid_columns", kind=COUNT, bound=(64, "columns"),
                help="VisualCloze: images per grid row, the target among them (default 2)",
                refusal="it takes no image grid (VisualCloze's)", examples=("3",))
pipeline_option("upsampling_strength", kind=SCALE,
                help="VisualClozePipeline: strength of the FLUX Fill upsampling of each generated image (default 1.0; "
                     "0 skips it)",
                refusal="it has no upsampling stage (VisualClozePipeline's)", examples=("0.5",))
pipeline_option("upsampling_height", kind=COUNT, bound=(16384, "pixels"),
                help="VisualClozePipeline: height of the upsampled image (default FluxFillPipeline's 1024)",
                refusal="it has no upsampling stage (VisualClozePipeline's)", examples=("768",))
pipeline_option("upsampling_width", kind=COUNT, bound=(16384, "pixels"),
                help="VisualClozePipeline: width of the upsampled image (default FluxFillPipeline's 1024)",
                refusal="it has no upsampling stage (VisualClozePipeline's)", examples=("768",))

#: ``VisualClozeGenerationPipeline.__init__``'s ``resolution`` default (pipeline_visualcloze_generation.py:165).
RESOLUTION = 384
#: ``__call__`` defaults (generation, lines 661-680; combined, lines 254-276): 50 steps, guidance 30 embedded,
#: ``max_sequence_length`` 512, ``upsampling_strength`` 1.0.
STEPS, GUIDANCE, UPSAMPLING_STRENGTH = 50, 30.0, 1.0
#: The example grid of diffusers' docstrings: one in-context example row and the query row, two images each.
GRID_ROWS, GRID_COLUMNS = 2, 2
GENERATION_OPTIONS = ("max_sequence_length", "grid_rows", "grid_columns")
NO_TRUE_CFG = {"true_cfg_scale": "its __call__ takes no true_cfg_scale (the guidance is embedded; no negative "
                                 "prompt)"}


def cell_size(height: int, width: int, resolution: int, multiple: int) -> tuple[int, int]:
    """An image of ``height × width`` as ``preprocess_image`` resizes it (visualcloze_utils.py:74-82)."""
    aspect = width / height
    new_h = int((resolution * resolution / aspect) ** 0.5)
    new_w = int(new_h * aspect)
    return max(new_h // multiple, 1) * multiple, max(new_w // multiple, 1) * multiple


def _resolution(index: Mapping[str, Any] | None) -> int:
    value = (index or {}).get("resolution", RESOLUTION)
    if isinstance(value, bool) or not isinstance(value, int) or not 16 <= value <= 4096:
        raise FlopcalcError(f"model_index.json: 'resolution' must be an integer from 16 to 4096, got {value!r}")
    return value


@register_pipeline("VisualClozeGenerationPipeline", options=GENERATION_OPTIONS, refuses=NO_TRUE_CFG)
def visualcloze_generation_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``VisualClozeGenerationPipeline.__call__`` (``pipeline_visualcloze_generation.py:661-935``), see the module
    docstring for the grid (``height × width``: the input images' size):

    * the prompt (the layout sentence, the task prompt and the content prompt joined) through CLIP (77 tokens,
      pooled) and T5 (``max_sequence_length``, 512) once per prompt; the guidance (30) is embedded: one pass, no
      negative prompt;
    * each row, its images side by side (``h × C·w``), VAE-encoded once per prompt (``_prepare_latents``); the
      masked-image latent is that latent (the mask zeroes nothing: the target cells are black images);
    * the FLUX Fill transformer (``in_channels`` 384: latent, masked latent, mask) on all ``R · C · (h/16)(w/16)``
      tokens of the grid at every step (``strength`` 1.0: ``get_timesteps`` keeps all 50);
    * the VAE decodes the query row (``h × C·w``, the last of the unpacked rows) once per image, and the target cell
      is cropped from it."""
    if s.strength is not None and s.strength < 1:
        raise OptionError("--strength does not apply to VisualClozeGenerationPipeline: its __call__ runs every step "
                          "(get_timesteps with strength 1.0); VisualClozePipeline's --upsampling-strength sets the "
                          "upsampling stage's")
    f = vae_scale_factor(components)
    resolution = _resolution(index)
    rows = s.grid_rows or GRID_ROWS
    columns = s.grid_columns or GRID_COLUMNS
    if rows < 2 and columns < 2:
        raise OptionError("a VisualCloze grid needs a condition and a target: at least 2 images (grid_rows × "
                          "grid_columns)")
    if s.symbolic:
        raise FlopcalcError("no closed-form law for VisualCloze in H and W: every input image is resized to the area "
                            f"of resolution² ({resolution}²) by a square root and int(), so the grid does not follow "
                            "the input size")
    image_h, image_w = s.height or resolution, s.width or resolution
    h, w = cell_size(image_h, image_w, resolution, 2 * f)
    grid = replace(s, height=rows * h, width=columns * w, steps=s.steps or STEPS, strength=None,
                   guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                   true_cfg_scale=None, negative_prompt=False, max_sequence_length=s.max_sequence_length or 512)
    base = flux_pipeline(components, grid, index=index)
    images = s.batch_size * s.num_images_per_prompt
    cls = component_class(components, "vae") or "?"
    runs = [r for r in base.runs if r.component != "vae"]
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    if "vae" in components:
        runs.insert(at, ComponentRun("vae", cls, "encode", "vae_encoder", RunShape(height=h, width=columns * w),
                                     rows * s.batch_size, f"{rows} grid row(s) of {columns} image(s) × {s.batch_size} "
                                                          "prompt(s)"))
        runs.append(ComponentRun("vae", cls, "decode", "vae_decoder",
                                 RunShape(latent_height=h // f, latent_width=columns * w // f), images,
                                 f"{images} image(s): the query row"))
    settings = replace(base.settings, height=h, width=w, negative_prompt=s.negative_prompt, true_cfg_scale=None,
                       strength=s.strength).with_options(
        grid_rows=rows, grid_columns=columns)
    notes = [n for n in base.notes if "true_cfg" not in n]
    notes.append(f"a {rows}×{columns} grid of {image_h}×{image_w} images, each resized to {h}×{w} (the area of "
                 f"{resolution}²): {rows * columns * (h // (2 * f)) * (w // (2 * f))} latent tokens, one target image")
    if s.negative_prompt:
        notes.append("VisualClozeGenerationPipeline takes no negative prompt (guidance is embedded): ignored")
    return Plan("VisualClozeGenerationPipeline", settings, base.passes, tuple(runs), tuple(notes))


@register_pipeline("VisualClozePipeline", options=GENERATION_OPTIONS + (
        "upsampling_strength", "upsampling_height", "upsampling_width"), refuses=NO_TRUE_CFG)
def visualcloze_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``VisualClozePipeline.__call__`` (``pipeline_visualcloze_combined.py:254-450``): the generation stage
    (:func:`visualcloze_generation_pipeline`), then, unless ``upsampling_strength`` is 0, ``FluxFillPipeline``
    (``VisualClozeUpsamplingPipeline``) on each generated image with a white mask and the content prompt, at
    ``upsampling_height × upsampling_width`` (FluxFill's 1024² default), the same steps and guidance, ``strength``
    ``upsampling_strength`` (1.0): the text encoders once per image, the VAE encoding the image and the masked image,
    the last ``strength`` of the steps, one decode per image."""
    strength = UPSAMPLING_STRENGTH if s.upsampling_strength is None else s.upsampling_strength
    if strength > 1:
        raise OptionError(f"upsampling_strength must be between 0 and 1, got {strength}")
    generation = visualcloze_generation_pipeline(
        components, s.with_options(upsampling_strength=None, upsampling_height=None, upsampling_width=None),
        index=index)
    settings = generation.settings.with_options(upsampling_strength=strength, upsampling_height=s.upsampling_height,
                                                upsampling_width=s.upsampling_width)
    if strength == 0:
        return replace(generation, pipeline="VisualClozePipeline", settings=settings,
                       notes=generation.notes + ("upsampling_strength 0: the generated images are returned as "
                                                 "they are",))
    st = generation.settings
    images = st.batch_size * st.num_images_per_prompt
    upsampling = flux_fill_pipeline(components, Settings(
        height=s.upsampling_height, width=s.upsampling_width, steps=st.steps, guidance_scale=st.guidance_scale,
        batch_size=images, max_sequence_length=st.max_sequence_length, strength=strength), index=index)
    runs = tuple(replace(r, why=f"upsampling: {r.why}") for r in upsampling.runs)
    notes = (f"upsampling: FluxFillPipeline on each of the {images} generated image(s) at "
             f"{upsampling.settings.height}×{upsampling.settings.width}, strength {strength:g} "
             f"({denoising_steps(st.steps, strength)} of {st.steps} steps)",)
    return Plan("VisualClozePipeline", settings, generation.passes, generation.runs + runs,
                generation.notes + tuple(n for n in upsampling.notes if n not in generation.notes) + notes)
