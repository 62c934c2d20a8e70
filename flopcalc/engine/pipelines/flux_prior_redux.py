"""FLUX.1 Redux prior: ``FluxPriorReduxPipeline`` (diffusers ``pipelines/flux/pipeline_flux_prior_redux.py``).

``__call__`` (lines 380-490) turns image prompts into the prompt embeddings of a following
``FluxPipeline`` run; it generates no image:

* ``encode_image`` (lines 189-199): the ``image_encoder`` (``SiglipVisionModel``) once per image, on the
  feature extractor's ``image_size²`` pixels, its ``last_hidden_state`` (N = 729 tokens for SigLIP
  so400m-patch14-384) into the ``image_embedder`` (``ReduxImageEncoder``), once per image;
* with text encoders loaded (``text_encoder`` present): ``encode_prompt`` as FluxPipeline's, CLIP on 77
  tokens and T5 on 512, once per image's prompt; without them (FLUX.1-Redux-dev ships none) zero
  embeddings of 512 tokens;
* the image tokens are appended to the T5 embeddings, and the outputs of the images summed into one
  prompt (``torch.sum(prompt_embeds, dim=0)``).

What users run next is ``FluxPipeline(prompt_embeds=..., pooled_prompt_embeds=...)`` with the base model
loaded without text encoders. A folder that holds the FLUX ``transformer`` (and ``vae``) beside the prior's
components is planned with that run too: FluxPipeline's plan (1024², 28 steps, guidance 3.5 embedded) for
one prompt, its transformer on 512 + N text tokens, no text encoder run. Without them size, steps and
guidance do not apply (the prior generates no image). The prior's batch is the number of images
(``--batch-size``); strength, negative prompt and true CFG do not apply.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Mapping

from flopcalc.engine.architectures.siglip import siglip_patches
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import ComponentRun, Plan, Settings, component_class, missing_notes, register_pipeline
from flopcalc.engine.pipelines.base import text_runs
from flopcalc.engine.pipelines.flux import flux_pipeline
from flopcalc.engine.registry import RunShape

#: T5 tokens ``encode_prompt`` is called with (``max_sequence_length=512``) and the zero embeddings' length.
T5_TOKENS = 512
#: Options that apply only to the FLUX run (a folder with a transformer), and those that never apply.
_GENERATION = ("height", "width", "steps", "guidance_scale", "num_images_per_prompt")
_NEVER = ("strength", "negative_prompt")


@register_pipeline("FluxPriorReduxPipeline")
def flux_prior_redux_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxPriorReduxPipeline.__call__``: the image encoder and embedder once per image, the text encoders
    once per prompt when loaded (see the module doc)."""
    defaults = {f.name: f.default for f in fields(s)}
    generates = "transformer" in components
    for option in _NEVER + (() if generates else _GENERATION):
        if getattr(s, option) != defaults[option]:
            flag = "--" + option.replace("_", "-")
            why = ("the FLUX run gets its prompt embeddings from the prior" if generates else
                   "it generates no image (it encodes image prompts for a following FluxPipeline run; a folder with "
                   "the FLUX transformer plans that run too)")
            raise OptionError(f"{flag} does not apply to FluxPriorReduxPipeline: {why}")
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
    if "text_encoder" not in components:
        notes.append("no text encoders: zero prompt embeddings of 512 tokens (FLUX.1-Redux-dev ships none)")
    if not generates:
        if tokens is not None:
            notes.append(f"the following FluxPipeline run sees {T5_TOKENS} + {tokens} = {T5_TOKENS + tokens} text "
                         "tokens (prompt_embeds given: its text encoders need not run); give the FLUX transformer and "
                         "VAE in this folder to count it")
        return Plan("FluxPriorReduxPipeline", s, 1, tuple(runs), tuple(notes))
    return _with_flux_run(components, s, index, runs, notes, tokens)


def _with_flux_run(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                   prior: list[ComponentRun], notes: list[str], tokens: int | None) -> Plan:
    """The prior's runs, then FluxPipeline's for the one summed prompt: its transformer on ``512 + tokens``
    text tokens, no text encoder (``prompt_embeds`` given)."""
    if tokens is None:
        raise OptionError("FluxPriorReduxPipeline: the FLUX run's text length needs the image_encoder config "
                          "(512 + its tokens)")
    flux = {name: cfg for name, cfg in components.items() if name in ("transformer", "vae")}
    base = flux_pipeline(flux, replace(s, batch_size=1, max_sequence_length=T5_TOKENS), index=index)
    text_len = T5_TOKENS + tokens
    runs = [replace(r, shape=replace(r.shape, text_len=text_len), why=f"{r.why}, {text_len} text tokens")
            if r.role == "denoiser" else r for r in base.runs]
    notes += [n for n in base.notes if not n.startswith("text_encoder")]
    notes.append(f"FluxPipeline run on the prior's one summed prompt: {T5_TOKENS} + {tokens} = {text_len} text tokens, "
                 "its text encoders not run (prompt_embeds given)")
    settings = replace(base.settings, batch_size=s.batch_size, true_cfg_scale=s.true_cfg_scale,
                       max_sequence_length=s.max_sequence_length)  # FluxPipeline's own, not options of this plan
    return Plan("FluxPriorReduxPipeline", settings, base.passes,
                tuple(prior + runs), tuple(notes))
