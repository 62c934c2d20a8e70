"""Validation at the boundary: declared config keys, the run budget, the count check and the last
line of defence, each refusing bad input with one line that says what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.config import (
    SIZE, Config, ListOf, UndeclaredKeyError, check_value, declared_keys, validate_components,
)
from flopcalc.engine.cost import Cost, Node, invalid_count
from flopcalc.engine.errors import ConfigError, FlopcalcError, UnbuildableConfigError, unbuildable
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.registry import registered

CARDS = Path(__file__).resolve().parent.parent / "model_cards"


def _config(card: str, component: str) -> dict:
    return json.loads((CARDS / card / component / "config.json").read_text())


def test_message_names_component_class_key_value_and_expectation():
    cfg = _config("flux-dev", "transformer") | {"num_layers": -3}
    with pytest.raises(ConfigError) as e:
        validate_components({"transformer": cfg})
    msg = str(e.value)
    assert "\n" not in msg
    for part in ("transformer/config.json", "FluxTransformer2DModel", "'num_layers'", "-3",
                 "expected a non-negative integer (at most 1024)"):
        assert part in msg


def test_every_declared_class_accepts_its_real_configs():
    """The declarations refuse nothing a bundled card holds."""
    for folder in sorted(CARDS.glob("*/*/config.json")):
        validate_components({folder.parent.name: json.loads(folder.read_text())})


def test_a_read_validates_and_get_does_not_swallow_a_bad_value():
    cfg = Config("vae", _config("sd1.5", "vae") | {"latent_channels": "4"}, {})
    with pytest.raises(ConfigError, match="'latent_channels' is '4'"):
        cfg["latent_channels"]
    with pytest.raises(ConfigError):
        cfg.get("latent_channels")
    assert Config("vae", {"_class_name": "AutoencoderKL"}, {}).get("latent_channels", 7) == 7


def test_strict_mode_refuses_an_undeclared_read(monkeypatch):
    monkeypatch.setenv("FLOPCALC_STRICT_KEYS", "1")
    cfg = Config("vae", _config("sd1.5", "vae"), {})
    with pytest.raises(UndeclaredKeyError, match="act_fn"):
        cfg["act_fn"]
    monkeypatch.setenv("FLOPCALC_STRICT_KEYS", "0")
    assert cfg["act_fn"] == "silu"


def test_nested_objects_are_validated_by_their_declared_keys():
    cfg = _config("qwen-image", "text_encoder")
    cfg["text_config"] = dict(cfg.get("text_config") or {}, num_hidden_layers=10**9)
    with pytest.raises(ConfigError, match=r"'text_config\.num_hidden_layers' is 1000000000"):
        validate_components({"text_encoder": cfg})


def test_specs_combine_and_say_what_they_accept():
    spec = SIZE | ListOf(SIZE, lo=2, hi=2)
    assert check_value("c", "K", "k", [3, 4], spec) == [3, 4]
    with pytest.raises(ConfigError, match="a positive integer .* or a list of 2 entries"):
        check_value("c", "K", "k", [3], spec)
    with pytest.raises(ConfigError):
        check_value("c", "K", "k", True, SIZE)  # a bool is not a size


def test_every_registered_class_declares_keys():
    assert all(declared_keys(a.class_name) for a in registered())


def test_run_budget_and_its_override(monkeypatch):
    with pytest.raises(FlopcalcError, match="height 100000 is beyond .* FLOPCALC_ALLOW_LARGE=1"):
        flopcalc.estimate("sd1.5", height=100_000, width=512)
    with pytest.raises(FlopcalcError, match="guidance_scale must be a finite number"):
        flopcalc.estimate("sd1.5", guidance_scale=float("nan"))
    monkeypatch.setenv("FLOPCALC_ALLOW_LARGE", "1")
    assert flopcalc.estimate("sd1.5", height=512, width=20_480, steps=1).flops > 0


def test_tile_budget_on_a_tiny_tile():
    vae = _config("sd1.5", "vae") | {"sample_size": 16}
    with pytest.raises(FlopcalcError, match="AutoencoderKL tiles .* beyond flopcalc's budget of 65536"):
        estimate_configs(None, {"vae": vae}, Settings(height=8192, width=8192, vae_tiling=True))


def test_tiling_with_a_list_sample_size_is_refused_as_diffusers_fails():
    vae = _config("sd1.5", "vae") | {"sample_size": [512, 512]}
    assert estimate_configs(None, {"vae": vae}, Settings(height=512, width=512, vae_tiling=True)).flops > 0
    with pytest.raises(ConfigError, match="sample_size .* is a list"):
        estimate_configs(None, {"vae": vae}, Settings(height=1024, width=1024, vae_tiling=True))


def test_counts_are_checked_exact_and_non_negative():
    assert invalid_count(Node("a", Cost(linear=3), children=(Node("b", Cost(conv=2), count=4),))) is None
    assert invalid_count(Node("a", children=(Node("b", Cost(conv=-1)),))) == "a.b.conv = -1"
    assert invalid_count(Node("a", Cost(linear=0.5))) == "a.linear = 0.5"


def test_last_line_of_defence_is_one_clean_line():
    with pytest.raises(UnbuildableConfigError) as e:
        with unbuildable("vae", "AutoencoderKL", "decode"):
            raise ZeroDivisionError("integer division or modulo by zero")
    assert isinstance(e.value, FlopcalcError) and "\n" not in str(e.value)
    assert str(e.value).startswith("vae/config.json (AutoencoderKL), decode: ")
    with pytest.raises(ConfigError, match="kept as is"):  # a FlopcalcError passes through unchanged
        with unbuildable("vae", "AutoencoderKL"):
            raise ConfigError("kept as is")
