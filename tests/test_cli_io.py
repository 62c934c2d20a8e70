"""The command line's output side, as a careless or unlucky user meets it: output files in missing
folders, on directories, on a full disk; stdout closed, full, a broken pipe, an ASCII or cp1252
terminal; Ctrl-C; grids too large for memory; progress on a terminal. Every failure is one line
and an exit status, never a traceback. Also: every command takes what ``estimate`` takes, and
every example in ``--help`` runs (the README's and docs' examples: tests/test_docs.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import flopcalc
from flopcalc.cli.main import EXAMPLES

REPO = Path(__file__).resolve().parent.parent
FLUX = REPO / "model_cards" / "flux-dev"
BARE_CONFIGS = [FLUX / "vae" / "config.json", FLUX / "text_encoder" / "config.json"]


def cli(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flopcalc", *args], capture_output=True, text=True, timeout=120,
                          env=env, **kw)


def shell(command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, env=env)


def one_line_error(res: subprocess.CompletedProcess, *words: str, status: int = 2) -> str:
    assert res.returncode == status, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


FLOPCALC = f"{shlex.quote(sys.executable)} -m flopcalc"


# --------------------------------------------------------------------------- output files


@pytest.mark.parametrize("command", [["report", "sd1.5", "--html"], ["plot", "sd1.5", "--out"]])
def test_output_file_errors_are_one_line(command, tmp_path):
    name = "page.html" if command[0] == "report" else "plot.png"
    one_line_error(cli(*command, str(tmp_path / "no" / "such" / name)), "does not exist", "create it first")
    one_line_error(cli(*command, str(tmp_path)), "is a directory")
    full = tmp_path / name
    full.symlink_to("/dev/full")  # a full disk
    one_line_error(cli(*command, str(full)), "cannot write", "No space left on device")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    try:
        if not os.access(readonly, os.W_OK):  # root writes anywhere
            one_line_error(cli(*command, str(readonly / name)), "no permission")
    finally:
        readonly.chmod(0o700)


def test_output_path_is_checked_before_the_work(tmp_path):
    start = time.monotonic()
    one_line_error(cli("plot", "sd1.5", "--out", str(tmp_path / "plot.pdf")), ".png or .svg")
    one_line_error(cli("report", "flux-dev", "no-such-model", "--html", str(tmp_path / "x" / "r.html")),
                   "does not exist")
    assert time.monotonic() - start < 10


def test_plot_and_report_write_their_files(tmp_path):
    res = cli("plot", "flux-dev", "sd1.5", "--sides", "256:2048:256", "--out", str(tmp_path / "p.svg"))
    assert res.returncode == 0, res.stderr
    svg = (tmp_path / "p.svg").read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "share of the total" in svg
    res = cli("report", "kandinsky-3", "--html", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "reconstructed" in page and "corrected by flopcalc in movq/config.json" in page


# --------------------------------------------------------------------------- stdout


def test_closed_stdout():
    one_line_error(shell(f"{FLOPCALC} list >&-"), "standard output is closed")


def test_full_stdout():
    one_line_error(shell(f"{FLOPCALC} estimate flux-dev --per-block > /dev/full"), "No space left on device")


def test_broken_pipe_stops_quietly():
    # 44,800 rows, written in chunks: the reader is gone after two lines, a later chunk meets the broken pipe
    res = shell(f"set -o pipefail; {FLOPCALC} sweep sd1.5 --height 64:4096:64 --width 512 --steps 1:700 | head -n 2")
    assert res.stdout.count("\n") == 2 and res.stderr == "", res.stderr
    assert res.returncode == 141


@pytest.mark.parametrize("encoding", ["ascii", "cp1252", "latin-1"])
def test_non_utf8_terminal_gets_ascii_stand_ins(encoding):
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    for args in (["estimate", "flux-dev", "--per-block"], ["kaplan", "sd3-medium"], ["symbolic", "sd3-medium"],
                 ["estimate", "--help"], ["compare", "flux-dev", "sd1.5"]):
        res = subprocess.run([sys.executable, "-m", "flopcalc", *args], capture_output=True, timeout=120, env=env)
        assert res.returncode == 0, res.stderr.decode(encoding)
        text = res.stdout.decode(encoding)  # what the terminal shows: valid in its encoding
        assert "Traceback" not in text and text.strip()
    out = subprocess.run([sys.executable, "-m", "flopcalc", "estimate", "flux-dev"], capture_output=True,
                         timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii"}).stdout.decode("ascii")
    assert "(QKT, A*V)" in out and "FLOPs = 2 x MACs" in out and "?" not in out


def test_errors_on_an_ascii_terminal():
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    one_line_error(cli("estimate", "flux-dev", "--height", "1000", env=env), "nearest valid")


# --------------------------------------------------------------------------- budgets, progress, Ctrl-C


def test_huge_sweep_is_refused_up_front():
    start = time.monotonic()
    line = one_line_error(cli("sweep", "sd3-medium", "--steps", "1:100000000"),
                          "100,000,000", "limit of 2,000,000", "--max-points")
    assert time.monotonic() - start < 10, line
    one_line_error(cli("sweep", "sd1.5", "--height", "512:4096:64", "--width", "512:4096:64", "--steps", "1:1000"),
                   "3,249,000 points", "--max-points 3249000")


def test_huge_plot_is_refused_up_front(tmp_path):
    one_line_error(cli("plot", "sd1.5", "--sides", "16:10000000:16", "--out", str(tmp_path / "p.png")),
                   "625,000", "limit of 10,000", "--max-points")
    assert not (tmp_path / "p.png").exists()


def test_max_points_raises_the_limit():
    one_line_error(cli("sweep", "sd1.5", "--steps", "1:10", "--max-points", "9"), "10 values", "limit of 9")
    res = cli("sweep", "sd1.5", "--steps", "1:10", "--max-points", "10")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 11, res.stderr


def _in_pty(args: list[str], interrupt_on: str | None = None) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal; optionally send Ctrl-C (SIGINT) as soon as ``interrupt_on``
    appears on it (mid-work, whatever the machine's speed)."""
    import pty

    leader, follower = pty.openpty()
    # SIGINT back to its default in the child: a shell's background job (`pytest … &`) ignores it, and Python then
    # installs no KeyboardInterrupt handler, as a terminal user's flopcalc would have
    proc = subprocess.Popen([sys.executable, "-m", "flopcalc", *args], stdout=subprocess.DEVNULL,
                            stderr=follower, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(follower)
    chunks: list[bytes] = []
    sent = interrupt_on is None
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
        if not sent and interrupt_on.encode() in b"".join(chunks):
            proc.send_signal(signal.SIGINT)
            sent = True
    status = proc.wait(timeout=120)
    os.close(leader)
    return status, b"".join(chunks).decode("utf-8", "replace")


SLOW_SWEEP = ["sweep", "sd1.5", "--height", "64:16384:64", "--width", "64:16384:64", "--max-points", "100000"]


def test_progress_on_a_terminal_and_ctrl_c():
    status, err = _in_pty(SLOW_SWEEP)
    assert status == 0, err
    assert "checking the law against the exact estimate: " in err and "\r" in err
    status, err = _in_pty(SLOW_SWEEP, interrupt_on="checking the law")
    assert status == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].strip("\r\x1b[K").endswith("flopcalc: interrupted")


def test_no_progress_when_stderr_is_not_a_terminal():
    res = cli(*SLOW_SWEEP[:3], "64:2048:64", "--width", "512")
    assert res.returncode == 0 and res.stderr == ""


# --------------------------------------------------------------------------- exact sweeps


def test_sweep_csv_and_json_are_exact_integers():
    rows = list(csv.DictReader(io.StringIO(cli("sweep", "hunyuanvideo", "--num-frames", "101,129", "--steps",
                                               "50,10000").stdout)))  # 10000: the steps budget
    assert len(rows) == 4
    for row in rows:
        exact = flopcalc.estimate("hunyuanvideo", num_frames=int(row["F"]), steps=int(row["S"]),
                                  resolution_binning=False).flops
        assert int(row["flops"]) == exact  # beyond 2**53: float64 would round it
    assert max(int(r["flops"]) for r in rows) > 2**63  # past int64 too
    data = json.loads(cli("sweep", "flux-dev", "--height", "512,1024", "--format", "json").stdout)
    assert [r["flops"] for r in data["rows"]] == [flopcalc.estimate("flux-dev", height=h).flops for h in (512, 1024)]


# --------------------------------------------------------------------------- every command, every input


@pytest.mark.parametrize("config", BARE_CONFIGS, ids=lambda p: p.parent.name)
def test_every_command_takes_a_bare_component_config(config, tmp_path):
    estimate = flopcalc.estimate(str(config))
    sym = json.loads(cli("symbolic", str(config), "--format", "json").stdout)
    assert sym["components"][0]["class_name"] == estimate.components[0].class_name
    sweep = list(csv.DictReader(io.StringIO(cli("sweep", str(config)).stdout)))
    assert [int(r["flops"]) for r in sweep] == [estimate.flops]
    assert cli("report", str(config), "--html", str(tmp_path / "r.html")).returncode == 0
    plot = cli("plot", str(config), "--out", str(tmp_path / "p.png"))
    if "H" in sym["symbols"]:
        assert plot.returncode == 0, plot.stderr
    else:
        one_line_error(plot, "do not depend on the image size")


# --------------------------------------------------------------------------- examples


def _help_examples() -> list[str]:
    return [line for lines in EXAMPLES.values() for line in lines]


def test_help_shows_the_examples():
    for command, lines in EXAMPLES.items():
        text = cli(command, "--help").stdout
        for line in lines:
            assert line in text


@pytest.mark.parametrize("example", sorted(set(_help_examples())))
def test_example_runs(example, tmp_path):
    res = subprocess.run([sys.executable, "-m", "flopcalc", *shlex.split(example)[1:]], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, (example, res.stderr)
    assert res.stdout.strip()




def test_sweep_refuses_values_on_another_branch():
    one_line_error(cli("sweep", "hunyuanvideo", "--num-frames", "5,129"), "not at F=129")


def test_plot_shows_shares_truthfully():
    pytest.importorskip("matplotlib")
    from matplotlib.collections import PolyCollection

    from flopcalc.flops.plots import resolution_figure
    from flopcalc.flops.symbolic import symbolic_estimate

    laws = [symbolic_estimate(m) for m in ("flux-dev", "sd1.5", "sd3-medium")]
    fig = resolution_figure(laws, list(range(256, 4097, 256)))
    colours: dict[str, set] = {}
    for ax in fig.axes:
        areas = [c for c in ax.collections if isinstance(c, PolyCollection)]
        if ax.get_yscale() == "log":
            assert not areas  # no stacked areas on a log axis
        else:
            assert areas and ax.get_ylim() == (0, 100)
        for line in ax.get_lines():
            colours.setdefault(line.get_label(), set()).add(tuple(line.get_color()) if not isinstance(
                line.get_color(), str) else line.get_color())
        for area in areas:
            colours.setdefault(area.get_label(), set()).add(tuple(area.get_facecolor()[0][:3]))
    for name in ("text_encoder", "vae.decode"):  # in every panel, always the same colour
        rgb = {c[:3] if isinstance(c, tuple) else c for c in colours[name]}
        assert len(rgb) == 1, (name, rgb)
