"""The engine without a GPU: cuDNN's own validation, the graph JSON, FLOPs and a CPU reference."""

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tui.engine.graph import define_and_validate
from tui.engine.keywords import SDPA_KEYWORDS, sdpa_kwargs
from tui.model.config import SEED_MAX, SdpaConfig
from tui.model.options import RunOptions
from tui.model.results import RunResult
from tui.model.statuses import SCHEMA_VERSION, STATUS_CPU_ONLY


def test_cpu_mode_result(cpu_engine):
    c = SdpaConfig(b=1, h_q=4, h_kv=2, s_q=128, s_kv=128, d_qk=64, d_v=64)
    r = cpu_engine.run(c)
    assert r.status == "cpu_only" and r.ok and r.device == "cpu"
    assert "CPU mode requested by the test" in r.message
    (fwd,) = r.passes
    assert [p.name for p in fwd.phases] == ["define", "validate"] and all(p.ok for p in fwd.phases)
    assert fwd.flops == c.flops() and fwd.io_bytes == c.io_bytes()
    assert fwd.timing is None and fwd.plans == ()
    graph = json.loads(fwd.graph_json)
    node = graph["nodes"][0]
    assert node["type"] == "SDPA" and node["params"]["use_causal_mask"] is True
    assert graph["tensors"]["q"]["dim"] == [1, 4, 128, 64]
    assert graph["tensors"]["q"]["stride"] == [128 * 4 * 64, 64, 4 * 64, 1]  # BSHD
    (check,) = fwd.checks
    assert fwd.check_device == "cpu" and check.cudnn is None and check.passed is None and fwd.passed is None
    flash = check.peers["torch FLASH fp16"]  # torch's FLASH backend for the CPU runs this (GQA expanded)
    assert flash.mismatched == 0 and 0 < flash.max_abs < check.atol
    assert "CPU" in fwd.notes[0] and "torch's FLASH fp16 forward on the CPU" in fwd.notes[0]
    assert "(CPU)" in fwd.peers["torch FLASH fp16"] and "never cuDNN" in fwd.peers["torch FLASH fp16"]


def test_cpu_mode_skips_the_reference_for_large_problems(cpu_engine):
    r = cpu_engine.run(SdpaConfig(b=8, s_q=8192, s_kv=8192, h_q=32, h_kv=32, d_qk=128, d_v=128))
    assert r.status == "cpu_only"
    assert r.forward.checks == () and "GFLOP, above the 4 GFLOP CPU limit" in r.forward.notes[0]
    assert r.forward.notes[0].endswith("(even b=1 does not fit: shorten s_q or s_kv)")
    seed = cpu_engine.run(SdpaConfig(), RunOptions(check=True)).forward  # the seed's shape on a CPU
    assert (
        "checked on the first 2 of 4 batch entries: all 4 are 6.4 GFLOP, above the 4 GFLOP CPU limit"
        in (seed.notes[0])
    )
    (check,) = seed.checks  # what the CPU can: torch's own forward of the batch that fits, checked
    assert check.peers["torch FLASH fp16"].passed and check.cudnn is None


def test_the_cpu_check_of_the_first_entries_keeps_their_real_lengths(cpu_engine):
    varlen = SdpaConfig(b=8, s_q=1024, s_kv=1024, seq_lens_q=(1024, 512) * 4, seq_lens_kv=(1024, 512) * 4)
    fwd = cpu_engine.run(varlen, RunOptions(check=True)).forward
    assert "checked on the first 2 of 8 batch entries" in fwd.notes[0]  # as many as fit at full length
    assert fwd.checks and all(m.passed for c in fwd.checks for m in c.peers.values())


def test_unsupported_config_gets_cudnns_own_words(cpu_engine):
    r = cpu_engine.run(SdpaConfig(d_qk=65, d_v=65))
    assert r.status == "unsupported" and not r.ok
    assert r.message == "validate: hidden_dim should be multiple of 8"
    phases = r.forward.phases
    assert phases[-1].name == "validate" and not phases[-1].ok


def test_an_unsupported_backward_ends_the_run_in_its_own_words(cpu_engine):
    """sdpa_fp8_backward has no ALiBi keyword: said by name before any build, as the backward's status."""
    r = cpu_engine.run(SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=128, d_v=128, dtype="fp8_e4m3",
                                  backward=True, alibi=True))  # fmt: skip
    fwd, bwd = r.passes
    assert bwd.status == "unsupported" and "has no option for ALiBi" in bwd.message
    assert r.status == "unsupported" and r.message == f"backward: {bwd.message}"


def test_invalid_config_names_its_fields(cpu_engine):
    r = cpu_engine.run(SdpaConfig(h_q=6, h_kv=4, s_q=0))
    assert r.status == "invalid"
    assert {e["field"] for e in r.errors} == {"h_kv", "s_q"}
    assert r.passes == ()


@pytest.mark.parametrize(
    "changes,field",
    [
        (dict(b=2, seq_lens_q=(5,), seq_lens_kv=(5,)), "seq_lens_q"),
        (dict(s_q="64"), "s_q"),
        (dict(attn_scale=10**400), "attn_scale"),
        (dict(dropout=-(10**400)), "dropout"),
        (dict(b=1, seq_lens_q=(10**5000,), seq_lens_kv=(1,)), "seq_lens_q"),
        (dict(window=2**100), "window"),
        (dict(heuristics=("A", 10**5000)), "heuristics"),
    ],
)
def test_run_says_any_field_value_is_invalid_and_never_raises(cpu_engine, changes, field):
    """Issue 12, item 6: a caller that bypasses from_dict gets a result naming the field."""
    r = cpu_engine.run(SdpaConfig(**changes), RunOptions(check=False))
    assert r.status == "invalid" and field in {e["field"] for e in r.errors} and r.passes == ()


@pytest.mark.parametrize("seed", [2**70, SEED_MAX + 1, -1, "1", 1.5, True])
def test_a_seed_out_of_its_bound_is_invalid_and_named(cpu_engine, seed):
    """Issue 12, item 5: --seed 2**70 ended in torch's OverflowError; the bound is SEED_MAX."""
    r = cpu_engine.run(SdpaConfig(b=1, h_q=1, h_kv=1, s_q=8, s_kv=8), RunOptions(seed=seed))
    assert r.status == "invalid" and [e["field"] for e in r.errors] == ["seed"]
    assert f"from 0 to {SEED_MAX}" in r.message


def test_the_largest_seed_runs(cpu_engine):
    """The backward's dO is drawn from seed + 1: that fits torch's generator too."""
    config = SdpaConfig(b=1, h_q=1, h_kv=1, s_q=8, s_kv=8, backward=True)
    r = cpu_engine.run(config, RunOptions(seed=SEED_MAX))
    assert r.status == "cpu_only" and all(p.checks for p in r.passes), r.message


def test_result_json_round_trip(cpu_engine):
    r = cpu_engine.run(SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64))
    again = RunResult.from_json(r.to_json())
    assert again == r
    data = json.loads(r.to_json())
    assert data["schema_version"] == SCHEMA_VERSION and data["config"]["b"] == 1
    data["schema_version"] = "9.0"
    with pytest.raises(ValueError, match="schema"):
        RunResult.from_dict(data)


def _binding_keywords() -> set[str]:
    import cudnn

    doc = cudnn._pybind_module.backend_graph.sdpa.__doc__
    signature = doc.split(")", 1)[0] if doc.startswith("sdpa(") else doc.split("\n", 1)[0]
    return set(re.findall(r"(\w+):", signature))


def test_sdpa_keywords_exist_in_the_binding():
    """The frontend accepts misspelled keywords silently; this is where we would hear of one."""
    known = _binding_keywords()
    assert {"q", "k", "v", "attn_scale", "use_causal_mask"} <= known  # the parse works
    assert known >= SDPA_KEYWORDS, SDPA_KEYWORDS - known
    for causal in ("none", "top_left", "bottom_right"):
        assert set(sdpa_kwargs(SdpaConfig(causal=causal))) <= SDPA_KEYWORDS


@pytest.mark.parametrize(
    "causal,param", [("top_left", "use_causal_mask"), ("bottom_right", "use_causal_mask_bottom_right")]
)
def test_causal_mode_reaches_the_graph(causal, param):
    g = define_and_validate(SdpaConfig(causal=causal, s_q=512, s_kv=1024))
    params = json.loads(g.json())["nodes"][0]["params"]
    assert params[param] is True
    assert params["attn_scale"] == pytest.approx(1 / 8)


def test_engine_imports_no_textual():
    """The engine runs headless (CLI, engine process): importing it must not pull in textual.
    (server_preload silences the process that imports it: only the fork server does; it imports
    torch and child, both checked here.)"""
    code = (
        "import sys, importlib, pkgutil, tui.engine as e\n"
        "for m in pkgutil.iter_modules(e.__path__):\n"
        "    if m.name != 'server_preload': importlib.import_module('tui.engine.' + m.name)\n"
        "print(any(n == 'textual' or n.startswith('textual.') for n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    engine_dir = Path(inspect.getfile(define_and_validate)).parent
    for path in engine_dir.glob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+textual", path.read_text(), re.M), path


def test_a_gpu_is_named_by_nvmls_index_uuid_and_serial_and_its_host(monkeypatch):
    """What the box's GPUs are told apart by (check --gpus, merged results): NVML's words win over
    torch's UUID; the Environment pane and `env` say which GPU it was."""
    import types

    import torch

    from tui.engine import environment

    props = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                                  total_memory=150 << 30, L2_cache_size=60 << 20, uuid="torch-uuid")  # fmt: skip
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _i: props)
    monkeypatch.setattr(environment, "_driver_version", lambda: "580.95")
    monkeypatch.setattr(
        environment, "identity", lambda _p: {"gpu_index": 1, "gpu_uuid": "GPU-eb48", "gpu_serial": "1652"}
    )
    env = environment.collect()
    assert (env.gpu_index, env.gpu_uuid, env.gpu_serial) == (1, "GPU-eb48", "1652") and env.host
    rows = dict(environment.describe(env))
    assert rows["which GPU"] == f"index 1, GPU-eb48, serial 1652 on {env.host}"
    monkeypatch.setattr(environment, "identity", lambda _p: {})  # no NVML: torch's UUID
    assert environment.collect().gpu_uuid == "torch-uuid"


def test_nothing_is_measured_until_the_warm_up_is_done(monkeypatch):
    # timing captures CUDA graphs and records the profiler: no other thread may launch work then
    import threading

    from tui.engine.runner import Engine

    gate, done = threading.Event(), []
    monkeypatch.setattr(Engine, "_warm", lambda self: (gate.wait(), done.append("warmed")))
    engine = Engine()
    engine.warm_up()
    gate.set()
    engine._warmed()
    assert done == ["warmed"]
    engine._warmed()  # once done, it costs nothing


def test_a_warm_up_that_fails_says_nothing_and_leaves_the_engine_working(cpu_engine, capsys):
    # without CUDA the handle cannot be made: the first run says so in its own words, not the warm-up
    from tui.engine.runner import Engine

    engine = Engine(environment=cpu_engine.environment())
    engine.warm_up()
    engine._warmed()
    assert capsys.readouterr() == ("", "")
    assert engine.warm_up_error  # kept for a test to read, shown nowhere
    assert (
        engine.run(SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)).status == STATUS_CPU_ONLY
    )
