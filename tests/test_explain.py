"""`explain`: who refuses a configuration and why, and the nearest configurations that work.

The CPU tests ask the frontend's real validate() (it runs without a GPU); the GPU tests ask cuDNN
for plans on the H200 (cuDNN 9.19, frontend 1.32: FP8 in with fp16 out is Blackwell-only there)."""

import json
import shlex

import pytest
from click.testing import CliRunner

from tui.cli.main import main
from tui.engine.explain import (
    MAX_CANDIDATES,
    REFUSED,
    SOURCE_BACKEND,
    SOURCE_OPENSOURCE,
    SOURCE_TOOL,
    SOURCE_VALIDATE,
    SUPPORTED,
    VALID,
    Explanation,
    explain,
    named_requirements,
    planning_refusals,
    requirement,
    run_command,
)
from tui.model.config import SdpaConfig
from tui.model.fields import config_from_dict
from tui.model.results import Environment

D65 = SdpaConfig(d_qk=65, d_v=65)
HEADS_6_4 = SdpaConfig(h_q=6, h_kv=4)
UNIFIED_BOUND = "Left bound or right bound for unified SDPA node requires cuDNN 9.21.0 or above"
# the frontend 1.32's own words (its compiled support check), as cuDNN gives them on Hopper
FP8_HALF_OUT = (
    "sdpa fp8 forward with HALF/BFLOAT16 output is only supported on Blackwell architecture with "
    "cuDNN version 9.13.0 and newer."
)
H200 = Environment(gpu_available=True, compute_capability="9.0", cudnn_backend_version="9.19.0")


def invoke(*args):
    return CliRunner().invoke(main, ["explain", *args])


@pytest.fixture(autouse=True)
def explained_here(monkeypatch):
    """The command's engine session, its explanations asked of the engine's own explain() in this
    process, as the engine process asks it (a child's start-up would be most of each test's time;
    tests/test_process.py covers the process)."""
    from fakes import FakeEngine

    from tui.cli import common
    from tui.engine.environment import collect
    from tui.process.session import EngineSession

    env = collect()

    def answer(reply, config):
        reply.explained(explain(config, gpu=env.gpu_available, environment=env))

    monkeypatch.setattr(
        common, "engine_session", lambda: EngineSession(FakeEngine(environment=env, explainer=answer))
    )


def refusals_by_source(e: Explanation) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r, _cells in e.refusals():
        out.setdefault(r.source, []).append(r.message)
    return out


@pytest.fixture(scope="module")
def cpu():
    """Explanations as a machine without a GPU gives them (validate() only), one per config."""
    return {c: explain(c, gpu=False) for c in (D65, HEADS_6_4, SdpaConfig())}


def test_d65_is_refused_by_validate_and_the_nearest_head_dims_work(cpu):
    e = cpu[D65]
    assert e.verdict == REFUSED and not e.gpu
    assert refusals_by_source(e) == {SOURCE_VALIDATE: ["hidden_dim should be multiple of 8"]}
    assert {c.status for c in e.cells} == {REFUSED} and len(e.cells) == len(e.modes) * len(e.implementations)
    assert {"A", "B", "FALLBACK", "OPENSOURCE"} <= set(e.modes)
    first = e.nearest[0]
    assert (first.config.d_qk, first.config.d_v) in {(64, 64), (72, 72)}
    assert first.checked == "validate" and first.changes[0][:2] == ("d_qk", "65")
    assert all(a.cost <= b.cost for a, b in zip(e.nearest, e.nearest[1:], strict=False))
    assert "needs a GPU to know more" in e.gpu_note


def test_heads_name_the_tools_rule_and_cudnns_and_propose_divisors(cpu):
    e = cpu[HEADS_6_4]
    assert e.verdict == REFUSED
    (rule,) = e.rules
    assert rule.source == SOURCE_TOOL and rule.field == "h_kv" and "multiple of h_kv" in rule.message
    said = refusals_by_source(e)
    assert any("must be a factor of number of heads for query" in m for m in said[SOURCE_VALIDATE])
    assert all(rule in c.refusals for c in e.cells)  # the rule is a finding of every cell
    kv_edits = [n.config.h_kv for n in e.nearest if n.config.h_q == 6]
    assert kv_edits and set(kv_edits) <= {1, 2, 3, 6}
    assert all(n.config.h_q % n.config.h_kv == 0 for n in e.nearest)


def test_a_sensible_config_has_no_refusal_and_says_a_gpu_would_tell_more(cpu):
    e = cpu[SdpaConfig()]
    assert e.verdict == VALID and not e.refusals() and not e.rules and not e.nearest
    assert {c.status for c in e.cells} == {VALID}


@pytest.mark.parametrize(
    "config", [D65, HEADS_6_4, SdpaConfig(dtype="fp8_e4m3", alibi=True, backward=True, deterministic=True)]
)
def test_the_explanation_round_trips_through_json(config):
    e = explain(config, gpu=False)
    assert Explanation.from_dict(json.loads(json.dumps(e.to_dict()))) == e


def test_an_option_an_operation_lacks_is_the_tools_and_dropping_it_drops_what_needs_it():
    """FP8's backward has no ALiBi keyword (the tool's guard); dropping the backward pass takes the
    deterministic option with it, since that one means nothing without a backward."""
    e = explain(SdpaConfig(dtype="fp8_e4m3", alibi=True, backward=True, deterministic=True), gpu=False)
    said = refusals_by_source(e)
    assert said[SOURCE_TOOL] == ["sdpa_fp8_backward has no option for ALiBi"]
    edits = {tuple(name for name, _was, _now in n.changes) for n in e.nearest}
    assert ("alibi",) in edits and ("backward", "deterministic") in edits
    assert e.searched <= MAX_CANDIDATES


def test_a_command_reads_back_as_its_configuration():
    from tui.model.launch import launcher

    config = SdpaConfig(h_q=8, h_kv=2, window=128, alibi=False, backward=True, heuristics=("B",))
    args = shlex.split(run_command(config))[len(launcher()) + 1 :]
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    assert config_from_dict(json.loads(r.output)["config"]) == config


def test_minimum_versions_and_architectures_named_by_messages():
    assert named_requirements(UNIFIED_BOUND) == ("cuDNN 9.21.0",)
    assert named_requirements(FP8_HALF_OUT) == ("Blackwell", "cuDNN 9.13.0")
    assert named_requirements("NVFP4 output requires SM100+ (Blackwell)") == ("Blackwell",)
    # a limit ON Blackwell is no requirement of it; 'below 9.18.0' names 9.18.0 as the minimum
    assert named_requirements(
        "Deterministic algorithm is not supported on blackwell architecture with cudnn version below 9.18.0"
    ) == ("cuDNN 9.18.0",)
    assert named_requirements("hidden_dim should be multiple of 8") == ()


def test_requirements_against_what_is_installed():
    version = requirement("cuDNN 9.21.0", UNIFIED_BOUND, H200)
    assert (version.kind, version.needed, version.installed, version.met) == (
        "cuDNN",
        "9.21.0",
        "9.19.0",
        False,
    )
    arch = requirement("Blackwell", FP8_HALF_OUT, H200)
    assert (arch.installed, arch.met) == ("Hopper (9.0)", False)
    assert requirement("Blackwell", FP8_HALF_OUT, Environment(gpu_available=False)).met is None


def test_a_planning_failure_is_split_by_who_declined():
    message = (
        f"no engine — python or backend — proposed a plan for this graph (the backend declined: {UNIFIED_BOUND}; "
        "python engines declined: sdpa_fwd_prefill_sm90: needs nvidia-cutlass-dsl)"
    )
    backend, engines = planning_refusals("create_execution_plans", message, "forward")
    assert (backend.source, backend.message) == (SOURCE_BACKEND, f"the backend declined: {UNIFIED_BOUND}")
    assert backend.needs == ("cuDNN 9.21.0",)
    assert engines.source == SOURCE_OPENSOURCE and engines.message.startswith(
        "python engines declined: sdpa_fwd"
    )
    (plain,) = planning_refusals("check_support", "No execution plans support the graph", "backward")
    assert (plain.source, plain.graph) == (SOURCE_BACKEND, "backward")


def test_cli_d65_names_the_refusal_and_a_nearest_command():
    r = invoke("--d", "65")
    assert r.exit_code == 0, r.output
    assert "hidden_dim should be multiple of 8" in r.output and "[frontend validate()]" in r.output
    assert "sdpa-explorer run --d-qk 64 --d-v 64" in r.output or "--d-qk 72 --d-v 72" in r.output
    assert "Traceback" not in r.output


def test_cli_heads_report_the_rule_instead_of_stopping():
    r = invoke("--h-q", "6", "--h-kv", "4")
    assert r.exit_code == 0, r.output
    assert "h_q must be a multiple of h_kv" in r.output and "[tool]" in r.output
    assert "must be a factor of number of heads for query" in r.output
    assert "sdpa-explorer run --h-q 6 --h-kv 3" in r.output


def test_cli_json_is_the_explanation():
    r = invoke("--d", "65", "--json")
    assert r.exit_code == 0, r.output
    e = Explanation.from_dict(json.loads(r.output))
    assert e.verdict == REFUSED and e.config == D65 and e.nearest


@pytest.mark.parametrize("args,needle", [(["--b", "0"], "--b: batch (b) must be at least 1 (got 0)"),
                                         (["--d", "x"], "--d"), (["--preset", "no-such"], "--preset")])  # fmt: skip
def test_cli_bad_input_exits_2_and_names_the_option(args, needle):
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output


@pytest.mark.gpu
def test_gpu_default_config_has_a_supported_cell_with_plans():
    e = explain(SdpaConfig(), gpu=True)
    assert e.verdict == SUPPORTED, e.to_dict()
    supported = [c for c in e.cells if c.status == SUPPORTED]
    assert supported and all(c.plan_names for c in supported)
    assert not e.gpu_note


@pytest.mark.gpu
def test_gpu_fp8_with_half_output_names_blackwell_and_the_nearest_fp8_output():
    """On Hopper cuDNN refuses FP8 in with fp16 out (Blackwell only); FP8 out works (DESIGN fact 9)."""
    e = explain(SdpaConfig(dtype="fp8_e4m3", out_dtype="fp16"), gpu=True)
    if not any("Blackwell" in r.needs for r, _ in e.refusals()):
        pytest.skip(f"this GPU and cuDNN accept FP8 with fp16 output: {e.versions}")
    assert e.verdict == REFUSED
    assert any(r.kind == "architecture" and r.met is False for r in e.requirements)
    assert any(n.config.fp8 and n.config.o_dtype == "fp8_e4m3" and n.checked == "plans" for n in e.nearest)


def test_a_plan_build_that_kills_the_engine_costs_the_process_not_the_command(monkeypatch):
    """Asked of the engine process, as the Explain pane asks: a crash there is one line, exit 1."""
    from fakes import FakeEngine, explain_crash

    from tui.cli import common
    from tui.process.session import EngineSession

    monkeypatch.setattr(
        common, "engine_session", lambda: EngineSession(FakeEngine(explainer=explain_crash()))
    )
    r = invoke("--d", "72")
    assert r.exit_code == 1, r.output
    assert "FAIL no explanation of" in r.output and "SIGSEGV" in r.output


def test_a_suggested_command_starts_the_tool_as_the_user_did(monkeypatch):
    from tui.model.launch import LAUNCHER_ENV

    monkeypatch.delenv(LAUNCHER_ENV, raising=False)
    monkeypatch.setenv("UV", "/usr/bin/uv")  # under `uv run`: sdpa-explorer is not on the shell's PATH
    assert run_command(SdpaConfig(b=2)) == "uv run sdpa-explorer run --b 2"
    monkeypatch.delenv("UV")
    assert run_command(SdpaConfig()).startswith("sdpa-explorer run")
    monkeypatch.setenv(LAUNCHER_ENV, "python3 -m tui")  # as `python3 -m tui` started it
    assert run_command(SdpaConfig()).startswith("python3 -m tui run")
