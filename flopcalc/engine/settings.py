"""Run settings: the options every pipeline takes (:class:`Settings`) and those one family declares.

Size, steps, guidance, batch, strength and the negative prompt are every pipeline's (``Settings`` fields), and
``true_cfg_scale``, ``max_sequence_length``, ``num_frames`` and ``vae_tiling`` several families'. An option only
one family's ``__call__`` takes (PAG's ``pag_scale``, Marigold's ``ensemble_size``, SkyReels' ``ar_step``) is
declared in that family's pipeline module with :func:`pipeline_option`::

    pipeline_option("ensemble_size", kind=COUNT, bound=(4096, "ensemble members"),
                    help="Marigold: predictions per input image (default 1)",
                    refusal="it makes no ensemble of predictions (Marigold's)")

and named by the pipelines that apply it (``register_pipeline(options=("ensemble_size",))``); every other
pipeline refuses it with ``refusal``. Nothing central lists these options: the discovery index records each
declaration (so ``flopcalc estimate --help`` shows the flag without importing the family), the CLI makes one
flag per declared option, ``flopcalc.estimate(..., ensemble_size=4)`` takes it as a keyword, and a plan reads
it as ``s.ensemble_size`` (``None``: the pipeline's default).

A value is checked by its kind before any plan runs (a bounded number, or a list of plain identifiers), never
evaluated.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Mapping

from flopcalc.engine.discovery import provide
from flopcalc.engine.errors import OptionError, close_to, few

#: Kinds of option values.
COUNT = "count"  # an integer > 0
INDEX = "index"  # an integer >= 0
SCALE = "scale"  # a finite number >= 0
NAMES = "names"  # one or more identifiers (letters, digits, ``_``, ``.``)
PAIRS = "pairs"  # one or more integer pairs (count ≥ 1, index ≥ 0), written COUNT@INDEX, the flag repeated
KINDS = (COUNT, INDEX, SCALE, NAMES, PAIRS)
_NAME = r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*"  # compiled on first use (re caches it)
MAX_NAMES, MAX_NAME_LENGTH = 64, 100


@dataclass(frozen=True)
class Counting:
    """How a plan makes its counts. The numeric estimate counts in exact integers; the symbolic
    path (:mod:`flopcalc.flops.symbolic`) hands in integers that also carry the law they stand for, and
    says so here, so a plan never inspects the type of its numbers: ``symbolic`` tells a plan that
    a closed-form law is being built (a branch with no law, such as a tiled VAE, refuses), and
    ``passes`` turns the guidance passes per step (1 or 2) into the count the plan multiplies by."""

    symbolic: bool = False
    passes: Callable[[int], int] = int


#: Exact integers: the numeric estimate.
NUMERIC = Counting()


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Run settings, as the pipeline's ``__call__`` takes them. ``None`` means the pipeline's
    default (resolved into the plan's settings). Every field but ``counting`` is a user option."""

    height: int | None = None
    width: int | None = None
    steps: int | None = None
    guidance_scale: float | None = None
    true_cfg_scale: float | None = None
    negative_prompt: bool = False
    batch_size: int = 1
    num_images_per_prompt: int = 1
    max_sequence_length: int | None = None
    strength: float | None = None  # image-to-image when set
    resolution_binning: bool = True  # PixArt: snap the size to the model's aspect-ratio bins, as the pipeline does
    num_frames: int | None = None  # video pipelines: frames generated (None: the pipeline's default)
    vae_tiling: bool | None = None  # video VAEs: decode in tiles/temporal chunks (None: as the pipeline does)
    #: the options one family declares (:mod:`flopcalc.engine.settings`), set ones only, ``(name, value)`` by name; a
    #: plan reads them as attributes (``s.pag_scale``; ``None`` when not set)
    extra: tuple[tuple[str, Any], ...] = field(default=(), metadata={"option": False})
    counting: Counting = field(default=NUMERIC, metadata={"option": False})

    def __getattr__(self, name: str) -> Any:
        """A family option's value (``None`` when not set); only declared options are attributes."""
        if not name.startswith("_"):
            for key, value in self.__dict__.get("extra", ()):
                if key == name:
                    return value
            if name in _DECLARED:
                return None
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @classmethod
    def make(cls, **values: Any) -> Settings:
        """Settings from keyword values, family options (:mod:`flopcalc.engine.settings`) among them."""
        names = {f.name for f in fields(cls)}
        s = cls(**{k: v for k, v in values.items() if k in names})
        extra = {k: v for k, v in values.items() if k not in names}
        return s.with_options(**extra) if extra else s

    def with_options(self, **values: Any) -> Settings:
        """These settings with family options set (``None``: unset), checked as the API checks them."""
        merged = {**dict(self.extra), **values}
        return replace(self, extra=checked(merged))

    @property
    def symbolic(self) -> bool:
        """Whether a symbolic law is being built from this plan (see :class:`Counting`)."""
        return self.counting.symbolic

    def options(self) -> dict[str, Any]:
        """The user options, by name (what reports print)."""
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("option", True)},
                **dict(self.extra)}


#: Options every pipeline applies: size, steps, guidance, batch, image-to-image ``strength``, a
#: negative prompt (under classifier-free guidance the negative prompt, "" when not given, is
#: encoded either way), and resolution binning (a pipeline without bins estimates the size as given,
#: which is what turning binning off asks for).
COMMON_OPTIONS = frozenset({"height", "width", "steps", "guidance_scale", "batch_size", "num_images_per_prompt",
                            "strength", "negative_prompt", "resolution_binning"})
#: The options a pipeline applies only when it declares them (``register_pipeline(options=...)``):
#: option → (its CLI flag, why a pipeline that does not declare it refuses it).
OPTIONAL = {
    "true_cfg_scale": ("--true-cfg-scale", "it has no true classifier-free guidance (a separate negative-prompt "
                                          "pass); use --guidance-scale"),
    "max_sequence_length": ("--max-sequence-length", "its __call__ takes no max_sequence_length (its text encoders "
                                                    "run on a fixed number of tokens)"),
    "num_frames": ("--num-frames", "it generates images, not videos"),
    "vae_tiling": ("--vae-tiling / --no-vae-tiling", "flopcalc does not model a tiled decode of its VAE"),
}
@dataclass(frozen=True)
class PipelineOption:
    """One family's option: its value kind, the largest value allowed (with its unit; raised by
    ``FLOPCALC_ALLOW_LARGE=1`` like every budget), its ``--help`` line, and why a pipeline that does not take it
    refuses it. ``module``: the declaring module (the index records it)."""

    name: str
    kind: str
    help: str
    refusal: str
    bound: tuple[int, str] | None = None
    module: str = ""
    cli_flag: str = ""  # the flag when it is not the name's (``--condition`` for ``conditions``, repeated)
    metavar: str = ""
    #: values as the command line writes them that some pipeline applying it takes (tests run each through the CLI
    #: and the API); default: one per kind (a count 2, an index 1, a scale 2.0, a pair 1@0)
    examples: tuple[str, ...] = ()

    @property
    def sample_values(self) -> tuple[str, ...]:
        return self.examples or {COUNT: ("2",), INDEX: ("1",), SCALE: ("2.0",), PAIRS: ("1@0",)}.get(self.kind, ())

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.name.replace("_", "-")


_DECLARED: dict[str, PipelineOption] = {}


def pipeline_option(name: str, *, kind: str, help: str, refusal: str, bound: tuple[int, str] | None = None,
                    flag: str = "", metavar: str = "", examples: tuple[str, ...] = ()) -> PipelineOption:
    """Declare a family's option (once, in the family's pipeline module, before the plans naming it)."""
    import sys

    if kind not in KINDS:
        raise RuntimeError(f"option {name}: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if name in _DECLARED or name in OPTIONAL or name in Settings.__dataclass_fields__ or not name.isidentifier():
        raise RuntimeError(f"option {name!r} declared twice, or the name of a common option")
    module = sys._getframe(1).f_globals.get("__name__", "")  # the declaring module (no source read)
    if kind == NAMES and not examples:
        raise RuntimeError(f"option {name}: a list of names needs examples (values some pipeline applying it takes)")
    option = PipelineOption(name, kind, help, refusal, bound, module, flag, metavar, tuple(examples))
    _DECLARED[name] = option
    return option


def declared() -> dict[str, PipelineOption]:
    """The options declared by the modules imported so far."""
    return dict(_DECLARED)


def index_entries() -> dict[str, dict[str, Any]]:
    """The declarations as the discovery index stores them."""
    return {name: {**asdict(o), "bound": list(o.bound) if o.bound else None, "examples": list(o.examples)}
            for name, o in _DECLARED.items()}


def known() -> dict[str, PipelineOption]:
    """Every declared option, from the discovery index (no family module imported)."""
    from flopcalc.engine.discovery import index

    return {name: PipelineOption(**{**spec, "bound": tuple(spec["bound"]) if spec["bound"] else None,
                                    "examples": tuple(spec.get("examples", ()))})
            for name, spec in index().options.items()}


def option(name: str) -> PipelineOption:
    """The declaration of ``name``; a one-line error naming the known options."""
    options = _DECLARED if name in _DECLARED else known()
    if name not in options:
        raise OptionError(f"unknown option {name!r}{close_to(name, options)}; options of particular pipelines: "
                          f"{few(sorted(options), 6) or 'none'} (`flopcalc estimate --help` lists them)")
    return options[name]


def check(name: str, value: Any) -> Any:
    """``value`` as option ``name`` takes it (a list of names becomes a tuple); a one-line error otherwise."""
    from flopcalc.engine.limits import allow_large, bounded

    spec = option(name)
    if value is None:
        return None
    if spec.kind == NAMES:
        return simple_names(value, spec.flag)
    if spec.kind == PAIRS:
        return _pairs(spec, value)
    if spec.kind == SCALE:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise OptionError(f"{name} must be a finite number >= 0, got {value!r}")
    else:
        lowest = 1 if spec.kind == COUNT else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise OptionError(f"{name} must be an integer >= {lowest}, got {value!r}")
    if spec.bound is not None:
        bounded(spec.flag, value, spec.bound, large=allow_large())
    return value


def simple_names(value: object, what: str) -> tuple[str, ...]:
    """One id or a list of 1 to :data:`MAX_NAMES` ids, each a dotted name of letters, digits and ``_`` (such as
    ``mid``, ``down_blocks.2``): never a pattern."""
    ids = (value,) if isinstance(value, str) else value
    if not isinstance(ids, (list, tuple)) or not ids or len(ids) > MAX_NAMES:
        raise OptionError(f"{what} must be one id or a list of 1 to {MAX_NAMES} ids, got {value!r}")
    for name in ids:
        if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not re.fullmatch(_NAME, name):
            raise OptionError(f"{what}: {name!r} is not a simple id (dotted names of letters, digits and '_', such "
                              "as 'mid', 'down_blocks.2', 'blocks.14'); flopcalc takes no regular expressions")
    return tuple(ids)


def _pairs(spec: PipelineOption, value: Any) -> tuple[tuple[int, int], ...]:
    """1 to :data:`MAX_NAMES` pairs ``(count ≥ 1, index ≥ 0)`` of integers, each within the option's bound."""
    from flopcalc.engine.limits import allow_large, bounded

    items = tuple(tuple(item) if isinstance(item, (list, tuple)) else item for item in value) \
        if isinstance(value, (list, tuple)) else None
    if not items or len(items) > MAX_NAMES:
        raise OptionError(f"{spec.name} must be 1 to {MAX_NAMES} ({spec.metavar or 'COUNT@INDEX'}) pairs, got {value!r}")
    for item in items:
        if not (len(item) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
                and item[0] >= 1 and item[1] >= 0):
            raise OptionError(f"{spec.flag} is {spec.metavar or 'COUNT@INDEX'} with a count >= 1 and an index >= 0, "
                              f"got {item!r}")
        if spec.bound is not None:
            for v in item:
                bounded(spec.flag, v, spec.bound, large=allow_large())
    return items


def pair(text: str) -> tuple[int, int]:
    """``COUNT@INDEX`` as two integers (the command line's form of a :data:`PAIRS` item)."""
    count, sep, index = text.partition("@")
    if not sep or not all(part.isascii() and part.isdigit() and len(part) <= 9 for part in (count, index)):
        raise ValueError(f"expected COUNT@INDEX such as 1@0, got {text!r}")
    return int(count), int(index)


def checked(values: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The set options of ``values`` (``None`` dropped), each checked, in name order."""
    return tuple((name, check(name, v)) for name, v in sorted(values.items()) if v is not None)


provide("options", index_entries)
