"""BRIA FIBO 2 (diffusers ``pipelines/bria_fibo2/pipeline_bria_fibo2.py``, ``BriaFibo2Pipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``BriaFibo2Pipeline.__init__``: ``default_sample_size`` 128 (× ``vae_scale_factor`` 8: 1024²) and
#: ``tokenizer_max_length`` 4096, the truncation of the prompt (pipeline_bria_fibo2.py:210-211).
DEFAULT_SAMPLE_SIZE, MAX_SEQUENCE_LENGTH = 128, 4096
#: ``__call__`` defaults (:583-584).
STEPS, GUIDANCE = 30, 5.0
#: ``TEXT_ENCODER_OUT_LAYERS`` (:61): six bundles of three hidden states each, the transformer's ``encoder_hidden_states``
#: (the Perceiver's bundle, then one per injection block).
TEXT_ENCODER_OUT_LAYERS = ((9, 20, 31), (5, 16, 27), (7, 18, 29), (9, 20, 31), (11, 22, 33), (13, 24, 35))


def _check_components(components: Mapping[str, Any]) -> None:
    """What the real call needs of the components: the text encoder's hidden states the bundles read, three of them
    concatenated as wide as the transformer's ``cap_feat_dim``, and a bundle for every injection block."""
    transformer, encoder = components.get("transformer"), components.get("text_encoder")
    bundles = len(TEXT_ENCODER_OUT_LAYERS)
    if transformer is not None:
        layers = transformer["n_layers"]
        ids = list(transformer["injection_layer_ids"])
        unfed = [i for k, i in enumerate(ids) if k + 1 >= bundles and isinstance(i, int) and 0 <= i < layers]
        if unfed:
            raise ConfigError(f"transformer/config.json: injection_layer_ids {ids}: BriaFibo2Pipeline passes "
                              f"{bundles - 1} injection bundles, so block(s) {unfed} would read a bundle it does not "
                              "have")
    if encoder is not None:
        from flopcalc.engine.architectures.qwen3_vl import text_config

        text = text_config(encoder)
        depth, width = text["num_hidden_layers"], text["hidden_size"]
        deepest = max(max(layers) for layers in TEXT_ENCODER_OUT_LAYERS)
        if deepest > depth:
            raise ConfigError(f"BriaFibo2Pipeline reads hidden state {deepest} but the text encoder has {depth} layers "
                              f"({depth + 1} hidden states)")
        if transformer is not None and transformer["cap_feat_dim"] != 3 * width:
            raise ConfigError(f"BriaFibo2Pipeline concatenates three text-encoder layers (3 × {width} = {3 * width}) "
                              f"but the transformer's cap_feat_dim is {transformer['cap_feat_dim']}")


@register_pipeline("BriaFibo2Pipeline", denoisers=("BriaFibo2Transformer2DModel",), options=("max_sequence_length",),
                   guidance="separate")
def bria_fibo2_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``BriaFibo2Pipeline.__call__`` generating from a prompt: 1024² (``default_sample_size`` 128 × 8), 30 steps,
    ``guidance_scale`` 5.0; guidance (``> 1``) runs the negative prompt as a second batch of transformer forwards each
    step (:825-834) and encodes it on its own (:766-779).

    ``_get_qwen_prompt_embeds`` runs ``Qwen3VLForConditionalGeneration`` (every position through ``lm_head``) on the chat
    template around the (JSON) prompt, ``padding="longest"``, truncated at 4096 tokens; six bundles of three hidden
    states each are the transformer's text (the Perceiver's, then one per injection block). flopcalc counts
    ``max_sequence_length`` tokens (default 4096, the upper bound) for the prompt and for the negative prompt (by
    default the null caption, whose length needs the tokenizer): set ``max_sequence_length`` to the real token count.
    The transformer turns them into gist tokens (256 to 512, from the length) and runs on them and on the
    ``(H/16)(W/16)`` patch tokens of the ``H/8 × W/8`` latent; the Flux 2 VAE decodes at ``H/8 × W/8``. Editing
    (``image=``) and the images of a caption's text (``text_images``, drawn for JSON captions with ``text_render``
    entries) run Qwen3-VL's vision tower and are not planned."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to BriaFibo2Pipeline: its __call__ takes no strength (it generates "
                          "from noise; editing takes image=, not planned by flopcalc)")
    if s.symbolic:
        raise FlopcalcError("BriaFibo2Pipeline: the transformer's gist-token count is a rounded, clamped function of "
                            "the text length (compute_gist_count): no closed-form law; use the numeric estimate")
    _check_components(components)
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * f, width=s.width or DEFAULT_SAMPLE_SIZE * f,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"BriaFibo2Pipeline truncates the prompt at {MAX_SEQUENCE_LENGTH} tokens "
                            f"(tokenizer_max_length), got max_sequence_length {s.max_sequence_length}")
    check_divisible(s.height, s.width, f * 2, "BRIA FIBO 2 height and width (vae_scale_factor × 2)")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {s.max_sequence_length} tokens per prompt{' and negative prompt' if cfg else ''} (the upper "
                 "bound: the pipeline pads to the longest prompt; set max_sequence_length to its token count)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in BriaFibo2Pipeline)")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("BriaFibo2Pipeline", s, passes, tuple(runs), tuple(notes))
