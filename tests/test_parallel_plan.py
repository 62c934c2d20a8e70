"""Multi-GPU inference plans (``flopcalc parallel``): legal xDiT layouts, weights and activations per GPU,
communication per step, and the latency the energy law's multi-GPU fit predicts."""

from __future__ import annotations

import json
import math

import pytest

import flopcalc
from flopcalc.cli.main import main
from flopcalc.energy_laws.parallel_plan import attention_calls, comm_bytes, plan, render_plan
from flopcalc.engine.errors import FlopcalcError
from flopcalc.hardware.gpus import gpu


@pytest.fixture(scope="module")
def flux():
    return plan("flux-dev", gpu="h100-sxm", num_gpus=(1, 2, 4, 8))


def test_attention_calls_are_read_from_the_exact_counts():
    report = flopcalc.estimate("flux-dev")
    den = next(c for c in report.components if c.role == "denoiser")
    calls = attention_calls(den.tree, 24)
    assert [(a.tokens, a.width, a.count) for a in calls] == [(4096 + 512, 3072, 19 + 38)]  # image + text tokens
    assert sum(a.count * 2 * a.tokens ** 2 * a.width for a in calls) == den.per_run.attention


def test_every_layout_is_legal_and_splits_what_it_should(flux):
    mem = flopcalc.memory("flux-dev", gpu="h100-sxm")
    den = next(c for c in mem.components if c.component == "transformer")
    counts = {lay.gpus for lay in flux.layouts}
    assert counts == {1, 2, 4, 8}
    for lay in flux.layouts:
        assert lay.cfg == 1  # guidance embedded: one pass, no CFG parallel
        assert 24 % lay.ulysses == 0 and 4608 % lay.ring == 0 and lay.pipefusion <= len(den.block_bytes)
        split = den.bytes - sum(den.block_bytes) + math.ceil(sum(den.block_bytes) / lay.pipefusion)
        assert lay.weights_bytes == mem.weights_bytes - den.bytes + split
        assert lay.fits is (lay.peak_bytes <= gpu("h100-sxm").memory_bytes)
    one = next(lay for lay in flux.layouts if lay.gpus == 1)
    assert one.comm_bytes_per_step == 0 and one.weights_bytes == mem.weights_bytes
    r = flopcalc.energy("flux-dev", gpu="h100-sxm", num_gpus=4)
    four = [lay for lay in flux.layouts if lay.gpus == 4]
    assert all(lay.latency_s == r.latency_s for lay in four)


def test_the_communication_of_one_layout_by_hand(flux):
    lay = next(x for x in flux.layouts if (x.ulysses, x.ring, x.pipefusion) == (2, 2, 1))
    L, D, n, b = 4608, 3072, 57, 2
    ulysses = n * 4 * (L // 4) * D * b * 1 // 2  # Q, K, V in and the output back, half of each leaves the rank
    ring = n * 2 * 1 * (L // 2) * (D // 2) * b  # K and V chunks passed on once
    assert lay.comm_bytes_per_step == ulysses + ring
    assert lay.comm_seconds_per_step == pytest.approx(lay.comm_bytes_per_step / gpu("h100-sxm").gpu_link_bytes_per_s)
    assert comm_bytes([], 2, 1, 1, 1, 128 * 128) == 128 * 128 * 2  # CFG parallel: the noise prediction gathered


def test_cfg_parallel_where_the_pipeline_runs_two_passes():
    p = plan("sd3.5-large", gpu="h100-sxm", num_gpus=(2,))
    assert any(lay.cfg == 2 for lay in p.layouts)


def test_refusals_are_one_line(capsys):
    with pytest.raises(FlopcalcError, match="budget of 1048576 GPUs"):
        plan("flux-dev", gpu="h100-sxm", num_gpus=(10**9,))
    p = plan("sd1.5", gpu="h100-sxm", num_gpus=(3,))  # a UNet: CFG parallel only, and PipeFusion over its blocks
    assert all(lay.ulysses == lay.ring == 1 for lay in p.layouts)
    for counts in ("0", "two"):
        with pytest.raises(SystemExit) as info:
            main(["parallel", "flux-dev", "--gpu", "h100", "--num-gpus", counts])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1 and "expected positive GPU counts" in err
    assert main(["parallel", "flux-dev", "--gpu", "nope"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_cli_prints_what_the_api_returns(capsys):
    assert main(["parallel", "flux-dev", "--gpu", "h100-sxm", "--num-gpus", "2,4", "--format", "json"]) == 0
    cli = capsys.readouterr().out
    assert cli == render_plan(plan("flux-dev", gpu="h100-sxm", num_gpus=(2, 4)), "json")
    d = json.loads(cli)
    assert {x["gpus"] for x in d["layouts"]} == {2, 4}
