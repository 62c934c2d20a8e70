"""BRIA FIBO (diffusers ``pipelines/bria_fibo/pipeline_bria_fibo.py``, ``BriaFiboPipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    RunShape,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
)
from flopcalc.engine.pipelines.vae import vae_runs

#: ``BriaFiboPipeline.__init__``: ``vae_scale_factor = 16`` (hard-coded: the Wan 2.2 VAE's ×16) and
#: ``default_sample_size`` 64: 1024².
VAE_SCALE_FACTOR, DEFAULT_SAMPLE_SIZE = 16, 64
#: ``__call__`` defaults; ``check_inputs`` refuses ``max_sequence_length`` above 3000 and sides not divisible by 16.
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 30, 5.0, 3000


def fibo_text_runs(components: Mapping[str, Any], s: Settings, cfg: bool) -> list[ComponentRun]:
    """``get_prompt_embeds``: the text encoder on each batch of prompts, ``padding="longest"`` truncated at
    ``max_sequence_length`` (counted in full: the upper bound); under guidance the negative prompts too, which
    for ``""`` (the default) is one ``<|begin_of_text|>`` token per prompt."""
    if "text_encoder" not in components:
        return []
    cls = component_class(components, "text_encoder") or "?"
    runs = [ComponentRun("text_encoder", cls, "forward", "text_encoder", RunShape(seq_len=s.max_sequence_length),
                         s.batch_size, f"{s.batch_size} prompt(s)")]
    if cfg:
        length = s.max_sequence_length if s.negative_prompt else 1
        runs.append(ComponentRun("text_encoder", cls, "forward", "text_encoder", RunShape(seq_len=length),
                                 s.batch_size, f"{s.batch_size} negative prompt(s)"
                                 + ("" if s.negative_prompt else " (\"\": one token)")))
    return runs


def fibo_settings(s: Settings) -> Settings:
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * VAE_SCALE_FACTOR,
                width=s.width or DEFAULT_SAMPLE_SIZE * VAE_SCALE_FACTOR, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH} for BRIA FIBO, got "
                            f"{s.max_sequence_length}")
    check_divisible(s.height, s.width, VAE_SCALE_FACTOR, "BRIA FIBO height and width")
    return s


@register_pipeline("BriaFiboPipeline", denoisers=("BriaFiboTransformer2DModel",), options=("max_sequence_length",))
def bria_fibo_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``BriaFiboPipeline.__call__``: 1024² (``default_sample_size`` 64 × 16), 30 steps, ``guidance_scale`` 5.0;
    guidance (``> 1``) doubles the transformer's batch (negative rows, then prompt rows: two passes).

    The text encoder (``SmolLM3ForCausalLM``; every layer's hidden state is read, ``lm_head`` runs too) encodes the
    (structured JSON) prompt unpadded, truncated at ``max_sequence_length`` (3000): flopcalc counts 3000 tokens,
    the upper bound; give the prompt's token count with ``max_sequence_length``. The negative embeddings are
    zero-padded to the prompt's length, so the transformer sees ``max_sequence_length`` text tokens per row, plus
    one token per ``H/16 × W/16`` latent pixel (``do_patching`` off, the default), with every block reading its own
    text-encoder layer through a caption projection. The Wan 2.2 VAE decodes one frame at ``H/16 × W/16``."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to BriaFiboPipeline: its __call__ takes no strength (it generates "
                          "from noise; BriaFiboEditPipeline edits an image)")
    s = fibo_settings(s)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    images = s.batch_size * s.num_images_per_prompt
    lat_h, lat_w = s.height // VAE_SCALE_FACTOR, s.width // VAE_SCALE_FACTOR
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {s.max_sequence_length} tokens per prompt (the upper bound: the pipeline encodes the prompt "
                 "unpadded; set max_sequence_length to its token count)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in BriaFiboPipeline)")
    runs = fibo_text_runs(components, s, cfg)
    if "transformer" in components:
        runs.append(ComponentRun("transformer", component_class(components, "transformer") or "?", "forward",
                                 "denoiser", RunShape(latent_height=lat_h, latent_width=lat_w,
                                                      text_len=s.max_sequence_length),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    runs += vae_runs(components, s, images, lat_h, lat_w)
    return Plan("BriaFiboPipeline", s, passes, tuple(runs), tuple(notes))
