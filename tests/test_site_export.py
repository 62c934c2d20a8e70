"""The site's export and its command: laws as plain data evaluate exactly as sympy does, each card's export is
checked against the numeric path, and every bad input of ``flopcalc site`` is one line and exit 2."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from fractions import Fraction

import pytest
import sympy as sp

from flopcalc.site.laws import compile_law, evaluate

H, W, S, P, B, L, F = sp.symbols("H W S P B L F", positive=True, integer=True)


@pytest.mark.parametrize("expr", [
    171 * H**2 * W**2 * S * P * B / 16 + 87552 * H * W * L + 3,
    sp.floor(F / 12 + sp.Rational(11, 12)) * H * W + sp.Min(5, F / 4 - 3 * sp.floor(F / 12 + sp.Rational(11, 12))
                                                               + sp.Rational(27, 4)) ** 2 * H,
    sp.ceiling((H - 1) / 32) * 32 * W + sp.Max(L, 77) * B,
    S * B / (B * P),  # a feature per denoiser forward: a quotient
    sp.Integer(0),
])
def test_a_law_evaluates_exactly_as_sympy(expr):
    law = json.loads(json.dumps(compile_law(expr)))  # what the page reads
    for h, w, s, p, f, length in itertools.product((64, 1000), (48, 1024), (1, 28), (1, 2), (1, 33, 129), (5, 512)):
        values = {"H": h, "W": w, "S": s, "P": p, "B": 2, "L": length, "F": f}
        exact = sp.Rational(expr.subs({H: h, W: w, S: s, P: p, B: 2, L: length, F: f}) if expr != 0 else 0)
        assert evaluate(law, values) == Fraction(int(exact.p), int(exact.q))


def test_an_unknown_function_is_refused():
    with pytest.raises(ValueError, match="cannot state"):
        compile_law(sp.sqrt(H) * sp.exp(W))


@pytest.fixture(scope="module")
def flux():
    from flopcalc.site.export import card_data

    return card_data("flux-dev")


def test_a_card_exports_its_checked_laws(flux):
    import flopcalc

    assert flux["law"] and flux["domain"]["H"]["step"] == 16  # FLUX refuses sizes off the multiple of 16
    assert flux["guidance"]["rule"] == "any"  # guidance-distilled: the scale is an input, not a pass
    assert [v["key"] for v in flux["variants"]] == ["default", "true-cfg"]
    report = flopcalc.estimate("flux-dev", height=768, width=1344, steps=20, batch_size=2)
    values = {"H": 768, "W": 1344, "S": 20, "B": 2, "L": 512, "P": 1}
    rows = flux["variants"][0]["rows"]
    assert [evaluate(r["flops"], values) for r in rows] == [c.flops for c in report.components]
    assert "law" in flux["training"] and flux["checked_points"] >= 10


def test_a_card_without_a_law_says_why():
    from flopcalc.site.export import card_data

    entry = card_data("stable-cascade")
    assert entry["law"] is None and "no closed-form law" in entry["why"]


def test_the_page_reads_only_exported_numbers():
    """calc.js holds no coefficient of its own: besides 0, 1, ½, 2, 3 its numeric literals are Python's own in the
    functions it ports (the 1e-9 of ``_out_of_range`` and ``clamp``, 3.6e6 J per kWh) and the 1e18 of a fraction's
    conversion; every fitted number, peak and table comes from data.js."""
    from importlib import resources

    text = (resources.files("flopcalc.site") / "static" / "calc.js").read_text(encoding="utf-8")
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    code = re.sub(r"/\*\*.*?\*/", "", code, flags=re.S)  # docstrings
    code = re.sub(r"\.replace\(/.*?/g", "", code)  # regular expressions
    literals = {float(x.rstrip("n")) for x in re.findall(r"(?<![\w.$])\d+(?:\.\d+)?(?:e-?\d+)?n?", code)}
    assert literals <= {0.0, 0.5, 1.0, 2.0, 3.0, 1e-9, 3.6e6, 1e18}, literals


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flopcalc", "site", *args], capture_output=True, text=True,
                          timeout=300)


def test_the_command_prints_what_the_api_wrote(tmp_path):
    from flopcalc.site.writer import write_site

    res = _cli("--out", str(tmp_path / "cli"), "--models", "sd1.5", "flux", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    api = write_site(str(tmp_path / "api"), models=["sd1.5", "flux"], jobs=1)
    assert res.stdout == api.summary().replace(str(tmp_path / "api"), str(tmp_path / "cli")) + "\n"
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == ["app.js", "calc.js", "data.js", "index.html",
                                                                    "style.css"]
    assert api.cards == 2 and api.with_law == 2  # the alias flux names flux-dev


@pytest.mark.parametrize("args, words", [
    (("--models", "sd1.5"), ("required", "--out")),
    (("--out", "{file}", "--models", "sd1.5"), ("is a file",)),
    (("--out", "{missing}/site", "--models", "sd1.5"), ("does not exist",)),
    (("--out", "{dir}", "--models", "fluxdev"), ("not a bundled card", "flux-dev")),
    (("--out", "{dir}", "--models", "sd1.5", "--jobs", "0"), ("positive integer",)),
])
def test_refusals_are_one_line_and_exit_2(tmp_path, args, words):
    (tmp_path / "file").write_text("x")
    subs = {"file": str(tmp_path / "file"), "missing": str(tmp_path / "missing"), "dir": str(tmp_path / "out")}
    res = _cli(*(a.format(**subs) for a in args))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2  # argparse adds its usage line
    assert all(w in res.stderr for w in words), res.stderr
    assert not (tmp_path / "out").exists()  # a misspelt card is refused before the folder is made


def test_a_site_over_its_budget_is_refused(tmp_path, monkeypatch):
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.site import writer

    monkeypatch.setattr(writer, "MAX_BYTES", 1000)
    with pytest.raises(FlopcalcError, match="over its"):
        writer.write_site(str(tmp_path / "s"), models=["sd1.5"], jobs=1)
    assert not list((tmp_path / "s").iterdir())


# --------------------------------------------------------------------------- the exported data against the CLI
#: Cards and settings (symbol values) where the data the page reads is compared with what the commands print: an
#: image UNet, a DiT with a T5 encoder, an SDXL pair of encoders, a video model with frames.
CLI_POINTS = [
    ("sd1.5", {}), ("sd1.5", {"H": 768, "W": 512, "S": 30}),
    ("flux-dev", {"H": 768, "W": 1344, "S": 20}),
    ("sdxl-base", {"B": 2}),
    ("wan2.1-t2v-1.3b", {"H": 480, "W": 832, "F": 33}),
]
FLAG = {"H": "--height", "W": "--width", "S": "--steps", "B": "--batch-size", "F": "--num-frames"}


def _json_of(*argv: str) -> dict:
    """What ``flopcalc ARGV --format json`` prints, through the command line's own ``main`` in this process."""
    import contextlib
    import io

    from flopcalc.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--format", "json"]) == 0, argv
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def exported():
    from flopcalc.site.export import _constants, card_data

    return {name: card_data(name) for name in dict.fromkeys(n for n, _ in CLI_POINTS)}, _constants()


def _peaks(mem: dict, constants: dict, dtype: str, values: dict, gpu: dict | None) -> tuple[int, int, float]:
    """``(peak_bytes, peak_allocated_bytes, the reserve's relative error)`` without offload, from the exported pieces
    alone (weights, kinds, replayed weights reserves, activation fits, call laws, the laws per kind, the GPU's
    workspaces and context): the moment of each component's largest call, its reserve as
    ``flopcalc.gpu_memory.allocator.reserve`` states it, the largest."""
    from flopcalc.gpu_memory.activations import peak_elements

    law = constants["allocator"]
    comps = mem["weights"][dtype]["components"]
    weights = sum(c["bytes"] for c in comps)
    calls: dict[str, tuple[int, list | None]] = {}  # component -> its largest call (the first of equals)
    for row in mem["rows"]:
        if "fit" in row:
            n, batch = int(evaluate(row["n"], values)), int(evaluate(row["batch"], values))
            size = peak_elements(row["fit"]["fused"], n) * batch * constants["activation_dtype_bytes"][dtype]
            if size and size > calls.get(row["component"], (0, None))[0]:
                calls[row["component"]] = (size, row.get("law"))
    best = None
    for c in comps:
        act, own = calls.get(c["component"], (0, None))
        exact = sum(x["weights_reserve"] for x in comps if "weights_reserve" in x)
        by_kind: dict[str, int] = {}
        for x in comps:
            if "weights_reserve" not in x and x["bytes"]:
                by_kind[x["kind"]] = by_kind.get(x["kind"], 0) + x["bytes"]
        parts = [(round(law["kinds"][k]["weights_overhead"] * b + law["kinds"][k]["weights_constant_bytes"]),
                  law["kinds"][k]["weights_loco_max_rel_error"]) for k, b in by_kind.items()]
        if act:
            k = law["kinds"][c["kind"]]
            parts.append((round((k["activation_factor"] - 1) * act + k["activation_constant_bytes"]),
                          k["activation_loco_max_rel_error"]) if own is None else
                         (round((own[0] - 1) * act), own[1]))
        allocator = max(exact + sum(p for p, _ in parts), 0)
        ws = gpu["workspace_bytes"] if gpu else 0
        peak = weights + act + allocator + ws + (gpu["context_bytes"] if gpu else 0)
        uncertain = sum(max(abs(p), law["significant_bytes"]) * e for p, e in parts)
        if best is None or peak > best[0]:
            best = (peak, uncertain / (allocator + ws) if allocator + ws else 0.0)
    allocated = weights + max((a for a, _ in calls.values()), default=0)
    return best[0], allocated, best[1]


@pytest.mark.parametrize("name, point", CLI_POINTS)
def test_the_exported_data_equals_what_the_commands_print(exported, name, point):
    """Without a browser: the laws the page evaluates give ``flopcalc estimate``'s FLOPs per component exactly, and
    the memory pieces ``flopcalc memory``'s weights, both peaks (``peak_bytes``: the caching allocator's reserve,
    the workspaces and the CUDA context; ``peak_allocated_bytes``: the live tensors) with the reserve's error,
    without offload, in bf16 and in fp8 weights, with a GPU and without one, and the calls whose activations are
    not estimated."""
    cards, constants = exported
    card = cards[name]
    variant = card["variants"][0]
    values = {**card["defaults"], **point}
    flags = [x for k, v in point.items() for x in (FLAG[k], str(v))]
    estimate = _json_of("estimate", name, *flags)
    mine = [int(evaluate(r["flops"], values)) for r in variant["rows"]]
    assert mine == [c["flops"] for c in estimate["components"]]
    assert sum(mine) == estimate["total"]["flops"]
    mem = variant["memory"]
    gpus = {g["key"]: g for g in exported_gpus()["table"]}
    for precision in ("bf16", "fp8"):
        dtype = constants["memory_dtype"][precision]
        for gpu in ("h100-sxm", None):
            cli = _json_of("memory", name, "--dtype", dtype, *(["--gpu", gpu] if gpu else []), *flags)
            assert sum(c["bytes"] for c in mem["weights"][dtype]["components"]) == cli["weights_bytes"]
            peak, allocated, error = _peaks(mem, constants, dtype, values, gpus[gpu] if gpu else None)
            assert (peak, allocated) == (cli["peak_bytes"], cli["peak_allocated_bytes"]), (precision, gpu)
            assert error == cli["reserve"]["allocator_workspace_rel_error"]
            assert [f"{r['component']}.{r['call']}" for r in mem["rows"] if "fit" not in r] == \
                cli["activations_not_estimated"]


def exported_gpus() -> dict:
    from flopcalc.site.export import _gpus

    return _gpus()


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed: calc.js is run in the browser test only")
@pytest.mark.parametrize("name", ["sd1.5", "flux-dev"])
def test_calc_js_memory_equals_the_command_line_under_every_offload_mode(exported, name, tmp_path):
    """calc.js's ``Calc.memory`` itself (run by node on the exported data) gives ``flopcalc memory``'s two peaks,
    the reserve's error, the moment and the verdict, under every offload mode, with a GPU and without one."""
    from importlib import resources

    cards, constants = exported
    data = {"cards": [cards[name]], "gpus": exported_gpus(), "constants": constants}
    (tmp_path / "data.json").write_text(json.dumps(data), encoding="utf-8")
    calc = str(resources.files("flopcalc.site") / "static" / "calc.js")
    cases = [(dtype, mode, gpu) for dtype in ("bf16", "fp8", "fp32") for mode in constants["offload"]
             for gpu in ("h100-sxm", "rtx-4090", None) if dtype != "fp8" or mode in ("none", "model")]
    script = """
const fs = require("fs"), Calc = require(process.argv[1]);
const DATA = JSON.parse(fs.readFileSync(process.argv[2], "utf8")), card = DATA.cards[0], v = card.variants[0];
const out = JSON.parse(process.argv[3]).map(([dtype, mode, gpu]) => {
  const g = gpu === null ? null : DATA.gpus.table.find((x) => x.key === gpu);
  const m = Calc.memory(DATA, v.memory, { ...card.defaults }, dtype, mode, g, "fused", {});
  return [m.peak.toString(), m.peak_allocated.toString(), m.reserve.error, m.reserve.at, m.fits === undefined ? null : m.fits,
    m.verdict === undefined ? null : m.verdict];
});
console.log(JSON.stringify(out));"""
    res = subprocess.run([NODE, "-e", script, calc, str(tmp_path / "data.json"), json.dumps(cases)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for (dtype, mode, gpu), (peak, allocated, error, at, fits, verdict) in zip(cases, json.loads(res.stdout)):
        cli = _json_of("memory", name, "--dtype", dtype, "--offload", mode, *(["--gpu", gpu] if gpu else []))
        assert (int(peak), int(allocated), error, at) == (cli["peak_bytes"], cli["peak_allocated_bytes"],
                                                          cli["reserve"]["allocator_workspace_rel_error"],
                                                          cli["reserve"]["at"]), (dtype, mode, gpu)
        assert (fits, verdict) == ((cli["gpu"]["fits"], cli["gpu"]["verdict"]) if gpu else (None, None))
