"""``flopcalc coverage``: the diffusers classes flopcalc counts, from the registries and the shipped
class list; docs/coverage.md kept current; no diffusers needed at run time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flopcalc.flops.coverage import class_list, coverage, render, shipped_versions
from flopcalc.engine.discovery import index
from flopcalc.engine.errors import OptionError

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "coverage.md"


def test_the_docs_table_is_current():
    assert DOC.read_text(encoding="utf-8") == render(coverage(), "markdown"), (
        "docs/coverage.md is stale: flopcalc coverage --format markdown > docs/coverage.md")


def test_the_class_list_holds_what_diffusers_0_42_1_exports():
    """The counts issue 12 cites for diffusers 0.42.1: 306 exported pipeline classes, 51 deprecated."""
    data = class_list("0.42.1")
    assert len(data["pipelines"]) == 306
    assert sum(p["deprecated"] for p in data["pipelines"].values()) == 51
    flux = {c["name"]: c for c in data["pipelines"]["FluxPipeline"]["components"]}
    assert [k["class"] for k in flux["transformer"]["classes"]] == ["FluxTransformer2DModel"]
    assert flux["image_encoder"]["optional"] and not flux["text_encoder_2"]["optional"]


def test_every_plan_and_formula_is_picked_up_from_the_registries():
    cov = coverage()
    planned = set(index().pipelines)
    by_name = {p.name: p for p in cov.pipelines}
    assert {n for n, p in by_name.items() if p.status == "planned"} == planned & set(by_name)
    assert set(cov.planned_elsewhere) == planned - set(by_name)
    formulas = set(index().architectures)
    assert {m.name for m in cov.models if m.status == "formula"} == formulas & {m.name for m in cov.models}
    for p in cov.pipelines:
        if p.status == "components-only":
            assert not p.lacking
        if p.status == "missing" and p.components:
            assert p.lacking or all(c.split(":")[0].endswith("?") for c in p.components), p


def test_statuses_add_up_in_every_format():
    cov = coverage()
    data = json.loads(render(cov, "json"))
    assert sum(data["counts"]["all"].values()) == len(data["pipelines"]) == 306
    assert sum(data["counts"]["current"].values()) == 306 - data["counts"]["deprecated"]
    table = render(cov, "table")
    assert table.startswith("diffusers 0.42.1: 306 exported pipeline classes, 51 deprecated")
    assert "FluxPipeline" in table and "planned" in table


def test_an_unshipped_version_is_refused_with_the_shipped_ones():
    assert shipped_versions() == ["0.42.1"]
    with pytest.raises(OptionError, match="no class list for diffusers 0.1.0; shipped: 0.42.1"):
        coverage("0.1.0")


def test_coverage_needs_no_diffusers_or_torch():
    code = ("import sys\n"
            "for name in ('torch', 'diffusers', 'transformers'): sys.modules[name] = None\n"
            "from flopcalc.cli.main import main\n"
            "sys.exit(main(['coverage', '--format', 'json']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["diffusers_version"] == "0.42.1"


def test_the_class_list_is_what_the_script_extracts_from_the_installed_diffusers():
    diffusers = pytest.importorskip("diffusers")
    pytest.importorskip("transformers")
    if diffusers.__version__ not in shipped_versions():
        pytest.skip(f"no class list shipped for the installed diffusers {diffusers.__version__}")
    sys.path.insert(0, str(REPO / "validation"))
    import extract_diffusers_classes as script

    data = script.extract()
    shipped = (REPO / "flopcalc/data/diffusers" / f"{data['diffusers_version']}.json").read_text(encoding="utf-8")
    assert script.render(data) == shipped, "python validation/extract_diffusers_classes.py"
