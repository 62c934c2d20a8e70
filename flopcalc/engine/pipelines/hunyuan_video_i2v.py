"""HunyuanVideo image-to-video: ``HunyuanVideoImageToVideoPipeline`` (diffusers
``pipelines/hunyuan_video/pipeline_hunyuan_video_image2video.py``), planned with the HunyuanVideo plan's pieces
(:mod:`flopcalc.engine.pipelines.hunyuan_video`: latent frames, the VAE calls in the pipeline's mode). Its text encoder
is a ``LlavaForConditionalGeneration`` (:mod:`flopcalc.engine.architectures.llava`) run on the templated prompt with the
image."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flopcalc.engine.architectures.autoencoder_kl_hunyuan_video import temporal_factor
from flopcalc.engine.architectures.llava import image_features
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    component_class,
    config_value,
    denoiser_run,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.hunyuan_video import (
    CLIP_TOKENS,
    DEFAULT_TEMPORAL,
    _vae_run,
    _vae_runs,
    latent_frame_count,
    true_cfg_passes,
    with_defaults,
)

NAME = "HunyuanVideoImageToVideoPipeline"
#: ``__call__``'s ``guidance_scale`` default (pipeline_hunyuan_video_image2video.py:636); the others (720×1280,
#: 129 frames, 50 steps, true_cfg_scale 1.0, max_sequence_length 256, :631-652) are HunyuanVideoPipeline's.
GUIDANCE_SCALE = 1.0
#: ``DEFAULT_PROMPT_TEMPLATE["image_emb_len"]`` (:98): the Llava image features kept per prompt.
IMAGE_EMB_LEN = 576
#: ``_get_llama_prompt_embeds`` (:370-373): the 4 tokens before the assistant header's end are cut out.
ASSISTANT_TOKENS_CUT = 4
#: ``DEFAULT_PROMPT_TEMPLATE["crop_start"]`` (:95): the template tokens before the user's prompt.
CROP_START = 103
#: ``__call__`` (:779-784): ``image_embed_interleave`` by ``image_condition_type``.
INTERLEAVE = {"latent_concat": 2, "token_replace": 4}


def text_tokens(max_sequence_length: int, image_condition_type: str) -> int:
    """Tokens of ``prompt_embeds`` the transformer sees (``_get_llama_prompt_embeds``, :350-419): the Llava
    output over ``max_sequence_length + crop_start`` prompt tokens with the one ``<image>`` token expanded to
    ``image_emb_len`` (576) is cut into the text part (``text_crop_start = crop_start − 1 + 576`` to the end,
    less the 4 tokens before the assistant marker: ``max_sequence_length − 4``) and the image part
    (``prompt_embeds[:, 5:581]`` taken every ``image_embed_interleave``-th: ⌈576 / interleave⌉, 144 for
    token_replace, 288 for latent_concat), concatenated image first. The count does not depend on the prompt
    (a truncated prompt takes the fallback marker at the end, :359-366, and keeps the same length; with
    ``max_sequence_length`` ≤ 4 the text slice is empty)."""
    step = INTERLEAVE[image_condition_type]
    return -(-IMAGE_EMB_LEN // step) + max(max_sequence_length - ASSISTANT_TOKENS_CUT, 0)


def llava_tokens(max_sequence_length: int) -> int:
    """Tokens the Llava text encoder runs on (``_get_llama_prompt_embeds``, :315-347): the templated prompt padded
    to ``max_sequence_length + crop_start`` (103) tokens, its one ``<image>`` token expanded to ``image_emb_len``
    (576) by ``_expand_input_ids_with_image_tokens`` (:116: ``+ 1 × (576 − 1)``): 934 for 256."""
    return max_sequence_length + CROP_START + IMAGE_EMB_LEN - 1


def _check_llava(components: Mapping[str, Mapping[str, Any]]) -> None:
    """The pipeline splices ``image_emb_len`` (576) image tokens into the prompt; the Llava's projector must give as
    many features per image, or its ``get_placeholder_mask`` refuses the call."""
    if component_class(components, "text_encoder") != "LlavaForConditionalGeneration":
        return
    features = image_features(components["text_encoder"])
    if features != IMAGE_EMB_LEN:
        raise FlopcalcError(f"text_encoder: the Llava gives {features} image features per image, but {NAME} "
                            f"splices {IMAGE_EMB_LEN} image tokens into its prompt (the call would fail)")


def _condition_type(components: Mapping[str, Mapping[str, Any]]) -> str:
    """``self.transformer.config.image_condition_type`` (:774), checked against the channels the pipeline
    gives the transformer (:806-809): latent_concat concatenates noise, image latent and a mask
    (``2 × latent_channels + 1``), token_replace passes the latent as is (``latent_channels``)."""
    transformer = components.get("transformer")
    kind = "token_replace" if transformer is None else transformer["image_condition_type"]
    if kind not in INTERLEAVE:
        raise FlopcalcError(f"transformer: image_condition_type {kind!r}: {NAME} runs only a latent_concat or "
                            "token_replace transformer (a text-to-video transformer has none)")
    latent = config_value(components, "vae", "latent_channels", None)
    if transformer is not None and latent is not None:
        want = 2 * latent + 1 if kind == "latent_concat" else latent
        if transformer["in_channels"] != want:
            raise FlopcalcError(f"transformer: in_channels {transformer['in_channels']} ≠ {want} for {kind} with the "
                                f"VAE's {latent} latent channels ({NAME} would fail on its first step)")
    return kind


@register_pipeline(NAME, guidance="separate", options=("true_cfg_scale", "max_sequence_length", "num_frames", "vae_tiling"))
def hunyuan_video_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                          index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanVideoImageToVideoPipeline.__call__`` (:623): 720×1280, 129 frames, 50 steps, ``guidance_scale``
    1.0 (an embedding when the transformer has ``guidance_embeds``), ``true_cfg_scale`` 1.0: true CFG (a
    second forward on the negative prompt, :906) only when ``true_cfg_scale > 1`` and a negative prompt is
    given (:778). Per prompt (and negative prompt, with a black image, :849): the Llava on
    :func:`llava_tokens` tokens and the image, CLIP on 77 tokens (:491). The transformer sees
    :func:`text_tokens` text tokens. The image:

    * ``prepare_latents`` (:552): VAE-encoded as a one-frame video at the output size, once per video
      (``[self.vae.encode(img.unsqueeze(0)) for img in image]``);
    * latent_concat: noise, image latent (zeroed after frame 0) and a mask concatenated on channels
      (``in_channels = 2 × latent + 1``); token_replace: the first latent frame replaced by the image latent
      (the transformer runs its first-frame tokens on a zero timestep too, counted by its assembler).

    The decode covers every latent frame (:950). No ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions every step and the whole "
                          "schedule runs")
    if s.symbolic:
        raise FlopcalcError(f"{NAME}'s transformer sees max(L − {ASSISTANT_TOKENS_CUT}, 0) prompt tokens after the image "
                            "tokens: piecewise in the text length, no closed-form law; use the numeric estimate")
    kind = _condition_type(components)
    f = vae_scale_factor(components)
    t = temporal_factor(components["vae"]) if "vae" in components else DEFAULT_TEMPORAL
    s = with_defaults(s, GUIDANCE_SCALE)
    _check_llava(components)
    true_cfg, passes, notes = true_cfg_passes(components, s, NAME)
    transformer = components.get("transformer")
    if transformer is not None and not transformer["guidance_embeds"]:
        notes.append("guidance_scale is ignored: the transformer is not guidance-distilled (guidance_embeds false)")
    latent_frames = latent_frame_count(s.num_frames, t)
    runs = text_runs(components, [("text_encoder", llava_tokens(s.max_sequence_length)),
                                  ("text_encoder_2", CLIP_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if true_cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, text_tokens(s.max_sequence_length, kind), passes,
                         latent_frames=latent_frames)
    vae, vae_notes = _vae_runs(components, s, f, latent_frames)
    if "vae" in components:
        videos = s.batch_size * s.num_images_per_prompt
        vae.insert(0, _vae_run("encode", component_class(components, "vae") or "?", components["vae"], s, videos,
                               f"{videos} input image(s) (one per video)", height=s.height, width=s.width,
                               frames=1))
        how = ("is concatenated to the noise latent on channels with a mask" if kind == "latent_concat"
               else "replaces the first latent frame (token_replace)")
        notes.append(f"the image is VAE-encoded as a one-frame video once per video; its latent {how}")
    return Plan(NAME, s, passes, tuple(runs + vae), tuple(notes + vae_notes))
