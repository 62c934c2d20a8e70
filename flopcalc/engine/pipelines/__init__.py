"""Pipeline semantics (see :mod:`flopcalc.engine.pipelines.base`); one module per pipeline family."""

from flopcalc.engine.pipelines.base import (  # noqa: F401
    ComponentRun,
    Counting,
    Plan,
    Settings,
    check_divisible,
    config_value,
    denoising_steps,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.dispatch import plan  # noqa: F401
from flopcalc.engine.pipelines.vae import image_runs, vae_runs  # noqa: F401
