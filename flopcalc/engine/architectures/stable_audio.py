"""Stable Audio Open: ``StableAudioDiTModel`` (diffusers ``models/transformers/stable_audio_transformer.py``) and
``StableAudioProjectionModel`` (``pipelines/stable_audio/modeling_stable_audio.py``); formulas in
:mod:`flopcalc.formulas.stable_audio`.

Run shapes. The DiT: ``seq_len`` latent frames (the latent's length), ``text_len`` conditioning tokens (the projected text and the
two duration tokens), and ``timestep_tokens``: how many timesteps this run embeds — None or 1 for a call's first row,
0 for its other rows, which share the call's one timestep (``StableAudioPipeline`` passes ``t.unsqueeze(0)``).
The projection model: ``seq_len`` text states projected (0: none) and ``text_len_2`` duration tokens made (2: the
start and end numbers; 0: none): the pipeline calls it once on the text (``encode_prompt``) and once on the numbers
(``encode_duration``), one piece each.
"""

from __future__ import annotations

from flopcalc.engine.config import SIZE, Config, Int, Real, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas.stable_audio import stable_audio_dit, stable_audio_projection

#: ``StableAudioDiTModel.__init__`` keyword defaults (stable_audio_transformer.py:196-209).
DIT_DEFAULTS = {
    "sample_size": 1024,
    "in_channels": 64,
    "num_layers": 24,
    "attention_head_dim": 64,
    "num_attention_heads": 24,
    "num_key_value_attention_heads": 12,
    "out_channels": 64,
    "cross_attention_dim": 768,
    "time_proj_dim": 256,
    "global_states_input_dim": 1536,
    "cross_attention_input_dim": 768,
}

declare_keys("StableAudioDiTModel", {
    # the conversion script writes a float (2097152 / 2048); the pipeline reads int(sample_size)
    "sample_size": SIZE | Real(0.0, 2.0**24), "in_channels": SIZE, "num_layers": Int(0, 1024),
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "num_key_value_attention_heads": SIZE,
    "out_channels": SIZE, "cross_attention_dim": SIZE, "time_proj_dim": SIZE, "global_states_input_dim": SIZE,
    "cross_attention_input_dim": SIZE,
})


def latent_length(values) -> int:
    """``int(transformer.config.sample_size)``: the latent frames every Stable Audio generation denoises
    (pipeline_stable_audio.py:572)."""
    return int(values.get("sample_size", DIT_DEFAULTS["sample_size"]))


@register("StableAudioDiTModel", role="denoiser", defaults=DIT_DEFAULTS,
          source="diffusers/models/transformers/stable_audio_transformer.py",
          nominal=RunShape(seq_len=16, text_len=8))
def stable_audio_dit_model(config: Config, shape: RunShape) -> Node:
    """``StableAudioDiTModel.forward`` on one row (see the module doc)."""
    heads = positive_int(config, "num_attention_heads")
    kv_heads = positive_int(config, "num_key_value_attention_heads")
    if heads % kv_heads:  # repeat_interleave(heads // kv_heads) must give the query heads
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} is not a multiple of "
                          f"num_key_value_attention_heads {kv_heads}")
    time_dim = positive_int(config, "time_proj_dim")
    if time_dim % 2:
        raise ConfigError(f"{config.component}/config.json: time_proj_dim {time_dim} must be even (cos and sin halves)")
    return stable_audio_dit(
        in_channels=positive_int(config, "in_channels"), out_channels=positive_int(config, "out_channels"),
        layers=int(config["num_layers"]), heads=heads, kv_heads=kv_heads,
        head_dim=positive_int(config, "attention_head_dim"), cross_dim=positive_int(config, "cross_attention_dim"),
        cross_input_dim=positive_int(config, "cross_attention_input_dim"),
        global_dim=positive_int(config, "global_states_input_dim"), time_dim=time_dim, frames=shape.seq_len,
        context=shape.text_len, time_rows=1 if shape.timestep_tokens is None else shape.timestep_tokens)


#: ``StableAudioProjectionModel.__init__`` takes no defaults (modeling_stable_audio.py:126).
PROJECTION_DEFAULTS = {"text_encoder_dim": None, "conditioning_dim": None, "min_value": None, "max_value": None}

declare_keys("StableAudioProjectionModel", {
    "text_encoder_dim": SIZE, "conditioning_dim": SIZE, "min_value": Real(-1e9, 1e9, closed=True),
    "max_value": Real(-1e9, 1e9, closed=True),
})


@register("StableAudioProjectionModel", role="projection", defaults=PROJECTION_DEFAULTS,
          source="diffusers/pipelines/stable_audio/modeling_stable_audio.py",
          nominal=RunShape(seq_len=8, text_len_2=2))
def stable_audio_projection_model(config: Config, shape: RunShape) -> Node:
    """``StableAudioProjectionModel.forward``: the text projection on ``seq_len`` states and the two number
    conditioners when ``text_len_2`` is 2."""
    for key in PROJECTION_DEFAULTS:
        if config[key] is None:
            raise ConfigError(f"{config.component}/config.json: {key} is required (StableAudioProjectionModel has no "
                              "default for it)")
    if config["max_value"] == config["min_value"]:  # the conditioners divide by max - min
        raise ConfigError(f"{config.component}/config.json: max_value must differ from min_value")
    numbers = shape.text_len_2 or 0
    if numbers not in (0, 2):
        raise ConfigError(f"{config.component}: the projection model makes 0 or 2 duration tokens, not {numbers}")
    return stable_audio_projection(text_dim=positive_int(config, "text_encoder_dim"),
                                   dim=positive_int(config, "conditioning_dim"), text_tokens=shape.seq_len or 0,
                                   numbers=numbers // 2)
