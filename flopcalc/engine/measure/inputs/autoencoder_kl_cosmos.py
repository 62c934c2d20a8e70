"""Input builder for the Cosmos 1.0 VAE ``AutoencoderKLCosmos`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md).

Shapes as ``CosmosTextToWorldPipeline`` / ``CosmosVideoToWorldPipeline`` (diffusers ``pipelines/cosmos/``) feed it at
batch 1: ``num_frames`` video frames become ``(num_frames − 1) // temporal_compression_ratio + 1`` latent frames,
``H × W`` pixels an ``H/s × W/s`` latent (``s`` the ``spatial_compression_ratio``).

What needed help: the Haar patching's ``wavelets`` buffer is ``_WAVELETS[...].clone()`` of a module-level CPU tensor,
which building under ``torch.device("meta")`` leaves on the CPU while its ``_arange`` (``torch.arange``) lands on meta;
``_dwt`` multiplies the two, which meta refuses. Encode moves the encoder's ``wavelets`` to meta first (as on a real
device, where ``.to(device)`` moves both); its values never change a count. The decoder's unpatching moves them itself
(``.to(device)``), and the functional convolutions and the temporal attention's causal boolean mask run on meta as on
real data.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder


@input_builder("AutoencoderKLCosmos", settings=("height", "width", "num_frames"), calls=("decode", "encode"))
def _cosmos_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, (F − 1)//t + 1, H/s, W/s); encode: x (1, in_channels, F, H, W)."""
    if call == "encode":
        embed = model.encoder.patch_embed
        embed.wavelets = embed.wavelets.to("meta")  # see the module doc
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    f, t = _cfg(model, "spatial_compression_ratio"), _cfg(model, "temporal_compression_ratio")
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), (s["num_frames"] - 1) // t + 1,
                             _div(s["height"], f, "height"), _div(s["width"], f, "width")))}
