"""``memory()``: the weights a pipeline holds in GPU memory, what is resident at the peak under diffusers'
offload modes, and whether that fits a GPU of the table.

* weights per component: :func:`flopcalc.gpu_memory.weights.component_weights` (parameters at the loaded dtype,
  float32-kept modules, buffers), exact;
* activations: the estimated peak of each measured text encoder, denoiser forward and VAE decode
  (:mod:`flopcalc.gpu_memory.activations`, with its leave-one-out error), for the fused attention kernel and the
  math path, × the samples per forward, in the component's dtype;
* at the peak: ``none`` (``pipe.to("cuda")``): every component's weights + the largest activation peak, also of
  the components ``from_pretrained`` loads that these settings never run (``ComponentWeights.runs`` False);
  ``model`` (``enable_model_cpu_offload()``): one component at a time, the largest weights + activations (a
  component that never runs is never moved to the GPU);
  ``sequential`` (``enable_sequential_cpu_offload()``, ``pipeline_utils.py:1349``): accelerate's ``cpu_offload``
  hooks every module with direct tensors (``hooks.py`` ``attach_align_device_hook``) and moves only those
  tensors to the GPU for that module's forward (``AlignDevicesHook.pre_forward`` / ``post_forward``); buffers stay
  on the GPU. Resident: every component's buffers + the largest single module (exact) + that component's
  activations. accelerate also keeps the direct parameters of the modules enclosing the running one (tables,
  scales, an attention's in-projection: at most 7.1% of the largest module on every bundled component, measured by
  ``tests/test_weights.py``),
  which this leaves out;
* two peaks: ``peak_allocated_bytes``, the live tensors (weights resident + activations) at the worst moment; and
  ``peak_bytes``, what decides an out-of-memory error: the caching allocator's reserved peak above them (rounding,
  segments, fragmentation: replayed and fitted, :mod:`flopcalc.gpu_memory.allocator`), the cuBLAS workspaces and the
  CUDA context of the GPU named, at the moment where that sum is largest;
* against a GPU of :mod:`flopcalc.hardware.gpus`: fits when ``peak_bytes`` is at most its memory.

Quantized weights (bitsandbytes, optimum-quanto, torchao, GGUF: :mod:`flopcalc.gpu_memory.quantized`); their activations
are in bf16, the dtype the unquantized layers and the computation run in. ``transformers_version`` decides whether a
transformers class keeps its ``_keep_in_fp32_modules`` in float32 (:mod:`flopcalc.gpu_memory.transformers_versions`);
where another release would load different bytes, a note gives that figure.

Not counted: activations of components whose config was not measured (a note names them); sequential offload
of quantized weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Mapping

from flopcalc.gpu_memory.activations import ATTENTION, ActivationPeak, activation_peak, pixel_call
from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.quantized import FORMATS, REST_DTYPE, canonical, refuse_unknown
from flopcalc.gpu_memory.weights import DTYPE_BYTES, ComponentWeights, component_weights

OFFLOAD = ("none", "model", "group-block", "group-leaf", "sequential")
#: What ``resident`` holds under each offload mode.
RESIDENT = {"none": "every component's weights and buffers",
            "model": "the largest component's weights and buffers (one component at a time)",
            "group-block": "the running component's blocks outside its ModuleLists, and its largest group of blocks "
                           "(two with CUDA streams: the next one prefetched)",
            "group-leaf": "the running component's largest leaf module (two with CUDA streams)",
            "sequential": "every component's buffers and the largest single module's parameters (one module at a "
                          "time; the enclosing modules' direct parameters, at most 7.1% of it on the bundled models, "
                          "are not included)"}


#: What the GPU fit compares with the GPU's memory.
FIT_USES = "peak_bytes (the caching allocator's reserved peak + the CUDA context), not peak_allocated_bytes"


@dataclass(frozen=True)
class CallActivations:
    """The estimated activation peaks of one call (a denoiser forward, a VAE decode or encode, an encoder) at the
    run's size."""

    component: str
    call: str
    batch: int
    bytes_per_element: int
    fused: ActivationPeak | None
    math: ActivationPeak | None

    def bytes(self, attention: str) -> int | None:
        peak = self.fused if attention == "fused" else self.math
        return None if peak is None else peak.elements * self.batch * self.bytes_per_element

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "call": self.call, "batch": self.batch,
                "bytes_per_element": self.bytes_per_element,
                **{a: None if p is None else {**p.to_dict(), "bytes": self.bytes(a)}
                   for a, p in (("fused", self.fused), ("math", self.math))}}


@dataclass(frozen=True)
class MemoryEstimate:
    model: str
    pipeline: str
    offload: str
    components: tuple[ComponentWeights, ...]
    activations: tuple[CallActivations, ...] = ()
    attention: str = "fused"
    settings: dict[str, Any] = field(default_factory=dict, hash=False)
    gpu_key: str | None = None
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None
    notes: tuple[str, ...] = ()
    #: components model_index.json lists (from_pretrained loads them) whose config.json is not in the source:
    #: not weighed, so every total is a lower bound
    uncounted: tuple[str, ...] = ()
    #: component → the forwards it makes per generation (each call of the real module: a step's doubled-batch
    #: denoiser call once, a tile once), what sequential offload moves its weights for
    forwards: Mapping[str, int] = field(default_factory=dict, hash=False)
    #: images or videos one generation makes (prompts × per prompt)
    items: int = 1
    #: group offloading: consecutive blocks per group (``num_blocks_per_group``), and CUDA streams (``use_stream``:
    #: the next group is prefetched while one runs; diffusers then forces one block per group)
    blocks_per_group: int = 1
    stream: bool = False
    #: the denoiser's last ``block_swap`` blocks kept on the host and copied in for each forward (trainers'
    #: ``blocks_to_swap``), without offload
    block_swap: int = 0
    #: the calls of the run whose activation peak has no estimate (``component.call``): "fits" cannot be said then
    unestimated: tuple[str, ...] = ()
    #: component → its reserve law's kind (:func:`flopcalc.gpu_memory.allocator.kind_of_role`)
    kinds: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: component → the caching allocator's exact reserve above its weights, where its config was replayed
    weights_reserved: Mapping[str, int] = field(default_factory=dict, hash=False)
    #: ``component.call`` → that measured call's own reserve law ``(factor, error)``
    call_laws: Mapping[str, tuple[float, float]] = field(default_factory=dict, hash=False)
    #: a tiled image-VAE decode's peak as a function of the tile side (:mod:`flopcalc.gpu_memory.vae_tiles`)
    tile_law: Any = field(default=None, hash=False, compare=False)

    @cached_property
    def vae_tile(self) -> Any:
        """With a GPU and a tiled image-VAE decode: the largest tile side that fits
        (:func:`flopcalc.gpu_memory.vae_tiles.largest_tile`), else None."""
        from flopcalc.gpu_memory.vae_tiles import largest_tile

        return largest_tile(self)

    @property
    def transfer_bytes(self) -> int:
        """Weight bytes moved to the GPU per generation by the offload mode: none without offload; each running
        component once under ``enable_model_cpu_offload()`` (its hook moves it when it is called, it stays until
        another is); every module for every forward under ``enable_sequential_cpu_offload()`` and group offloading
        (each group's hook onloads it for every forward); the swapped blocks for every denoiser forward."""
        if self.offload == "model":
            return sum(c.bytes for c in self.running)
        if self.offload == "sequential":
            return sum((c.bytes - c.buffer_bytes) * self.forwards.get(c.component, 1) for c in self.running)
        if self.offload in ("group-block", "group-leaf"):
            return sum(c.bytes * self.forwards.get(c.component, 1) for c in self.running)
        if self.block_swap:
            den = self._swapped()
            return sum(den[1]) * self.forwards.get(den[0].component, 1)
        return 0

    @property
    def host_bytes(self) -> int:
        """Weight bytes the offload mode keeps in host memory (pinned with CUDA streams): every component's under an
        offload mode (the pipeline lives on the CPU), the swapped blocks with a block swap, none otherwise."""
        if self.offload != "none":
            return self.weights_bytes
        return sum(self._swapped()[1]) if self.block_swap else 0

    def _swapped(self) -> tuple[ComponentWeights, tuple[int, ...]]:
        """The denoiser (the running component with the most block bytes) and its swapped blocks' bytes."""
        den = max(self.running, key=lambda c: sum(c.block_bytes))
        return den, den.block_bytes[len(den.block_bytes) - self.block_swap:]

    def _group(self, c: ComponentWeights) -> int:
        """The largest group block-level group offloading has on the GPU at once while ``c`` runs."""
        size = 1 if self.stream else self.blocks_per_group
        b = c.block_bytes
        windows = [sum(b[i:i + size]) for i in range(0, len(b), size)] or [0]
        if self.stream and len(windows) > 1:  # the next group onloaded while one runs
            return max(x + y for x, y in zip(windows, windows[1:]))
        return max(windows)

    @property
    def transfer_bytes_per_item(self) -> float:
        return self.transfer_bytes / self.items

    @property
    def weights_bytes(self) -> int:
        return sum(c.bytes for c in self.components)

    @property
    def buffer_bytes(self) -> int:
        return sum(c.buffer_bytes for c in self.components)

    @property
    def running(self) -> tuple[ComponentWeights, ...]:
        """The components the pipeline runs at these settings (offload moves only these to the GPU)."""
        return tuple(c for c in self.components if c.runs)

    def _held(self, c: ComponentWeights) -> int:
        """What the offload mode holds on the GPU while ``c`` runs, beyond what stays there throughout
        (``_apply_group_offloading_block_level``: the unmatched group is onloaded for the whole forward, one group of
        blocks at a time; leaf level: one leaf module at a time, two with streams)."""
        if self.offload == "sequential":
            return c.largest_module_bytes
        if self.offload == "group-block":
            return c.unmatched_bytes + self._group(c)
        if self.offload == "group-leaf":
            return c.largest_module_bytes * (2 if self.stream else 1)
        return c.bytes

    def _always(self) -> int:
        """What stays on the GPU throughout: every buffer under sequential offload; without offload every weight,
        less the swapped blocks, plus the one swapped block being computed."""
        if self.offload == "sequential":
            return self.buffer_bytes
        if self.offload == "none":
            if not self.block_swap:
                return self.weights_bytes
            swapped = self._swapped()[1]
            return self.weights_bytes - sum(swapped) + max(swapped, default=0)
        return 0

    @property
    def resident_bytes(self) -> int:
        """Weights on the GPU at the peak under the offload mode."""
        if self.offload == "none":
            return self._always()
        return self._always() + max((self._held(c) for c in self.running), default=0)

    @property
    def resident_components(self) -> tuple[str, ...]:
        if self.offload != "none" and self.running:
            return (max(self.running, key=self._held).component,)
        return tuple(c.component for c in self.components)

    def activation_bytes(self, component: str) -> int:
        """The largest estimated activation peak among ``component``'s calls (0 where none is estimated)."""
        return max((a.bytes(self.attention) or 0 for a in self.activations if a.component == component), default=0)

    def _resident_parts(self, c: ComponentWeights) -> list[tuple[ComponentWeights, int]]:
        """Each component's weight bytes on the GPU while ``c`` runs (they sum to :meth:`_always` + :meth:`_held`)."""
        if self.offload == "none":
            den, swapped = self._swapped() if self.block_swap else (None, ())
            return [(w, w.bytes - sum(swapped) + max(swapped, default=0) if w is den else w.bytes)
                    for w in self.components]
        if self.offload == "sequential":
            return [(w, w.buffer_bytes + (self._held(c) if w is c else 0)) for w in self.components]
        return [(c, self._held(c))]

    def _peak_call(self, c: ComponentWeights) -> CallActivations | None:
        """The call of ``c`` with the largest estimated activation peak."""
        calls = [a for a in self.activations if a.component == c.component and a.bytes(self.attention)]
        return max(calls, key=lambda a: a.bytes(self.attention) or 0, default=None)

    def _reserve_at(self, c: ComponentWeights) -> tuple[str, Any]:
        """``(where, Reserve)`` of the moment ``c`` runs its largest call (:func:`flopcalc.gpu_memory.allocator.reserve`):
        replayed weights exact, the others by their kind's fitted overhead, the call's activations by its own law
        where measured, else its kind's."""
        from flopcalc.gpu_memory.allocator import reserve
        from flopcalc.hardware.gpus import gpu as lookup_gpu

        exact, by_kind = [], {}
        for w, b in self._resident_parts(c):
            r = self.weights_reserved.get(w.component)
            if r is not None and b == w.bytes:
                exact.append((b, r))
            elif b:
                k = self.kinds.get(w.component, "denoiser")
                by_kind[k] = by_kind.get(k, 0) + b
        call = self._peak_call(c)
        act = 0 if call is None else call.bytes(self.attention) or 0
        where = c.component if call is None else f"{c.component}.{call.call}"
        r = reserve(sum(b for b, _ in exact) + sum(by_kind.values()) + act,
                    gpu=None if self.gpu_key is None else lookup_gpu(self.gpu_key), activation_bytes=act,
                    kind=self.kinds.get(c.component, "denoiser"), weights=by_kind, exact_weights=exact,
                    activation_law=None if call is None else self.call_laws.get(where))
        return where, r

    @property
    def peak_allocated_bytes(self) -> int:
        """Live tensors at the worst moment of the run: weights resident + activations (``max_memory_allocated``,
        rounding aside)."""
        if self.offload == "none":
            return self._always() + max((self.activation_bytes(c.component) for c in self.components), default=0)
        return self._always() + max((self._held(c) + self.activation_bytes(c.component) for c in self.running),
                                    default=0)

    @cached_property
    def _reserve_peak(self) -> tuple[str, Any]:
        moments = [self._reserve_at(c) for c in (self.components if self.offload == "none" else self.running)]
        return max(moments, key=lambda m: m[1].peak_bytes)

    @property
    def reserve(self) -> Any:
        """The :class:`~flopcalc.gpu_memory.allocator.Reserve` of the moment with the largest :attr:`peak_bytes`."""
        return self._reserve_peak[1]

    @property
    def peak_at(self) -> str:
        """The call (``component.call``, or a component without an estimated call) at that moment."""
        return self._reserve_peak[0]

    @property
    def peak_bytes(self) -> int:
        """What decides an out-of-memory error: the caching allocator's reserved peak (live tensors, its rounding and
        fragmentation, the cuBLAS workspaces) plus the CUDA context of the GPU named (none without one)."""
        return self.reserve.peak_bytes

    @property
    def fits(self) -> bool | None:
        """True when the peak is within the GPU's memory and every call's activation peak is estimated; False when
        even the estimated part exceeds it; None without a GPU, or when the estimated part fits but a call's
        activations are not estimated (:attr:`verdict` says which)."""
        if self.gpu_memory_bytes is None:
            return None
        if self.peak_bytes > self.gpu_memory_bytes:
            return False
        return None if self.unestimated else True

    @property
    def verdict(self) -> str | None:
        """The answer in words: fits, does not fit, or what is not known."""
        if self.gpu_memory_bytes is None:
            return None
        if self.fits is True:
            return "fits"
        if self.fits is False:
            return "does not fit"
        return ("weights and the estimated activations fit; the activations of " + ", ".join(self.unestimated) +
                " are not estimated")

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.gpu_memory_bytes is None else self.gpu_memory_bytes - self.peak_bytes

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "pipeline": self.pipeline,
            "unit": "bytes",
            "offload": self.offload,
            "components": [c.to_dict() for c in self.components],
            "weights_bytes": self.weights_bytes,
            "resident": {"bytes": self.resident_bytes, "components": list(self.resident_components),
                         "what": RESIDENT[self.offload]},
            "settings": dict(self.settings),
            "activations": [a.to_dict() for a in self.activations],
            "attention": self.attention,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_bytes": self.peak_bytes,
            "reserve": {**self.reserve.to_dict(), "at": self.peak_at},
            "transfer_bytes": self.transfer_bytes,
            "host_bytes": self.host_bytes,
            "offload_options": {"blocks_per_group": self.blocks_per_group, "stream": self.stream,
                                "block_swap": self.block_swap},
            "notes": list(self.notes),
            "uncounted_components": list(self.uncounted),
        }
        if self.gpu_key is not None:
            out["gpu"] = {"key": self.gpu_key, "name": self.gpu_name, "memory_bytes": self.gpu_memory_bytes,
                          "fits": self.fits, "verdict": self.verdict, "headroom_bytes": self.headroom_bytes,
                          "fit_uses": FIT_USES}
            tile = self.vae_tile
            if tile is not None:
                out["gpu"]["vae_tile"] = tile.to_dict()
        out["activations_not_estimated"] = list(self.unestimated)
        return out


def forward_batch(report: Any, role: str) -> int:
    """Samples one forward of a component of ``role`` holds, as the pipeline batches them: the denoiser the images of
    the batch × the guidance passes when ``__call__`` concatenates them (``torch.cat([latents] * 2)``), else the
    images alone (a forward per pass), and so a ControlNet, which each step calls on the denoiser's input (e.g.
    ``control_model_input = latent_model_input``, pipeline_controlnet.py:1264; pipeline_z_image_controlnet.py:662-668);
    the VAE decoder the images (``vae.decode(latents)`` on the whole batch); text encoders, image encoders and the VAE
    encoder the prompts (their inputs)."""
    s = report.settings
    items = s.batch_size * s.num_images_per_prompt
    if role in ("denoiser", "controlnet"):
        return items * (report.passes if report.batched_passes else 1)
    if role == "vae_decoder":
        return items
    return s.batch_size


def memory(model: str, *, attention: str = "fused", dtype: str = "bf16", dtype_of: Mapping[str, str] | None = None,
           offload: str = "none", gpu: str | None = None, revision: str | None = None, token: str | None = None,
           blocks_per_group: int = 1, stream: bool = False, block_swap: int = 0,
           transformers_version: str | None = None, lora_rank: int | None = None,
           lora_targets: str | tuple[str, ...] | None = None, **settings: Any) -> MemoryEstimate:
    """The weights of ``model``'s components (the pipeline's, as :func:`flopcalc.estimate` plans them), each
    loaded in ``dtype`` unless ``dtype_of`` names its own, the activation peaks of the measured calls at the
    run's size with the samples each forward holds (:func:`forward_batch`), and what is resident at the peak under
    ``offload`` (``group-block`` / ``group-leaf``: diffusers' ``enable_group_offload`` at block level with
    ``blocks_per_group`` blocks per group, or at leaf level, with CUDA streams when ``stream``), or with the
    denoiser's last ``block_swap`` blocks kept on the host. ``settings`` are :func:`flopcalc.estimate`'s (size,
    steps, guidance, batch of prompts, family options such as ``reference_images=2``): they decide which components
    run, on what, how often."""
    from flopcalc.engine.settings import Settings
    from flopcalc.engine.sources import resolve
    from flopcalc.gpu_memory.allocator import call_law, kind_of_role, replayed_weights
    from flopcalc.flops.estimate import estimate_configs

    run = Settings.make(**settings)  # family options checked before any file is read, as estimate does
    if offload not in OFFLOAD:
        raise FlopcalcError(f"--offload {offload!r}: choose one of {', '.join(OFFLOAD)}")
    _check_offload(offload, blocks_per_group, stream, block_swap)
    from flopcalc.gpu_memory.transformers_versions import OTHER, PINNED, parse_version

    parse_version(transformers_version or PINNED)
    from flopcalc.gpu_memory.adapters import check_rank, parse_targets

    targets = parse_targets(lora_targets)
    if lora_rank is not None:
        check_rank(lora_rank)
    elif targets is not None:
        raise FlopcalcError("--lora-targets needs --lora-rank (the adapters' rank)")
    for d in (dtype, *(dtype_of or {}).values()):
        if d not in DTYPE_BYTES and canonical(d) is None:
            raise refuse_unknown(d, tuple(DTYPE_BYTES))
        if offload in ("sequential", "group-block", "group-leaf") and d not in DTYPE_BYTES:
            raise FlopcalcError(f"--offload {offload} with {d} weights is not modelled (the hooks move quantized "
                                "layers differently): use --offload model, or a bf16/fp16/fp32 dtype")
    if attention not in ATTENTION:
        raise FlopcalcError(f"--attention {attention!r}: choose one of {', '.join(ATTENTION)}")
    source = resolve(model, revision=revision, token=token)

    def plan(settings: Settings):
        return estimate_configs(source.model_index, source.components, settings, model=source.name,
                                source_kind=source.kind, revision=source.revision, source_notes=source.notes,
                                missing=tuple(source.missing))

    report = plan(run)
    # a decode split into tiles: its fit is in the whole latent's positions, the shape the untiled plan gives
    whole = {(c.component, c.call): c for c in plan(replace(run, vae_tiling=False)).components} if run.vae_tiling \
        else {}
    names = list(dict.fromkeys(c.component for c in report.components))
    idle, notes = _loaded_not_run(source, names)
    notes += source.notes  # a listed component without its config.json (not weighed), a skipped safety checker
    unknown = sorted(set(dtype_of or {}) - set(names) - set(idle))
    if unknown:
        raise FlopcalcError(f"--dtype-of names {', '.join(unknown)}, not components of {source.name}: "
                            f"{', '.join(names + idle)}")
    version = transformers_version or PINNED
    adds = _adapter_shapes(report)
    lora = None if lora_rank is None else (lora_rank, targets)
    denoisers = {c.component for c in report.components if c.role == "denoiser"}
    weights = tuple(replace(component_weights(source.components[n], component=n, dtype=(dtype_of or {}).get(n, dtype),
                                              transformers_version=version, shape=adds.get(n),
                                              lora=lora if n in denoisers else None), runs=n not in idle)
                    for n in names + idle)
    weights += _ip_adapter_encoder(report, source, names, dtype, dtype_of, version, notes)
    if lora is not None:
        notes += [f"{w.component}: LoRA adapters of rank {lora_rank} on {w.lora_layers:,} layers, "
                  f"{w.lora_params:,} parameters ({w.lora_bytes / 2**30:,.2f} GiB; peft, unfused)"
                  for w in weights if w.lora_layers]
    other = OTHER if parse_version(version) != parse_version(OTHER) else PINNED
    for w in weights:
        if w.component not in source.components:
            continue
        alt = component_weights(source.components[w.component], component=w.component,
                                dtype=(dtype_of or {}).get(w.component, dtype), transformers_version=other,
                                shape=adds.get(w.component), lora=lora if w.component in denoisers else None)
        if alt.bytes != w.bytes:
            notes.append(f"{w.component}: {w.bytes / 2**30:,.2f} GiB as transformers {version} loads it "
                         f"({w.params_fp32:,} parameters kept in float32); transformers {other} keeps "
                         f"{alt.params_fp32:,} in float32: {alt.bytes / 2**30:,.2f} GiB")
    dtypes = {w.component: w.dtype for w in weights}
    acts = []
    tiles = None
    laws: dict[str, tuple[float, float]] = {}
    forwards: dict[str, int] = {}
    for c in report.components:
        forwards[c.component] = forwards.get(c.component, 0) + max(1, c.runs // forward_batch(report, c.role))
        if c.role not in MEASURED_ROLES:
            continue
        cfg = source.components[c.component]
        untiled = whole.get((c.component, c.call))
        tiled = untiled is not None and (untiled.shape != c.shape or untiled.runs != c.runs)
        shape = untiled.shape if tiled else c.shape
        peaks = {a: activation_peak(c.class_name, c.call, cfg, shape, a, tiled=tiled) for a in ATTENTION}
        if peaks["fused"] is None:
            notes.append(f"{c.component}.{c.call}: no activation estimate (this config was not measured"
                         f"{' in tiles' if tiled else ''})")
            continue
        acts.append(CallActivations(c.component, c.call, forward_batch(report, c.role),
                                    DTYPE_BYTES[REST_DTYPE if dtypes[c.component] in FORMATS else dtypes[c.component]],
                                    peaks["fused"], peaks["math"]))
        if tiled and c.call == "decode":
            from flopcalc.gpu_memory.vae_tiles import tile_law

            tiles = tile_law(c.component, c.class_name, cfg, report.settings.height, report.settings.width,
                             untiled.shape.get("latent_frames"))
        law = call_law(c.class_name, c.call, cfg, tiled=tiled)
        if law is not None:
            laws[f"{c.component}.{c.call}"] = law
        if peaks["fused"].text_len not in (None, c.shape.get("text_len")):
            notes.append(f"{c.component}: fitted at {peaks['fused'].text_len} text tokens, run with "
                         f"{c.shape.get('text_len')}: the activation estimate does not follow the text length")
        if pixel_call(shape):  # an encode: the frames it encodes (its shape's; one image: none), not the video's
            if peaks["fused"].num_frames not in (None, shape.get("frames")) and shape.get("frames") is not None:
                notes.append(f"{c.component}.{c.call}: fitted encoding {peaks['fused'].num_frames} frames, run on "
                             f"{shape['frames']}: the estimate follows one frame's pixels, an extrapolation in the "
                             "frame count")
        elif peaks["fused"].num_frames not in (None, report.settings.num_frames):
            notes.append(f"{c.component}.{c.call}: fitted at {peaks['fused'].num_frames} frames, run with "
                         f"{report.settings.num_frames}: the estimate follows the latent positions, an extrapolation "
                         "in the frame count")
        if peaks["fused"].extrapolated:
            unit = "pixels" if pixel_call(shape) else "latent positions"
            notes.append(f"{c.component}.{c.call}: {peaks['fused'].n} {unit} lie outside the fitted "
                         f"{peaks['fused'].n_range[0]}–{peaks['fused'].n_range[1]}: the activation peak is extrapolated")
    key = name = mem = None
    if gpu is not None:
        from flopcalc.hardware.gpus import gpu as lookup_gpu

        g = lookup_gpu(gpu)
        key, name, mem = g.key, g.name, g.memory_bytes
    s = report.settings
    items = s.batch_size * s.num_images_per_prompt
    summary = {"height": s.height, "width": s.width, "num_frames": s.num_frames, "batch_size": s.batch_size,
               "num_images_per_prompt": s.num_images_per_prompt, "guidance_passes": report.passes,
               "passes_in_one_forward": report.batched_passes, "transformers_version": version}
    est = MemoryEstimate(source.name, report.pipeline, offload, weights, tuple(acts), attention, summary, key, name,
                         mem, tuple(notes), tuple(source.missing), forwards, items, blocks_per_group, stream,
                         block_swap, _unestimated(report, acts),
                         {c.component: kind_of_role(c.role) for c in reversed(report.components)},
                         replayed_weights(source.components, weights), laws, tiles)
    if block_swap:
        den = est._swapped()[0]
        if block_swap > len(den.block_bytes):
            raise FlopcalcError(f"--block-swap {block_swap}: {den.component} has {len(den.block_bytes)} blocks")
    return est


def _check_offload(offload: str, blocks_per_group: int, stream: bool, block_swap: int) -> None:
    for value, flag, low in ((blocks_per_group, "--blocks-per-group", 1), (block_swap, "--block-swap", 0)):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 100_000:
            raise FlopcalcError(f"{flag} must be an integer from {low} to 100000, got {value!r}")
    if stream and offload not in ("group-block", "group-leaf"):
        raise FlopcalcError("--stream applies to group offloading (--offload group-block or group-leaf)")
    if blocks_per_group != 1 and offload != "group-block":
        raise FlopcalcError("--blocks-per-group applies to --offload group-block")
    if blocks_per_group != 1 and stream:
        raise FlopcalcError("--blocks-per-group with --stream: diffusers runs one block per group with streams")
    if block_swap and offload != "none":
        raise FlopcalcError(f"--block-swap keeps blocks on the host without an offload mode; not with --offload "
                            f"{offload}")


#: Roles whose activation peaks are measured and fitted (:mod:`flopcalc.gpu_memory.activations`); a vocoder (LTX-2's,
#: turning the decoded mel spectrogram into the waveform) as a decode, in its mel frames; the projection is Stable
#: Audio's ``StableAudioProjectionModel`` (the text states and the start / end seconds it projects); a VAE encoder and
#: an image encoder in their input's pixels of one frame (``activations.positions``); an upsampler (LTX-Video's and
#: LTX-2's latent upsamplers, one call on the whole latent: pipeline_ltx_latent_upsample.py:277,
#: pipeline_ltx2_latent_upsample.py:386) in its input latent's positions.
MEASURED_ROLES = ("text_encoder", "denoiser", "vae_decoder", "vocoder", "controlnet", "projection", "vae_encoder",
                  "image_encoder", "upsampler")


def _unestimated(report: Any, acts: list[CallActivations]) -> tuple[str, ...]:
    """The calls the run makes whose activation peak has no estimate (``component.call``)."""
    have = {(a.component, a.call) for a in acts}
    return tuple(dict.fromkeys(f"{c.component}.{c.call}" for c in report.components
                               if (c.component, c.call) not in have))


def _adapter_shapes(report: Any) -> dict[str, dict[str, Any]]:
    """Run-shape fields that add modules to a component's weights: an IP-Adapter's image projection and
    ``to_k_ip`` / ``to_v_ip`` (``ip_image_embed_dim``, ``ip_resampler``), as the plan runs the UNet."""
    out: dict[str, dict[str, Any]] = {}
    for c in report.components:
        extra = {k: c.shape[k] for k in ("ip_image_embed_dim", "ip_resampler") if c.shape.get(k) is not None}
        if extra:
            out[c.component] = extra
    return out


def _ip_adapter_encoder(report: Any, source: Any, names: list[str], dtype: str, dtype_of: Mapping[str, str] | None,
                        version: str, notes: list[str]) -> tuple[ComponentWeights, ...]:
    """The image encoder ``load_ip_adapter`` loads from h94/IP-Adapter when the pipeline has none (the plan counts
    no run of it: its config is not in the source), weighed from its bundled config."""
    chosen = getattr(report.settings, "ip_adapter", None)
    if not chosen or "image_encoder" in names or "image_encoder" in source.components:
        return ()
    from flopcalc.engine.pipelines.ip_adapter import LAYOUTS
    from flopcalc.gpu_memory.adapters import ip_adapter_image_encoder

    layout = LAYOUTS[chosen[0]]
    config, _ = ip_adapter_image_encoder(layout.image_encoder)
    notes.append(f"image_encoder: h94/IP-Adapter's (load_ip_adapter loads it; config bundled as "
                 f"flopcalc/data/ip_adapter_image_encoders.json, reconstructed): weighed, its FLOPs not counted")
    return (component_weights(config, component="image_encoder",
                              dtype=(dtype_of or {}).get("image_encoder", dtype), transformers_version=version),)


def _loaded_not_run(source: Any, running: list[str]) -> tuple[list[str], list[str]]:
    """The components ``from_pretrained`` loads (their config is in the source and their class is counted) that
    the plan does not run at these settings, and a note for each of them and for those not counted."""
    from flopcalc.engine.config import class_name_of
    from flopcalc.engine.registry import registered

    known = {a.class_name for a in registered()}
    idle, notes = [], []
    for name, cfg in source.components.items():
        if name in running:
            continue
        cls = class_name_of(cfg)
        if cls in known:
            idle.append(name)
            notes.append(f"{name} ({cls}): loaded by from_pretrained but not run at these settings: its weights are "
                         "resident without offload, never moved to the GPU with offload")
        else:
            notes.append(f"{name} ({cls}): loaded by from_pretrained, not run; its weights are not in the totals (no formula "
                         f"for {cls})")
    return idle, notes
