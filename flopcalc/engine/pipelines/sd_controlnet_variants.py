"""Image-to-image and inpainting ControlNet pipelines of Stable Diffusion 1.x/2.x and SDXL (diffusers
``pipelines/controlnet/``). Each is its text-to-image ControlNet pipeline
(:mod:`flopcalc.engine.pipelines.sd_addons`: the ControlNet(s) at every kept step × pass, a
``MultiControlNetModel``'s nets each) with the image-to-image or inpainting pipeline's own defaults,
VAE encodes and step rule (:mod:`flopcalc.engine.pipelines.image_to_image`,
:mod:`flopcalc.engine.pipelines.stable_diffusion_inpaint`):

* ``StableDiffusionControlNetImg2ImgPipeline`` (``pipeline_controlnet_img2img.py:912-916``): strength
  0.8, 50 steps, guidance 7.5; ``get_timesteps`` floors ``steps · strength`` (:801-803); the input image
  encoded once per prompt (``prepare_latents``, :842-847).
* ``StableDiffusionXLControlNetImg2ImgPipeline`` (``pipeline_controlnet_sd_xl_img2img.py:1088-1090``):
  strength 0.8, 50 steps, guidance 5.0; floored steps (:892-896); the image encoded once (:951-956).
* ``StableDiffusionControlNetInpaintPipeline`` (``pipeline_controlnet_inpaint.py:1005-1007``): strength
  1.0, 50 steps, guidance 7.5; the masked image encoded (``prepare_mask_latents``, :923) and the image
  too for a 4-channel UNet or ``strength < 1`` (``return_image_latents``, :877-883, :1333-1334); the
  ControlNet sees the plain 4-channel latents, the UNet 4 or 9 channels (:1435).
* ``StableDiffusionXLControlNetInpaintPipeline`` (``pipeline_controlnet_inpaint_sd_xl.py:1179-1183``):
  strength 0.9999, 50 steps, guidance 5.0; the same encodes (:943-949, :1024, :1604-1605) and floored
  steps (:1046-1049): 49 of 50 steps by default.
"""

from __future__ import annotations

from flopcalc.engine.pipelines.image_to_image import _image_to_image
from flopcalc.engine.pipelines.sd_addons import sd_controlnet_pipeline, sdxl_controlnet_pipeline
from flopcalc.engine.pipelines.stable_diffusion_inpaint import _inpaint

_image_to_image("StableDiffusionControlNetImg2ImgPipeline", "StableDiffusionControlNetPipeline",
                sd_controlnet_pipeline, strength=0.8)
_image_to_image("StableDiffusionXLControlNetImg2ImgPipeline", "StableDiffusionXLControlNetPipeline",
                sdxl_controlnet_pipeline, strength=0.8)
_inpaint("StableDiffusionControlNetInpaintPipeline", "StableDiffusionControlNetPipeline", sd_controlnet_pipeline,
         denoiser="unet", channels=(4, 9), strength=1.0, steps=50, guidance=7.5)
_inpaint("StableDiffusionXLControlNetInpaintPipeline", "StableDiffusionXLControlNetPipeline",
         sdxl_controlnet_pipeline, denoiser="unet", channels=(4, 9), strength=0.9999, steps=50, guidance=5.0)
