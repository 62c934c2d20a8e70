"""IP-Adapter on the Stable Diffusion and SDXL pipelines: ``pipe.load_ip_adapter("h94/IP-Adapter", subfolder=...,
weight_name=...)`` then ``pipe(..., ip_adapter_image=image)`` (diffusers 0.42.1 ``loaders/ip_adapter.py``,
``loaders/unet.py``, ``pipelines/stable_diffusion/pipeline_stable_diffusion.py``).

The option ``ip_adapter`` names one bundled adapter layout (:data:`LAYOUTS`): the weight file and the width
of the image embedding its ``image_proj`` reads, which is its image encoder's ``projection_dim``. What it
adds to a generation (a plain adapter; a plus adapter differs where said):

* ``prepare_ip_adapter_image_embeds`` (pipeline_stable_diffusion.py:538-581) → ``encode_image`` (:514-536):
  the ``image_encoder`` (``CLIPVisionModelWithProjection``, the adapter's ``models/image_encoder`` or
  ``sdxl_models/image_encoder``, which ``load_ip_adapter`` registers as the pipeline's ``image_encoder``)
  runs **once** on the one adapter image (the feature extractor's ``image_size²`` crop); a plain adapter's
  ``ImageProjection`` takes its ``image_embeds`` and the negative is ``torch.zeros_like`` (no second encode).
  The embeddings are repeated for every prompt × image and, under guidance, stacked after the zeros: every
  UNet row gets one image embedding. A plus adapter reads the encoder's hidden states (``output_hidden_states``)
  and encodes a zero image for the negative: two encoder calls.
* every UNet call: ``encoder_hid_proj`` (``MultiIPAdapterImageProjection([ImageProjection])``: the embedding →
  4 tokens; a plus adapter's ``IPAdapterPlusImageProjection``: a Resampler of 16 queries on the hidden states) and ``IPAdapterAttnProcessor2_0`` in every ``attn2`` (``to_k_ip`` / ``to_v_ip`` on the 4 tokens
  and a second attention), see :func:`flopcalc.engine.architectures.unet_2d_condition.ip_adapter_projection` and
  :func:`flopcalc.formulas.cross_attention_block.ip_adapter_attention`.

The image encoder is counted from the pipeline folder's ``image_encoder`` (a pipeline saved after
``load_ip_adapter`` holds it); the layouts' own image encoder configs are bundled in
``validation/configs/sd1.5-ip-adapter/image_encoder`` (ViT-H-14) and ``sdxl-base-ip-adapter/image_encoder``
(ViT-bigG-14), with PROVENANCE.json, and measured there. FaceID, full-face and composition adapters and several
adapters at once are not modelled: their names are not layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.settings import NAMES, pipeline_option
from flopcalc.engine.pipelines.base import ComponentRun, Plan, component_class
from flopcalc.engine.registry import RunShape

pipeline_option("ip_adapter", kind=NAMES,
                help="SD / SDXL pipelines: an IP-Adapter with one image prompt: sd15, sd15_plus, sdxl, sdxl_vit_h or "
                     "sdxl_plus_vit_h (h94/IP-Adapter's ip-adapter_sd15, ip-adapter-plus_sd15, ip-adapter_sdxl, "
                     "ip-adapter_sdxl_vit-h, ip-adapter-plus_sdxl_vit-h)",
                refusal="flopcalc models IP-Adapter on the Stable Diffusion and SDXL pipelines only",
                examples=("sd15", "sdxl"))


@dataclass(frozen=True)
class IPAdapterLayout:
    """One adapter file of h94/IP-Adapter: where it lives, which UNet family it fits (``cross_attention_dim``:
    a plain adapter's ``image_proj.proj.weight`` is ``(4 × cross_attention_dim, image_embed_dim)``), the width it
    reads (a plain adapter: the image encoder's ``image_embeds``, ``projection_dim``; a plus adapter: its hidden
    states, ``hidden_size``) and the image encoder folder providing it (bundled under ``validation/configs``).
    ``resampler``: a plus adapter's Resampler ``(width, heads)`` (16 queries on the encoder's ``encoder_tokens``
    hidden states); None: a plain adapter."""

    weight: str
    cross_attention_dim: int
    image_embed_dim: int
    image_encoder: str
    resampler: tuple[int, int] | None = None

    @property
    def reads(self) -> str:
        """The image encoder config key whose width this adapter's projection reads."""
        return "projection_dim" if self.resampler is None else "hidden_size"


#: An IP-Adapter Plus's Resampler queries (``num_tokens=16`` in tencent-ailab/IP-Adapter's plus demos; diffusers
#: reads ``latents.shape[1]``, loaders/unet.py:522).
PLUS_QUERIES = 16
#: The hidden states ViT-H-14 gives at its 224² input: (224 / 14)² patches + the class token.
VIT_H_TOKENS = (224 // 14) ** 2 + 1


#: The plain IP-Adapters of h94/IP-Adapter (README "Models", and diffusers' IP-Adapter guide
#: ``docs/source/en/using-diffusers/ip_adapter.md``): SD 1.5 adapters read ViT-H-14's 1024-wide embedding,
#: ``ip-adapter_sdxl`` ViT-bigG-14's 1280-wide one, ``ip-adapter_sdxl_vit-h`` ViT-H-14's. ``ip-adapter_sd15_light``
#: has the layout of ``sd15``. The plus adapters (tencent-ailab/IP-Adapter ``ip_adapter/ip_adapter.py`` @ 1ae324ac:
#: ``IPAdapterPlus``: ``Resampler(dim=cross_attention_dim, heads=12, ...)``; ``IPAdapterPlusXL``: ``Resampler(dim=1280,
#: heads=20, ...)``, both ``depth=4, dim_head=64, embedding_dim=image_encoder.config.hidden_size``) read ViT-H-14's
#: 1280-wide hidden states; ``ip-adapter-plus-face_sd15`` and ``ip-adapter-plus-face_sdxl_vit-h`` share their layouts.
LAYOUTS: dict[str, IPAdapterLayout] = {
    "sd15": IPAdapterLayout("models/ip-adapter_sd15.safetensors", 768, 1024, "sd1.5-ip-adapter/image_encoder"),
    "sdxl": IPAdapterLayout("sdxl_models/ip-adapter_sdxl.safetensors", 2048, 1280,
                            "sdxl-base-ip-adapter/image_encoder"),
    "sdxl_vit_h": IPAdapterLayout("sdxl_models/ip-adapter_sdxl_vit-h.safetensors", 2048, 1024,
                                  "sd1.5-ip-adapter/image_encoder"),
    "sd15_plus": IPAdapterLayout("models/ip-adapter-plus_sd15.safetensors", 768, 1280,
                                 "sd1.5-ip-adapter/image_encoder", (768, 12)),
    "sdxl_plus_vit_h": IPAdapterLayout("sdxl_models/ip-adapter-plus_sdxl_vit-h.safetensors", 2048, 1280,
                                       "sd1.5-ip-adapter/image_encoder", (1280, 20)),
}


def layout_for(image_embed_dim: int, cross_attention_dim: int, resampler_width: int | None = None) -> str:
    """The layout whose ``image_proj`` reads ``image_embed_dim``-wide embeddings into a UNet of
    ``cross_attention_dim``, through a Resampler ``resampler_width`` wide (None: a plain adapter) (what a
    measurement of the adapter records)."""
    return next(name for name, ip in LAYOUTS.items()
                if (ip.image_embed_dim, ip.cross_attention_dim) == (image_embed_dim, cross_attention_dim)
                and (ip.resampler[0] if ip.resampler else None) == resampler_width)


def layout(names: tuple[str, ...] | None) -> tuple[str, IPAdapterLayout] | None:
    """The chosen layout (None: no IP-Adapter); one adapter, a known name."""
    if not names:
        return None
    if len(names) != 1:
        raise OptionError(f"--ip-adapter: flopcalc models one IP-Adapter at a time, got {list(names)}")
    if names[0] not in LAYOUTS:
        raise OptionError(f"--ip-adapter: unknown layout {names[0]!r}; bundled: {', '.join(LAYOUTS)} (the FaceID, "
                          "full-face and composition adapters are not modelled)")
    return names[0], LAYOUTS[names[0]]


def with_ip_adapter(p: Plan, components: Mapping[str, Mapping[str, Any]]) -> Plan:
    """``p`` (an SD / SDXL plan, settings resolved) with the IP-Adapter of ``p.settings.ip_adapter``: the image
    encoder once before the denoising loop, and every UNet run given one image embedding per row."""
    chosen = layout(p.settings.ip_adapter)
    if chosen is None:
        return p if "image_encoder" not in components else replace(p, notes=p.notes + (
            "image_encoder (an IP-Adapter's) runs only with an image prompt, not counted: --ip-adapter counts it",))
    name, ip = chosen
    unet = components.get("unet")
    if unet is not None and unet["cross_attention_dim"] != ip.cross_attention_dim:
        raise OptionError(f"--ip-adapter {name}: {ip.weight} projects to cross_attention_dim {ip.cross_attention_dim}, "
                          f"this UNet's is {unet['cross_attention_dim']!r} (load_ip_adapter fails on the shapes)")
    runs: list[ComponentRun] = []
    notes = [f"IP-Adapter {name} (h94/IP-Adapter {ip.weight}): one image prompt; every UNet call adds the image "
             f"projection ({4 if ip.resampler is None else PLUS_QUERIES} tokens"
             f"{'' if ip.resampler is None else ', a Resampler on the image encoder hidden states'}) and to_k_ip / "
             f"to_v_ip with a second attention in every cross-attention"]
    encoder = components.get("image_encoder")
    if encoder is not None and encoder[ip.reads] != ip.image_embed_dim:
        raise OptionError(f"--ip-adapter {name}: its image_proj reads {ip.image_embed_dim}-wide image embeddings, "
                          f"this pipeline's image_encoder gives {encoder[ip.reads]} ({ip.reads})")
    tokens = VIT_H_TOKENS
    if encoder is not None and ip.resampler is not None:
        tokens = (encoder["image_size"] // encoder["patch_size"]) ** 2 + 1  # CLIPVisionEmbeddings' positions
    if encoder is None:
        notes.append(f"image_encoder is absent from this pipeline and was not counted (load_ip_adapter loads "
                     f"h94/IP-Adapter's image encoder, bundled as validation/configs/{ip.image_encoder})")
    for r in p.runs:
        if r.role == "denoiser" and r.component == "unet":
            if encoder is not None:
                size = encoder["image_size"]
                # encode_image: a plain adapter's negative is zeros; a plus adapter's (output_hidden_states) encodes a
                # zero image too (pipeline_stable_diffusion.py:521-536), guidance or not
                runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?",
                                         "forward", "image_encoder", RunShape(height=size, width=size),
                                         1 if ip.resampler is None else 2,
                                         "1 IP-Adapter image (encode_image; the negative is zeros)" if ip.resampler
                                         is None else "1 IP-Adapter image + 1 zero image (encode_image's hidden "
                                         "states for the negative)"))
                encoder = None
            resampler = None if ip.resampler is None else (tokens, PLUS_QUERIES, *ip.resampler)
            runs.append(replace(r, shape=replace(r.shape, ip_image_embed_dim=ip.image_embed_dim,
                                                 ip_resampler=resampler)))
        else:
            runs.append(r)
    return replace(p, runs=tuple(runs), notes=p.notes + tuple(notes))
