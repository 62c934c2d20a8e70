"""SANA-Sprint pipelines (diffusers ``pipelines/sana/pipeline_sana_sprint.py`` and
``pipeline_sana_sprint_img2img.py``): few-step sCM sampling of a guidance-distilled SANA transformer.

What one generation runs (``SanaSprintPipeline.__call__``, pipeline_sana_sprint.py:563-862):

* size: ``height = width = 1024``; with ``use_resolution_binning`` (default) snapped to the 1024px
  aspect-ratio bins, the only table it has (``transformer.config.sample_size == 32``, else "Invalid
  sample size", :686-691); multiples of 32 (``check_inputs``, :348); the latent is ``size / 32`` (the
  DC-AE's ``vae_scale_factor``, as in :mod:`flopcalc.engine.pipelines.sana`).
* steps: ``num_inference_steps`` 2. ``SCMScheduler.set_timesteps`` (scheduling_scm.py:130-187) builds
  ``num_inference_steps + 1`` timesteps, ``[max_timesteps, intermediate_timesteps, 0]`` = ``[1.5708, 1.3, 0]``
  at the defaults; the loop drops the last (``timesteps = timesteps[:-1]``, :778), so the transformer runs
  once per step: 2 forwards. With the default ``intermediate_timesteps=1.3`` any other step count raises
  in ``set_timesteps`` (:169); passing ``intermediate_timesteps=None`` makes it ``linspace(max, 0, N + 1)``:
  N forwards, which is what flopcalc plans for ``steps=N`` (and says so).
* guidance: none by classifier-free guidance; ``guidance_scale`` (4.5) × ``guidance_embeds_scale`` is
  passed as ``guidance`` to the transformer (:770-772), whose ``SanaCombinedTimestepGuidanceEmbeddings``
  embeds it (a second 256 → D → D MLP, counted by :mod:`flopcalc.engine.architectures.sana`): one pass per step,
  whatever the scale; the prompt alone is encoded (``__call__`` takes no negative prompt).
* timestep scaling: the sCM timestep ``sin t / (cos t + sin t)`` and the input scale
  ``sqrt(s² + (1 − s)²)`` (:793-799), and the output mix after the call (:811-814), are elementwise in the
  pipeline, outside the module: no MACs.
* text: Gemma-2 on ``max_sequence_length`` 300 tokens once per prompt (the complex human instruction, on by
  default, lengthens it as in SanaPipeline: not counted, see the note).
* VAE: the DC-AE decodes each image once.

``SanaSprintImg2ImgPipeline`` adds ``image`` and ``strength`` 0.6: ``get_timesteps`` (SD3's rule,
pipeline_sana_sprint_img2img.py:343-353) keeps ``N − int(N − N·strength)`` of the ``N + 1`` timesteps' steps
(2 at 0.6, 1 below 0.5; never fewer than one for a strength in (0, 1], so the check at :834-839 cannot
fire); the input image, resized to the (binned) size, is
VAE-encoded once (``prepare_latents``, :585-588).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.pipelines.sana import SIZE_MULTIPLE, chi_note, sana_settings, sana_vae_scale_factor

#: ``SanaSprintPipeline.__call__`` defaults.
DEFAULT_STEPS = 2
#: ``SanaSprintImg2ImgPipeline.__call__`` default strength.
DEFAULT_STRENGTH = 0.6
#: The only ``transformer.sample_size`` the Sprint pipelines bin for (ASPECT_RATIO_1024_BIN).
BINNED_SAMPLE_SIZE = 32


def _is_sprint_transformer(cfg: Mapping[str, Any]) -> bool:
    return bool(cfg.get("guidance_embeds"))


@register_pipeline("SanaSprintPipeline", denoisers=("SanaTransformer2DModel",), options=("max_sequence_length", "vae_tiling"),
                   when=_is_sprint_transformer)
def sana_sprint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``SanaSprintPipeline.__call__`` (see the module doc for every default)."""
    return _sprint_plan("SanaSprintPipeline", components, s)


@register_pipeline("SanaSprintImg2ImgPipeline", options=("max_sequence_length",))
def sana_sprint_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``SanaSprintImg2ImgPipeline.__call__``: the text-to-image plan with ``strength`` 0.6 (module doc)."""
    s = replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength)
    return _sprint_plan("SanaSprintImg2ImgPipeline", components, s)


def _sprint_plan(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings) -> Plan:
    transformer = components.get("transformer")
    if transformer is not None and not transformer["guidance_embeds"]:
        raise ConfigError(f"transformer/config.json: {name} passes `guidance` to the transformer, which needs "
                          "guidance_embeds: true (SanaCombinedTimestepGuidanceEmbeddings); a SANA transformer "
                          "without it runs under SanaPipeline")
    f = sana_vae_scale_factor(components)
    sample_size = transformer["sample_size"] if transformer is not None else BINNED_SAMPLE_SIZE
    if s.resolution_binning and sample_size != BINNED_SAMPLE_SIZE:
        raise FlopcalcError(f"{name} bins sizes only for transformer sample_size {BINNED_SAMPLE_SIZE} (it raises "
                            f"'Invalid sample size' for {sample_size}); turn binning off "
                            "(--no-resolution-binning) to estimate the size as given")
    s, notes = sana_settings(components, s, name, steps=DEFAULT_STEPS, sample_size=BINNED_SAMPLE_SIZE)
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{name} height and width")
    check_divisible(s.height, s.width, f * (transformer["patch_size"] if transformer is not None else 1),
                    f"{name} height and width (the VAE factor × patch size)")
    if s.steps != DEFAULT_STEPS:
        notes.append(f"{s.steps} steps: SCMScheduler refuses steps other than 2 at the default "
                     "intermediate_timesteps=1.3; planned as the call with intermediate_timesteps=None "
                     f"({s.steps} + 1 timesteps from max_timesteps to 0, the last dropped)")
    if s.negative_prompt:
        notes.append(f"the negative prompt is not used: {name} takes none (its guidance is embedded)")
    passes = cfg_passes(s, False)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size,
                     f"{s.batch_size} prompt(s)")
    if runs:
        notes.append(chi_note(name, "the prompt"))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    notes.append(f"guidance_scale {s.guidance_scale} is embedded (guidance_embedder), not a second pass")
    return Plan(name, s, passes, tuple(runs), tuple(notes))
