"""flopcalc: analytical, weight-free FLOP calculator for diffusion pipelines.

>>> import flopcalc
>>> report = flopcalc.estimate("flux-dev", height=1024, width=1024, steps=28)
>>> report.flops, report.to_dict()["components"][0]["component"]
>>> flopcalc.energy("flux-dev", gpu="h100", steps=28).to_dict()["prediction"]["energy_j"]
>>> flopcalc.train("flux-dev", step_time=2.0, gpu="h100-sxm").mfu          # training FLOPs and MFU
>>> flopcalc.train("flux-dev", trainable="lora:16").lora.trainable_params   # a LoRA run (peft adapters)
>>> flopcalc.memory("flux-dev", gpu="rtx-4090", offload="model").fits       # weights in GPU memory

Nothing heavy is imported here: the numeric path needs neither sympy nor huggingface_hub.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flopcalc.engine.version import __version__
__all__ = ["estimate", "energy", "memory", "train", "FlopcalcError", "__version__"]

if TYPE_CHECKING:
    from flopcalc.flops.estimate import estimate
    from flopcalc.energy_laws.predict import energy
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.gpu_memory.estimate import memory
    from flopcalc.training.estimate import train


def __getattr__(name: str) -> Any:
    if name == "estimate":
        from flopcalc.flops.estimate import estimate

        return estimate
    if name == "energy":
        from flopcalc.energy_laws.predict import energy

        return energy
    if name == "train":
        from flopcalc.training.estimate import train

        return train
    if name == "memory":
        from flopcalc.gpu_memory.estimate import memory

        return memory
    if name == "FlopcalcError":
        from flopcalc.engine.errors import FlopcalcError

        return FlopcalcError
    raise AttributeError(f"module 'flopcalc' has no attribute {name!r}")
