"""Measured records (one generation setting on one GPU) and the exact work each one ran.

The CSV format read by ``flopcalc energy-fit`` and written by ``validation/energy/fit_energy.py``:

=================== =====================================================================
column              meaning
=================== =====================================================================
model               what ``flopcalc.estimate`` accepts: a card, a diffusers folder (a relative
                    path is read from the CSV's folder), a config.json, a Hub id
label               the model's name for grouping (leave-one-model-out holds out one label)
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


def _number(text: str, kind: type, what: str, line: int) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise MeasurementError(f"line {line}: {what} must be a number, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value) or value <= 0:
        raise MeasurementError(f"line {line}: {what} must be positive and finite, got {text!r}")
    return value


def _setting(key: str, text: str, line: int) -> Any:
    if text == "":
        return None
    if key == "vae_tiling":
        low = text.strip().lower()
        if low not in ("true", "false", "1", "0"):
            raise MeasurementError(f"line {line}: vae_tiling must be true or false, got {text!r}")
        return low in ("true", "1")
    return _number(text, float if key == "guidance_scale" else int, key, line)


def is_records_csv(path: str | Path) -> bool:
    """Whether ``path`` starts with a header of this format (``energy_j`` and ``latency_s`` columns)."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    return {"energy_j", "latency_s"} <= set(header)


def read_csv(path: str | Path) -> tuple[Record, ...]:
    """Records of a measurement CSV (format in the module docstring); bad rows name their line."""
    from flopcalc.hardware.gpus import gpu

    p = Path(path)
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise MeasurementError(f"cannot read {p}: {exc.strerror or exc}") from None
    with fh:
        reader = csv.DictReader(fh)
        missing = {"model", "gpu", "energy_j", "latency_s"} - set(reader.fieldnames or ())
        if missing:
            raise MeasurementError(f"{p}: missing column(s) {', '.join(sorted(missing))}; "
                                   f"expected {', '.join(COLUMNS)}")
        out = []
        for line, raw in enumerate(reader, start=2):
            get = lambda k: (raw.get(k) or "").strip()  # noqa: E731
            precision = get("precision") or "bf16"
            if precision not in PRECISIONS:
                raise MeasurementError(f"line {line}: precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
            out.append(Record(
                model=get("model"), label=get("label") or get("model"), gpu=gpu(get("gpu")).key, precision=precision,
                stack=get("stack") or "user", num_gpus=_number(get("num_gpus") or "1", int, "num_gpus", line),
                batch_size=_number(get("batch_size") or "1", int, "batch_size", line),
                settings={k: _setting(k, get(k), line) for k in SETTING_KEYS},
                energy_j=_number(get("energy_j"), float, "energy_j", line),
                latency_s=_number(get("latency_s"), float, "latency_s", line), source=get("source"), base=p.parent))
    if not out:
        raise MeasurementError(f"{p}: no records")
    return tuple(out)


def estimate_record(r: Record):
    """The exact report of the setting ``r`` ran (relative model paths read from the CSV's folder)."""
    from flopcalc.flops.estimate import estimate

    model = r.model
    local = r.base / model
    if not Path(model).is_absolute() and local.exists():
        model = str(local)
    kwargs = {k: v for k, v in r.settings.items() if v is not None}
    return estimate(model, batch_size=r.batch_size, **kwargs)
