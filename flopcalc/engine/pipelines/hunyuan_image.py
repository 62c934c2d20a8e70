"""HunyuanImage 2.1 pipeline (diffusers ``pipelines/hunyuan_image/pipeline_hunyuanimage.py``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.settings import INDEX, pipeline_option
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    config_value,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.vae import vae_runs

#: ``default_sample_size`` (pipeline_hunyuanimage.py:221): 64 latent pixels → 2048² with the 32× VAE.
DEFAULT_SAMPLE_SIZE = 64
#: ``vae_scale_factor`` without a VAE (line 215).
VAE_SCALE_FACTOR = 32
#: ``tokenizer_max_length`` (line 217): Qwen2.5-VL tokens the transformer sees (padded to it, always).
TEXT_TOKENS = 1000
#: ``prompt_template_encode_start_idx`` (line 220): the system template's tokens, encoded then dropped.
TEMPLATE_TOKENS = 34
#: ``tokenizer_2_max_length`` (line 218): byT5 glyph tokens (zeros without quoted text), always passed.
GLYPH_TOKENS = 128
#: ``__call__`` defaults (line 505): ``num_inference_steps`` 50, ``distilled_guidance_scale`` 3.25.
DEFAULT_STEPS = 50
#: ``AdaptiveProjectedMixGuidance.guidance_scale`` default (guiders/adaptive_projected_guidance_mix.py:67).
GUIDER_SCALE = 3.5

pipeline_option("glyph_prompts", kind=INDEX, bound=(4096, "prompts"),
                help="HunyuanImage 2.1 / HunyuanVideo 1.5: prompts of the batch with quoted text, whose glyph text "
                     "the byT5 text_encoder_2 encodes (default 0: none)",
                refusal="it has no byT5 glyph encoder run on quoted text (HunyuanImage 2.1's, HunyuanVideo 1.5's)")


def guider_class(index: Mapping[str, Any] | None, name: str = "guider") -> str | None:
    """The class the index names for ``name`` (None: absent or ``[null, null]``); its config is not read."""
    entry = (index or {}).get(name)
    return entry[1] if isinstance(entry, list) and len(entry) == 2 and entry[1] else None


def glyph_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, tokens: int,
               extra: str = "") -> tuple[list[ComponentRun], str]:
    """byT5 (``text_encoder_2``) as HunyuanImage 2.1 and HunyuanVideo 1.5 run it (``encode_prompt``): each prompt's
    quoted text (``extract_glyph_text``: '...', "...", ‘...’, “...”) is formatted as ``Text "..."``, padded to
    ``tokens`` and encoded, one batch-1 forward per prompt that has any; a prompt without quoted text gets
    zero glyph embeddings and no forward. ``glyph_prompts`` (default 0) of the ``batch_size`` prompts have
    quoted text; the negative prompt (diffusers' default: empty) is taken to have none. The transformer
    embeds the ``tokens`` glyph tokens either way (``extra``: what else it embeds regardless). Returns the
    runs and the note saying so."""
    n = s.glyph_prompts or 0
    if n > s.batch_size:
        raise OptionError(f"glyph_prompts {n} is more than the batch's {s.batch_size} prompt(s)")
    either = f"the transformer embeds its {tokens} glyph tokens{extra} either way"
    if not n:
        return [], ("text_encoder_2 (byT5) runs only on a prompt with quoted text: none assumed (--glyph-prompts N "
                    f"for N such prompts), not run; {either}")
    runs = text_runs(components, [("text_encoder_2", tokens)], n, f"{n} prompt(s) with quoted text (one each)")
    where = "" if runs else " (text_encoder_2 is absent: not counted)"
    return runs, (f"text_encoder_2 (byT5) encodes the quoted text of {n} prompt(s), {tokens} tokens each{where}; "
                  f"the negative prompt is taken to have none; {either}")


@register_pipeline("HunyuanImagePipeline", guidance="separate", denoisers=("HunyuanImageTransformer2DModel",), options=("glyph_prompts",))
def hunyuan_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanImagePipeline.__call__`` (pipeline_hunyuanimage.py:505): 2048² default
    (``default_sample_size`` 64 × ``vae_scale_factor`` 32, line 626), 50 steps (line 720: ``sigmas``
    linspace(1, 0, steps + 1)[:-1], one transformer call each).

    Guidance (lines 677-684, 789): the pipeline's ``guider`` runs one transformer forward per condition. With
    no guider (the card's index: ``guider`` null) it builds ``AdaptiveProjectedMixGuidance(enabled=False)``:
    one pass, the negative prompt never encoded. A guider named in the index is the class's default
    (``guidance_scale`` 3.5: classifier-free guidance on every step; its config is not read, so
    ``guidance_scale`` stands for it: ≤ 1 disables it): two passes, the negative prompt encoded too.
    Without a guider, ``guidance_scale`` is the distilled guidance scale (``distilled_guidance_scale``,
    default 3.25) a guidance-distilled transformer (``guidance_embeds``) takes as an input: no pass.

    Text (lines 223-258): the prompt, wrapped in a 34-token system template, is padded to 1000 + 34 tokens
    and encoded by Qwen2.5-VL; the template's states are dropped, so the transformer sees 1000 tokens. byT5
    (``text_encoder_2``) encodes only quoted text in the prompt (``extract_glyph_text``, lines 64 and 352-368:
    :func:`glyph_runs`, 128 tokens); without it the pipeline passes 128 zero glyph tokens, which the
    transformer still embeds and attends to. By default no prompt has quoted text: byT5 is not run;
    ``glyph_prompts`` N runs it on N prompts, and then an ``ocr_guider`` named in the index replaces the
    guider (line 677: any non-zero glyph embedding selects it).

    Latents: ``H/32 × W/32`` (``prepare_latents`` floors; ``check_inputs`` wants multiples of 64, which
    flopcalc asks for)."""
    f = config_value(components, "vae", "spatial_compression_ratio", VAE_SCALE_FACTOR)
    glyph, glyph_note = glyph_runs(components, s, GLYPH_TOKENS)
    guider = (s.glyph_prompts and guider_class(index, "ocr_guider")) or guider_class(index)
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * f, width=s.width or DEFAULT_SAMPLE_SIZE * f,
                steps=s.steps or DEFAULT_STEPS)
    check_divisible(s.height, s.width, f * 2, "HunyuanImage height and width (check_inputs)")
    distilled = bool(config_value(components, "transformer", "guidance_embeds", False))
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if guider is not None:
        cfg = (GUIDER_SCALE if s.guidance_scale is None else s.guidance_scale) > 1
        notes.append(f"guider {guider}: its config is not read; planned with guidance_scale "
                     f"{GUIDER_SCALE if s.guidance_scale is None else s.guidance_scale} (class default unless "
                     "--guidance-scale is given): " + ("two passes per step" if cfg else "one pass"))
    else:
        cfg = False
        if distilled:
            s = replace(s, guidance_scale=3.25 if s.guidance_scale is None else s.guidance_scale)
        elif s.guidance_scale is not None:
            notes.append("guidance_scale is ignored: no guider (AdaptiveProjectedMixGuidance disabled) and the "
                         "transformer is not guidance-distilled")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored without guidance (as in HunyuanImagePipeline)")
    if distilled and guider is None and s.guidance_scale is None:
        raise FlopcalcError("distilled_guidance_scale is required for a guidance-distilled HunyuanImage transformer")
    passes = cfg_passes(s, cfg)
    notes.append(glyph_note)
    if s.strength is not None:
        notes.append("diffusers has no HunyuanImage image-to-image pipeline: estimated as the text-to-image "
                     "pipeline with the input image VAE-encoded and the last `strength` of the schedule run")
    runs = text_runs(components, [("text_encoder", TEXT_TOKENS + TEMPLATE_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else "")) + glyph
    runs += [replace(r, shape=replace(r.shape, text_len_2=GLYPH_TOKENS))
             for r in denoiser_run(components, "transformer", s, f, TEXT_TOKENS, passes)]
    runs += vae_runs(components, s, s.batch_size * s.num_images_per_prompt, s.height // f, s.width // f)
    return Plan("HunyuanImagePipeline", s, passes, tuple(runs), tuple(notes))
