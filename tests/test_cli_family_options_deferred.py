"""The command line's first pass leaves the pipeline families' options out (they are read from the discovery index)
and a second pass with the whole parser takes over whenever anything is left over or help is asked for: the
answer is the same either way (:func:`flopcalc.cli.main._parse`)."""

from __future__ import annotations

import pytest

from flopcalc.cli import main as cli_main
from flopcalc.cli.common import run_settings
from flopcalc.engine import settings


def _parse_without_family_options(monkeypatch: pytest.MonkeyPatch, argv: list[str]):
    def unread() -> dict:
        raise AssertionError("the family options were read")

    monkeypatch.setattr(settings, "known", unread)
    return cli_main._parse(argv)


def test_a_command_line_without_family_options_never_reads_them(monkeypatch):
    args = _parse_without_family_options(monkeypatch, ["estimate", "flux-dev", "--height", "768", "--format", "json"])
    assert (args.model, args.height, args.format) == ("flux-dev", 768, "json")
    assert run_settings(args) == {"height": 768}


@pytest.mark.parametrize("argv", [
    ["estimate", "animatediff-v1-5-3", "--conditioning-frames", "4"],
    ["estimate", "--conditioning-frames", "4", "animatediff-v1-5-3"],
    ["estimate", "animatediff-v1-5-3", "--conditioning-frames=4"],
])
def test_a_family_option_anywhere_on_the_line_is_parsed_by_the_whole_parser(argv):
    args = cli_main._parse(argv)
    assert args.model == "animatediff-v1-5-3"
    assert run_settings(args)["conditioning_frames"] == 4


def test_the_first_pass_takes_no_abbreviation_that_the_whole_parser_would_read_otherwise():
    # abbreviations are left over by the first pass, so the whole parser (which knows every option) reads them
    assert cli_main._parse(["estimate", "flux-dev", "--hei", "512"]).height == 512


def test_an_unknown_option_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main._parse(["estimate", "flux-dev", "--no-such-option"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "unrecognized arguments: --no-such-option" in err and "\n" not in err


def test_help_lists_the_family_options(capsys):
    with pytest.raises(SystemExit):
        cli_main._parse(["estimate", "--help"])
    assert "--conditioning-frames" in capsys.readouterr().out
