"""Turn what the user typed into parsed configs: a local path, a bundled card, or a Hub repo.

:func:`resolve` tries, in order:

1. an existing path: a diffusers pipeline folder (``model_index.json``), a single-model folder
   (``config.json``), or a ``*.json`` config file;
2. a bundled model card, by name or alias, any case (``flopcalc list`` shows them);
3. a Hugging Face Hub repo id ``org/name``: only ``model_index.json`` and each model component's
   ``config.json`` are downloaded, with ``huggingface_hub.hf_hub_download`` into the shared HF cache
   (so HF_HOME / HF_HUB_CACHE / HF_ENDPOINT / HF_TOKEN / HF_HUB_OFFLINE behave as in every other
   Hugging Face tool). Never a weight file.

Which components are read: the ``model_index.json`` entries whose value is ``[library, class]``
naming a model, i.e. not a scheduler, tokenizer, feature extractor / image processor / processor,
safety checker, and not ``[null, null]``. See :func:`model_components`.

Nothing user-supplied is ever evaluated: JSON is read with :mod:`json`, YAML with ``yaml.safe_load``.
Every failure is a :class:`~flopcalc.engine.errors.SourceError` (or :class:`MalformedConfigError`, which is
both a ``SourceError`` and a ``ConfigError``) whose message says what to do.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from flopcalc.engine import cards as _cards
from flopcalc.engine.config import class_name_of
from flopcalc.engine.errors import ConfigError, SourceError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "ConfigOrigin",
    "ModelSource",
    "MalformedConfigError",
    "resolve",
    "model_components",
    "skipped_components",
    "is_model_class",
    "component_name_for",
    "is_hub_id",
]

MODEL_INDEX = "model_index.json"
CONFIG = "config.json"
PROVENANCE = "PROVENANCE.json"
HUB_URL = "https://huggingface.co"
LIST_HINT = "Run `flopcalc list` to see the bundled model cards."


class MalformedConfigError(SourceError, ConfigError):
    """A config file exists but is not valid JSON, or not the shape a config must have."""


@dataclass(frozen=True)
class ConfigOrigin:
    """Where one component's config came from, as every report states it."""

    #: "hub" (downloaded now), "verbatim" (a copy of the Hub's file), "reconstructed" (not the Hub's
    #: file: rebuilt from code, a conversion script or defaults), "local" (a file whose origin is not recorded)
    status: str
    detail: str  # one line: from where
    correction: str | None = None  # what flopcalc changed in the file and why, where a card corrects it


_CORRECTED = r"CORRECTED[^:]*:\s*(.+)"  # compiled on first use (re caches it)


def config_origin(kind: str, component: str, provenance: Mapping[str, Any] | None, *, name: str,
                  revision: str | None = None, location: str | None = None) -> ConfigOrigin:
    """The :class:`ConfigOrigin` of ``component``'s config: from the Hub, or from the card's / folder's
    PROVENANCE.json entry ``<component>/config.json`` (``verbatim``, ``source_repo``, ``notes``)."""
    if kind == "hub":
        return ConfigOrigin("hub", f"downloaded from the Hub: {name}" + (f" @ {revision[:12]}" if revision else ""))
    entry = (provenance or {}).get(f"{component}/{CONFIG}")
    if not isinstance(entry, Mapping):
        where = location if kind == "config" else f"{location or name}/{component}/{CONFIG}"
        what = "bundled card" if kind == "card" else "local file"
        return ConfigOrigin("local", f"{what} {where} (its origin is not recorded)")
    source = entry.get("source_repo") or entry.get("source") or "an unnamed source"
    path = entry.get("source_path")
    origin = f"{source}" + (f" {path}" if path else "")
    notes = entry.get("notes") if isinstance(entry.get("notes"), str) else ""
    match = re.search(_CORRECTED, notes, re.S)
    correction = " ".join(match.group(1).split()) if match else None
    if entry.get("verbatim") is True:
        return ConfigOrigin("verbatim", f"verbatim copy of the Hub file, from {origin}", correction)
    return ConfigOrigin("reconstructed", f"reconstructed, not the Hub file: from {origin}", correction)


@dataclass(frozen=True)
class ModelSource:
    """The parsed configs of one model, and where they came from."""

    name: str  # what to show the user: card name, hub id, folder path
    kind: str  # "card" | "hub" | "folder" | "config"
    model_index: Mapping[str, Any] | None  # parsed model_index.json; None for a single config
    components: Mapping[str, Mapping[str, Any]]  # component name -> parsed config.json, in model_index order
    card: Mapping[str, Any] | None  # parsed card.yaml when kind == "card"
    provenance: Mapping[str, Any] | None  # parsed PROVENANCE.json when present (cards, local folders)
    revision: str | None  # hub: the commit sha the files came from
    location: str | None  # folder path / cache snapshot path
    #: model components model_index.json lists whose config.json is not there: {name: class}
    missing: Mapping[str, str] = field(default_factory=dict)
    #: non-model entries of model_index.json that are not schedulers, tokenizers or processors
    #: (guiders, safety checkers, watermarkers): {name: class}, skipped and said so
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def origins(self) -> dict[str, ConfigOrigin]:
        """Each component's :class:`ConfigOrigin` (Hub, verbatim copy, reconstructed, local)."""
        return {name: config_origin(self.kind, name, self.provenance, name=self.name, revision=self.revision,
                                    location=self.location) for name in self.components}

    @property
    def notes(self) -> tuple[str, ...]:
        """What the source could not give, for the report: missing configs, skipped entries."""
        return tuple(
            [f"{name} ({cls}): listed in {MODEL_INDEX}, but its {CONFIG} is not there; not counted"
             for name, cls in self.missing.items()]
            + [f"{name} ({cls}): {_SKIPPED_WHAT.get(_skipped_kind(name, cls), 'not a model')}; skipped"
               for name, cls in self.skipped.items()]
        )


# --------------------------------------------------------------------------------------------
# Which model_index entries are models
# --------------------------------------------------------------------------------------------

# Classes that are not networks with a config.json of their own (or are not part of generation).
_NOT_MODEL_SUFFIXES = (
    "Scheduler",
    "Tokenizer",
    "TokenizerFast",
    "FeatureExtractor",
    "ImageProcessor",
    "ImageProcessorFast",
    "VideoProcessor",
    "Processor",
    "SafetyChecker",  # post-hoc NSFW filter on the decoded image; not part of the diffusion pipeline
    "Watermarker",
    "Guidance",  # diffusers.guiders (ClassifierFreeGuidance, ...): guidance helpers, no weights
    "Guider",
)
#: Skipped entries worth a note in the report (schedulers, tokenizers and processors go unsaid).
_SKIPPED_WHAT = {
    "guider": "a guidance helper (diffusers.guiders), not a model",
    "safety_checker": "a post-hoc safety filter, not part of generation",
    "watermarker": "a watermarker, not part of generation",
}


def _skipped_kind(name: str, class_name: str) -> str | None:
    if class_name.endswith(("Guidance", "Guider")) or name == "guider" or name.endswith("_guider"):
        return "guider"
    if class_name.endswith("SafetyChecker"):
        return "safety_checker"
    if class_name.endswith("Watermarker"):
        return "watermarker"
    return None

# Folder names that are a pipeline component (a single config.json found in such a folder keeps it).
_COMPONENT_NAME = (
    r"^(transformer|unet|vae|movq|vqvae|vqgan|text_encoder|image_encoder|prior|decoder|"
    r"controlnet|adapter|super_res|prior_text_encoder|prior_image_encoder|text_proj|audio_vae|vocoder)"
    r"(_\d+)?$"
)


def is_model_class(class_name: str) -> bool:
    """Whether a model_index class names a model (not a scheduler, tokenizer, processor, guider, ...)."""
    return bool(class_name) and not class_name.endswith(_NOT_MODEL_SUFFIXES)


def noted_skips(model_index: Mapping[str, Any]) -> dict[str, str]:
    """The skipped entries a report mentions: guiders, safety checkers, watermarkers ({name: class})."""
    return {name: cls for name, (_lib, cls) in skipped_components(model_index).items()
            if isinstance(cls, str) and _skipped_kind(name, cls) is not None}


def _entry(value: Any) -> tuple[str, str] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) and v for v in value):
        return value[0], value[1]
    return None


def model_components(model_index: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The model components of a model_index: ``{name: (library, class)}``, in file order."""
    out: dict[str, tuple[str, str]] = {}
    for key, value in model_index.items():
        if key.startswith("_"):
            continue
        entry = _entry(value)
        if entry is not None and is_model_class(entry[1]) and _skipped_kind(key, entry[1]) is None:
            out[key] = entry
    return out


def skipped_components(model_index: Mapping[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    """The ``[library, class]`` entries that are not read (schedulers, tokenizers, [null, null], ...)."""
    kept = model_components(model_index)
    out: dict[str, tuple[str | None, str | None]] = {}
    for key, value in model_index.items():
        if key.startswith("_") or key in kept:
            continue
        if isinstance(value, (list, tuple)) and len(value) == 2:
            out[key] = (value[0], value[1])
    return out


def component_name_for(folder_name: str) -> str:
    """Component name for a single config found in ``folder_name``: the folder name when it is a usual
    component name (transformer, unet, vae, movq, text_encoder_2, prior, decoder, ...), else "model"."""
    return folder_name if re.match(_COMPONENT_NAME, folder_name or "") else "model"


# --------------------------------------------------------------------------------------------
# Parsing (json / yaml.safe_load only)
# --------------------------------------------------------------------------------------------


def _parse_json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw)  # bytes: UTF-8 (BOM tolerated), UTF-16 or UTF-32
    except json.JSONDecodeError as exc:
        raise MalformedConfigError(
            f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
            "Fix or re-download the file."
        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MalformedConfigError(f"{where} is not valid JSON ({exc}). Fix or re-download the file.") from None


def _parse_object(raw: bytes, where: str) -> dict[str, Any]:
    data = _parse_json(raw, where)
    if not isinstance(data, dict):
        raise MalformedConfigError(f"{where} must hold a JSON object ({{...}}), not a {type(data).__name__}.")
    return data


def _read_bytes(node: Traversable | Path, where: str) -> bytes:
    try:
        return node.read_bytes()
    except OSError as exc:
        raise SourceError(f"Cannot read {where}: {exc.strerror or exc}.") from None


def _model_index_components(index: Mapping[str, Any], where: str) -> dict[str, tuple[str, str]]:
    comps = model_components(index)
    if not comps:
        raise MalformedConfigError(
            f"{where} lists no model components (expected entries like \"transformer\": "
            "[\"diffusers\", \"FluxTransformer2DModel\"])."
        )
    return comps


def _read_pipeline_folder(root: Traversable | Path, display: str) -> _Folder:
    """The configs of a folder laid out like a diffusers Hub repo. A listed component whose
    config.json is absent (a gated or partial repo, an encoder the user passes in) is recorded in
    ``missing``: what can be counted is counted, and the report names what is not."""
    index_where = f"{display}/{MODEL_INDEX}"
    index = _parse_object(_read_bytes(root.joinpath(MODEL_INDEX), index_where), index_where)
    components: dict[str, Mapping[str, Any]] = {}
    missing: dict[str, str] = {}
    for name, (library, cls) in _model_index_components(index, index_where).items():
        node = root.joinpath(name, CONFIG)
        where = f"{display}/{name}/{CONFIG}"
        if not node.is_file():
            missing[name] = cls
            continue
        components[name] = _with_index_class(_parse_object(_read_bytes(node, where), where), library, cls)
        for extra in _multi_model_folders(name, cls):  # a MultiControlNetModel's further nets
            node = root.joinpath(extra, CONFIG)
            if not node.is_file():
                break
            where = f"{display}/{extra}/{CONFIG}"
            components[extra] = _parse_object(_read_bytes(node, where), where)
    _require_some(components, missing, index_where)
    provenance = None
    prov = root.joinpath(PROVENANCE)
    if prov.is_file():
        where = f"{display}/{PROVENANCE}"
        provenance = _parse_object(_read_bytes(prov, where), where)
    return _Folder(index, components, provenance, missing, noted_skips(index))


def _with_index_class(config: dict[str, Any], library: str, class_name: str) -> dict[str, Any]:
    """``config`` naming the class ``model_index.json`` names for it, where the file itself names none: a
    transformers config written without ``architectures`` (a shared Cosmos T5 encoder's) is still loaded as that
    class by diffusers (``pipeline_loading_utils.load_sub_model`` takes the class from the index entry)."""
    if class_name_of(config) is not None or not is_model_class(class_name):
        return config
    key, value = ("_class_name", class_name) if library == "diffusers" else ("architectures", [class_name])
    return {**config, key: value}


#: Index classes saved as several models: ``MultiControlNetModel.save_pretrained``
#: (diffusers ``models/controlnets/multicontrolnet.py``) writes its nets to ``<name>``, ``<name>_1``,
#: ``<name>_2``, ... and ``from_pretrained`` reads them back while the next folder exists.
_MULTI_MODEL_CLASSES = frozenset({"MultiControlNetModel"})
#: Most nets read after the first (a bound, so a folder cannot make the reader loop on).
_MAX_EXTRA_NETS = 64


def _multi_model_folders(name: str, class_name: str) -> list[str]:
    """The folders after ``name`` that a multi-model component's further nets sit in, in order."""
    if class_name not in _MULTI_MODEL_CLASSES:
        return []
    return [f"{name}_{i}" for i in range(1, _MAX_EXTRA_NETS + 1)]


@dataclass(frozen=True)
class _Folder:
    model_index: dict[str, Any]
    components: dict[str, Mapping[str, Any]]
    provenance: dict[str, Any] | None
    missing: dict[str, str]
    skipped: dict[str, str]


def _require_some(components: Mapping[str, Any], missing: Mapping[str, str], where: str) -> None:
    if not components:
        names = ", ".join(f"{n}/{CONFIG}" for n in missing)
        raise SourceError(
            f"{where} lists model components but none of their configs is there ({names}). "
            "Copy those files from the model's Hub repo (only config.json is needed, no weights)."
        )


# --------------------------------------------------------------------------------------------
# Local paths and cards
# --------------------------------------------------------------------------------------------


def _from_path(model: str, path: Path, display: str | None = None) -> ModelSource | None:
    """A source for an existing path, or None if the path holds no config at all."""
    display = display or model.rstrip("/\\") or model
    if path.is_dir():
        if (path / MODEL_INDEX).is_file():
            folder = _read_pipeline_folder(path, display)
            return ModelSource(
                name=model,
                kind="folder",
                model_index=folder.model_index,
                components=folder.components,
                card=None,
                provenance=folder.provenance,
                revision=None,
                location=str(path.resolve()),
                missing=folder.missing,
                skipped=folder.skipped,
            )
        if (path / CONFIG).is_file():
            return _single_config(model, path / CONFIG, f"{display}/{CONFIG}")
        return None
    if path.is_file():
        if path.name == MODEL_INDEX:
            return _from_path(model, path.parent, str(Path(display).parent))
        if path.suffix.lower() != ".json":
            raise SourceError(
                f"'{model}' is a file but not a .json config. Give a diffusers pipeline folder (with "
                f"{MODEL_INDEX}), a model folder or file config.json, a bundled card name, or a Hub repo id "
                f"(org/name). {LIST_HINT}"
            )
        return _single_config(model, path, model)
    return None


def _single_config(model: str, file: Path, where: str) -> ModelSource:
    config = _parse_object(_read_bytes(file, where), where)
    name = component_name_for(file.resolve().parent.name)
    return ModelSource(
        name=model,
        kind="config",
        model_index=None,
        components={name: config},
        card=None,
        provenance=None,
        revision=None,
        location=str(file.resolve()),
    )


def _from_card(card: _cards.Card) -> ModelSource:
    folder = _read_pipeline_folder(card.path, f"bundled card {card.name}")
    return ModelSource(
        name=card.name,
        kind="card",
        model_index=folder.model_index,
        components=folder.components,
        card=copy.deepcopy(dict(card.data)),  # the Card is cached per process; the caller gets its own copy
        provenance=folder.provenance,
        revision=None,
        location=str(card.path) if isinstance(card.path, Path) else None,
        missing=folder.missing,
        skipped=folder.skipped,
    )


# --------------------------------------------------------------------------------------------
# Hub ids
# --------------------------------------------------------------------------------------------

# huggingface_hub's validate_repo_id rules, with the namespace made mandatory.
_HUB_PART = r"[A-Za-z0-9](?:[\w.\-]*[A-Za-z0-9_])?"
_HUB_ID = rf"^{_HUB_PART}/{_HUB_PART}$"


def is_hub_id(text: str) -> bool:
    """Whether ``text`` has the shape of a Hub model repo id ``org/name``."""
    return (
        bool(re.match(_HUB_ID, text))
        and len(text) <= 96
        and "--" not in text
        and ".." not in text
        and not text.endswith(".git")
    )


def _looks_like_path(text: str) -> bool:
    return (
        text.startswith((".", "/", "~", "\\"))
        or text.count("/") > 1
        or "\\" in text
        or text.lower().endswith(".json")
        or (len(text) > 1 and text[1] == ":")  # C:\...
    )


def _card_for_hub_id(repo_id: str) -> _cards.Card | None:
    try:
        for card in _cards.list_cards():
            if card.hub_id and card.hub_id.casefold() == repo_id.casefold():
                return card
    except ConfigError:
        pass
    return None


def _card_hint(repo_id: str) -> str:
    card = _card_for_hub_id(repo_id)
    if card is None:
        return ""
    return f" Or use the bundled card `{card.name}`, which holds this repo's configs and needs no network."


class _Missing(Exception):
    """A file is not there: remote=True means the Hub said so, False means not cached and no Hub."""

    def __init__(self, remote: bool, error: BaseException, reason: BaseException | None = None):
        super().__init__(str(error))
        self.remote = remote
        self.error = error
        self.reason = reason if reason is not None else error.__cause__  # what the network said


def _first_line(error: BaseException) -> str:
    for line in str(error).splitlines():
        if line.strip():
            return line.strip().rstrip(".")
    return type(error).__name__


def _snapshot_of(path: str) -> tuple[str | None, str | None]:
    """(commit sha, snapshot folder) from a path inside the HF cache: .../snapshots/<sha>/<file>."""
    parts = Path(path).parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "snapshots" and i + 1 < len(parts):
            return parts[i + 1], str(Path(*parts[: i + 2]))
    return None, None


class _NeverRaised(Exception):
    """Stands in for an exception class that this huggingface_hub release does not have."""


def _hf_errors() -> Any:
    """huggingface_hub's exception classes by name (``errors`` module since 0.24, ``utils`` before;
    ``RemoteEntryNotFoundError`` since 1.0, plain ``EntryNotFoundError`` before)."""
    import types

    from huggingface_hub import utils as hf_utils

    try:
        from huggingface_hub import errors as hf_errors
    except ImportError:  # pragma: no cover - older huggingface_hub
        hf_errors = hf_utils

    def get(*names: str) -> type[BaseException]:
        for name in names:
            for module in (hf_errors, hf_utils):
                cls = getattr(module, name, None)
                if isinstance(cls, type) and issubclass(cls, BaseException):
                    return cls
        return _NeverRaised

    return types.SimpleNamespace(
        GatedRepoError=get("GatedRepoError"),
        RepositoryNotFoundError=get("RepositoryNotFoundError"),
        RevisionNotFoundError=get("RevisionNotFoundError"),
        DisabledRepoError=get("DisabledRepoError"),
        LocalEntryNotFoundError=get("LocalEntryNotFoundError"),
        RemoteEntryNotFoundError=get("RemoteEntryNotFoundError", "EntryNotFoundError"),
        HfHubHTTPError=get("HfHubHTTPError"),
        OfflineModeIsEnabled=get("OfflineModeIsEnabled"),
    )


#: Seconds the first request to the Hub may take before it counts as unreachable (HF_HUB_ETAG_TIMEOUT
#: when that is set lower).
HUB_PROBE_TIMEOUT = 5


@contextlib.contextmanager
def _quiet_hub_logging() -> Iterator[None]:
    """huggingface_hub's own warnings (retries, fallbacks) are not shown: flopcalc says what went
    wrong in one line of its own."""
    import logging

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class _Hub:
    """Downloads through huggingface_hub and turns its exceptions into SourceError."""

    def __init__(self, repo_id: str, revision: str | None, token: str | None):
        try:
            import huggingface_hub  # deferred: the local and card paths never pay for it
            from huggingface_hub import constants
        except ImportError:  # pragma: no cover - it is a dependency
            raise SourceError(
                f"Reading '{repo_id}' from the Hub needs huggingface_hub (pip install huggingface_hub). "
                f"Or use a bundled card or a local folder. {LIST_HINT}"
            ) from None
        self.hf = huggingface_hub
        self.constants = constants
        self.errors = _hf_errors()
        self.repo_id = repo_id
        self.revision = revision
        self.token = token
        self.unreachable: _Missing | None = None  # set when a probe found the Hub unreachable

    @property
    def _rev_text(self) -> str:
        return f" at revision '{self.revision}'" if self.revision else ""

    def _offline(self) -> bool:
        try:
            return bool(self.constants.is_offline_mode())
        except Exception:  # pragma: no cover - older huggingface_hub
            return bool(getattr(self.constants, "HF_HUB_OFFLINE", False))

    def _not_cached_message(self, filename: str, missing: _Missing | None = None) -> str:
        cache = self.constants.HF_HUB_CACHE
        what = f"'{filename}' of Hub repo '{self.repo_id}'{self._rev_text} is not in the Hugging Face cache ({cache})"
        if self._offline():
            why = f"HF_HUB_OFFLINE=1 is set and {what}."
            fix = "Connect to the network once without HF_HUB_OFFLINE so the configs get cached"
        else:
            cause = missing.reason if missing is not None else None
            reason = f" ({_first_line(cause)})" if cause is not None and _first_line(cause) else ""
            why = f"Could not reach the Hub at {self.constants.ENDPOINT}{reason} and {what}."
            fix = "Check your connection (and HF_ENDPOINT if set) and connect once so the configs get cached"
        return (
            f"{why} {fix}, or use a bundled card (`flopcalc list`), or a local folder with the configs."
            f"{_card_hint(self.repo_id)}"
        )

    def download(self, filename: str, revision: str | None, *, local_only: bool = False) -> str:
        """Local path of ``filename`` in the HF cache (downloaded if needed), or an actionable SourceError.

        Raises :class:`_Missing` when the Hub says the file does not exist (``remote=True``) or when it
        is not cached and the Hub cannot be asked (``remote=False``), so the caller can word it.
        """
        e = self.errors
        if self.unreachable is not None:  # asked once, no answer: only the cache can help now
            local_only = True
        elif not local_only:
            self._probe(filename, revision)
        try:
            with _quiet_hub_logging():
                return self.hf.hf_hub_download(
                    self.repo_id,
                    filename,
                    revision=revision,
                    token=self.token,
                    library_name="flopcalc",
                    local_files_only=local_only,
                )
        except e.GatedRepoError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            account = "You are logged in, but this account has not been granted access yet. " if status == 403 else ""
            raise SourceError(
                f"Hub repo '{self.repo_id}' is gated. {account}Accept its license on "
                f"{HUB_URL}/{self.repo_id} (while logged in on the website), then log in here with "
                f"`hf auth login` or set HF_TOKEN to a token of that account.{_card_hint(self.repo_id)}"
            ) from None
        except e.RepositoryNotFoundError:
            raise SourceError(
                f"Hub repo '{self.repo_id}' was not found, or it is private and you are not logged in. "
                f"Check the id (org/name, as in {HUB_URL}/{self.repo_id}); for a private repo log in with "
                f"`hf auth login` or set HF_TOKEN. {LIST_HINT}"
            ) from None
        except e.RevisionNotFoundError:
            raise SourceError(
                f"Revision '{revision or 'main'}' does not exist in Hub repo '{self.repo_id}'. "
                "Give a branch, tag or commit sha of that repo (default: main)."
            ) from None
        except e.DisabledRepoError:
            raise SourceError(
                f"Hub repo '{self.repo_id}' has been disabled by its owner and cannot be read. {LIST_HINT}"
            ) from None
        except e.LocalEntryNotFoundError as exc:  # before RemoteEntryNotFoundError: older releases nest them
            raise _Missing(False, exc) from None
        except e.RemoteEntryNotFoundError as exc:
            raise _Missing(True, exc) from None
        except e.HfHubHTTPError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", "?")
            detail = getattr(exc, "server_message", None) or str(exc).strip().splitlines()[0]
            raise SourceError(
                f"The Hub answered HTTP {status} for '{filename}' of '{self.repo_id}': {detail}. "
                "Try again later; if it persists, check HF_ENDPOINT and your token."
            ) from None
        except e.OfflineModeIsEnabled:  # pragma: no cover - hf_hub_download wraps it
            raise SourceError(self._not_cached_message(filename)) from None
        except ValueError as exc:  # HFValidationError (bad revision string, ...)
            raise SourceError(f"Cannot download '{filename}' of '{self.repo_id}': {exc}") from None
        except OSError as exc:
            raise SourceError(
                f"Could not store '{filename}' of '{self.repo_id}' in the Hugging Face cache "
                f"({self.constants.HF_HUB_CACHE}): {exc}. Set HF_HOME or HF_HUB_CACHE to a writable folder."
            ) from None
        except Exception as exc:  # network layer errors (proxy, protocol) that huggingface_hub lets through
            raise SourceError(
                f"Could not download '{filename}' of '{self.repo_id}' from {self.constants.ENDPOINT}: "
                f"{type(exc).__name__}: {exc}. Check your connection, proxy and HF_ENDPOINT, or use a bundled "
                f"card (`flopcalc list`) or a local folder."
            ) from None

    def _probe(self, filename: str, revision: str | None) -> None:
        """Ask the Hub once, without retries, for a file that is not cached.

        ``hf_hub_download`` retries a network failure five times with back-off (about 23 s and a
        warning per try) when the file is not in the cache. One quick HEAD first tells an
        unreachable Hub apart: then :class:`_Missing` (not remote) is raised at once and every
        later file is looked up in the cache only. An answer from the Hub (even an error) leaves
        the download to ``hf_hub_download``, which words it."""
        if self._offline():
            return
        cached = self.hf.try_to_load_from_cache(self.repo_id, filename, revision=revision)
        if isinstance(cached, str) or cached is not None:  # a cached file, or a cached "does not exist"
            return
        e = self.errors
        url = self.hf.hf_hub_url(self.repo_id, filename, revision=revision)
        try:
            with _quiet_hub_logging():
                self.hf.get_hf_file_metadata(url, token=self.token,
                                             timeout=min(HUB_PROBE_TIMEOUT, self.constants.HF_HUB_ETAG_TIMEOUT))
        except (e.HfHubHTTPError, ValueError):  # the Hub answered; hf_hub_download gives the detail
            return
        except Exception as exc:  # no answer: DNS, refused, timeout, proxy
            self.unreachable = _Missing(False, exc, reason=exc)
            raise self.unreachable from None

    def read(self, path: str, filename: str) -> dict[str, Any]:
        where = f"'{filename}' of Hub repo '{self.repo_id}' (cached at {path})"
        return _parse_object(_read_bytes(Path(path), where), where)

    def resolve(self) -> ModelSource:
        try:
            index_path = self.download(MODEL_INDEX, self.revision)
        except _Missing as missing_index:
            # No model_index.json: a single-model repo keeps its config.json at the root. When the Hub
            # could not be asked, only look in the cache (huggingface_hub already retried the network).
            try:
                config_path = self.download(CONFIG, self.revision, local_only=not missing_index.remote)
            except _Missing as missing_config:
                if missing_index.remote and missing_config.remote:
                    raise SourceError(
                        f"Hub repo '{self.repo_id}'{self._rev_text} has neither {MODEL_INDEX} (a diffusers "
                        f"pipeline) nor {CONFIG} (a single model), so it is not a model flopcalc can read."
                    ) from None
                raise SourceError(self._not_cached_message(MODEL_INDEX, missing_index)) from None
            sha, snapshot = _snapshot_of(config_path)
            config = self.read(config_path, CONFIG)
            return ModelSource(
                name=self.repo_id,
                kind="hub",
                model_index=None,
                components={"model": config},
                card=None,
                provenance=None,
                revision=sha,
                location=snapshot,
            )

        sha, snapshot = _snapshot_of(index_path)
        index = self.read(index_path, MODEL_INDEX)
        where = f"'{MODEL_INDEX}' of Hub repo '{self.repo_id}'"
        pinned = sha or self.revision  # every component from the same commit as model_index.json
        components: dict[str, Mapping[str, Any]] = {}
        absent: dict[str, str] = {}
        for name, (library, cls) in _model_index_components(index, where).items():
            filename = f"{name}/{CONFIG}"
            try:
                path = self.download(filename, pinned)
            except _Missing as missing:
                if missing.remote:  # the Hub says the repo has no such file: count the rest, name it
                    absent[name] = cls
                    continue
                raise SourceError(self._not_cached_message(filename, missing)) from None
            components[name] = _with_index_class(self.read(path, filename), library, cls)
            for extra in _multi_model_folders(name, cls):  # a MultiControlNetModel's further nets
                try:
                    path = self.download(f"{extra}/{CONFIG}", pinned)
                except _Missing as missing:
                    if missing.remote:
                        break
                    raise SourceError(self._not_cached_message(f"{extra}/{CONFIG}", missing)) from None
                components[extra] = self.read(path, f"{extra}/{CONFIG}")
        _require_some(components, absent, where)
        return ModelSource(
            name=self.repo_id,
            kind="hub",
            model_index=index,
            components=components,
            card=None,
            provenance=None,
            revision=sha,
            location=snapshot,
            missing=absent,
            skipped=noted_skips(index),
        )


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _unknown(model: str, why: str) -> SourceError:
    import difflib

    try:
        keys = {key.casefold(): card.name for card in _cards.list_cards() for key in (card.name, *card.aliases)}
    except ConfigError:
        keys = {}
    names = list(dict.fromkeys(keys[k] for k in difflib.get_close_matches(model.casefold(), list(keys), n=5)))
    shown = model if len(model) <= 40 else model[:40] + "…"
    names = names[:3]
    while True:  # one line of at most 280 characters: fewer suggestions where the names are long
        hint = " Did you mean " + " or ".join(f"`{n}`" for n in names) + "?" if names else ""
        text = (f"'{shown}' {why} (inputs: a folder with {MODEL_INDEX} or {CONFIG}, a config .json, a card name, a "
                f"Hub id).{hint} {LIST_HINT}")
        if len(text) <= 280 or not names:
            return SourceError(text)
        names.pop()


def _no_revision(model: str, revision: str | None) -> None:
    if revision is not None:
        raise SourceError(
            f"A revision ('{revision}') only applies to a Hub repo id (org/name), and '{model}' is a local "
            "path or a bundled card. Drop the revision, or give the Hub repo id."
        )


def resolve(model: str, *, revision: str | None = None, token: str | None = None) -> ModelSource:
    """Find and parse the configs of ``model``: a local path, a bundled card name/alias, or a Hub repo id.

    ``revision`` (branch, tag or commit sha) and ``token`` only apply to Hub repos; ``token=None``
    uses HF_TOKEN or the token saved by ``hf auth login``.
    """
    if not isinstance(model, str) or not model.strip():
        raise SourceError(f"No model given. {LIST_HINT}")
    model = model.strip()

    path = Path(os.path.expanduser(model))
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte, ...
        exists = False
    if exists:
        source = _from_path(model, path)
        if source is None and _cards.find_card(model) is not None:
            source = _from_card(_cards.find_card(model))
        if source is not None:
            _no_revision(model, revision)
            return source
        raise SourceError(
            f"'{model}' exists but holds neither {MODEL_INDEX} (a diffusers pipeline folder) nor {CONFIG} "
            f"(a single model). Point at the folder that has them, or at a config .json file. {LIST_HINT}"
        )

    card = _cards.find_card(model)
    if card is not None:
        _no_revision(model, revision)
        return _from_card(card)

    if _looks_like_path(model):
        raise SourceError(f"No such file or folder: '{model}'. {LIST_HINT}")
    if is_hub_id(model):
        return _Hub(model, revision, token).resolve()
    if "/" in model:
        raise _unknown(model, "is not a valid Hub repo id (org/name: letters, digits, '-', '_', '.')")
    raise _unknown(model, "is not a local path or a bundled model card")
