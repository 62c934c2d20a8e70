"""flopcalc.engine.sources / flopcalc.engine.cards: local folders, bundled cards, and the Hub through huggingface_hub.

Self-contained and offline: the data are the bundled cards (``model_cards/<name>``, each a valid
diffusers pipeline folder), and the Hub is a real HTTP server on 127.0.0.1 (``hub_server.FakeHub``)
that ``huggingface_hub`` talks to for real. Hub resolutions run in a subprocess because
huggingface_hub reads HF_ENDPOINT / HF_HOME / HF_HUB_OFFLINE when it is imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # hub_server, whether or not tests/ is a package
from hub_server import FakeHub, repo_files_from_folder  # noqa: E402

import flopcalc  # noqa: E402
from flopcalc.engine import cards as cards_mod  # noqa: E402
from flopcalc.engine.errors import ConfigError, FlopcalcError, SourceError  # noqa: E402
from flopcalc.engine.sources import (  # noqa: E402
    MalformedConfigError,
    ModelSource,
    component_name_for,
    is_hub_id,
    model_components,
    resolve,
    skipped_components,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
CARDS_DIR = REPO_ROOT / "model_cards"
CARD_NAMES = sorted(p.name for p in CARDS_DIR.iterdir() if (p / "card.yaml").is_file())
SUBPROCESS_TIMEOUT = 60
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".msgpack", ".h5")


def _load(path: Path):
    return json.loads(path.read_bytes())


def _expected_components(folder: Path) -> dict[str, dict]:
    """The model components of a pipeline folder, read independently of the code under test."""
    index = _load(folder / "model_index.json")
    out = {}
    for key, value in index.items():
        if key.startswith("_") or not isinstance(value, list) or len(value) != 2 or None in value:
            continue
        if value[1].endswith(("Scheduler", "Tokenizer", "TokenizerFast", "FeatureExtractor", "ImageProcessor",
                              "Processor", "SafetyChecker")):  # Processor: FLUX.2-dev's PixtralProcessor
            continue
        if not (folder / key / "config.json").exists():  # named missing in the report
            continue
        out[key] = _load(folder / key / "config.json")
    return out


def _plain(source: ModelSource) -> dict:
    return {
        "name": source.name,
        "kind": source.kind,
        "model_index": None if source.model_index is None else dict(source.model_index),
        "components": {k: dict(v) for k, v in source.components.items()},
        "revision": source.revision,
        "location": source.location,
    }


def _copy_card(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(CARDS_DIR / name, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


# --------------------------------------------------------------------------------------------
# Cards
# --------------------------------------------------------------------------------------------


def test_list_cards_reads_every_card_yaml():
    listed = cards_mod.list_cards()
    assert [c.name for c in listed] == sorted((c.name for c in listed), key=str.casefold)
    assert {c.path.name for c in listed} == set(CARD_NAMES)
    for card in listed:
        assert card.title and card.name
        assert card.hub_id is None or is_hub_id(card.hub_id), card
        assert isinstance(card.aliases, tuple)
        assert card.data["name"] == card.name


def test_card_names_and_aliases_are_unique():
    seen: dict[str, str] = {}
    for card in cards_mod.list_cards():
        for key in (card.name, *card.aliases):
            assert key.casefold() not in seen, f"{key!r} of {card.name} also names {seen.get(key.casefold())}"
            seen[key.casefold()] = card.name


def test_find_card_is_case_insensitive():
    flux = cards_mod.find_card("flux-dev")
    assert flux is not None and flux.hub_id == "black-forest-labs/FLUX.1-dev"
    assert cards_mod.find_card("FLUX") == flux
    assert cards_mod.find_card("  Flux.1-Dev ") == flux
    assert cards_mod.find_card("no-such-card") is None
    assert cards_mod.find_card("") is None


@pytest.mark.parametrize("name", CARD_NAMES)
def test_resolve_card_by_name(name):
    source = resolve(name)
    assert source.kind == "card"
    assert source.name == name
    folder = CARDS_DIR / name
    assert dict(source.model_index) == _load(folder / "model_index.json")
    assert {k: dict(v) for k, v in source.components.items()} == _expected_components(folder)
    assert source.card["name"] == name
    assert source.provenance == _load(folder / "PROVENANCE.json")
    assert source.revision is None
    assert Path(source.location) == folder


def test_resolve_card_by_alias_any_case():
    by_alias = resolve("FLUX")
    assert by_alias.kind == "card" and by_alias.name == "flux-dev"
    assert _plain(by_alias) == _plain(resolve("flux-dev"))
    assert resolve("Sd3.5").name == "sd3.5-large"


def test_components_follow_model_index_order_and_skip_non_models():
    source = resolve("sd3-medium")
    assert list(source.components) == ["text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae"]
    assert "scheduler" not in source.components and "tokenizer" not in source.components


def test_unknown_name_says_how_to_see_the_cards():
    with pytest.raises(SourceError) as info:
        resolve("flx")
    message = str(info.value)
    assert "flopcalc list" in message
    assert "`flux-dev`" in message  # did-you-mean
    with pytest.raises(SourceError, match="flopcalc list"):
        resolve("not a model")
    with pytest.raises(SourceError, match="not a valid Hub repo id"):
        resolve("org/na me")
    with pytest.raises(SourceError, match="No model given"):
        resolve("  ")


def test_revision_only_applies_to_hub_ids():
    with pytest.raises(SourceError, match="only applies to a Hub repo id"):
        resolve("flux-dev", revision="main")
    with pytest.raises(SourceError, match="only applies to a Hub repo id"):
        resolve(str(CARDS_DIR / "flux-dev"), revision="main")


# --------------------------------------------------------------------------------------------
# Local paths
# --------------------------------------------------------------------------------------------


def test_pipeline_folder(tmp_path):
    folder = _copy_card("flux-dev", tmp_path)
    source = resolve(str(folder))
    assert source.kind == "folder" and source.name == str(folder)
    assert {k: dict(v) for k, v in source.components.items()} == _expected_components(folder)
    assert source.card is None and source.revision is None
    assert source.location == str(folder.resolve())
    assert source.provenance is not None  # PROVENANCE.json is read when a folder has one
    # model_index.json itself names its folder
    assert _plain(resolve(str(folder / "model_index.json")))["components"] == _plain(source)["components"]


SHARED_SNAPSHOTS = REPO_ROOT.parent / "shared" / "hub-snapshots"
SNAPSHOTS = sorted(p.parent for p in SHARED_SNAPSHOTS.glob("*/*/model_index.json")) if SHARED_SNAPSHOTS.is_dir() else []


@pytest.mark.skipif(not SNAPSHOTS, reason="../shared/hub-snapshots is not beside the checkout")
@pytest.mark.parametrize("folder", SNAPSHOTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_hub_snapshots_resolve_as_folders(folder):
    source = resolve(str(folder))
    assert source.kind == "folder" and source.components
    index = _load(folder / "model_index.json")
    for name, config in source.components.items():
        file = _load(folder / name / "config.json")
        if "_class_name" not in file and "architectures" not in file:  # the class the index names (a Cosmos T5)
            library, cls = index[name]
            file = {**file, **({"_class_name": cls} if library == "diffusers" else {"architectures": [cls]})}
        assert dict(config) == file
    assert "scheduler" not in source.components and not any(n.startswith("tokenizer") for n in source.components)
    assert not any("guider" in n for n in source.components)
    # every listed model whose config.json is not in the snapshot is named, none silently dropped
    for name in source.missing:
        assert not (folder / name / "config.json").exists() and name in index
        assert any(note.startswith(f"{name} (") and "not counted" in note for note in source.notes)


def test_guider_entries_are_skipped_with_a_note(tmp_path):
    folder = _copy_card("flux-dev", tmp_path)
    index = _load(folder / "model_index.json")
    index["guider"] = ["diffusers", "ClassifierFreeGuidance"]
    index["ocr_guider"] = [None, None]
    (folder / "model_index.json").write_text(json.dumps(index))
    source = resolve(str(folder))
    assert "guider" not in source.components and not source.missing
    assert source.skipped == {"guider": "ClassifierFreeGuidance"}
    assert any(n.startswith("guider (ClassifierFreeGuidance)") and "skipped" in n for n in source.notes)
    report = flopcalc.estimate(str(folder))
    assert report.flops == flopcalc.estimate("flux-dev").flops
    assert any("guidance helper" in n for n in report.notes)


@pytest.mark.parametrize("component, key", [("text_encoder_2", "architectures"), ("transformer", "_class_name")])
def test_a_config_naming_no_class_takes_the_class_model_index_names(tmp_path, component, key):
    """diffusers loads the class the index entry names (``load_sub_model``), whatever the config.json says: a
    transformers config written without ``architectures`` (a shared Cosmos T5 encoder's) is still a T5 encoder."""
    folder = _copy_card("flux-dev", tmp_path)
    path = folder / component / "config.json"
    config = _load(path)
    del config[key]
    path.write_text(json.dumps(config))
    assert flopcalc.estimate(str(folder)).flops == flopcalc.estimate("flux-dev").flops


def test_card_folder_is_a_valid_local_folder():
    source = resolve(str(CARDS_DIR / "sd3.5-large"))
    assert source.kind == "folder"
    assert {k: dict(v) for k, v in source.components.items()} == _expected_components(CARDS_DIR / "sd3.5-large")


def test_single_config_folder_and_file(tmp_path):
    transformer = CARDS_DIR / "flux-dev" / "transformer" / "config.json"
    folder = tmp_path / "transformer"
    folder.mkdir()
    shutil.copy(transformer, folder / "config.json")
    source = resolve(str(folder))
    assert source.kind == "config" and source.model_index is None
    assert {k: dict(v) for k, v in source.components.items()} == {"transformer": _load(transformer)}

    other = tmp_path / "downloads"
    other.mkdir()
    shutil.copy(transformer, other / "flux.json")
    source = resolve(str(other / "flux.json"))
    assert list(source.components) == ["model"]
    assert source.location == str((other / "flux.json").resolve())

    assert resolve(str(CARDS_DIR / "flux-dev" / "vae" / "config.json")).components.keys() == {"vae"}


def test_component_name_for():
    for name in ("transformer", "unet", "vae", "movq", "text_encoder", "text_encoder_2", "prior", "decoder"):
        assert component_name_for(name) == name
    assert component_name_for("snapshots") == "model"
    assert component_name_for("my-model") == "model"


def test_model_component_selection():
    index = {
        "_class_name": "StableDiffusionPipeline",
        "_diffusers_version": "0.6.0",
        "feature_extractor": ["transformers", "CLIPImageProcessor"],
        "image_processor": ["transformers", "SiglipImageProcessor"],
        "processor": ["transformers", "Qwen2VLProcessor"],
        "safety_checker": ["stable_diffusion", "StableDiffusionSafetyChecker"],
        "watermark": [None, None],
        "requires_safety_checker": True,
        "add_watermarker": None,
        "scheduler": ["diffusers", "PNDMScheduler"],
        "text_encoder": ["transformers", "CLIPTextModel"],
        "tokenizer": ["transformers", "CLIPTokenizer"],
        "tokenizer_2": ["transformers", "T5TokenizerFast"],
        "unet": ["diffusers", "UNet2DConditionModel"],
        "vae": ["diffusers", "AutoencoderKL"],
        "prior": ["other_lib", "PriorTransformer"],
    }
    assert model_components(index) == {
        "text_encoder": ("transformers", "CLIPTextModel"),
        "unet": ("diffusers", "UNet2DConditionModel"),
        "vae": ("diffusers", "AutoencoderKL"),
        "prior": ("other_lib", "PriorTransformer"),
    }
    skipped = skipped_components(index)
    assert set(skipped) == {
        "feature_extractor", "image_processor", "processor", "safety_checker", "watermark",
        "scheduler", "tokenizer", "tokenizer_2",
    }


def test_malformed_json_names_the_file(tmp_path):
    folder = _copy_card("flux-dev", tmp_path)
    (folder / "transformer" / "config.json").write_text('{"_class_name": "FluxTransformer2DModel",\n  "x": }')
    with pytest.raises(MalformedConfigError) as info:
        resolve(str(folder))
    assert isinstance(info.value, SourceError) and isinstance(info.value, ConfigError)
    assert "transformer/config.json" in str(info.value) and "not valid JSON" in str(info.value)
    assert "line 2" in str(info.value)

    (folder / "model_index.json").write_text("[1, 2]")
    with pytest.raises(MalformedConfigError, match=r"model_index\.json must hold a JSON object"):
        resolve(str(folder))
    with pytest.raises(MalformedConfigError) as info:
        resolve(str(folder / "model_index.json"))
    assert f"{folder}/model_index.json must" in str(info.value)

    (folder / "model_index.json").write_text('{"_class_name": "FluxPipeline", "scheduler": ["diffusers", "PNDMScheduler"]}')
    with pytest.raises(MalformedConfigError, match="lists no model components"):
        resolve(str(folder))

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000)
    with pytest.raises(MalformedConfigError, match="deep.json"):
        resolve(str(deep))

    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(MalformedConfigError, match="bad.json"):
        resolve(str(bad))


def test_missing_component_config(tmp_path):
    """A listed component without its config.json (a partial repo, an encoder passed in by the
    user): the rest is counted and the report names what is not."""
    folder = _copy_card("sd3-medium", tmp_path)
    (folder / "vae" / "config.json").unlink()
    source = resolve(str(folder))
    assert source.missing == {"vae": "AutoencoderKL"} and "vae" not in source.components
    report = flopcalc.estimate(str(folder))
    whole = flopcalc.estimate("sd3-medium")
    assert [c.component for c in report.components] == [c.component for c in whole.components if c.component != "vae"]
    assert report.flops == whole.flops - whole.component("vae").flops
    notes = [n for n in report.notes if n.startswith("vae")]
    assert len(notes) == 1 and "config.json is not there" in notes[0]
    # nothing at all to count is still an error that names the files
    for name in source.components:
        (folder / name / "config.json").unlink()
    with pytest.raises(SourceError, match="none of their configs"):
        resolve(str(folder))


def test_path_errors(tmp_path):
    with pytest.raises(SourceError):
        resolve("x" * 5000)  # too long to be a path on any file system
    with pytest.raises(SourceError):
        resolve("bad\0name")
    with pytest.raises(SourceError, match="No such file or folder"):
        resolve(str(tmp_path / "nope"))
    with pytest.raises(SourceError, match="No such file or folder"):
        resolve("./definitely/not/here")
    with pytest.raises(SourceError, match="neither model_index.json"):
        resolve(str(tmp_path))
    text = tmp_path / "notes.txt"
    text.write_text("hi")
    with pytest.raises(SourceError, match=r"not a \.json config"):
        resolve(str(text))


def test_is_hub_id():
    for good in ("black-forest-labs/FLUX.1-dev", "stabilityai/stable-diffusion-3.5-large", "a/b", "org_1/x.y-z"):
        assert is_hub_id(good), good
    for bad in ("flux", "a/b/c", "/abs", "org/", "org/na me", "org--x/y", "org/x..y", "org/x.git", "-org/x"):
        assert not is_hub_id(bad), bad


# --------------------------------------------------------------------------------------------
# The Hub, through huggingface_hub against a local server, in subprocesses
# --------------------------------------------------------------------------------------------

_RUNNER = r"""
import json, sys
calls = json.loads(sys.argv[1])
out = []
from flopcalc.engine.sources import resolve
for call in calls:
    try:
        s = resolve(call["model"], revision=call.get("revision"), token=call.get("token"))
    except BaseException as exc:
        out.append({"ok": False, "type": type(exc).__name__,
                    "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)})
    else:
        out.append({"ok": True, "name": s.name, "kind": s.kind,
                    "model_index": None if s.model_index is None else dict(s.model_index),
                    "components": {k: dict(v) for k, v in s.components.items()},
                    "card": s.card is not None, "revision": s.revision, "location": s.location,
                    "missing": dict(s.missing), "notes": list(s.notes)})
print("RESULT " + json.dumps(out))
"""

_SCRUB = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
          "http_proxy", "https_proxy", "all_proxy")


def _env(hf_home: Path, endpoint: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env.update(
        HF_HOME=str(hf_home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    )
    if endpoint is not None:
        env["HF_ENDPOINT"] = endpoint
    env.update(extra)
    return env


def run_resolve(calls: list[dict], env: dict[str, str]) -> list[dict]:
    """Resolve each call in one fresh interpreter; every call's outcome comes back as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(calls)],
        env=env, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"runner failed (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


def _assert_error(result: dict, *words: str, cls: str = "SourceError") -> str:
    assert not result["ok"], result
    assert cls in result["mro"] and "FlopcalcError" in result["mro"], result
    for word in words:
        assert word in result["message"], (word, result["message"])
    return result["message"]


FLUX = CARDS_DIR / "flux-dev"
SD3 = CARDS_DIR / "sd3-medium"
GRANTED = "hf_granted_token_for_tests"


@pytest.fixture(scope="module")
def hub():
    with FakeHub() as server:
        repo = server.add_repo("org/flux-dev", repo_files_from_folder(FLUX))
        repo.refs["v1.0"] = repo.commit  # a tag
        server.add_repo("org/gated", repo_files_from_folder(SD3), gated=True, granted_tokens=frozenset({GRANTED}))
        broken = repo_files_from_folder(SD3)
        del broken["vae/config.json"]
        server.add_repo("org/no-vae", broken)
        bad = repo_files_from_folder(SD3)
        bad["transformer/config.json"] = b'{"_class_name": "SD3Transformer2DModel", oops}'
        server.add_repo("org/bad-json", bad)
        server.add_repo("org/just-a-transformer", {"config.json": (FLUX / "transformer" / "config.json").read_bytes(),
                                                   "diffusion_pytorch_model.safetensors": b"\0" * 64})
        server.add_repo("org/readme-only", {"README.md": b"# nothing here\n"})
        yield server


def _resolve_paths(hub: FakeHub, start: int) -> list[str]:
    return [path for _method, path, _status in hub.requests()[start:] if "/resolve/" in path]


def test_hub_download_then_offline_from_cache(tmp_path):
    hf_home = tmp_path / "hf"
    expected = _expected_components(FLUX)
    with FakeHub() as server:  # its own server, so it can be stopped
        repo = server.add_repo("org/flux-dev", {**repo_files_from_folder(FLUX),
                                                "transformer/diffusion_pytorch_model.safetensors": b"\0" * 128})
        (online,) = run_resolve([{"model": "org/flux-dev"}], _env(hf_home, server.endpoint))
        requests = server.requests()
    assert online["ok"], online
    assert online["kind"] == "hub" and online["name"] == "org/flux-dev" and not online["card"]
    assert online["components"] == expected
    assert online["model_index"] == _load(FLUX / "model_index.json")
    assert online["revision"] == repo.commit

    # Only model_index.json and the model components' config.json were asked for: no weights,
    # no scheduler/tokenizer files. (huggingface_hub itself also asks /api/agent-harnesses.)
    resolve_files = sorted({path.split("/resolve/", 1)[1].split("/", 1)[1] for _m, path, _s in requests
                            if "/resolve/" in path})
    assert resolve_files == sorted(["model_index.json", *(f"{name}/config.json" for name in expected)])
    assert all(status == 200 for _m, path, status in requests if "/resolve/" in path)
    assert not any(path.endswith(WEIGHT_SUFFIXES) for _m, path, _s in requests)
    assert {path for _m, path, _s in requests if "/resolve/" not in path} <= {"/api/agent-harnesses"}

    # The files are in the tmp cache, in huggingface_hub's layout.
    snapshot = hf_home / "hub" / "models--org--flux-dev" / "snapshots" / repo.commit
    assert Path(online["location"]) == snapshot
    assert (hf_home / "hub" / "models--org--flux-dev" / "refs" / "main").read_text() == repo.commit
    for name in expected:
        assert _load(snapshot / name / "config.json") == expected[name]
    assert not list(hf_home.rglob("*.safetensors"))

    # The server is gone: the same answer from the cache, in offline mode and without it.
    offline = run_resolve([{"model": "org/flux-dev"}], _env(hf_home, server.endpoint, HF_HUB_OFFLINE="1"))
    unreachable = run_resolve([{"model": "org/flux-dev"}, {"model": "org/flux-dev", "revision": repo.commit}],
                              _env(hf_home, server.endpoint))
    assert offline == [online]
    assert unreachable == [online, online]


def test_hub_hand_built_cache_offline(tmp_path):
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = tmp_path / "cache" / "models--someorg--sd3-offline"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(sha)
    snapshot = repo_dir / "snapshots" / sha
    for rel, data in repo_files_from_folder(SD3).items():
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / rel).write_bytes(data)
    env = _env(tmp_path / "home", None, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "cache"))
    main, pinned, other = run_resolve(
        [{"model": "someorg/sd3-offline"}, {"model": "someorg/sd3-offline", "revision": sha},
         {"model": "someorg/not-cached"}],
        env,
    )
    assert main["ok"] and main["revision"] == sha and Path(main["location"]) == snapshot
    assert main["components"] == _expected_components(SD3)
    assert pinned == main
    _assert_error(other, "HF_HUB_OFFLINE", "not in the Hugging Face cache", "flopcalc list", "local folder")


def test_hub_revisions_and_single_config(hub, tmp_path):
    repo = hub.repos["org/flux-dev"]
    start = len(hub.requests())
    by_tag, by_sha, missing_rev, single = run_resolve(
        [{"model": "org/flux-dev", "revision": "v1.0"}, {"model": "org/flux-dev", "revision": repo.commit},
         {"model": "org/flux-dev", "revision": "no-such-branch"}, {"model": "org/just-a-transformer"}],
        _env(tmp_path / "hf", hub.endpoint),
    )
    assert by_tag["ok"] and by_tag["revision"] == repo.commit
    assert by_tag["components"] == _expected_components(FLUX)
    assert by_sha == by_tag
    _assert_error(missing_rev, "no-such-branch", "does not exist", "org/flux-dev", "branch, tag or commit")
    assert single["ok"] and single["kind"] == "hub" and single["model_index"] is None
    assert single["components"] == {"model": _load(FLUX / "transformer" / "config.json")}
    assert not any(path.endswith(WEIGHT_SUFFIXES) for path in _resolve_paths(hub, start))


def test_hub_gated_repo(hub, tmp_path):
    anonymous, wrong, granted = run_resolve(
        [{"model": "org/gated"}, {"model": "org/gated", "token": "hf_not_granted"},
         {"model": "org/gated", "token": GRANTED}],
        _env(tmp_path / "hf", hub.endpoint),
    )
    _assert_error(anonymous, "gated", "Accept its license", "https://huggingface.co/org/gated",
                  "hf auth login", "HF_TOKEN")
    _assert_error(wrong, "gated", "not been granted access", "https://huggingface.co/org/gated")
    assert granted["ok"] and granted["components"] == _expected_components(SD3)
    # the token also comes from HF_TOKEN, as in every Hugging Face tool
    (from_env,) = run_resolve([{"model": "org/gated"}], _env(tmp_path / "hf2", hub.endpoint, HF_TOKEN=GRANTED))
    assert from_env["ok"], from_env


def test_hub_repo_errors(hub, tmp_path):
    no_repo, no_vae, bad_json, readme_only = run_resolve(
        [{"model": "org/does-not-exist"}, {"model": "org/no-vae"}, {"model": "org/bad-json"},
         {"model": "org/readme-only"}],
        _env(tmp_path / "hf", hub.endpoint),
    )
    _assert_error(no_repo, "org/does-not-exist", "not found", "Check the id", "hf auth login", "HF_TOKEN",
                  "flopcalc list")
    assert no_vae["ok"] and no_vae["missing"] == {"vae": "AutoencoderKL"}, no_vae
    assert any(n.startswith("vae (AutoencoderKL)") and "not counted" in n for n in no_vae["notes"])
    message = _assert_error(bad_json, "transformer/config.json", "not valid JSON", cls="MalformedConfigError")
    assert "org/bad-json" in message
    assert "ConfigError" in bad_json["mro"]
    _assert_error(readme_only, "neither model_index.json", "config.json")


def test_hub_offline_with_empty_cache(tmp_path):
    results = run_resolve(
        [{"model": "org/anything"}, {"model": "black-forest-labs/FLUX.1-dev"}],
        _env(tmp_path / "hf", "http://127.0.0.1:9", HF_HUB_OFFLINE="1"),
    )
    for result in results:
        _assert_error(result, "HF_HUB_OFFLINE=1", "not in the Hugging Face cache", "flopcalc list", "local folder")
    assert "bundled card `flux-dev`" in results[1]["message"]


def test_hub_endpoint_that_is_not_a_hub(hub, tmp_path):
    # A wrong HF_ENDPOINT: huggingface_hub cannot locate the file and nothing is cached.
    (result,) = run_resolve([{"model": "org/flux-dev"}], _env(tmp_path / "hf", hub.endpoint + "/not-a-hub"))
    _assert_error(result, "Could not reach the Hub", "/not-a-hub", "HF_ENDPOINT", "flopcalc list")


def test_local_paths_do_not_import_huggingface_hub(tmp_path):
    code = (
        "import sys; from flopcalc.engine.sources import resolve; resolve('flux-dev'); resolve(sys.argv[1]);"
        "print('HUB' if 'huggingface_hub' in sys.modules else 'NOHUB')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(CARDS_DIR / "sd3-medium")], env=_env(tmp_path / "hf", None),
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )
    assert proc.stdout.strip() == "NOHUB", proc.stderr


def test_every_error_is_a_flopcalc_error():
    assert issubclass(MalformedConfigError, SourceError) and issubclass(MalformedConfigError, ConfigError)
    assert issubclass(SourceError, FlopcalcError)


def _cli_resolve(model: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    import time

    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "flopcalc", "estimate", model], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return proc, time.monotonic() - start


def test_unreachable_hub_is_one_line_within_seconds(tmp_path):
    # Connection refused: huggingface_hub alone retries five times with back-off (~23 s, a warning each).
    proc, seconds = _cli_resolve("org/anything", _env(tmp_path / "hf", "http://127.0.0.1:9"))
    assert proc.returncode == 2 and seconds < 6, (seconds, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("flopcalc: error: Could not reach the Hub"), \
        proc.stderr
    assert "Retrying" not in proc.stderr and "Traceback" not in proc.stderr


def test_endpoint_that_never_answers_times_out_quickly(tmp_path):
    import socket

    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        proc, seconds = _cli_resolve("org/anything", _env(tmp_path / "hf", endpoint, HF_HUB_ETAG_TIMEOUT="1"))
    assert proc.returncode == 2 and seconds < 15, (seconds, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "timed out" in proc.stderr, proc.stderr


def test_partly_cached_repo_without_network_names_the_missing_file(tmp_path):
    # model_index.json is cached, a component's config.json is not, and the Hub cannot be reached.
    with FakeHub() as server:
        server.add_repo("org/flux-dev", repo_files_from_folder(FLUX))
        (online,) = run_resolve([{"model": "org/flux-dev"}], _env(tmp_path / "hf", server.endpoint))
    assert online["ok"], online
    snapshot = Path(online["location"])
    (snapshot / "vae" / "config.json").unlink()
    proc, seconds = _cli_resolve("org/flux-dev", _env(tmp_path / "hf", "http://127.0.0.1:9"))
    assert proc.returncode == 2 and seconds < 6, (seconds, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "'vae/config.json'" in proc.stderr, proc.stderr
