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

from flopcalc.energy_laws.records import MeasurementError, Record, read_yaml

V2_PRECISION, V2_STACK = "fp16", "mlenergy-v2"
V3_STACK = "mlenergy-v3"
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


def _entry(model_map: Mapping[str, Mapping], model: str, path: Path) -> Mapping[str, Any] | None:
    entry = model_map.get(model)
    if entry is None:
        raise MeasurementError(f"{path.name}: model {model!r} is not in the model map; add it with the flopcalc "
                               f"`source` that counts it (a card of `flopcalc list` or a config folder)")
    return None if "left_out" in entry else entry


def read_mlenergy(path: str | Path, model_map: Mapping[str, Mapping], base: Path) -> list[Record]:
    """Records of one ML.ENERGY file; ``base`` is the folder relative ``source`` paths are read from."""
    from flopcalc.hardware.gpus import gpu

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise MeasurementError(f"cannot read {p}: {exc.strerror or exc}") from None
    out = []
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
            rows, task = doc["configurations"], doc["task"]
        except (ValueError, KeyError, TypeError):
            raise MeasurementError(f"{p}: not an ML.ENERGY v3 task file (no `task` / `configurations`)") from None
        for row in rows:
            entry = _entry(model_map, row["model_id"], p)
            if entry is None:
                continue
            video = "num_frames" in row
            settings = {"steps": row["inference_steps"], "height": row["video_height" if video else "image_height"],
                        "width": row["video_width" if video else "image_width"],
                        "num_frames": row["num_frames"] if video else None, **entry.get("settings", {})}
            batch = int(row["batch_size"])
            out.append(Record(
                entry["source"], row["model_id"], gpu(row["gpu_model"]).key,
                _V3_PRECISION.get(row["weight_precision"], row["weight_precision"]), V3_STACK, int(row["num_gpus"]),
                batch, settings, float(row["energy_per_video_joules" if video else "energy_per_image_joules"]),
                float(row["batch_latency_s"]) / batch,
                f"github ml-energy/leaderboard public/data/tasks/{task}.json", base))
        return out
    reader = csv.DictReader(text.splitlines())
    need = {"model", "gpu", "batch", "steps", "energy_j", "batch_latency_s"}
    if not need <= set(reader.fieldnames or ()):
        raise MeasurementError(f"{p}: not an ML.ENERGY v2 table (needs columns {', '.join(sorted(need))})")
    for row in reader:
        entry = _entry(model_map, row["model"], p)
        if entry is None:
            continue
        batch = int(row["batch"])
        out.append(Record(entry["source"], row["model"], gpu(row["gpu"]).key, V2_PRECISION, V2_STACK, 1, batch,
                          {"steps": int(row["steps"]), **entry.get("settings", {})}, float(row["energy_j"]),
                          float(row["batch_latency_s"]) / batch, row.get("source", "").split(" data/")[0], base))
    return out
