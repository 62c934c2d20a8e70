"""ML.ENERGY leaderboard result files → :class:`~flopcalc.energy_laws.records.Record`.

Two formats, told apart by their content:

* v3 task files (``public/data/tasks/{text-to-image,text-to-video}.json`` of github
  ml-energy/leaderboard): ``{"task", "configurations": [...]}``, bf16, one row per model × GPU ×
  GPU count × batch (``energy_per_image_joules`` / ``energy_per_video_joules``, ``batch_latency_s``);
* the v2 table (``task,model,gpu,batch,steps,frames,energy_j,energy_unit,batch_latency_s,source``,
  collected from github ml-energy/leaderboard-v2 ``data/diffusion/**``): fp16, diffusers.

The files name Hub repos, which flopcalc may not count as such (a fine-tune, a renamed org, a
config that must be read offline), so a *model map* says, per model id, what ``flopcalc.estimate``
should count (``source``: a card or a config folder relative to the map) at which extra
``settings``, or why it is ``left_out``. ``validation/energy/models.yaml`` is the map of the
shipped calibration.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Mapping

from flopcalc.energy_laws.records import MeasurementError, Record, gpu_key, positive, precision_of, read_yaml

#: The software stacks of the two benchmarks (what each ran: validation/energy/data/README.md).
V2_PRECISION, V2_STACK = "fp16", "diffusers"
V3_STACK = "xdit"
#: What each ran, and which denoisers it runs (xDiT parallelises DiT pipelines only; diffusers runs every one), the
#: most recent first: the default stack of a prediction is the first of these that runs its denoiser.
STACKS = {
    V3_STACK: {"description": "eager PyTorch, xDiT pipelines or diffusers with flash attention, bf16, 2025 "
                              "(ML.ENERGY v3 harness)", "denoisers": ["transformer"]},
    V2_STACK: {"description": "diffusers AutoPipeline, eager PyTorch, fp16, 2024 (ML.ENERGY v2 harness)",
               "denoisers": ["transformer", "unet"]},
}
_V3_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def load_model_map(path: str | Path) -> dict[str, Mapping[str, Any]]:
    """The model map: ``{model id: {source, settings} | {left_out: reason}}``, every section merged."""
    p = Path(path)
    doc = read_yaml(p, "model map")
    if not isinstance(doc, dict):
        raise MeasurementError(f"model map {p}: expected a mapping of model ids")
    sections = [v for v in doc.values() if isinstance(v, dict) and all(isinstance(e, dict) for e in v.values())]
    merged: dict[str, Mapping[str, Any]] = {}
    for section in sections or [doc]:
        for model, entry in section.items():
            if not isinstance(entry, dict) or not ("source" in entry or "left_out" in entry):
                raise MeasurementError(f"model map {p}: {model!r} needs `source` (and optional `settings`) or `left_out`")
            merged[model] = entry
    return merged


def _entry(model_map: Mapping[str, Mapping], model: Any, where: str) -> Mapping[str, Any] | None:
    if not isinstance(model, str) or not model:
        raise MeasurementError(f"{where}: no model id")
    entry = model_map.get(model)
    if entry is None:
        raise MeasurementError(f"{where}: model {model!r} is not in the model map; add it with the flopcalc "
                               f"`source` that counts it (a card of `flopcalc list` or a config folder)")
    return None if "left_out" in entry else entry


def _object_lines(text: str, key: str) -> list[int]:
    """The line each object of the top-level array ``key`` starts on (a scanner that skips strings), so that an
    error names its record's line."""
    start = text.find(f'"{key}"')
    lines, depth, line, in_str, escaped = [], 0, text.count("\n", 0, start) + 1, False, False
    for ch in text[start + len(key) + 2:]:
        if ch == "\n":
            line += 1
        if in_str:
            escaped, in_str = (not escaped and ch == "\\"), in_str and (escaped or ch != '"')
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if ch == "{" and depth == 2:
                lines.append(line)
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                break
    return lines


def read_mlenergy(path: str | Path, model_map: Mapping[str, Mapping], base: Path) -> list[Record]:
    """Records of one ML.ENERGY file; ``base`` is the folder relative ``source`` paths are read from. A malformed
    record is one error naming ``file:line``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MeasurementError(f"cannot read {p}: {getattr(exc, 'strerror', None) or exc}") from None
    if text.lstrip().startswith("{"):
        return _v3(p, text, model_map, base)
    return _v2(p, text, model_map, base)


def _v3(p: Path, text: str, model_map: Mapping[str, Mapping], base: Path) -> list[Record]:
    try:
        doc = json.loads(text)
        rows, task = doc["configurations"], doc["task"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows) or not isinstance(task, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise MeasurementError(f"{p}: not an ML.ENERGY v3 task file (no `task` / `configurations` list)") from None
    lines = _object_lines(text, "configurations")
    out = []
    for i, row in enumerate(rows):
        where = f"{p}:{lines[i] if i < len(lines) else '?'}"
        entry = _entry(model_map, row.get("model_id"), where)
        if entry is None:
            continue
        video = "num_frames" in row
        size = ("video_height", "video_width") if video else ("image_height", "image_width")
        energy_key = "energy_per_video_joules" if video else "energy_per_image_joules"
        batch = positive(row.get("batch_size"), "batch_size", where, int)
        settings = {"steps": positive(row.get("inference_steps"), "inference_steps", where, int),
                    "height": positive(row.get(size[0]), size[0], where, int),
                    "width": positive(row.get(size[1]), size[1], where, int),
                    "num_frames": positive(row.get("num_frames"), "num_frames", where, int) if video else None,
                    **entry.get("settings", {})}
        precision = precision_of(_V3_PRECISION.get(row.get("weight_precision"), row.get("weight_precision")), where)
        out.append(Record(
            entry["source"], row["model_id"], gpu_key(row.get("gpu_model"), where), precision, V3_STACK,
            positive(row.get("num_gpus"), "num_gpus", where, int), batch, settings,
            positive(row.get(energy_key), energy_key, where),
            positive(row.get("batch_latency_s"), "batch_latency_s", where) / batch,
            f"github ml-energy/leaderboard public/data/tasks/{task}.json", base))
    return out


def _v2(p: Path, text: str, model_map: Mapping[str, Mapping], base: Path) -> list[Record]:
    reader = csv.DictReader(text.splitlines())
    need = {"model", "gpu", "batch", "steps", "energy_j", "batch_latency_s"}
    if not need <= set(reader.fieldnames or ()):
        raise MeasurementError(f"{p}: not an ML.ENERGY v2 table (needs columns {', '.join(sorted(need))})")
    out = []
    for line, row in enumerate(reader, start=2):
        where = f"{p}:{line}"
        entry = _entry(model_map, row.get("model"), where)
        if entry is None:
            continue
        batch = positive(row.get("batch"), "batch", where, int)
        out.append(Record(entry["source"], row["model"], gpu_key(row.get("gpu"), where), V2_PRECISION, V2_STACK, 1,
                          batch, {"steps": positive(row.get("steps"), "steps", where, int), **entry.get("settings", {})},
                          positive(row.get("energy_j"), "energy_j", where),
                          positive(row.get("batch_latency_s"), "batch_latency_s", where) / batch,
                          (row.get("source") or "").split(" data/")[0], base))
    return out
