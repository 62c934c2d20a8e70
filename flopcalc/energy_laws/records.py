"""Measured records (one generation setting on one GPU) and the exact work each one ran.

The CSV format read by ``flopcalc energy-fit`` and written by ``validation/energy/fit_energy.py``:

=================== =====================================================================
column              meaning
=================== =====================================================================
model               what ``flopcalc.estimate`` accepts: a card, a diffusers folder (a relative
                    path is read from the CSV's folder), a config.json, a Hub id; records of one
                    model (a card and its aliases are one; paths compare as normalised) are held out
                    together and count as one model
label               the model's name as the source of the measurements calls it (shown only)
gpu                 a name of the GPU table (``flopcalc gpus``)
precision           bf16, fp16, fp32 or fp8
stack               software stack (one calibration per GPU × precision × stack)
num_gpus            GPUs the item ran on (1 for the single-GPU laws)
batch_size          prompts per batch (items = batch_size × num_images_per_prompt)
steps, height, width, num_frames, guidance_scale, max_sequence_length, vae_tiling
                    the estimate settings (empty: the pipeline's default)
energy_j            measured GPU energy per item (J)
latency_s           measured latency per item (s) = batch latency ÷ items
source              where the measurement comes from
=================== =====================================================================
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from flopcalc.engine.errors import FlopcalcError

COLUMNS = ("model", "label", "gpu", "precision", "stack", "num_gpus", "batch_size", "steps", "height", "width",
           "num_frames", "guidance_scale", "max_sequence_length", "vae_tiling", "energy_j", "latency_s", "source")
SETTING_KEYS = ("steps", "height", "width", "num_frames", "guidance_scale", "max_sequence_length", "vae_tiling")
PRECISIONS = ("bf16", "fp16", "fp32", "fp8")


class MeasurementError(FlopcalcError):
    """A measurement file is malformed or too thin to fit."""


@dataclass(frozen=True)
class Record:
    model: str
    label: str
    gpu: str
    precision: str
    stack: str
    num_gpus: int
    batch_size: int
    settings: Mapping[str, Any]
    energy_j: float
    latency_s: float
    source: str = ""
    base: Path = field(default=Path("."), compare=False)

    @property
    def calibration(self) -> str:
        return f"{self.gpu}/{self.precision}/{self.stack}"

    @property
    def model_id(self) -> str:
        """What the record counts, as one identity: a card by its name (its aliases are the same model), a path
        normalised, anything else as written. Leave-one-model-out groups by this, never by the free-text label."""
        from flopcalc.engine.cards import find_card

        card = find_card(self.model)
        if card is not None:
            return card.name
        if (self.base / self.model).exists() or Path(self.model).exists():
            return os.path.normpath(self.model)
        return self.model.strip()

    def row(self) -> dict[str, Any]:
        out = {"model": self.model, "label": self.label, "gpu": self.gpu, "precision": self.precision,
               "stack": self.stack, "num_gpus": self.num_gpus, "batch_size": self.batch_size}
        out.update({k: "" if self.settings.get(k) is None else self.settings[k] for k in SETTING_KEYS})
        out.update({"energy_j": repr(self.energy_j), "latency_s": repr(self.latency_s), "source": self.source})
        return out


def read_yaml(path: str | Path, what: str, error: type[FlopcalcError] = MeasurementError) -> Any:
    """A user's YAML file (``yaml.safe_load``); unreadable or not YAML → ``error`` naming ``what``."""
    import yaml

    p = Path(path)
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {p}: {getattr(exc, 'strerror', None) or exc}") from None
    except yaml.YAMLError:
        raise error(f"{what} {p} is not YAML") from None


def write_csv(records: Iterable[Record], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in records:
            w.writerow(r.row())


def positive(value: Any, what: str, where: str, kind: type = float) -> Any:
    """``value`` as a positive finite ``kind``; anything else (text, NaN, infinity, zero, a negative, a bool) is one
    error naming ``where`` (``file:line``) and ``what``."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value) if not isinstance(value, str) or kind is float else int(value.strip())
    except (TypeError, ValueError):
        raise MeasurementError(f"{where}: {what} must be a positive number, got {value!r}") from None
    if isinstance(number, float) and not math.isfinite(number) or number <= 0:
        raise MeasurementError(f"{where}: {what} must be positive and finite, got {value!r}")
    return number


def _setting(key: str, text: str, where: str) -> Any:
    if text == "":
        return None
    if key == "vae_tiling":
        low = text.strip().lower()
        if low not in ("true", "false", "1", "0"):
            raise MeasurementError(f"{where}: vae_tiling must be true or false, got {text!r}")
        return low in ("true", "1")
    return positive(text, key, where, float if key == "guidance_scale" else int)


def gpu_key(name: Any, where: str) -> str:
    """The GPU table's key of ``name``; an unknown GPU is one error naming ``where``."""
    from flopcalc.hardware.gpus import gpu

    if not isinstance(name, str) or not name.strip():
        raise MeasurementError(f"{where}: no GPU named")
    try:
        return gpu(name).key
    except FlopcalcError as exc:
        raise MeasurementError(f"{where}: {exc}") from None


def precision_of(name: Any, where: str) -> str:
    if name not in PRECISIONS:
        raise MeasurementError(f"{where}: precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
    return name


def is_records_csv(path: str | Path) -> bool:
    """Whether ``path`` starts with a header of this format (``energy_j`` and ``latency_s`` columns)."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    return {"energy_j", "latency_s"} <= set(header)


def read_csv(path: str | Path) -> tuple[Record, ...]:
    """Records of a measurement CSV (format in the module docstring); every bad row is one error naming its
    ``file:line``."""
    p = Path(path)
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise MeasurementError(f"cannot read {p}: {exc.strerror or exc}") from None
    with fh:
        try:
            reader = csv.DictReader(fh)
            missing = {"model", "gpu", "energy_j", "latency_s"} - set(reader.fieldnames or ())
            if missing:
                raise MeasurementError(f"{p}:1: missing column(s) {', '.join(sorted(missing))}; "
                                       f"expected {', '.join(COLUMNS)}")
            out = [_row(raw, f"{p}:{line}", p.parent) for line, raw in enumerate(reader, start=2)]
        except (csv.Error, UnicodeDecodeError) as exc:
            raise MeasurementError(f"{p}: not a readable CSV ({exc})") from None
    if not out:
        raise MeasurementError(f"{p}: no records")
    return tuple(out)


def _row(raw: Mapping[str, Any], where: str, base: Path) -> Record:
    def get(key: str) -> str:
        value = raw.get(key)
        return value.strip() if isinstance(value, str) else ""

    if not get("model"):
        raise MeasurementError(f"{where}: no model named")
    return Record(
        model=get("model"), label=get("label") or get("model"), gpu=gpu_key(get("gpu"), where),
        precision=precision_of(get("precision") or "bf16", where), stack=get("stack") or "user",
        num_gpus=positive(get("num_gpus") or "1", "num_gpus", where, int),
        batch_size=positive(get("batch_size") or "1", "batch_size", where, int),
        settings={k: _setting(k, get(k), where) for k in SETTING_KEYS},
        energy_j=positive(get("energy_j"), "energy_j", where), latency_s=positive(get("latency_s"), "latency_s", where),
        source=get("source"), base=base)


def estimate_record(r: Record):
    """The exact report of the setting ``r`` ran (relative model paths read from the CSV's folder)."""
    from flopcalc.flops.estimate import estimate

    model = r.model
    local = r.base / model
    if not Path(model).is_absolute() and local.exists():
        model = str(local)
    kwargs = {k: v for k, v in r.settings.items() if v is not None}
    return estimate(model, batch_size=r.batch_size, **kwargs)
