"""HunyuanDiT pipeline (diffusers ``pipelines/hunyuandit/pipeline_hunyuandit.py``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from importlib.resources import files
from typing import Any

from flopcalc.engine.config import positive_int
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.registry import RunShape

#: ``encode_prompt(..., max_sequence_length=77 / 256)`` in ``__call__`` step 3: fixed, not arguments.
BERT_TOKENS = 77
MT5_TOKENS = 256
#: ``height = int((height // 16) * 16)`` in ``__call__`` step 0.
SIZE_FLOOR = 16


@lru_cache(maxsize=1)
def _shapes() -> dict[str, Any]:
    return json.loads(files("flopcalc").joinpath("data/hunyuan_dit_standard_shapes.json").read_text())


def hunyuan_binned_size(height: int, width: int) -> tuple[int, int]:
    """``(height, width)`` after the pipeline's resolution binning: unchanged when
    ``(height, width)`` is in ``SUPPORTED_SHAPE``, else ``map_to_standard_shapes(width, height)``:
    the standard aspect ratio nearest ``width / height``, then that ratio's shape of nearest area
    (first on ties, as ``np.argmin``). Tables copied from diffusers by
    ``validation/extract_tables.py``."""
    tables = _shapes()
    if [height, width] in tables["supported_shape"]:
        return height, width
    ratio = width / height
    ratios = tables["standard_ratio"]
    r = min(range(len(ratios)), key=lambda i: abs(ratios[i] - ratio))
    shapes = tables["standard_shape"][r]
    a = min(range(len(shapes)), key=lambda i: abs(shapes[i][0] * shapes[i][1] - width * height))
    w, h = shapes[a]
    return h, w


def _text_lengths(components: Mapping[str, Mapping[str, Any]]) -> int:
    """Text tokens the transformer attends to: its config's ``text_len + text_len_t5`` (the only
    count it accepts). With a text encoder present they must be the pipeline's 77 + 256."""
    bert = config_value(components, "transformer", "text_len", BERT_TOKENS)
    t5 = config_value(components, "transformer", "text_len_t5", MT5_TOKENS)
    if (bert, t5) != (BERT_TOKENS, MT5_TOKENS) and ({"text_encoder", "text_encoder_2"} & set(components)):
        raise ConfigError(
            f"transformer/config.json: text_len {bert} / text_len_t5 {t5}, but HunyuanDiTPipeline always encodes "
            f"{BERT_TOKENS} BERT and {MT5_TOKENS} mT5 tokens: the transformer would reject them "
            "(text_embedding_padding and the attention pool are sized by its config)."
        )
    return bert + t5


@register_pipeline("HunyuanDiTPipeline", denoisers=("HunyuanDiT2DModel",), options=("vae_tiling",),
                   refuses={"max_sequence_length": f"it encodes a fixed {BERT_TOKENS} BERT and {MT5_TOKENS} mT5 tokens"})
def hunyuan_dit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanDiTPipeline.__call__``: default size ``transformer.sample_size × vae_scale_factor``
    (128 × 8 = 1024²), floored to multiples of 16; with ``use_resolution_binning`` (default) a
    size outside ``SUPPORTED_SHAPE`` is generated at the nearest standard shape. 50 steps,
    ``guidance_scale`` 5.0; CFG (``guidance_scale > 1``) runs the transformer on a doubled batch
    (two passes), and both encoders encode the negative prompt ("" by default): BERT on 77
    tokens, mT5 on 256, each once per prompt (+ once per negative). The transformer attends to
    77 + 256 = 333 text tokens. There is no max_sequence_length argument."""
    f = vae_scale_factor(components)
    # default_sample_size: transformer.config.sample_size, 128 without a transformer
    sample = config_value(components, "transformer", "sample_size", 128)
    # the class has no patch size (None): the config must give one; without a transformer none applies
    patch = positive_int(components["transformer"], "patch_size") if "transformer" in components else 1
    text_len = _text_lengths(components)
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    if not {"text_encoder", "text_encoder_2"} & set(components) and text_len != BERT_TOKENS + MT5_TOKENS:
        notes.append(f"this transformer takes {text_len} text tokens (text_len + text_len_t5), not the pipeline's "
                     f"{BERT_TOKENS} + {MT5_TOKENS}: estimated at its own")

    asked = (s.height or sample * f, s.width or sample * f)
    height, width = (side // SIZE_FLOOR * SIZE_FLOOR for side in asked)
    if not height or not width:
        raise ResolutionError(f"HunyuanDiT height and width must be at least {SIZE_FLOOR} (the pipeline floors them "
                              f"to multiples of {SIZE_FLOOR}): got {asked[0]}×{asked[1]}")
    if (height, width) != asked:
        notes.append(f"{asked[0]}×{asked[1]} is floored to {height}×{width} (multiples of {SIZE_FLOOR}), as "
                     "HunyuanDiTPipeline does")
    if s.resolution_binning:
        binned = hunyuan_binned_size(height, width)
        if binned != (height, width):
            notes.append(f"resolution binning: {height}×{width} is generated at {binned[0]}×{binned[1]}, as "
                         "HunyuanDiTPipeline does (turn off with --no-resolution-binning)")
            height, width = binned
    s = replace(s, height=height, width=width, steps=s.steps or 50,
                guidance_scale=5.0 if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f * patch, "HunyuanDiT height and width (VAE factor × patch size)")
    if s.strength is not None:
        notes.append("diffusers has no HunyuanDiT image-to-image pipeline: estimated as the text-to-image pipeline "
                     "with the input image VAE-encoded and the last `strength` of the schedule run")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", BERT_TOKENS), ("text_encoder_2", MT5_TOKENS)],
                     s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, text_len, passes)
    runs += image_runs(components, s, f)
    return Plan("HunyuanDiTPipeline", s, passes, tuple(runs), tuple(notes))


@register_pipeline("HunyuanDiTControlNetPipeline", refuses={
    "max_sequence_length": f"it encodes a fixed {BERT_TOKENS} BERT and {MT5_TOKENS} mT5 tokens"})
def hunyuan_dit_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanDiTControlNetPipeline.__call__``
    (``pipelines/controlnet_hunyuandit/pipeline_hunyuandit_controlnet.py``): HunyuanDiTPipeline's plan (1024²,
    floored to 16 and resolution-binned, 50 steps, ``guidance_scale`` 5.0, BERT on 77 and mT5 on 256 tokens, CFG as a
    doubled batch) with a ``HunyuanDiT2DControlNetModel``:

    * ``prepare_image`` repeats the control image to every image and, under CFG, doubles the batch *before*
      ``vae.encode`` (``do_classifier_free_guidance=...``, ``guess_mode=False``): the encoder runs images × passes
      times at the generated size;
    * the ControlNet runs at every step on the same (doubled) batch as the transformer, once per pass and image,
      on the latent, the control latent and the 77 + 256 text states; its residuals are added to the transformer's
      long skips.

    A ``HunyuanDiT2DMultiControlNetModel`` (a list of ControlNets, no config of its own) is not modelled: one
    ControlNet. ``strength`` does not apply (every step runs)."""
    if s.strength is not None and s.strength < 1:
        raise OptionError("--strength does not apply to HunyuanDiTControlNetPipeline: its __call__ takes no strength "
                          "(every step runs), only 1 means that")
    base = hunyuan_dit_pipeline(components, replace(s, strength=None), index=index)
    st, passes = base.settings, base.passes
    notes = [n for n in base.notes if "image-to-image" not in n]
    controlnet = components.get("controlnet")
    if controlnet is None:
        notes.append("controlnet is absent from this pipeline and was not counted")
        return replace(base, pipeline="HunyuanDiTControlNetPipeline", notes=tuple(notes))
    f = vae_scale_factor(components)
    patch = positive_int(controlnet, "patch_size")
    check_divisible(st.height, st.width, f * patch, "HunyuanDiT height and width (VAE factor × ControlNet patch size)")
    images = st.batch_size * st.num_images_per_prompt
    text_len = positive_int(controlnet, "text_len") + positive_int(controlnet, "text_len_t5")
    runs = list(base.runs)
    control = ComponentRun("controlnet", component_class(components, "controlnet") or "?", "forward", "controlnet",
                           RunShape(latent_height=st.height // f, latent_width=st.width // f, text_len=text_len),
                           st.steps * passes * images, f"{st.steps} steps × {passes} pass(es) × {images} image(s)")
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    runs.insert(at, control)
    if "vae" in components:
        runs.insert(at, ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                     RunShape(height=st.height, width=st.width), images * passes,
                                     f"{images} control image(s)" + (" × 2 (the batch doubled for CFG before "
                                                                     "encoding)" if passes == 2 else "")))
    return replace(base, pipeline="HunyuanDiTControlNetPipeline", runs=tuple(runs), notes=tuple(notes))
