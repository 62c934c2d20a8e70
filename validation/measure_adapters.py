"""The parameters adapters add to a denoiser, from the real modules built on the meta device.

* **LoRA**: the denoiser built from its config (``flopcalc.engine.measure.harness.build_model``), then peft's
  ``inject_adapter_in_model(LoraConfig(r=rank, target_modules=targets), model)`` (what diffusers'
  ``add_adapter`` / ``load_lora_weights`` call) inside ``torch.device("meta")``; counted: every parameter whose
  name holds ``lora_`` (``lora_A`` / ``lora_B``), and how many layers were wrapped. Targets: the ones diffusers' LoRA
  training scripts use (``train_dreambooth_lora_flux.py``: the attention projections and feed-forwards of both
  streams, ``train_dreambooth_lora.py`` / ``_sdxl.py`` / ``_sd3.py``:
  ``to_k, to_q, to_v, to_out.0``), and one named set.
* **IP-Adapter**: the UNet with one IP-Adapter installed as ``load_ip_adapter`` installs it
  (``flopcalc.engine.measure.ip_adapter.attach``: ``IPAdapterAttnProcessor2_0`` in every cross-attention and the
  image projection), its total parameters.

Run ``python validation/measure_adapters.py``: writes ``validation/fixtures/quantized/adapters.json`` (needs torch,
diffusers, transformers, peft).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
OUT = Path(__file__).parent / "fixtures" / "quantized" / "adapters.json"
FLUX_TARGETS = ("attn.to_k", "attn.to_q", "attn.to_v", "attn.to_out.0", "attn.add_k_proj", "attn.add_q_proj",
                "attn.add_v_proj", "attn.to_add_out", "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj",
                "ff_context.net.2")
UNET_TARGETS = ("to_k", "to_q", "to_v", "to_out.0")
#: (folder, rank, targets: None for the class's defaults as flopcalc reads them, and the names peft gets)
LORA_CASES = (
    ("model_cards/flux-dev/transformer", 16, None, FLUX_TARGETS),
    ("model_cards/flux-dev/transformer", 4, "attn.to_q,attn.to_v,proj_mlp,proj_out",
     ("attn.to_q", "attn.to_v", "proj_mlp", "proj_out")),
    ("model_cards/sd1.5/unet", 4, None, UNET_TARGETS),
    ("model_cards/sdxl-base/unet", 32, None, UNET_TARGETS),
    ("model_cards/sd3-medium/transformer", 8, None, UNET_TARGETS),
    ("model_cards/wan2.1-t2v-1.3b/transformer", 16, "to_q,to_k,to_v,to_out.0", UNET_TARGETS),
)
#: (folder, image embedding width, Resampler width or None)
IP_CASES = (
    ("validation/configs/sd1.5-ip-adapter/unet", 1024, None),
    ("validation/configs/sd1.5-ip-adapter/unet", 1280, 768),
    ("validation/configs/sdxl-base-ip-adapter/unet", 1280, None),
    ("validation/configs/sdxl-base-ip-adapter/unet", 1280, 1280),
)


def lora(folder: str, rank: int, targets: tuple[str, ...]) -> dict[str, int]:
    from peft import LoraConfig, inject_adapter_in_model

    from flopcalc.engine.measure.harness import build_model

    model = build_model(REPO / folder)
    with torch.device("meta"):
        inject_adapter_in_model(LoraConfig(r=rank, target_modules=list(targets)), model)
    params = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    layers = sum(1 for n, _ in model.named_modules() if n.endswith(".lora_A"))
    return {"lora_params": params, "lora_layers": layers}


def ip_adapter(folder: str, width: int, plus: int | None) -> dict[str, int]:
    from flopcalc.engine.measure.harness import build_model
    from flopcalc.engine.measure.ip_adapter import attach

    model = build_model(REPO / folder)
    bare = sum(p.numel() for p in model.parameters())
    attach(model, width, {}, plus, 257 if plus else None)
    return {"params": sum(p.numel() for p in model.parameters()), "bare_params": bare}


def measure() -> dict[str, Any]:
    import diffusers
    import peft

    warnings.filterwarnings("ignore")
    rows = [{"folder": f, "rank": r, "targets": t, **lora(f, r, names)} for f, r, t, names in LORA_CASES]
    ips = [{"folder": f, "image_embed_dim": w, "resampler": p, **ip_adapter(f, w, p)} for f, w, p in IP_CASES]
    return {"versions": {"torch": torch.__version__, "diffusers": diffusers.__version__, "peft": peft.__version__},
            "lora": rows, "ip_adapter": ips}


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(measure(), indent=1) + "\n")
    sys.stdout.write(f"wrote {OUT}\n")
