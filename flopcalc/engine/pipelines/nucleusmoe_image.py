"""NucleusMoE-Image (diffusers ``pipelines/nucleusmoe_image/pipeline_nucleusmoe_image.py``,
``NucleusMoEImagePipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``NucleusMoEImagePipeline.__init__``: ``default_sample_size`` 128 (× ``vae_scale_factor`` 8: 1024²),
#: ``default_max_sequence_length`` 1024, ``default_return_index`` -8 (pipeline_nucleusmoe_image.py:174-176).
DEFAULT_SAMPLE_SIZE, MAX_SEQUENCE_LENGTH, RETURN_INDEX = 128, 1024, -8
#: ``__call__`` defaults (:385, :388).
STEPS, GUIDANCE = 50, 4.0
#: ``encode_prompt`` pads the batch to the longest prompt, rounded up to a multiple of 8 (``pad_to_multiple_of=8``, :221-229).
PAD_MULTIPLE = 8
#: ``prepare_latents`` packs ``in_channels // 4`` latent channels into ``patch_size``² features (:522, :303-311).
PACKING = 2


def _check_components(components: Mapping[str, Any]) -> None:
    transformer, encoder, vae = components.get("transformer"), components.get("text_encoder"), components.get("vae")
    if transformer is not None:
        p, c = transformer["patch_size"], transformer["in_channels"]
        if p != PACKING or c % 4:
            raise ConfigError(f"transformer/config.json: NucleusMoEImagePipeline packs in_channels // 4 latent channels "
                              f"into patch_size² features, so in_channels ({c}) must divide by 4 and patch_size ({p}) be "
                              f"{PACKING}")
        out = c if transformer["out_channels"] is None else transformer["out_channels"]
        if p * p * out != c:
            raise ConfigError(f"transformer/config.json: proj_out gives patch_size² × out_channels = {p * p * out} "
                              f"features per token, the packed latent has in_channels = {c} (set out_channels "
                              f"{c // (p * p)}; the scheduler step fails otherwise)")
        if vae is not None and vae.get("z_dim") is not None and vae["z_dim"] != c // 4:
            raise ConfigError(f"NucleusMoEImagePipeline decodes latents of in_channels // 4 = {c // 4} channels but the "
                              f"VAE's z_dim is {vae['z_dim']}")
    if encoder is not None:
        from flopcalc.engine.architectures.qwen3_vl import text_config

        text = text_config(encoder)
        if text["num_hidden_layers"] + 1 < -RETURN_INDEX:
            raise ConfigError(f"NucleusMoEImagePipeline reads hidden state {RETURN_INDEX} but the text encoder has "
                              f"{text['num_hidden_layers'] + 1} hidden states")
        if transformer is not None and transformer["joint_attention_dim"] != text["hidden_size"]:
            raise ConfigError(f"the text encoder's hidden_size {text['hidden_size']} must equal the transformer's "
                              f"joint_attention_dim {transformer['joint_attention_dim']}")


@register_pipeline("NucleusMoEImagePipeline", denoisers=("NucleusMoEImageTransformer2DModel",),
                   options=("max_sequence_length",), guidance="separate")
def nucleusmoe_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``NucleusMoEImagePipeline.__call__``: 1024² (``default_sample_size`` 128 × 8), 50 steps, ``guidance_scale``
    4.0; guidance (``> 1``) encodes the negative prompt (``""`` by default) on its own and runs it as a second batch of
    transformer forwards each step (:583-592).

    ``encode_prompt`` runs ``Qwen3VLForConditionalGeneration`` (``lm_head`` on every position) on the chat template
    (system prompt, then the prompt), padded to the longest prompt rounded up to a multiple of 8 and truncated at
    ``max_sequence_length`` (default 1024), and hands hidden state -8 to the transformer. flopcalc counts
    ``max_sequence_length`` (rounded up to 8) tokens for the prompt and for the negative prompt: the upper bound; set it
    to the real token count. The transformer runs on the ``(H/16)(W/16)`` packed tokens of the ``H/8 × W/8`` latent
    (sides not divisible by 16 are floored, as ``prepare_latents`` does) and the text tokens; the Qwen-Image VAE
    decodes one frame."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to NucleusMoEImagePipeline: its __call__ takes no strength (it "
                          "generates from noise)")
    if s.symbolic:
        raise FlopcalcError("NucleusMoEImagePipeline: the experts' capacity is a ceiling of the token count and the "
                            "text is padded to a multiple of 8: no closed-form law; use the numeric estimate")
    _check_components(components)
    f = vae_scale_factor(components)
    height, width = s.height or DEFAULT_SAMPLE_SIZE * f, s.width or DEFAULT_SAMPLE_SIZE * f
    side = f * PACKING
    if height < side or width < side:
        raise ResolutionError(f"NucleusMoE-Image height and width must be at least {side} (one packed latent patch)")
    length = s.max_sequence_length or MAX_SEQUENCE_LENGTH
    padded = -(-length // PAD_MULTIPLE) * PAD_MULTIPLE
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if height % side or width % side:
        notes.append(f"{height}×{width} is floored to {height // side * side}×{width // side * side} (prepare_latents: "
                     f"sides divisible by {side}), the size of the image made")
    s = replace(s, height=height // side * side, width=width // side * side, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale, max_sequence_length=length)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    notes.append(f"text: {padded} tokens per prompt{' and negative prompt' if cfg else ''} (max_sequence_length "
                 f"{length}{'' if padded == length else ' rounded up to a multiple of 8'}: the upper bound; the pipeline "
                 "pads to the longest prompt; set max_sequence_length to its token count)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in NucleusMoEImagePipeline)")
    runs = text_runs(components, [("text_encoder", padded)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, padded, passes)
    runs += image_runs(components, s, f)
    return Plan("NucleusMoEImagePipeline", s, passes, tuple(runs), tuple(notes))
