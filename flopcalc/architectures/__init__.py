"""Architecture assemblers: config → tree of block formulas. Importing this package registers
every architecture (one module per model family)."""

from flopcalc.architectures import autoencoder_kl, clip, flux, pixart_dit, sd3, t5, unet_2d_condition  # noqa: F401
