"""FLUX.1 Redux prior: ``FluxPriorReduxPipeline`` (diffusers ``pipelines/flux/pipeline_flux_prior_redux.py``).

``__call__`` (lines 380-490) turns image prompts into the prompt embeddings of a following
``FluxPipeline`` run; it generates no image:

* ``encode_image`` (lines 189-199): the ``image_encoder`` (``SiglipVisionModel``) once per image, on the
  feature extractor's ``image_size²`` pixels, its ``last_hidden_state`` (N = 729 tokens for SigLIP
  so400m-patch14-384) into the ``image_embedder`` (``ReduxImageEncoder``), once per image;
* with text encoders loaded (``text_encoder`` present): ``encode_prompt`` as FluxPipeline's, CLIP on 77
  tokens and T5 on 512, once per image's prompt; without them (FLUX.1-Redux-dev ships none) zero
  embeddings of 512 tokens;
* the image tokens are appended to the T5 embeddings: the FLUX run that follows sees 512 + N text
  tokens, and its text encoders need not run (``prompt_embeds`` given). That run is not part of this plan.

The batch is the number of images (``--batch-size``); the outputs are summed into one prompt. Size,
steps, guidance, strength and negative prompt do not apply.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

from flopcalc.architectures.siglip import siglip_patches
from flopcalc.errors import OptionError
from flopcalc.pipelines.base import ComponentRun, Plan, Settings, component_class, missing_notes, register_pipeline
from flopcalc.pipelines.base import text_runs
from flopcalc.registry import RunShape

#: T5 tokens ``encode_prompt`` is called with (``max_sequence_length=512``) and the zero embeddings' length.
T5_TOKENS = 512
#: Options that do not apply: the pipeline generates no image.
_NOT_APPLIED = ("height", "width", "steps", "guidance_scale", "strength", "negative_prompt", "num_images_per_prompt")


@register_pipeline("FluxPriorReduxPipeline")
def flux_prior_redux_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxPriorReduxPipeline.__call__``: the image encoder and embedder once per image, the text encoders
    once per prompt when loaded (see the module doc)."""
    defaults = {f.name: f.default for f in fields(s)}
    for option in _NOT_APPLIED:
        if getattr(s, option) != defaults[option]:
            flag = "--" + option.replace("_", "-")
            raise OptionError(f"{flag} does not apply to FluxPriorReduxPipeline: it generates no image (it encodes "
                              "image prompts for a following FluxPipeline run); only --batch-size (images) applies")
    images = s.batch_size
    runs = []
    if "text_encoder" in components:
        runs += text_runs(components, [("text_encoder", 77), ("text_encoder_2", T5_TOKENS)], images,
                          f"{images} prompt(s)")
    notes = list(missing_notes(components, ["image_encoder", "image_embedder"]))
    tokens = None
    if "image_encoder" in components:
        cfg = components["image_encoder"]
        size = cfg["image_size"]
        tokens = siglip_patches(cfg)
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(seq_len=tokens, height=size, width=size), images,
                                 f"{images} image(s) (encode_image)"))
    if "image_embedder" in components:
        if tokens is None:
            notes.append("image_embedder was not counted: without the image_encoder config its token count is unknown")
        else:
            runs.append(ComponentRun("image_embedder", component_class(components, "image_embedder") or "?",
                                     "forward", "image_encoder", RunShape(seq_len=tokens), images,
                                     f"{images} image(s), {tokens} tokens each"))
    if tokens is not None:
        notes.append(f"the following FluxPipeline run sees {T5_TOKENS} + {tokens} = {T5_TOKENS + tokens} text tokens "
                     "(prompt_embeds given: its text encoders need not run); that run is not counted here")
    if "text_encoder" not in components:
        notes.append("no text encoders: zero prompt embeddings of 512 tokens (FLUX.1-Redux-dev ships none)")
    return Plan("FluxPriorReduxPipeline", s, 1, tuple(runs), tuple(notes))
