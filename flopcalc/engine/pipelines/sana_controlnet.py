"""``SanaControlNetPipeline`` (diffusers ``pipelines/sana/pipeline_sana_controlnet.py``): SanaPipeline with a
``SanaControlNetModel`` as a row of its own.

``__call__`` (:724-1060) runs SanaPipeline's defaults (1024² snapped to the transformer's bins, 20 steps, CFG 4.5
on a doubled batch, Gemma-2 on 300 tokens for the prompt and the negative prompt) and:

* ``prepare_image`` repeats the control image to ``batch_size · num_images_per_prompt`` and doubles it under CFG
  (:658-690); the DC-AE encodes that whole batch (``self.vae.encode(control_image)``, :937): one encoder run per
  image per guidance pass;
* every step the ControlNet runs on the same doubled batch as the transformer (:996-1005), the latent plus the
  control latent, and the transformer adds its ``controlnet_block_samples`` to its blocks (additions: no
  counted work).

No ``strength``: ``__call__`` takes none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import ComponentRun, Plan, Settings, component_class, denoiser_run, register_pipeline
from flopcalc.engine.pipelines.sana import sana_pipeline, sana_vae_scale_factor
from flopcalc.engine.registry import RunShape


@register_pipeline("SanaControlNetPipeline", denoisers=("SanaControlNetModel",), component="controlnet",
                   options=("max_sequence_length",))
def sana_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``SanaControlNetPipeline.__call__`` (module doc)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to SanaControlNetPipeline: its __call__ takes no strength "
                          "(the control image is VAE-encoded as the condition, every step runs)")
    base = sana_pipeline(components, s, index=index)
    st = base.settings
    runs = list(base.runs)
    if "controlnet" not in components:
        return replace(base, pipeline="SanaControlNetPipeline",
                       notes=base.notes + ("controlnet is absent from this pipeline and was not counted",))
    f = sana_vae_scale_factor(components)
    control = denoiser_run(components, "controlnet", st, f, st.max_sequence_length, base.passes)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    runs[at:at] = control
    if "vae" in components:
        images = st.batch_size * st.num_images_per_prompt * base.passes
        runs.insert(next(i for i, r in enumerate(runs) if r.role == "vae_decoder"),
                    ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=st.height, width=st.width), images,
                                 f"{images} control image(s) (repeated per image, doubled under CFG)"))
    return replace(base, pipeline="SanaControlNetPipeline", runs=tuple(runs))
