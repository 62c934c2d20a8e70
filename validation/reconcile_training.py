"""Reconcile the training-compute formulas users and frameworks apply to diffusion transformers with
``flopcalc train``'s exact forward + backward counts.

    python validation/reconcile_training.py [--out validation/training_reconciliation.md]

Formulas (FLOPs of one training sample, forward + backward, no recomputation):

- **6·N·D** (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", eq. 2.1 and §2.1): N the
  denoiser's parameters, D the tokens its blocks carry (FLUX: image + text tokens; Wan: video tokens,
  the text entering only as cross-attention keys and values).
- **PaLM** (Chowdhery et al. 2022, "PaLM", appendix B; torchtitan's ``get_num_flop_per_token``):
  D × (6·N + 12·L·d·D), L the transformer blocks, d = heads × head dim.
- **NeMo ``flux()``** (NVIDIA/NeMo ``nemo/utils/flops_formulas.py``), as ``MM_FLOPsMeasurementCallback``
  (``nemo/lightning/pytorch/callbacks/flops_callback.py``) wires it: ``hs`` the hidden size, ``layers``
  (num_joint_layers, num_single_layers), ``model_channels`` and ``inp_s`` from the model config's
  ``model_channels`` and ``context_dim``, whose FLUX defaults (Megatron-Bridge ``FluxModelConfig``) are
  256 and 4096; ``gbs`` 1. Its sequence length is ``model_channels + inp_s``: 4352 whatever the image.
  It is re-expressed below term by term (FLOPs = 6 × gbs × ...), not copied.

flopcalc's side is ``flopcalc.train(card, frozen_encoders="cached")``: the denoiser's forward and backward,
exact against FlopCounterMode (``tests/test_training.py``). Every number in the report is computed here
from the cards' configs and flopcalc; none is typed.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import flopcalc

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "training_reconciliation.md"

#: NeMo's FluxConfig / Megatron-Bridge FluxModelConfig defaults the callback reads for FLUX.
NEMO_MODEL_CHANNELS = 256
NEMO_CONTEXT_DIM = 4096
NEMO_VEC_IN_DIM = 768


@dataclass(frozen=True)
class Case:
    card: str
    height: int
    width: int
    text_tokens: int
    num_frames: int | None = None


CASES = (
    Case("flux-dev", 512, 512, 512),
    Case("flux-dev", 1024, 1024, 256),
    Case("flux-dev", 1024, 1024, 512),
    Case("wan2.1-t2v-1.3b", 480, 832, 512, 81),
)


@dataclass(frozen=True)
class Row:
    case: Case
    tokens: int  # D: the tokens the blocks carry
    params: int  # N
    exact: int  # flopcalc: forward + backward FLOPs
    forward: int  # flopcalc: forward FLOPs
    attention: int  # flopcalc: forward FLOPs of the attention matmuls (QKᵀ, A·V; Wan: self and cross)
    palm_attention: int  # PaLM's 12·L·d·D² (FLOPs)
    kaplan: int
    palm: int
    nemo: int | None


def _config(card: str) -> dict:
    return json.loads((REPO / "model_cards" / card / "transformer" / "config.json").read_text())


def _blocks_and_width(cfg: dict) -> tuple[int, int]:
    """L (blocks: FLUX double + single, Wan layers) and d = heads × head dim."""
    blocks = cfg["num_layers"] + cfg.get("num_single_layers", 0)
    return blocks, cfg["num_attention_heads"] * cfg["attention_head_dim"]


def _tokens(case: Case, cfg: dict) -> tuple[int, int]:
    """(tokens the blocks carry, of which image/video tokens): VAE 8× spatial (Wan: 4× temporal, first
    frame alone), then the transformer's patch (FLUX packs 2×2 latents)."""
    if case.num_frames is None:  # FLUX: 2×2-packed 8× latents
        image = (case.height // 16) * (case.width // 16)
        return image + case.text_tokens, image
    _, ph, pw = cfg["patch_size"]
    frames = (case.num_frames - 1) // 4 + 1
    video = frames * (case.height // 8 // ph) * (case.width // 8 // pw)
    return video, video


def nemo_flux(cfg: dict) -> int:
    """NeMo's ``flux()`` with the callback's inputs (gbs 1): joint layers, single layers, embedders."""
    hs = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    joint, single = cfg["num_layers"], cfg["num_single_layers"]
    mc, inp_s, in_ch, vec = NEMO_MODEL_CHANNELS, NEMO_CONTEXT_DIM, cfg["in_channels"], NEMO_VEC_IN_DIM
    seq = mc + inp_s
    joint_flops = 6 * joint * (10 * hs * hs + 2 * hs * seq * (1 + 5 * hs) + 2 * seq * hs)
    single_flops = 6 * single * seq * hs * (3 + 1 + 4 * hs + 3 * hs + 2 * seq + 5 * hs + 1)
    other = 6 * (2 * inp_s * in_ch * hs + inp_s * hs * mc + vec * hs + hs * hs + 2 * (mc * hs + hs * hs))
    return joint_flops + single_flops + other


def nemo_missing(cfg: dict) -> int:
    """What NeMo's joint-layer term leaves out, × 6 (training FLOPs per forward MAC): the joint
    attention's QKᵀ and A·V (2·S²·hs MACs per block) and 2·hs² of the 12·hs² MACs per token of each
    stream's q, k, v, out (4·hs²) and feed-forward (8·hs²) that it counts as 10·hs²."""
    hs = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    seq = NEMO_MODEL_CHANNELS + NEMO_CONTEXT_DIM
    return 6 * cfg["num_layers"] * (2 * seq * seq * hs + 2 * hs * hs * seq)


def measure(case: Case) -> Row:
    cfg = _config(case.card)
    est = flopcalc.train(case.card, height=case.height, width=case.width, num_frames=case.num_frames,
                         max_sequence_length=case.text_tokens, frozen_encoders="cached")
    tokens, _ = _tokens(case, cfg)
    blocks, width = _blocks_and_width(cfg)
    n = est.params
    palm_attention = 12 * blocks * width * tokens * tokens
    return Row(
        case=case, tokens=tokens, params=n, exact=est.flops_per_sample, forward=est.trained_forward_flops,
        # the backward's attention MACs (dQ, dK, dA, dV) are twice the forward's: numerically its FLOPs
        attention=est.backward.attention_grad,
        palm_attention=palm_attention,
        kaplan=6 * n * tokens,
        palm=6 * n * tokens + palm_attention,
        nemo=nemo_flux(cfg) if case.card.startswith("flux") else None,
    )


def _t(flops: int) -> str:
    return f"{flops / 1e12:,.2f}"


def _pct(value: int, exact: int) -> str:
    return f"{100 * (value - exact) / exact:+.1f}%"


def render(rows: list[Row]) -> str:
    out = [
        "# Published training-compute formulas, reconciled with `flopcalc train`",
        "",
        "Generated by `python validation/reconcile_training.py`. FLOPs of one training sample (forward + backward,",
        "no gradient checkpointing, encoders cached), TFLOPs. flopcalc's figure is exact against FlopCounterMode on",
        "the real module (`tests/test_training.py`); D is the tokens the denoiser's blocks carry, N its parameters.",
        "",
        "| model | size | text tokens | D | N | flopcalc (exact) | 6·N·D | PaLM 6·N·D + 12·L·d·D² | NeMo `flux()` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r.case
        size = f"{c.height}×{c.width}" + (f"×{c.num_frames}" if c.num_frames else "")
        nemo = f"{_t(r.nemo)} ({_pct(r.nemo, r.exact)})" if r.nemo is not None else "-"
        out.append(f"| `{c.card}` | {size} | {c.text_tokens} | {r.tokens:,} | {r.params / 1e9:.2f} B | {_t(r.exact)} | "
                   f"{_t(r.kaplan)} ({_pct(r.kaplan, r.exact)}) | {_t(r.palm)} ({_pct(r.palm, r.exact)}) | {nemo} |")
    out += ["", "## Why they differ", ""]
    for r in rows:
        c = r.case
        linear_per_token = (r.forward - r.attention) / 2 / r.tokens  # forward MACs per token outside attention
        if r.palm_attention == 3 * r.attention:
            attention = (f"PaLM's attention term 12·L·d·D² = {_t(r.palm_attention)} TFLOPs is exactly 3 × flopcalc's "
                         f"forward attention matmuls ({_t(r.attention)}).")
        else:
            attention = (f"PaLM's attention term 12·L·d·D² = {_t(r.palm_attention)} TFLOPs is the self-attention; "
                         f"3 × flopcalc's forward attention matmuls is {_t(3 * r.attention)}, the rest the "
                         f"cross-attention's D × {c.text_tokens} scores.")
        out.append(
            f"- `{c.card}` {c.height}×{c.width}{'×' + str(c.num_frames) if c.num_frames else ''}, {c.text_tokens} text "
            f"tokens: forward + backward / forward = {r.exact / r.forward:.5f} (the 3 of 6·N·D holds). The forward runs "
            f"{linear_per_token / 1e9:.3f} B multiply-accumulates per token outside the attention matmuls, not N = "
            f"{r.params / 1e9:.3f} B: "
            + ("the double blocks run each token through its own stream's weights only (image or text), and "
               "AdaLN modulation, timestep and guidance embedders run once per sample, not per token; "
               if c.card.startswith("flux") else
               "the cross-attention's keys and values, the text and time embedders and the modulation run on the "
               "text tokens or once per sample; ")
            + attention
        )
    flux = [r for r in rows if r.nemo is not None]
    if flux:
        cfg = _config(flux[0].case.card)
        seq = NEMO_MODEL_CHANNELS + NEMO_CONTEXT_DIM
        matching = [r for r in flux if r.tokens == seq]
        missing = nemo_missing(cfg)
        line = (
            f"- NeMo `flux()`: its sequence is `model_channels + context_dim` = {NEMO_MODEL_CHANNELS} + "
            f"{NEMO_CONTEXT_DIM} = {seq:,} tokens from the model config, so it gives {_t(flux[0].nemo)} TFLOPs at "
            f"every image size and text length (it matches the token count only at 1024² with 256 text tokens). Its "
            f"joint-layer term has no attention scores (QKᵀ, A·V) and counts 10·hs² per token where each stream runs "
            f"12·hs² (q, k, v, out: 4·hs²; feed-forward: 8·hs²): {_t(missing)} TFLOPs left out at {seq:,} tokens")
        if matching:
            r = matching[0]
            line += (f"; added back, {_t(r.nemo + missing)} against flopcalc's exact {_t(r.exact)} "
                     f"({100 * (r.nemo + missing - r.exact) / r.exact:+.3f}%).")
        else:
            line += "."
        out.append(line)
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.write_text(render([measure(c) for c in CASES]), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
