"""ConsisID (diffusers ``pipelines/consisid/pipeline_consisid.py``, ``ConsisIDPipeline``): identity-preserving
image-to-video, CogVideoX image-to-video (:func:`flopcalc.engine.pipelines.cogvideox.cogvideox_plan`) with the face
modules of ``ConsisIDTransformer3DModel`` (:mod:`flopcalc.engine.architectures.consisid`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import Plan, Settings, register_pipeline
from flopcalc.engine.pipelines.cogvideox import Variant, cogvideox_plan

NAME = "ConsisIDPipeline"
#: ``ConsisIDPipeline.__call__`` defaults (pipeline_consisid.py:664-689): 480×720, 49 frames; the rest as CogVideoX's
#: (50 steps, ``guidance_scale`` 6.0 as a doubled batch, 226 T5 tokens, ``num_videos_per_prompt`` forced to 1).
HEIGHT, WIDTH = 480, 720
VARIANT = Variant(NAME, channel_inputs=2, conditioning="image", num_frames=49)


@register_pipeline(NAME, denoisers=("ConsisIDTransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def consisid_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                      index: Mapping[str, Any] | None = None) -> Plan:
    """``ConsisIDPipeline.__call__`` (pipeline_consisid.py:663-975): CogVideoX image-to-video at 480×720, 49 frames:

    * the face image VAE-encoded once (``prepare_latents``, :606-661: one image, so one prompt: a batch of prompts
      with one image fails in the real call, refused), its latent concatenated on channels every step;
    * each step one transformer call on the CFG-doubled batch; with ``is_train_face`` the call runs the local facial
      extractor once on the face (``id_cond`` and the face ViT's ``id_vit_hidden``) and the perceiver
      cross-attentions' face projections once, counted with the call's first row;
    * ``vae.decode`` of the video (CogVideoX's frame batches).

    The face models that make ``id_cond``, ``id_vit_hidden`` and ``kps_cond`` (insightface, facexlib, EVA-CLIP:
    ``consisid_utils``) run outside the pipeline and are not counted; ``kps_cond`` is not passed (its extra encode
    is not planned)."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions every step and the whole "
                          "schedule runs")
    if s.batch_size != 1:
        raise OptionError(f"{NAME} encodes its one face image once: a batch of {s.batch_size} prompts then fails to "
                          "concatenate with the image latent in the real call; use batch size 1")
    plan = cogvideox_plan(components, replace(s, height=s.height or HEIGHT, width=s.width or WIDTH), VARIANT)
    transformer = components.get("transformer")
    if transformer is None or not transformer["is_train_face"]:
        return plan
    from flopcalc.engine.architectures.consisid import FACE_VIT_TOKENS, LATER_ROWS

    runs = []
    for run in plan.runs:
        if run.component != "transformer":
            runs.append(run)
            continue
        calls = run.runs // plan.passes  # one CFG-doubled call per step
        shape = replace(run.shape, image_tokens=FACE_VIT_TOKENS)
        runs.append(replace(run, shape=shape, runs=calls, why=f"{calls} step(s): the first row of each call"))
        if plan.passes > 1:
            runs.append(replace(run, shape=replace(shape, split=LATER_ROWS), runs=calls * (plan.passes - 1),
                                why=f"{calls} step(s) × {plan.passes - 1} more row(s) (the face modules run once "
                                    "per call)"))
    notes = plan.notes + ("the face models behind id_cond / id_vit_hidden (insightface, facexlib, EVA-CLIP at 336 px: "
                          f"{FACE_VIT_TOKENS} ViT tokens) run outside the pipeline and are not counted",)
    return replace(plan, runs=tuple(runs), notes=notes)
