r"""The block formulas as closed forms: each block function evaluated on sympy symbols, beside
the closed form its docstring states. One source of truth: the expression printed (or rendered
as LaTeX by ``flopcalc formulas --latex``) is computed by the same code that counts a model.

Only this module and the ``formulas`` command import sympy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Entry:
    name: str
    mirrors: str
    symbols: str  # what the symbols mean
    cost: Callable[[dict], Any]  # symbols -> Cost, by the block's own code
    closed_form: Callable[[dict], Any] | None  # symbols -> torch MACs, as the docstring states it


def _symbols() -> dict:
    import sympy as sp

    names = "d h d_h d_f N T L n C_i C_o C H W h_z w_z"
    return {s.name: s for s in sp.symbols(names, positive=True, integer=True)}


def _kaplan(s):
    from flopcalc.engine.cost import Cost
    from flopcalc.formulas import ops
    from flopcalc.formulas.kaplan_transformer import mlp, self_attention

    n, h, dh, df = s["n"], s["h"], s["d_h"], s["d_f"]
    d = h * dh
    parts = [ops.layer_norm(n, d), self_attention(n, d, h, dh, bias=True), ops.layer_norm(n, d),
             mlp(n, d, df, bias=True, gated=False)]
    return sum(parts, Cost())


def _joint(s):
    from flopcalc.formulas.mmdit_joint_block import mmdit_joint_block

    return mmdit_joint_block(dim=s["h"] * s["d_h"], heads=s["h"], head_dim=s["d_h"], image_tokens=s["N"],
                             text_tokens=s["T"], qk_norm=None).total


def _single(s):
    from flopcalc.formulas.single_stream_block import single_stream_block

    return single_stream_block(dim=s["h"] * s["d_h"], heads=s["h"], head_dim=s["d_h"], tokens=s["L"]).total


def _cross(s):
    from flopcalc.formulas.cross_attention_block import cross_attention_block

    return cross_attention_block(dim=s["h"] * s["d_h"], heads=s["h"], head_dim=s["d_h"], tokens=s["n"],
                                 context_tokens=s["T"], context_dim=s["C"], ff_inner_dim=s["d_f"]).total


def _resnet(s):
    from flopcalc.formulas.resnet_block import resnet_block

    return resnet_block(s["C_i"], s["C_o"], s["H"], s["W"]).total


def _vae_attention(s):
    from flopcalc.formulas.resnet_block import spatial_self_attention

    return spatial_self_attention(s["C"], s["H"], s["W"], head_dim=s["C"]).total


def _vae_decoder(s):
    from flopcalc.formulas.vae_decoder import vae_decoder

    return vae_decoder(latent_channels=16, out_channels=3, block_out_channels=[128, 256, 512, 512], layers_per_block=2,
                       height=s["h_z"], width=s["w_z"]).total


CATALOG: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry("kaplan_transformer", "CLIPEncoderLayer (transformers clip/modeling_clip.py)",
              "n tokens, h heads of width d_h (d = h·d_h), MLP width d_f", _kaplan,
              lambda s: 4 * s["n"] * (s["h"] * s["d_h"]) ** 2 + 2 * s["h"] * s["n"] ** 2 * s["d_h"]
              + 2 * s["n"] * s["h"] * s["d_h"] * s["d_f"]),
        Entry("mmdit_joint_block", "JointTransformerBlock / FluxTransformerBlock (diffusers)",
              "N image and T text tokens, h heads of width d_h (d = h·d_h)", _joint,
              lambda s: 12 * (s["h"] * s["d_h"]) ** 2 + 4 * (s["N"] + s["T"]) * (s["h"] * s["d_h"]) ** 2
              + 2 * s["h"] * (s["N"] + s["T"]) ** 2 * s["d_h"] + 8 * (s["N"] + s["T"]) * (s["h"] * s["d_h"]) ** 2),
        Entry("single_stream_block", "FluxSingleTransformerBlock (diffusers transformer_flux.py)",
              "L = N + T tokens, h heads of width d_h (d = h·d_h), mlp_ratio 4", _single,
              lambda s: 3 * (s["h"] * s["d_h"]) ** 2 + 3 * s["L"] * (s["h"] * s["d_h"]) ** 2
              + 4 * s["L"] * (s["h"] * s["d_h"]) ** 2 + 2 * s["h"] * s["L"] ** 2 * s["d_h"]
              + 5 * s["L"] * (s["h"] * s["d_h"]) ** 2),
        Entry("cross_attention_block", "BasicTransformerBlock, norm_type layer_norm, GEGLU (diffusers attention.py)",
              "n image tokens of width d = h·d_h, T text tokens of width C, MLP width d_f", _cross,
              lambda s: 4 * s["n"] * (s["h"] * s["d_h"]) ** 2 + 2 * s["h"] * s["n"] ** 2 * s["d_h"]
              + 2 * s["n"] * (s["h"] * s["d_h"]) ** 2 + 2 * s["T"] * s["C"] * s["h"] * s["d_h"]
              + 2 * s["h"] * s["n"] * s["T"] * s["d_h"] + 3 * s["n"] * s["h"] * s["d_h"] * s["d_f"]),
        Entry("resnet_block", "ResnetBlock2D (diffusers resnet.py), no time embedding",
              "H×W map, C_i → C_o channels", _resnet,
              lambda s: 9 * s["H"] * s["W"] * s["C_o"] * s["C_i"] + 9 * s["H"] * s["W"] * s["C_o"] ** 2
              + s["H"] * s["W"] * s["C_o"] * s["C_i"]),
        Entry("vae_mid_attention", "UNetMidBlock2D attention of the VAE (diffusers, one head)",
              "H×W latent pixels as tokens, C channels", _vae_attention,
              lambda s: 4 * s["H"] * s["W"] * s["C"] ** 2 + 2 * (s["H"] * s["W"]) ** 2 * s["C"]),
        Entry("vae_decoder", "AutoencoderKL Decoder with the FLUX/SD3 config (16 latent channels)",
              "h_z×w_z latent", _vae_decoder, None),
    )
}


def expression(name: str, convention: str = "torch") -> Any:
    """The block's MACs under ``convention`` as an expanded sympy expression."""
    import sympy as sp

    return sp.expand(CATALOG[name].cost(_symbols()).macs(convention))


def stated_closed_form(name: str) -> Any:
    import sympy as sp

    entry = CATALOG[name]
    return None if entry.closed_form is None else sp.expand(entry.closed_form(_symbols()))


def render(name: str, convention: str = "torch", latex: bool = False) -> str:
    import sympy as sp

    entry = CATALOG[name]
    expr = sp.factor_terms(expression(name, convention))
    body = sp.latex(expr) if latex else sp.sstr(expr)
    return f"{name}: {entry.mirrors}\n  symbols: {entry.symbols}\n  MACs ({convention}) = {body}"
