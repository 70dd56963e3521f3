"""On a CUDA GPU with cuDNN (run on the H200; skipped elsewhere)."""

import re

import pytest
import torch
from click.testing import CliRunner

from tui.cli.main import main
from tui.engine import graph as graphmod
from tui.engine.runner import Engine, RunOptions
from tui.engine.timing import profiler_kernel_time
from tui.model.config import SdpaConfig
from tui.model.options import TimingOptions

pytestmark = pytest.mark.gpu

SEED = SdpaConfig()
SMALL = SdpaConfig(b=1, h_q=8, h_kv=8, s_q=256, s_kv=256, d_qk=64, d_v=64, causal="none")
LARGE = SdpaConfig(b=2, h_q=32, h_kv=8, s_q=4096, s_kv=4096, d_qk=128, d_v=128, dtype="bf16")


@pytest.fixture(scope="module")
def engine():
    return Engine(cache_size=16)


def test_an_engine_warmed_up_at_its_start_measures_as_one_that_was_not(engine):
    warmed = Engine()
    warmed.warm_up()  # as an engine process does when it says it is ready
    result = warmed.run(SEED)
    assert warmed.warm_up_error == "" and warmed._handle is not None
    assert result.status == "ok", result.message
    same = engine.run(SEED)
    assert result.forward.checks[0].cudnn.max_abs == same.forward.checks[0].cudnn.max_abs
    assert abs(result.forward.timing.median_us / same.forward.timing.median_us - 1) < 0.1


def only_peer(check):
    """A check's one peer, (name, error): torch forced to a named backend that is not cuDNN."""
    ((name, metrics),) = check.peers.items()
    assert re.fullmatch(r"torch (FLASH|EFFICIENT|MATH) (fp16|bf16)", name), name
    return name, metrics


@pytest.mark.parametrize("layout", ["BSHD", "BHSD", "SBHD"])
def test_seed_config_matches_the_reference(engine, layout):
    r = engine.run(SEED.replace(layout=layout))
    assert r.status == "ok", r.message
    (o,) = r.forward.checks
    assert o.passed and r.forward.passed
    assert 0 < o.cudnn.max_abs < 5e-3
    assert only_peer(o)[1].mismatched == 0


def test_the_seeds_peer_is_a_named_backend_whose_error_is_not_cudnns(engine):
    """DESIGN fact 12: left to choose, torch runs cuDNN's own kernel here, and the peer's error was
    cuDNN's to the last bit. Forced to FLASH (fp16, d=64, causal: FlashAttention-2 runs it), the
    peer is another kernel: other output bits, another mean error. Its max abs error may still
    equal cuDNN's: for both it is the fp16 rounding of the largest |O| (half an ulp), which any
    kernel that accumulates in fp32 reaches (9.74e-04 for both on the H200)."""
    from tui.engine.peer import torch_sdpa

    fwd = engine.run(SEED, RunOptions(autotune=False)).forward
    (o,) = fwd.checks
    name, peer = only_peer(o)
    assert name == "torch FLASH fp16" and set(fwd.peers) == {name}
    assert "FlashAttention-2" in fwd.peers[name] and "never cuDNN" in fwd.peers[name]
    assert peer.mismatched == 0 and peer.nonfinite == 0
    assert peer != o.cudnn and peer.mean_abs != o.cudnn.mean_abs, (peer, o.cudnn)
    q, k, v = (engine.output(SEED, n) for n in "qkv")
    assert not torch.equal(torch_sdpa(SEED, q, k, v, backend="FLASH"), engine.output(SEED))


def test_layouts_give_the_same_output(engine):
    outs = []
    for layout in ("BSHD", "BHSD"):
        config = SEED.replace(layout=layout)
        engine.run(config, RunOptions(autotune=False))
        outs.append(engine.output(config).float().clone())
    assert outs[0].shape == outs[1].shape == SEED.o_dims
    assert torch.allclose(outs[0], outs[1], atol=2e-3, rtol=0)


def test_every_plan_is_listed_built_and_timed(engine):
    r = engine.run(SEED, RunOptions(plan_cache=False)).forward
    assert len(r.plans) >= 2
    assert all(p.built and p.timing is not None and p.tflops > 0 for p in r.plans)
    assert all(p.name and p.engine_id is not None and p.build_seconds is not None for p in r.plans)
    assert [p.index for p in r.plans if p.is_heuristic_pick] == [r.heuristic_plan]
    assert [p.index for p in r.plans if p.is_fastest] == [r.fastest_plan]
    fastest = min(r.plans, key=lambda p: p.timing.median_us)
    assert fastest.index == r.fastest_plan
    assert all(p.matches for p in r.plans)
    assert r.plans[r.heuristic_plan].workspace_bytes is not None
    assert [p.name for p in r.phases] == list(graphmod.BUILD_PHASES)


def test_second_run_is_a_cache_hit(engine):
    engine.run(SEED, RunOptions(autotune=False))
    r = engine.run(SEED, RunOptions(autotune=False))
    assert r.cache_hit and r.status == "ok"


@pytest.mark.parametrize("config", [SMALL, SEED, LARGE], ids=["small", "seed", "large"])
def test_kernel_time_agrees_with_the_profiler(engine, config):
    r = engine.run(config, RunOptions(autotune=False, check=False, timing=TimingOptions(replays=20)))
    assert r.status == "ok", r.message
    prof_us, _ = profiler_kernel_time(engine.executor(config), calls=20)
    ratio = r.forward.timing.median_us / prof_us
    assert 0.8 <= ratio <= 1.2, (r.forward.timing.median_us, prof_us)
    assert r.forward.host_overhead_us > 0


def test_l2_flush_reports_a_cold_kernel_time(engine):
    r = engine.run(SEED, RunOptions(autotune=False, check=False, timing=TimingOptions(l2_flush=True)))
    assert r.status == "ok", r.message
    t = r.forward.timing
    assert t.l2_flushed and t.median_us > 0
    assert t.kernels_per_call >= 1


@pytest.mark.parametrize(
    "config,words",
    [
        (SdpaConfig(d_qk=65, d_v=65), "hidden_dim should be multiple of 8"),
        (SdpaConfig(h_q=6, h_kv=4), "must be a factor of number of heads for query"),
    ],
)
def test_cudnn_refusals_are_reported_not_crashed(engine, config, words):
    with pytest.raises(graphmod.GraphBuildError) as exc:
        graphmod.build(config, engine.cudnn_handle())  # below the config checks: cuDNN's own verdict
    assert exc.value.unsupported and words in exc.value.message
    r = engine.run(config)
    assert r.status in ("unsupported", "invalid") and not r.ok  # the engine keeps going
    assert engine.run(SMALL, RunOptions(autotune=False)).status == "ok"


def test_check_passes_over_the_smoke_set_and_every_builtin_preset():
    from tui.store.presets import builtin_dir

    result = CliRunner().invoke(main, ["check"])
    assert result.exit_code == 0, result.output
    cases = 6 + len(list(builtin_dir().glob("*.toml")))
    counts = re.search(r"(\d+) passed, 0 failed(?:, (\d+) known to be refused here)?", result.output)
    assert counts, result.output  # a preset cuDNN is known to refuse here is counted apart, never lost
    assert int(counts[1]) + int(counts[2] or 0) == cases, result.output


@pytest.mark.parametrize(
    "preset",
    [
        "gpt2-seed",
        "llama3-8b-decode",
        "bert-base",
        "deepseek-v3-mla",
        "mistral-7b-swa",
        "varlen-batch",
        "bloom-7b-alibi",
        "gpt2-dropout",
        "llama3-8b-train",
        "llama3-70b-fp8-prefill",
        "llama3-8b-chunked-prefill",
        "packed-thd-training",
        "gpt-oss-sinks",
    ],
)
def test_exported_script_runs_and_agrees_with_the_engine(engine, tmp_path, preset):
    from exported import assert_script_agrees

    from tui.store.presets import find

    r = engine.run(find(preset).config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    assert_script_agrees(tmp_path, r)


MASKED = SdpaConfig(b=2, h_q=16, h_kv=4, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16")


@pytest.mark.parametrize(
    "changes",
    [
        {"window": 256},
        {"window": 256, "causal": "bottom_right", "s_q": 512},
        {"seq_lens_q": (1024, 300), "seq_lens_kv": (1024, 800)},
        {"seq_lens_q": (40, 300), "seq_lens_kv": (1024, 800), "causal": "bottom_right"},
        {"alibi": True, "h_kv": 16},
        {"bias": "bxh", "h_kv": 16},
        {"bias": "1x1", "h_kv": 16, "causal": "none"},
        {"d_qk": 192},
        {"d_qk": 256, "d_v": 256},
        {"dropout": 0.1, "dropout_seed": 42},
    ],
    ids=[
        "window",
        "window-br",
        "padding",
        "padding-br",
        "alibi",
        "bias-bxh",
        "bias-1x1",
        "d192-128",
        "d256",
        "dropout",
    ],
)
def test_each_option_builds_and_matches(engine, changes):
    config = MASKED.replace(**changes)
    r = engine.run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    fwd = r.forward
    (o,) = fwd.checks
    assert o.passed
    if (
        config.dropout
    ):  # torch cannot apply cuDNN's dropout mask: its error is not shown, and the note says why
        assert o.peers == {} and any("dropout" in n for n in fwd.notes)
    else:
        assert only_peer(o)[0].endswith(" bf16") and only_peer(o)[1].nonfinite == 0
    assert fwd.plans and fwd.timing.median_us > 0


# ---- the backward pass -------------------------------------------------------------------
TRAIN = SdpaConfig(b=2, h_q=16, h_kv=4, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16", backward=True)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"dtype": "fp16", "h_kv": 16},
        {"deterministic": True},
        {"causal": "bottom_right", "s_q": 512},
        {"window": 256},
        {"seq_lens_q": (1024, 300), "seq_lens_kv": (1024, 800)},
        {"alibi": True, "h_kv": 16},
        {"bias": "1xh", "h_kv": 16},
        {"dropout": 0.1, "dropout_seed": 7},
        {"d_qk": 192},
        {"d_qk": 256, "d_v": 256},
    ],
    ids=[
        "causal",
        "fp16-mha",
        "deterministic",
        "br",
        "window",
        "padding",
        "alibi",
        "bias",
        "dropout",
        "d192-128",
        "d256",
    ],
)
def test_backward_builds_and_matches_autograd(engine, changes):
    config = TRAIN.replace(**changes)
    r = engine.run(config, RunOptions(autotune=False, plan_cache=False))
    assert r.status == "ok", r.message
    b = r.pass_of("backward")
    assert b.status == "ok" and b.passed, b.message
    assert [c.output for c in b.checks] == ["dQ", "dK", "dV"]
    assert all(c.cudnn.nonfinite == 0 and c.cudnn.max_abs > 0 for c in b.checks)
    assert b.plans and b.timing.median_us > 0 and b.tflops > 0
    assert [p.name for p in b.phases] == list(graphmod.BUILD_PHASES)
    assert b.flops == int(2.5 * config.flops())
    if config.deterministic:
        assert b.repeatable is True
    if not (config.dropout or config.padded):
        (name,) = {only_peer(c)[0] for c in b.checks}
        assert name.endswith(f" {config.dtype}") and set(b.peers) == {name}


def test_backward_kernel_time_agrees_with_the_profiler(engine):
    engine.run(TRAIN, RunOptions(autotune=False))
    r = engine.run(TRAIN, RunOptions(autotune=False))
    prof_us, _kernels = profiler_kernel_time(engine.executor(TRAIN, "backward"))
    bwd_us = r.pass_of("backward").timing.median_us
    assert 0.9 <= bwd_us / prof_us <= 1.1, (bwd_us, prof_us)


def test_backward_refusal_is_a_result(engine):
    r = engine.run(TRAIN.replace(d_qk=512, d_v=512), RunOptions(autotune=False))
    b = r.pass_of("backward")
    assert r.status == "unsupported" and b.status == "unsupported"
    assert r.forward.timing is not None  # the forward still ran and was timed
    assert "256" in b.message


# ---- FP8 ------------------------------------------------------------------------------------
FP8 = SdpaConfig(
    b=2, h_q=16, h_kv=16, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="fp8_e4m3", causal="none"
)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"causal": "top_left"},
        {"causal": "top_left", "window": 128},
        {"seq_lens_q": (1024, 512), "seq_lens_kv": (1024, 700)},
        {"h_kv": 4},
        {"d_qk": 64, "d_v": 64},
    ],
    ids=["plain", "causal", "window", "padding", "gqa", "d64"],
)
def test_fp8_forward_matches_and_reports_amax(engine, changes):
    config = FP8.replace(**changes)
    r = engine.run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    fwd = r.forward
    assert fwd.passed and fwd.checks[0].cudnn.max_abs > 0
    assert fwd.fp8.amax["amax_o"] == pytest.approx(fwd.fp8.reference_amax["amax_o"], rel=2e-2)
    assert fwd.fp8.scales["scale_o"] == pytest.approx(448 / fwd.fp8.amax["amax_o"], rel=1e-3)
    assert fwd.tflops > 0


@pytest.mark.parametrize(
    "changes", [{"out_dtype": "bf16"}, {"causal": "bottom_right"}], ids=["bf16-out", "br"]
)
def test_fp8_hopper_refusals_say_blackwell(engine, changes):
    r = engine.run(FP8.replace(**changes), RunOptions(autotune=False))
    if torch.cuda.get_device_capability()[0] >= 10:
        pytest.skip("Blackwell supports this")
    assert r.status == "unsupported" and "Blackwell" in r.message


@pytest.mark.parametrize(
    "changes", [{}, {"causal": "top_left"}, {"deterministic": True}], ids=["plain", "causal", "det"]
)
def test_fp8_backward_matches_autograd(engine, changes):
    config = FP8.replace(backward=True, **changes)
    r = engine.run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    b = r.pass_of("backward")
    assert b.passed, b.checks
    for name in ("dq", "dk", "dv"):
        assert b.fp8.amax[f"amax_{name}"] == pytest.approx(b.fp8.reference_amax[f"amax_{name}"], rel=5e-2)
