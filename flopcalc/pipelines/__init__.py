"""Pipeline semantics (see :mod:`flopcalc.pipelines.base`); one module per pipeline family."""

from flopcalc.pipelines.base import (  # noqa: F401
    ComponentRun,
    Counting,
    Plan,
    Settings,
    check_divisible,
    config_value,
    denoising_steps,
    plan,
    register_pipeline,
    vae_scale_factor,
)
