"""OmniGen (diffusers ``pipelines/omnigen/pipeline_omnigen.py``, ``OmniGenPipeline``; its processor
``processor_omnigen.py``).

OmniGen has no text encoder: the transformer embeds the instruction's token ids itself, at every step. The
processor (``OmniGenMultiModalProcessor``) wraps each instruction in OmniGen's template (``<|user|>`` …
``<|assistant|>\\n<|diffusion|>``), tokenizes it, and builds one row per guidance branch: the prompt, the default
negative prompt (a fixed 60-word list), and, with input images, an image-guidance row
(``<img><|image_1|></img> …``). ``OmniGenCollator.pad_input_ids`` left-pads every row of the batch to the
longest, so each row the transformer sees has the same number of condition tokens. That number depends on the
tokenizer (Phi-3's), which flopcalc does not have: it is the family option ``prompt_tokens``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import qwen_image_edit  # noqa: F401  (declares the input_images option)
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    RunShape,
    Settings,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import vae_runs
from flopcalc.engine.settings import COUNT, pipeline_option

#: The condition tokens flopcalc assumes per row when ``prompt_tokens`` is not given (no tokenizer here).
DEFAULT_PROMPT_TOKENS = 128

pipeline_option("prompt_tokens", kind=COUNT, bound=(1_000_000, "tokens"),
                help="pipelines that run the prompt unpadded (OmniGen, ERNIE-Image, BRIA FIBO, Qwen-Image 2.1): tokens "
                     "of the tokenized prompt, as each pipeline counts them (OmniGen: each row of the instruction "
                     f"template; default {DEFAULT_PROMPT_TOKENS}, an assumption: flopcalc has no tokenizer)",
                refusal="it pads or truncates the prompt to a fixed length (see --max-sequence-length where it "
                        "applies)")

#: ``OmniGenPipeline.__init__``: ``default_sample_size`` 128 latent pixels (× ``vae_scale_factor``: 1024²).
DEFAULT_SAMPLE_SIZE = 128
#: ``__call__`` defaults: ``num_inference_steps`` 50, ``guidance_scale`` 2.5 (``img_guidance_scale`` 1.6 and
#: ``max_input_image_size`` 1024 follow).
STEPS, GUIDANCE = 50, 2.5
MAX_INPUT_IMAGE_SIZE = 1024
#: ``crop_image`` (processor_omnigen.py:28-52): input images end as multiples of 16 pixels, at least 16.
IMAGE_MULTIPLE = 16

def input_image_size(height: int, width: int, max_size: int = MAX_INPUT_IMAGE_SIZE) -> tuple[int, int]:
    """``crop_image`` (processor_omnigen.py:28-52) on a ``height × width`` image: halved (box) while its short
    side is at least twice ``max_size``, scaled down so its long side is ``max_size`` (each side rounded), scaled
    up so its short side is 16, then centre-cropped to multiples of 16. PIL sizes are (width, height)."""
    w, h = width, height
    while min(w, h) >= 2 * max_size:
        w, h = w // 2, h // 2
    if max(w, h) > max_size:
        scale = max_size / max(w, h)
        w, h = round(w * scale), round(h * scale)
    if min(w, h) < IMAGE_MULTIPLE:
        scale = IMAGE_MULTIPLE / min(w, h)
        w, h = round(w * scale), round(h * scale)
    return h - h % IMAGE_MULTIPLE, w - w % IMAGE_MULTIPLE


@register_pipeline("OmniGenPipeline", denoisers=("OmniGenTransformer2DModel",),
                   options=("prompt_tokens", "input_images"))
def omnigen_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                     index: Mapping[str, Any] | None = None) -> Plan:
    """``OmniGenPipeline.__call__``: ``height = width = default_sample_size · vae_scale_factor`` (128 × 8 =
    1024), 50 steps, ``guidance_scale`` 2.5. Guidance always runs: the transformer gets a batch of
    ``num_cfg + 1`` rows per step, the prompt's and the negative prompt's (two passes), and with input images
    (``input_images``) the image-guidance row too (three passes; ``img_guidance_scale`` weighs it).
    ``guidance_scale`` never changes the work. Every row has ``prompt_tokens`` condition tokens (see the module
    doc), plus, in the prompt's and the image-guidance rows, the patch tokens of each input image in place of
    its placeholder: ``(h/16)(w/16)`` for an image the processor crops to ``h × w`` (flopcalc takes each input
    image at the output size). The negative row has the same length, padded. Each input image is VAE-encoded
    once per row that holds it (prompt and image-guidance rows, per image generated) before the loop; the VAE
    decodes each image once. Sides must divide by ``vae_scale_factor · 2`` (the transformer's 2×2 patches)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to OmniGenPipeline: its __call__ takes no strength (every "
                          "step runs from noise; input images condition it: --input-images)")
    f = vae_scale_factor(components)
    tokens = DEFAULT_PROMPT_TOKENS if s.prompt_tokens is None else s.prompt_tokens
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * f, width=s.width or DEFAULT_SAMPLE_SIZE * f,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f * 2, "OmniGen height and width (vae_scale_factor × 2)")
    images = s.input_images or 0
    passes = s.counting.passes(3 if images else 2)
    prompts = s.batch_size * s.num_images_per_prompt
    lat_h, lat_w = s.height // f, s.width // f
    notes = list(missing_notes(components, ["transformer", "vae"]))
    notes.append(f"text: {tokens} condition tokens per row" + (" (--prompt-tokens)" if s.prompt_tokens else
                 " (assumed: flopcalc has no tokenizer; set --prompt-tokens to the longest tokenized instruction, "
                 "OmniGen's template included; every row is padded to it, the default negative prompt's too)"))
    if s.negative_prompt:
        notes.append("the negative prompt only changes the negative row's tokens (within --prompt-tokens)")
    runs: list[ComponentRun] = []
    image_tokens = 0
    if images:
        if s.symbolic:
            raise FlopcalcError("OmniGen with input images has no closed-form law (the processor resizes and crops "
                                "each input image by rounding): use the numeric estimate")
        in_h, in_w = input_image_size(s.height, s.width)
        image_tokens = images * (in_h // IMAGE_MULTIPLE) * (in_w // IMAGE_MULTIPLE)
        notes.append(f"{images} input image(s), each taken at the output size and cropped by the processor to "
                     f"{in_h}×{in_w}: {image_tokens} image tokens in the prompt's and the image-guidance rows")
        if "vae" in components:
            encodes = 2 * images * prompts
            runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                     RunShape(height=in_h, width=in_w), encodes,
                                     f"{images} input image(s) × 2 rows (prompt, image guidance) × {prompts} "
                                     "image(s)"))
    if "transformer" in components:
        cls = component_class(components, "transformer") or "?"
        shape = RunShape(latent_height=lat_h, latent_width=lat_w, text_len=tokens)
        if images:
            per_image = s.steps * prompts
            runs.append(ComponentRun("transformer", cls, "forward", "denoiser",
                                     replace(shape, reference_tokens=image_tokens), 2 * per_image,
                                     f"{s.steps} steps × 2 rows with the input images (prompt, image guidance) × "
                                     f"{prompts} image(s)"))
            runs.append(ComponentRun("transformer", cls, "forward", "denoiser",
                                     replace(shape, text_len=tokens + image_tokens), per_image,
                                     f"{s.steps} steps × 1 negative row (padded to the same length) × {prompts} "
                                     "image(s)"))
        else:
            runs.append(ComponentRun("transformer", cls, "forward", "denoiser", shape, s.steps * passes * prompts,
                                     f"{s.steps} steps × {passes} rows (prompt, negative prompt) × {prompts} "
                                     "image(s)"))
    runs += [r for r in vae_runs(components, replace(s, strength=None), prompts, lat_h, lat_w)]
    return Plan("OmniGenPipeline", s, passes, tuple(runs), tuple(notes))
