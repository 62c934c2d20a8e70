"""Every subcommand resolves a size as ``estimate`` does (issue 24.3): a pipeline with resolution binning
generates SANA's 2048² at its bin, so ``symbolic`` evaluates its law there, ``sweep`` and ``plot`` refuse sizes
the pipeline moves (a law in H and W does not follow bins) unless told ``--no-resolution-binning``, and every
size-taking subcommand accepts that option."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.cli.main import main
from flopcalc.engine.errors import OptionError
from flopcalc.flops.symbolic import refuse_binned_sizes, symbolic_estimate

MODEL = "sana-1.6b-512"


def test_symbolic_is_evaluated_at_the_size_estimate_resolves():
    exact = flopcalc.estimate(MODEL, height=2048, width=2048)
    law = symbolic_estimate(MODEL, height=2048, width=2048)
    assert (law.settings.height, law.settings.width) == (exact.settings.height, exact.settings.width) == (512, 512)
    assert law.at(**law.representative()) == exact.flops
    assert any("2048×2048 is generated at 512×512" in n for n in law.notes)


def test_symbolic_without_binning_uses_the_size_as_given():
    exact = flopcalc.estimate(MODEL, height=2048, width=2048, resolution_binning=False)
    law = symbolic_estimate(MODEL, height=2048, width=2048, resolution_binning=False)
    assert law.at(**law.representative()) == exact.flops
    assert not any("binning" in n for n in law.notes)


def test_binned_sizes_are_refused_for_a_law_unless_binning_is_off():
    with pytest.raises(OptionError, match="generates 2048×2048 at 512×512"):
        refuse_binned_sizes(MODEL, [(512, 512), (2048, 2048)])
    refuse_binned_sizes(MODEL, [(2048, 2048)], resolution_binning=False)
    refuse_binned_sizes(MODEL, [(512, 512)])  # a size in its bins
    refuse_binned_sizes("sd1.5", [(2048, 2048)])  # no bins: every size as given


@pytest.mark.parametrize("command", [["sweep", MODEL, "--height", "2048", "--width", "2048"],
                                     ["plot", MODEL, "--sides", "2048", "--out", "x.png"]])
def test_sweep_and_plot_refuse_in_one_line(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and len(err) <= 300 and "--no-resolution-binning" in err


def test_every_size_command_takes_no_resolution_binning(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flag = "--no-resolution-binning"
    given = flopcalc.estimate(MODEL, height=2048, width=2048, resolution_binning=False).flops
    assert main(["sweep", MODEL, "--height", "2048", "--width", "2048", flag, "--format", "json"]) == 0
    assert f'"flops": {given}' in capsys.readouterr().out
    for command in (["symbolic", MODEL], ["compare", MODEL, MODEL], ["report", MODEL, "--html", "x.html"],
                    ["plot", MODEL, "--sides", "1024,2048", "--out", "x.png"]):
        assert main([*command, "--height", "2048", "--width", "2048", flag]) == 0, command
