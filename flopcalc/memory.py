"""``memory()``: the weights a pipeline holds in GPU memory, what is resident at the peak under diffusers'
offload modes, and whether that fits a GPU of the table.

* weights per component: :func:`flopcalc.weights.component_weights` (parameters at the loaded dtype,
  float32-kept modules, buffers), exact;
* resident at the peak: ``none`` (``pipe.to("cuda")``): every component; ``model``
  (``enable_model_cpu_offload()``): one component at a time, so the largest;
* against a GPU of :mod:`flopcalc.gpus`: fits when the resident weights are at most its memory; the
  headroom is what is left for activations, the CUDA context and the allocator.

Not counted: activations (see the README's scope), ``enable_sequential_cpu_offload()`` (it needs the
parameters of each leaf module, below the cost trees' grouping) and quantized storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from flopcalc.errors import FlopcalcError
from flopcalc.weights import DTYPE_BYTES, ComponentWeights, component_weights

OFFLOAD = ("none", "model")


@dataclass(frozen=True)
class MemoryEstimate:
    model: str
    pipeline: str
    offload: str
    components: tuple[ComponentWeights, ...]
    gpu_key: str | None = None
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None

    @property
    def weights_bytes(self) -> int:
        return sum(c.bytes for c in self.components)

    @property
    def resident_bytes(self) -> int:
        """Weights on the GPU at the peak under the offload mode."""
        if self.offload == "model":
            return max((c.bytes for c in self.components), default=0)
        return self.weights_bytes

    @property
    def resident_components(self) -> tuple[str, ...]:
        if self.offload == "model" and self.components:
            return (max(self.components, key=lambda c: c.bytes).component,)
        return tuple(c.component for c in self.components)

    @property
    def fits(self) -> bool | None:
        return None if self.gpu_memory_bytes is None else self.resident_bytes <= self.gpu_memory_bytes

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.gpu_memory_bytes is None else self.gpu_memory_bytes - self.resident_bytes

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "pipeline": self.pipeline,
            "unit": "bytes",
            "offload": self.offload,
            "components": [c.to_dict() for c in self.components],
            "weights_bytes": self.weights_bytes,
            "resident": {"bytes": self.resident_bytes, "components": list(self.resident_components),
                         "what": "weights and buffers only (activations not counted)"},
        }
        if self.gpu_key is not None:
            out["gpu"] = {"key": self.gpu_key, "name": self.gpu_name, "memory_bytes": self.gpu_memory_bytes,
                          "fits": self.fits, "headroom_bytes": self.headroom_bytes}
        return out


def memory(model: str, *, dtype: str = "bf16", dtype_of: Mapping[str, str] | None = None, offload: str = "none",
           gpu: str | None = None, revision: str | None = None, token: str | None = None) -> MemoryEstimate:
    """The weights of ``model``'s components (the pipeline's, as :func:`flopcalc.estimate` plans them), each
    loaded in ``dtype`` unless ``dtype_of`` names its own, and what is resident under ``offload``."""
    from flopcalc.api import estimate_configs
    from flopcalc.pipelines import Settings
    from flopcalc.sources import resolve

    if offload not in OFFLOAD:
        raise FlopcalcError(f"--offload {offload!r}: choose one of {', '.join(OFFLOAD)} (sequential offload is not "
                            "counted)")
    for d in (dtype, *(dtype_of or {}).values()):
        if d not in DTYPE_BYTES:
            raise FlopcalcError(f"dtype {d!r}: choose one of {', '.join(DTYPE_BYTES)} (quantized storage is not "
                                "counted)")
    source = resolve(model, revision=revision, token=token)
    report = estimate_configs(source.model_index, source.components, Settings(), model=source.name,
                              source_kind=source.kind, revision=source.revision, source_notes=source.notes,
                              missing=tuple(source.missing))
    names = list(dict.fromkeys(c.component for c in report.components))
    unknown = sorted(set(dtype_of or {}) - set(names))
    if unknown:
        raise FlopcalcError(f"--dtype-of names {', '.join(unknown)}, not components of {source.name}: "
                            f"{', '.join(names)}")
    weights = tuple(component_weights(source.components[n], component=n, dtype=(dtype_of or {}).get(n, dtype))
                    for n in names)
    key = name = mem = None
    if gpu is not None:
        from flopcalc.gpus import gpu as lookup_gpu

        g = lookup_gpu(gpu)
        key, name, mem = g.key, g.name, g.memory_bytes
    return MemoryEstimate(source.name, report.pipeline, offload, weights, key, name, mem)
