"""A ControlNet's activation peak is estimated (issue 22 item 5: "fits" only when every running call is), at the
samples the pipeline feeds it: the denoiser's (pipeline_z_image_controlnet.py:662-668 calls it on the transformer's
input, guidance passes included)."""

from __future__ import annotations

import flopcalc

CARD = "z-image-turbo-controlnet-union-2.1"


def test_the_controlnet_call_is_estimated_at_the_denoisers_batch():
    est = flopcalc.memory(CARD, batch_size=2, guidance_scale=4.0)
    calls = {(a.component, a.call): a for a in est.activations}
    controlnet, transformer = calls[("controlnet", "forward")], calls[("transformer", "forward")]
    assert "controlnet.forward" not in est.unestimated
    assert controlnet.batch == transformer.batch == 4  # 2 prompts × 2 guidance passes in one forward
    assert controlnet.fused.n == transformer.fused.n == 128 * 128
    assert controlnet.bytes("fused") > 0 and controlnet.bytes("math") > controlnet.bytes("fused")
    assert not any(n.startswith("controlnet.forward: no activation estimate") for n in est.notes)
