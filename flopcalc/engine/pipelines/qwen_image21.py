"""Qwen-Image 2.1 (diffusers 0.42.1 ``pipelines/qwenimage21/pipeline_qwenimage21.py``, ``QwenImage21Pipeline``),
text to image.

The prompt is wrapped in a raw chat template (``prompt_template_t2i``, :217-221): a system turn
(``<|im_start|>system\\nComprehend and analyze the provided prompt.<|im_end|>\\n``), the user turn
(``<|im_start|>user\\n{prompt}<|im_end|>\\n``) and the assistant header (``<|im_start|>assistant\\n``), tokenized
unpadded at batch 1 (``padding=True`` pads a batch to its longest prompt only). ``Qwen3VLForConditionalGeneration``
runs on all of it (``lm_head`` included: the pipeline calls the whole model, :310-315) and the hidden states of the
system turn are dropped (``_drop_idx``, :229-231): the transformer sees the user turn and the assistant header.
The token counts depend on the tokenizer, which flopcalc does not have: the prompt's own tokens are the family option
``prompt_tokens`` (default 128, an assumption), the template adds the constants below.

The vision tower of Qwen3-VL runs only on condition images (``image=``, which also adds their VAE latents and
their tokens to the transformer's sequence); this plan is text to image and refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from numbers import Real
from typing import Any

from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.omnigen import (
    DEFAULT_PROMPT_TOKENS,  # declares the prompt_tokens option
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.settings import INDEX, pipeline_option

pipeline_option("use_kv_cache", kind=INDEX, bound=(1, "(0 or 1)"),
                help="QwenImage21Pipeline: 1 (default, use_kv_cache=True) runs the text tokens through the "
                     "transformer at the first step only and reads their cached keys and values afterwards; 0 "
                     "runs the whole sequence at every step",
                refusal="it keeps no key/value cache of the text tokens across steps")

#: ``__call__`` defaults: ``output_resolution`` 1024 (the side of a text-to-image output), ``num_inference_steps``
#: 40 (unless ``model_index.json`` sets ``sample_sigmas``), ``true_cfg_scale`` 1.0.
RESOLUTION, STEPS, TRUE_CFG = 1024, 40, 1.0
#: ``vae_scale_factor`` (16, set in ``__init__``: one latent token per 16×16 pixels) and the multiple of 32 the
#: sides are floored to (``vae_scale_factor · 2``: one image slot of the text encoder per 2×2 latent tokens).
VAE_SCALE_FACTOR = 16
SIDE_MULTIPLE = 2 * VAE_SCALE_FACTOR
#: ``_drop_idx``: tokens of the system turn as ``apply_chat_template`` renders it, dropped after encoding. The
#: tokenizer is Qwen-Image-2.1's own (``processor/``), which flopcalc does not have: 14, as two independent
#: reimplementations record it against that tokenizer (search-index ids 68516670626, "It comes to 14 for this
#: checkpoint", and 68595837101, "its 14-token prefix is removed from the encoder output").
SYSTEM_TOKENS = 14
#: The user turn's template around the prompt and the assistant header, kept after the drop:
#: ``<|im_start|>`` ``user`` ``\\n`` before the prompt, ``<|im_end|>`` ``\\n`` ``<|im_start|>`` ``assistant`` ``\\n``
#: after it (Qwen2's tokenizer: the special tokens are one id each, ``user``, ``assistant`` and ``\\n`` one each; e.g.
#: "Hello" in that template is ``151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198``, search-index id
#: 58798410698).
USER_TURN_TOKENS = 8


def _sample_sigmas(index: Mapping[str, Any]) -> int | None:
    """The length of ``model_index.json``'s ``sample_sigmas`` (``__init__`` registers it in the pipeline's
    config): when set, the denoising steps are its length and ``num_inference_steps`` is ignored (:732-735)."""
    sigmas = index.get("sample_sigmas")
    if sigmas is None:
        return None
    if (not isinstance(sigmas, list) or not sigmas
            or not all(isinstance(v, Real) and not isinstance(v, bool) for v in sigmas)):
        raise ConfigError(f"model_index.json: QwenImage21Pipeline sample_sigmas must be a non-empty list of numbers, "
                          f"got {sigmas!r}")
    return len(sigmas)


@register_pipeline("QwenImage21Pipeline", guidance="separate", denoisers=("QwenImage21Transformer2DModel",),
                   options=("true_cfg_scale", "prompt_tokens", "use_kv_cache"),
                   refuses={"max_sequence_length": "it tokenizes the prompt unpadded and untruncated (see "
                                                   "--prompt-tokens)"})
def qwen_image21_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImage21Pipeline.__call__``, text to image: ``output_resolution`` 1024, so 1024² (sides floored to
    multiples of 32 by diffusers with a warning; flopcalc asks for a size that divides), 40 steps (the length of
    ``model_index.json``'s ``sample_sigmas`` when set; ``--steps`` then stands for ``sigmas`` of that length),
    ``true_cfg_scale`` 1.0. Guidance runs only with ``true_cfg_scale > 1`` and a negative prompt (``do_true_cfg``,
    :677-678): the negative prompt is encoded too and the transformer runs a second, separate forward per step
    with its own key/value cache (:797-813).

    Text: the encoder reads ``14 + prompt_tokens + 8`` tokens per prompt (see the module doc), the transformer
    ``prompt_tokens + 8`` text tokens and the ``(H/16)(W/16)`` latent tokens, unpatched.

    Key/value cache (``use_kv_cache=True`` and the transformer's ``causal_condition``: :761-764, :776): the first
    step runs the whole joint sequence and caches the text tokens' keys and values (``kv_cache_mode="extract"``);
    every later step runs the target tokens only (``"cached"``). Without it every step is a full forward. The VAE
    decodes each image once (``latent_frames`` 1)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to QwenImage21Pipeline: its __call__ takes no strength (a "
                          "condition image, image=, is read by Qwen3-VL's vision tower and prepended as latent tokens; "
                          "flopcalc plans text to image only)")
    if s.guidance_scale is not None:
        raise OptionError("--guidance-scale does not apply to QwenImage21Pipeline: its __call__ takes no "
                          "guidance_scale (guidance is true_cfg_scale with a negative prompt: --true-cfg-scale)")
    index = index or {}
    sigma_steps = _sample_sigmas(index)
    transformer = components.get("transformer")
    if transformer is not None and transformer["patch_size"] != 1:
        raise ConfigError(f"transformer/config.json: patch_size {transformer['patch_size']}: QwenImage21Pipeline "
                          "feeds the latent unpatched (one token per latent pixel), so only patch_size 1 runs")
    tokens = DEFAULT_PROMPT_TOKENS if s.prompt_tokens is None else s.prompt_tokens
    s = replace(s, height=s.height or RESOLUTION, width=s.width or RESOLUTION,
                steps=s.steps or sigma_steps or STEPS,
                true_cfg_scale=TRUE_CFG if s.true_cfg_scale is None else s.true_cfg_scale)
    check_divisible(s.height, s.width, SIDE_MULTIPLE, "Qwen-Image 2.1 height and width (vae_scale_factor × 2)")
    true_cfg = s.true_cfg_scale > 1 and s.negative_prompt
    passes = cfg_passes(s, true_cfg)
    text_len = tokens + USER_TURN_TOKENS
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {tokens} prompt tokens" + (" (--prompt-tokens)" if s.prompt_tokens is not None else
                 " (assumed: flopcalc has no tokenizer; set --prompt-tokens to the tokenized prompt's length)")
                 + f"; the transformer sees them with the {USER_TURN_TOKENS} user-turn template tokens ({text_len}), "
                 f"the text encoder also the {SYSTEM_TOKENS}-token system turn it drops "
                 f"({text_len + SYSTEM_TOKENS})" + ("; the negative prompt is assumed as long" if true_cfg else ""))
    if sigma_steps is not None:
        notes.append(f"model_index.json sets sample_sigmas: {sigma_steps} steps by default, num_inference_steps is "
                     "ignored (--steps stands for passing sigmas of that length)")
    if s.true_cfg_scale > 1 and not s.negative_prompt:
        notes.append("true_cfg_scale > 1 has no effect without a negative prompt (as in QwenImage21Pipeline): "
                     "one pass")
    elif s.negative_prompt and not true_cfg:
        notes.append("the negative prompt is ignored with true_cfg_scale <= 1 (as in QwenImage21Pipeline)")
    runs = text_runs(components, [("text_encoder", text_len + SYSTEM_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if true_cfg else ""))
    denoiser = denoiser_run(components, "transformer", s, VAE_SCALE_FACTOR, text_len, passes)
    cache = s.use_kv_cache != 0 and transformer is not None and transformer["causal_condition"]
    if denoiser and cache:
        (run,) = denoiser
        forwards = passes * s.batch_size * s.num_images_per_prompt
        denoiser = [replace(run, shape=replace(run.shape, kv_cache="extract"), runs=forwards,
                            why=f"step 0 × {passes} pass(es) × {s.batch_size * s.num_images_per_prompt} image(s): "
                                f"the {text_len} text tokens run and their keys and values are cached")]
        if s.steps > 1:
            denoiser.append(replace(run, shape=replace(run.shape, kv_cache="cached"), runs=(s.steps - 1) * forwards,
                                    why=f"{s.steps - 1} later steps × {passes} pass(es) × "
                                        f"{s.batch_size * s.num_images_per_prompt} image(s): the latent tokens "
                                        f"alone, attending to the {text_len} cached text keys and values too"))
    elif transformer is not None and s.use_kv_cache != 0:
        notes.append("the transformer's causal_condition is false: no key/value cache, every step is a full "
                     "forward (as in QwenImage21Pipeline)")
    runs += denoiser
    runs += image_runs(components, s, VAE_SCALE_FACTOR)
    return Plan("QwenImage21Pipeline", s, passes, tuple(runs), tuple(notes))
