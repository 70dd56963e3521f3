import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tui.cli.main import main
from tui.model.config import SdpaConfig
from tui.model.validation import validate
from tui.store import presets as presetmod

BUILTIN_NAMES = sorted(p.stem for p in presetmod.builtin_dir().glob("*.toml"))


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    folder = tmp_path / "presets"
    folder.mkdir()
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
    return folder


def test_builtins_all_load_and_validate(user_dir):
    found, problems = presetmod.load_all()
    assert problems == []
    assert len(BUILTIN_NAMES) >= 8
    for name in BUILTIN_NAMES:
        p = found[name]
        assert p.origin == "builtin" and p.description and p.source
        assert validate(p.config) == []


def test_the_seed_preset_is_the_seed_configuration(user_dir):
    assert presetmod.find("gpt2-seed").config == SdpaConfig()


def test_required_models_are_there(user_dir):
    found, _ = presetmod.load_all()
    c = {n: p.config for n, p in found.items()}
    assert c["bert-base"].causal == "none" and c["bert-base"].s_q == 512
    assert (c["llama3-8b-prefill"].h_q, c["llama3-8b-prefill"].h_kv, c["llama3-8b-prefill"].s_q) == (
        32,
        8,
        8192,
    )
    assert (c["llama3-70b-prefill"].h_q, c["llama3-70b-prefill"].h_kv) == (64, 8)
    assert c["llama3-8b-decode"].s_q == 1 and c["llama3-8b-decode"].h_kv < c["llama3-8b-decode"].h_q
    assert c["long-context-32k"].s_q == 32768
    assert c["gemma-7b-d256"].d_qk == 256
    assert (c["deepseek-v3-mla"].d_qk, c["deepseek-v3-mla"].d_v) == (192, 128)
    assert c["vit-base"].s_q == 197


BROKEN = {
    "bad-toml.toml": ('description = "x"\n[config]\nb = 4\nh_q = = 3\n', "not valid TOML", None, 4),
    "unknown-key.toml": ('description = "x"\ncolour = "red"\n[config]\nb = 4\n', "unknown key", "colour", 2),
    "negative.toml": ("[config]\nb = 1\ns_q = -5\n", "must be at least 1", "s_q", 3),
    "wrong-type.toml": ("[config]\nb = 1\n\ndtype = 16\n", "must be text", "dtype", 4),
    "unknown-field.toml": ("[config]\nbatch = 2\n", "unknown key 'batch'", "batch", 2),
    "bad-regime.toml": ('[config]\nb = 1\n[timing]\nregime = "fast"\n', "must be one of burst", "regime", 4),
    "timing-key.toml": ("[config]\nb = 1\n[timing]\nwarmup = 3\n", "unknown key in [timing]", "warmup", 4),
}


def test_broken_files_are_reported_and_the_rest_load(user_dir):
    for name, (text, *_rest) in BROKEN.items():
        (user_dir / name).write_text(text)
    (user_dir / "good.toml").write_text('description = "mine"\n[config]\nb = 2\n')
    found, problems = presetmod.load_all()
    assert "good" in found and found["good"].config.b == 2 and found["good"].origin == "user"
    assert set(BUILTIN_NAMES) <= set(found)
    by_file = {Path(p.path).name: p for p in problems}
    assert set(by_file) == set(BROKEN)
    for name, (_text, words, key, line) in BROKEN.items():
        p = by_file[name]
        assert words in p.message, (name, p)
        assert p.key == (key or "") and p.line == line, (name, p)
        assert str(p).startswith(f"{name}, line {line}")


def test_a_user_preset_shadows_a_builtin_and_says_so(user_dir):
    (user_dir / "bert-base.toml").write_text('[config]\nb = 1\ncausal = "none"\n')
    p = presetmod.find("bert-base")
    assert p.origin == "user" and p.shadows_builtin and p.config.b == 1
    result = CliRunner().invoke(main, ["presets"])
    assert "hides" in result.output
    data = json.loads(CliRunner().invoke(main, ["presets", "--json"]).output)
    assert next(p for p in data["presets"] if p["name"] == "bert-base")["shadows_builtin"] is True


def test_a_preset_chooses_its_timing_regime_and_run_follows_it_unless_told(user_dir, monkeypatch):
    from tests.fakes import NO_GPU, FakeEngine, computed
    from tui.cli import common as cli
    from tui.engine.runner import Engine
    from tui.process.session import EngineSession

    path = presetmod.save_user("steady", SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64), regime="sustained")
    assert '[timing]\nregime = "sustained"' in path.read_text()
    assert presetmod.find("steady").regime == "sustained"
    assert presetmod.find("gpt2-seed").regime == ""  # no [timing]: the user's choice, burst by default
    fake = FakeEngine(computed(Engine(environment=NO_GPU)), environment=NO_GPU)
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    cases = (
        (["--preset", "steady"], "sustained"),
        (["--preset", "steady", "--regime", "burst"], "burst"),
        (["--preset", "gpt2-seed"], "burst"),
    )
    for args, regime in cases:
        out = CliRunner().invoke(main, ["run", *args, "--json", "--no-check"])
        assert out.exit_code == 0, out.output
        assert fake.requests.pop()[1].timing.regime == regime, args
    bad = CliRunner().invoke(main, ["run", "--regime", "fast"])
    assert bad.exit_code == 2 and "--regime" in bad.output


def test_save_round_trips_and_never_silently_overwrites(user_dir):
    config = SdpaConfig(b=2, h_q=16, h_kv=4, dtype="bf16", layout="SBHD", attn_scale=0.2)
    path = presetmod.save_user("mine", config, "my shape")
    assert path.parent == user_dir
    assert presetmod.find("mine").config == config
    with pytest.raises(presetmod.PresetExists):
        presetmod.save_user("mine", config.replace(b=3))
    presetmod.save_user("mine", config.replace(b=3), overwrite=True)
    assert presetmod.find("mine").config.b == 3
    for bad in ("", "../escape", "a b", ".hidden"):
        with pytest.raises(ValueError):
            presetmod.save_user(bad, config)
    assert not any((presetmod.builtin_dir() / "mine.toml").exists() for _ in [0])


@pytest.mark.parametrize("fail_at", ["fsync", "replace"])
def test_an_interrupted_save_leaves_the_old_preset_whole(user_dir, monkeypatch, fail_at):
    presetmod.save_user("mine", SdpaConfig(b=2))
    before = (user_dir / "mine.toml").read_text()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(OSError):
        presetmod.save_user("mine", SdpaConfig(b=7), overwrite=True)
    monkeypatch.undo()
    assert (user_dir / "mine.toml").read_text() == before
    assert [p.name for p in user_dir.iterdir()] == ["mine.toml"]  # no temporary file left behind


def test_cli_presets_save_run_and_errors(user_dir):
    runner = CliRunner()
    r = runner.invoke(
        main, ["presets", "save", "small", "--preset", "gpt2-seed", "--s", "128", "--description", "d"]
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["presets", "save", "small", "--s", "64"])
    assert r.exit_code == 2 and "--force" in r.output
    r = runner.invoke(main, ["presets", "--json"])
    data = json.loads(r.output)
    small = next(p for p in data["presets"] if p["name"] == "small")
    assert small["config"]["s_q"] == 128 and small["config"]["h_q"] == 12 and small["description"] == "d"
    r = runner.invoke(main, ["run", "--preset", "nope"])
    assert r.exit_code == 2 and "no preset named 'nope'" in r.output
    (user_dir / "broken.toml").write_text("[config]\nb = -1\n")
    r = runner.invoke(main, ["run", "--preset", "broken"])
    assert r.exit_code == 2 and "broken.toml, line 2, key 'b'" in r.output
    r = runner.invoke(main, ["check", "--preset", "nope"])
    assert r.exit_code in (1, 2)
