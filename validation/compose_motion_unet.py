"""Write the ``UNetMotionModel`` config an AnimateDiff pipeline folder holds, as diffusers composes it.

``AnimateDiffPipeline.from_pretrained(base, motion_adapter=MotionAdapter.from_pretrained(adapter))`` loads
the base's ``UNet2DConditionModel`` and ``AnimateDiffPipeline.__init__`` turns it into
``UNetMotionModel.from_unet2d(unet, motion_adapter)`` (diffusers ``models/unets/unet_motion_model.py:1538``);
``save_pretrained`` then writes that model's config as ``unet/config.json`` beside ``motion_adapter/``.
This script runs exactly that on the meta device (no weights) from the two configs in a folder
(``unet/config.json``: the base's 2-D UNet; ``motion_adapter/config.json``) and writes the composed
config over ``unet/config.json`` and ``model_index.json`` (the pipeline's ``_class_name`` and components),
so that every value comes from diffusers, never from a hand:

    python validation/compose_motion_unet.py BASE_UNET_CONFIG FOLDER [--pipeline AnimateDiffPipeline]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from diffusers import MotionAdapter, UNet2DConditionModel, UNetMotionModel, __version__


def compose(base_unet: Path, folder: Path, pipeline: str) -> None:
    with torch.device("meta"):
        unet = UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(base_unet))
        adapter = MotionAdapter.from_config(MotionAdapter.load_config(folder / "motion_adapter"))
        motion = UNetMotionModel.from_unet2d(unet, adapter, load_weights=False)
    config = {"_class_name": "UNetMotionModel", "_diffusers_version": __version__,
              **{k: v for k, v in motion.config.items() if not k.startswith("_")}}
    (folder / "unet").mkdir(exist_ok=True)
    (folder / "unet" / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    index = {"_class_name": pipeline, "_diffusers_version": __version__}
    for name in sorted(p.name for p in folder.iterdir() if (p / "config.json").exists()):
        cls = json.loads((folder / name / "config.json").read_text()).get("_class_name") or \
            json.loads((folder / name / "config.json").read_text())["architectures"][0]
        index[name] = ["transformers" if name.startswith("text_encoder") else "diffusers", cls]
    (folder / "model_index.json").write_text(json.dumps(index, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_unet", type=Path, help="the base's unet folder (its config.json: UNet2DConditionModel)")
    parser.add_argument("folder", type=Path, help="the pipeline folder holding motion_adapter/config.json")
    parser.add_argument("--pipeline", default="AnimateDiffPipeline")
    args = parser.parse_args()
    compose(args.base_unet, args.folder, args.pipeline)
