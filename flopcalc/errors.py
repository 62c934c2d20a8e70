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
