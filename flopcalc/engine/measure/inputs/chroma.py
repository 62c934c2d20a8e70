"""Input builder for ``ChromaTransformer2DModel`` (imported by ``measure.py``; see validation/README.md).

No module needs help on meta: the rotary tables (``FluxPosEmbed``) and the approximator's input
(``ChromaCombinedTimestepTextProjEmbeddings``: sinusoidal projections and a fixed ``mod_proj``
buffer) run as they are. The T5 encoder and the ``AutoencoderKL`` use ``measure.py``'s builders.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, input_builder

#: ``ChromaPipeline``: ``vae_scale_factor`` 8 (``AutoencoderKL``), latents packed 2×2.
VAE_SCALE_FACTOR = 8
PACKING = 2


@input_builder("ChromaTransformer2DModel", settings=("height", "width", "text_len"))
def _chroma_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``ChromaPipeline`` calls it at batch 1: hidden_states (1, (H/16)(W/16), in_channels), the
    2×2-packed latent; encoder_hidden_states (1, text_len, joint_attention_dim); timestep (1,);
    img_ids ((H/16)(W/16), 3) and txt_ids (text_len, 3); attention_mask (1, text_len + image tokens),
    the pipeline's text mask extended over the image tokens (``_prepare_attention_mask``; all ones
    here: a mask never changes the dense matmuls counted)."""
    tokens = (_exact_div(s["height"], VAE_SCALE_FACTOR * PACKING, "height")
              * _exact_div(s["width"], VAE_SCALE_FACTOR * PACKING, "width"))
    text_len = s["text_len"]
    return {
        "hidden_states": TensorSpec((1, tokens, _cfg(model, "in_channels"))),
        "encoder_hidden_states": TensorSpec((1, text_len, _cfg(model, "joint_attention_dim"))),
        "timestep": TensorSpec((1,)),
        "img_ids": TensorSpec((tokens, 3)),
        "txt_ids": TensorSpec((text_len, 3)),
        "attention_mask": TensorSpec((1, text_len + tokens)),
    }
