"""Errors a user can act on.

Every problem with the user's input (an unknown architecture, a missing config key, a size that
does not divide, a gated or absent repo, no network and no cache) is raised as a
:class:`FlopcalcError` whose message names the problem and what to do. The CLI prints the
message and exits with status 2; it never shows a traceback for these.
"""


class FlopcalcError(Exception):
    """A problem with the user's input, with a message that says what to do about it."""


class UnknownArchitectureError(FlopcalcError):
    """A config names a class that no registered architecture handles."""


class ConfigError(FlopcalcError):
    """A config is malformed or lacks a key that has no default."""


class ResolutionError(FlopcalcError):
    """The requested image size does not map onto the model's latent grid."""


class SourceError(FlopcalcError):
    """The model could not be found or read (path, card, Hub repo, cache)."""


class OptionError(FlopcalcError):
    """A run option is out of range or does not apply to the pipeline it was given for."""


class UnplannedPipelineError(FlopcalcError):
    """A ``model_index.json`` names a pipeline flopcalc has no plan for."""


class MeasureError(FlopcalcError):
    """A component could not be measured (``--measure``): the extra is missing, the class has no
    input builder, or the real module failed to build or run on the meta device."""
class UnbuildableConfigError(ConfigError):
    """A config value no declaration caught made a formula fail (the real class would fail too):
    raised by :func:`unbuildable` in place of the formula's own exception."""


#: What a formula raises on a value it cannot use (a zero stride, a list where a size goes, ...).
_FORMULA_FAILURES = (TypeError, ValueError, ArithmeticError, IndexError, KeyError, AttributeError, RecursionError)


class unbuildable:
    """Context manager at the boundary between a component's config and its formulas: an exception
    a formula raises on a config value becomes one :class:`UnbuildableConfigError` naming the
    component and what failed, never a traceback. (Declared keys are validated before this; this
    is the last line for combinations no declaration expresses.)"""

    def __init__(self, component: str, class_name: str | None, call: str = "") -> None:
        self.where = f"{component}/config.json ({class_name or 'config'})" + (f", {call}" if call else "")

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, tb) -> bool:
        if kind is not None and issubclass(kind, _FORMULA_FAILURES) and not issubclass(kind, FlopcalcError):
            detail = " ".join(str(error).split())[:200] or kind.__name__
            raise UnbuildableConfigError(f"{self.where}: its values describe a model that cannot be built or "
                                         f"counted ({detail}); check the config against the model's original "
                                         f"config.json") from error
        return False


def install_hint(extra: str) -> str:
    """How to install one of flopcalc's extras, from an index and from a clone of the repository."""
    return f"pip install 'flopcalc[{extra}]' (from a clone of the repository: pip install -e '.[{extra}]')"


def few(names, most: int = 4) -> str:
    """Up to ``most`` names, then how many more: an error stays one short line however long the list
    (``a, b, c, d and 12 more``)."""
    names = list(names)
    if len(names) <= most:
        return " and ".join(filter(None, (", ".join(names[:-1]), *names[-1:])))
    return f"{', '.join(names[:most])} and {len(names) - most} more"


def close_to(name: str, known) -> str:
    """`` (did you mean X?)`` for the known name closest to ``name``, or nothing."""
    import difflib

    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.85)
    return f" (did you mean {match[0]}?)" if match else ""
