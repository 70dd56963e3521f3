"""Exports: the reproduction script (built from the engine's own code, run on the CPU as far as a
CPU takes it, and on the GPU against the engine), the RunResult as JSON and the plans as CSV."""

import ast
import builtins
import csv
import io
import itertools
import json
import symtable
import sys
import types
from pathlib import Path

import pytest
from fakes import TRAINING
from measured import measured

from tui.model.config import SdpaConfig
from tui.model.results import RunResult
from tui.model.statuses import SCHEMA_VERSION
from tui.model.validation import validate
from tui.present import bundle, repro
from tui.present.export import PLAN_COLUMNS, default_filename, render, script

RECORDED = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())
TUI = Path(repro.__file__).parents[1]
ENGINE_SOURCES = {
    p.stem: p.read_text() for layer in bundle.LAYERS for p in sorted((TUI / layer).glob("*.py"))
}


def shape(b, h_q, h_kv, s_q, s_kv, d_qk, d_v, **options) -> SdpaConfig:
    """A configuration written as its shape (b, h_q, h_kv, s_q, s_kv, d_qk, d_v), then its options."""
    return SdpaConfig(b=b, h_q=h_q, h_kv=h_kv, s_q=s_q, s_kv=s_kv, d_qk=d_qk, d_v=d_v, **options)


PADDED = {"seq_lens_q": (64, 20), "seq_lens_kv": (64, 33)}
PLAIN = shape(2, 4, 4, 64, 64, 16, 16)
MASKED = shape(
    2, 4, 2, 64, 64, 16, 8, dtype="bf16", causal="bottom_right", window=9, bias="bx1", layout="SBHD", **PADDED
)
DROPOUT = shape(1, 2, 2, 32, 32, 16, 16, dropout=0.25, dropout_seed=7)
FP8 = shape(2, 4, 2, 32, 48, 16, 16, dtype="fp8_e4m3", layout="BHSD")
FP8_TRAIN = shape(1, 4, 1, 40, 40, 16, 16, dtype="fp8_e4m3", backward=True, deterministic=True)
ALIBI_TRAIN = shape(2, 4, 4, 64, 64, 16, 16, alibi=True, bias="bxh", dropout=0.2, backward=True, **PADDED)
CONFIGS = [PLAIN, MASKED, DROPOUT, FP8, FP8_TRAIN, ALIBI_TRAIN]
IDS = ["fp16", "bf16-gqa-br-padded-window-bias", "dropout", "fp8", "fp8-train", "train-alibi"]


def load(config: SdpaConfig, seed: int = 0) -> types.ModuleType:
    """An exported script loaded as a module (main() not run), to call its own functions."""
    module = types.ModuleType("exported_repro")
    sys.modules[module.__name__] = module  # its dataclasses and its fp8 alias look the module up
    try:
        exec(compile(script(config, seed), "repro.py", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module


def defined_names(text: str) -> set[str]:
    """The names a module's top-level statements bind (imports aside)."""
    names = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


# ---- item 3: the engine's code, verbatim, and short glue ---------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_each_function_and_class_of_a_script_is_the_engines_verbatim_or_short_glue(config):
    text = script(config)
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    engine_names = set().union(*(defined_names(ENGINE_SOURCES[m]) for m in bundle.SOURCES))
    copied, glue = [], []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            source = "".join(lines[start - 1 : node.end_lineno])
            if node.name in repro.GLUE:
                assert node.name not in engine_names, node.name
                assert source.count("\n") <= 15, f"glue {node.name} has {source.count(chr(10))} lines"
                glue.append(node.name)
            else:
                assert any(source in engine for engine in ENGINE_SOURCES.values()), (
                    f"{node.name} is not verbatim"
                )
                copied.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            source = "".join(lines[node.lineno - 1 : node.end_lineno])
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            assert names <= set(repro.GLUE) or any(source in e for e in ENGINE_SOURCES.values()), names
        else:  # the docstring, the imports, and the call of main()
            assert isinstance(node, ast.Expr | ast.Import | ast.ImportFrom | ast.If), ast.dump(node)[:80]
    assert {"SdpaConfig", "define", "sdpa_kwargs", "device_tensors", "reference_fp32", "kernel_time"} <= set(
        copied
    )
    assert "main" in glue and copied.index("SdpaConfig") < copied.index("define")


def test_no_string_literal_in_the_package_is_longer_than_60_lines():
    long = []
    for path in sorted(TUI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            is_text = isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.Constant) and isinstance(node.value, str)
            )
            if is_text and node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{path.relative_to(TUI.parent)}:{node.lineno}")
    assert not long


MASKS = {"dropout": 0.1, "bias": "bxh", "alibi": True, "window": 8, "implementation": "unified"}
VARIANTS = [
    shape(2, 4, 2, 64, 64, 64, 64, dtype=dtype, out_dtype=out, backward=bwd, deterministic=det, **options)
    for (dtype, out), (bwd, det), options in itertools.product(
        [
            ("fp16", "auto"),
            ("bf16", "auto"),
            ("fp8_e4m3", "auto"),
            ("fp8_e4m3", "fp16"),
            ("fp8_e4m3", "bf16"),
        ],
        [(False, False), (True, False), (True, True)],
        [{}, {**MASKS, "seq_lens_q": (64, 9), "seq_lens_kv": (64, 30)}],
    )
]


@pytest.mark.parametrize("config", VARIANTS, ids=[c.label() for c in VARIANTS])
def test_every_variant_compiles_reads_only_names_it_defines_and_imports_only_cudnn_and_torch(config):
    assert validate(config) == []
    text = script(config)
    tree = ast.parse(text)
    table = symtable.symtable(text, "repro.py", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    read, scopes = {s.get_name() for s in table.get_symbols() if s.is_referenced()}, table.get_children()
    while scopes:
        scope = scopes.pop()
        read |= {s.get_name() for s in scope.get_symbols() if s.is_referenced() and s.is_global()}
        scopes.extend(scope.get_children())
    assert read - defined - set(dir(builtins)) == set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            for name in [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ("cudnn", "torch"), name
    # relative imports stay only where a script never runs them: SdpaConfig's validation and parsing
    config_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SdpaConfig")
    inside = {id(n) for n in ast.walk(config_class)}
    relative = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert all(id(n) in inside for n in relative)
    assert text.splitlines()[-2:] == ['if __name__ == "__main__":', "    main()"]


# ---- what a script carries ---------------------------------------------------------------------------


FP8_NAMES = defined_names(ENGINE_SOURCES["fp8"])
BACKWARD_NAMES = {
    "backward_tensors",
    "reference_grads",
    "random_d_o",
    "backward_pass",
    "check_backward",
    "report_backward",
    "repeatable",
    "GRADIENTS",
}
DROPOUT_NAMES = {"drawn_dropout_mask", "dump_dropout_mask"}


def test_a_plain_fp16_forward_has_no_fp8_backward_or_dropout_code():
    text = script(PLAIN)
    names = defined_names(text)
    assert not names & (FP8_NAMES | BACKWARD_NAMES | DROPOUT_NAMES)
    assert "\nfp8 = None  #" in text  # the engine's FP8 branches are there, and not taken


def test_an_fp8_forward_carries_the_forward_recipe_only():
    names = defined_names(script(FP8))
    assert {"quantise", "scalar", "forward_scales", "values", "delayed_scaling", "FORWARD_DELAYED"} <= names
    assert not names & ({"backward_scales", "BACKWARD_DELAYED"} | BACKWARD_NAMES)
    assert "fp8 = sys.modules[__name__]" in script(FP8)
    # O in bf16: nothing to scale after a warm-up
    bf16_out = defined_names(script(FP8.replace(out_dtype="bf16")))
    assert "delayed_scaling" not in bf16_out and "forward_scales" in bf16_out


def test_training_scripts_carry_the_backward_and_only_fp8_training_its_recipe():
    train = defined_names(script(ALIBI_TRAIN))
    assert train >= BACKWARD_NAMES | DROPOUT_NAMES and not train & FP8_NAMES
    fp8_train = defined_names(script(FP8_TRAIN))
    assert fp8_train >= BACKWARD_NAMES | {"backward_scales", "BACKWARD_DELAYED", "BACKWARD_AMAX"}
    assert not fp8_train & DROPOUT_NAMES


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_a_script_carries_its_configuration_and_says_what_it_does(config):
    text = script(config, seed=3)
    m = load(config, seed=3)
    assert repr(m.CONFIG) == repr(config)  # the script's own SdpaConfig, field for field
    assert m.SEED == 3
    doc = ast.get_docstring(ast.parse(text))
    assert doc.startswith(f"Reproduce one cuDNN SDPA configuration: {config.label()}")
    assert ("FP8 (E4M3)" in doc) == config.fp8 and ("Training step" in doc) == config.backward
    assert ("Dropout" in doc) == bool(config.dropout)
    assert "permute(0, 2, 1, 3)" not in text  # the seed's mistake


# ---- the script's own code on the CPU ----------------------------------------------------------------


def cpu_dropout_mask(config):
    import torch

    if not config.dropout:
        return None
    gen = torch.Generator().manual_seed(3)
    return (torch.rand(config.b, config.h_q, config.s_q, config.s_kv, generator=gen) > config.dropout).float()


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_a_script_draws_the_engines_inputs_and_defines_the_engines_graphs(config):
    import torch

    from tui.engine.graph import define
    from tui.engine.tensors import backward_tensors, device_tensors

    m = load(config)
    theirs = m.device_tensors(m.CONFIG, "cpu", m.SEED)
    ours = device_tensors(config, "cpu", 0)
    if config.backward:
        theirs = m.backward_tensors(m.CONFIG, theirs, "cpu", m.SEED)
        ours = backward_tensors(config, ours, "cpu", 0)
    assert theirs.keys() == ours.keys()
    for name, t in ours.items():
        assert theirs[name].dtype == t.dtype and theirs[name].stride() == t.stride(), name
        if name not in ("o", "stats", "dQ", "dK", "dV"):  # written by the graph: uninitialised here
            assert torch.equal(theirs[name].view(torch.uint8), t.view(torch.uint8)), name
    g = m.define(m.CONFIG)
    assert g.json() == define(config).json()
    assert verdict(g) == verdict(define(config))  # cuDNN's own word on the graph, without a GPU
    if config.backward:
        assert m.define(m.CONFIG, backward=True).json() == define(config, backward=True).json()


def verdict(g) -> str:
    """What cuDNN's validate() says of a defined graph."""
    try:
        g.graph.validate()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "valid"


def fake_executor(mask):
    """A stand-in for one execute() on the CPU that writes what the graph should: the engine's fp32
    reference (FP8 outputs times their scale, with their amax), so the script's glue can run."""
    from tui.engine import fp8
    from tui.engine.reference import reference_fp32, reference_grads

    def executor(g, data, ws, handle):
        config = g.config

        def write(name, value):
            scale = data[fp8.OUTPUT_SCALES[name]] if data[name].element_size() == 1 else 1.0
            data[name].copy_(value * scale)
            if f"amax_{name.lower()}" in data:
                data[f"amax_{name.lower()}"].fill_(float(value.abs().max()))

        def run():
            q, k, v = (fp8.values(config, data, n) for n in "qkv")
            if g.kind == "forward":
                write("o", reference_fp32(config, q, k, v, data.get("bias"), mask))
            else:
                d_o = fp8.values(config, data, "dO")
                grads = reference_grads(config, q, k, v, d_o, data.get("bias"), mask)
                for name, grad in zip(("dQ", "dK", "dV"), grads, strict=True):
                    write(name, grad)
                if "amax_dp" in data:
                    data["amax_dp"].fill_(1.0)

        return run

    return executor


def dry_run(m, monkeypatch, mask, wrong=False):
    """main() on the CPU: the script's own glue and engine code, with the GPU's parts stood in for
    (no handle, no plan, an execute() that writes the reference, fixed kernel times)."""
    import torch

    device_tensors, backward_tensors = m.device_tensors, getattr(m, "backward_tensors", None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "CPU stand-in")
    monkeypatch.setattr(m, "open_handle", lambda: None)
    monkeypatch.setattr(m, "build_plan", lambda g: None)
    monkeypatch.setattr(m, "kernel_us", lambda run, handle: 10.0)
    monkeypatch.setattr(m, "device_tensors", lambda c, device, seed: device_tensors(c, "cpu", seed))
    if backward_tensors:
        monkeypatch.setattr(
            m, "backward_tensors", lambda c, f, device, seed: backward_tensors(c, f, "cpu", seed)
        )
    if hasattr(m, "drawn_dropout_mask"):
        monkeypatch.setattr(m, "drawn_dropout_mask", lambda config, data, handle: mask)
    writes_nothing = lambda g, data, ws, handle: lambda: None  # noqa: E731
    monkeypatch.setattr(m, "executor", writes_nothing if wrong else fake_executor(mask))


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_a_scripts_main_runs_its_passes_and_ends_with_the_result_line(config, monkeypatch, capsys):
    m = load(config)
    dry_run(m, monkeypatch, cpu_dropout_mask(config))
    with pytest.raises(SystemExit) as exit_code:
        m.main()
    out = capsys.readouterr().out.splitlines()
    figures = json.loads(out[-1].removeprefix("RESULT "))
    assert exit_code.value.code == 0, out
    assert figures["passed"] and figures["max_abs_error"] < figures["atol"] and figures["kernel_us"] == 10.0
    assert out[0] == config.label() and "PASS" in out[2]
    if config.fp8:
        assert {"amax_o", "reference_max_abs", "scale_o"} <= figures.keys()
        assert figures["amax_o"] == pytest.approx(figures["reference_max_abs"])
    if config.backward:
        assert figures["output_passed"] and figures["grad_passed"] and figures["bitwise_repeatable"]
        assert figures["deterministic"] == config.deterministic and figures["step_us"] == 20.0
        assert figures["grad_max_abs_error"].keys() == figures["grad_atol"].keys() == {"dQ", "dK", "dV"}
        assert any(line.startswith("backward kernel time") for line in out)
    if config.fp8 and config.backward:
        assert figures["grad_amax"].keys() == {"dQ", "dK", "dV", "dP"}
        assert figures["grad_reference_max_abs"].keys() == {"dQ", "dK", "dV"}


@pytest.mark.parametrize("config", [PLAIN, FP8, ALIBI_TRAIN], ids=["fp16", "fp8", "train-alibi"])
def test_a_script_fails_an_output_its_graph_never_wrote(config, monkeypatch, capsys):
    m = load(config)
    dry_run(m, monkeypatch, cpu_dropout_mask(config), wrong=True)
    with pytest.raises(SystemExit) as exit_code:
        m.main()
    figures = json.loads(capsys.readouterr().out.splitlines()[-1].removeprefix("RESULT "))
    assert exit_code.value.code == 1 and not figures["passed"] and not figures["output_passed"]
    if config.backward:
        assert not figures["grad_passed"] and not figures["bitwise_repeatable"]  # NaN is never equal


def test_a_scripts_check_fails_an_output_outside_tolerance(monkeypatch):
    import torch

    from tui.engine.reference import reference_fp32

    m = load(MASKED)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    data = m.device_tensors(m.CONFIG, "cpu", m.SEED)
    ref = reference_fp32(MASKED, data["q"], data["k"], data["v"], data["bias"])
    good = m.check_forward(data, lambda: data["o"].copy_(ref), None)
    bad = m.check_forward(data, lambda: data["o"].copy_(ref + 4 * good["atol"]), None)
    assert good["output_passed"] and not bad["output_passed"]


def test_an_fp8_backward_refuses_what_sdpa_fp8_backward_cannot_say():
    """The frontend drops an unknown keyword without a word: the script's graph refuses it by name."""
    m = load(FP8_TRAIN.replace(alibi=True))
    with pytest.raises(m.UnsupportedOption, match="has no option for ALiBi"):
        m.define(m.CONFIG, backward=True)


# ---- JSON and CSV ------------------------------------------------------------------------------------


def test_json_export_round_trips():
    assert RunResult.from_json(render("json", RECORDED)) == RECORDED


def test_csv_export_has_every_plan_of_every_pass_and_the_environment():
    rows = list(csv.DictReader(io.StringIO(render("csv", RECORDED))))
    assert len(rows) == sum(len(p.plans) for p in RECORDED.passes)
    assert set(PLAN_COLUMNS) <= set(rows[0])
    assert all(r["gpu_name"] == "NVIDIA H200" and r["cudnn_backend_version"] == "9.19.0" for r in rows)
    heuristic = [r for r in rows if r["heuristic_pick"] == "True"]
    assert len(heuristic) == 1 and float(heuristic[0]["kernel_median_us"]) > 0
    assert rows[0]["schema_version"] == SCHEMA_VERSION and {r["pass"] for r in rows} == {"forward"}


# the columns of a CSV before schema 2.1, in their places: a reader of those files finds them still
COLUMNS_BEFORE_21 = (
    "config", "dtype", "layout", "pass", "plan_index", "plan_name", "engine_id", "knobs", "workspace_bytes",
    "built", "build_error", "build_seconds", "kernel_median_us", "kernel_p10_us", "kernel_p90_us",
    "l2_flushed", "tflops", "max_abs_error", "matches", "heuristic_pick", "fastest", "gpu_name",
    "compute_capability", "driver_version", "cuda_runtime", "torch_version", "cudnn_backend_version",
    "torch_cudnn_version", "frontend_version", "schema_version",
)  # fmt: skip
TIMING = ("regime", "stable", "retried", "samples")
GPU = ("sm_clock_after_mhz", "power_after_w", "power_limit_w", "power_capped_pct", "thermal_capped_pct")
SOURCE = ("source",)  # schema 2.4: where each plan comes from


def csv_rows(result: RunResult) -> tuple[list[str], list[dict[str, str]]]:
    header, *rows = csv.reader(io.StringIO(render("csv", result)))
    return header, [dict(zip(header, row, strict=True)) for row in rows]


def test_csv_keeps_its_columns_in_place_and_appends_how_each_figure_was_taken():
    header, rows = csv_rows(measured(TRAINING, unstable=("backward",)))
    assert tuple(header) == (*COLUMNS_BEFORE_21, *TIMING, *GPU, *SOURCE, "status", "message")
    picks = {r["pass"]: r for r in rows if r["heuristic_pick"] == "True"}
    assert [picks[k][c] for k in ("forward", "backward") for c in TIMING] == [
        "sustained", "True", "False", "20", "sustained", "False", "True", "20"
    ]  # fmt: skip
    assert [picks["backward"][c] for c in GPU] == ["1755", "699.0", "700.0", "38.2", "0.0"]
    assert all(r["regime"] == "sustained" and r["samples"] == "20" for r in rows)  # every plan was timed


def test_csv_of_an_older_or_unmeasured_figure_leaves_the_new_columns_blank():
    _, rows = csv_rows(RECORDED)  # schema 1.x: no regime, samples or telemetry recorded
    assert rows and all(r[c] == "" for r in rows for c in (*TIMING, *GPU))
    _, rows = csv_rows(measured(TRAINING, regime="burst", telemetry=None, unstable=()))  # no NVML
    assert all(r["regime"] == "burst" and r["stable"] == "True" for r in rows)
    assert all(r[c] == "" for r in rows for c in GPU)


def test_default_filenames_are_safe():
    name = default_filename(SdpaConfig(h_q=32, h_kv=8), "script")
    assert name.endswith(".py") and "/" not in name and " " not in name
    with pytest.raises(ValueError):
        render("pdf", RECORDED)


# ---- on the GPU: the script, run as a user runs it, agrees with the engine ------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "config",
    [
        shape(2, 16, 16, 1024, 1024, 128, 128, dtype="fp8_e4m3", causal="none"),
        shape(
            2,
            8,
            8,
            1024,
            1024,
            128,
            128,
            dtype="fp8_e4m3",
            window=256,
            layout="BHSD",
            seq_lens_q=(1024, 300),
            seq_lens_kv=(1024, 700),
        ),
        shape(2, 16, 4, 1024, 1024, 128, 128, dtype="bf16", backward=True),
        shape(
            2,
            8,
            8,
            512,
            512,
            64,
            64,
            backward=True,
            deterministic=True,
            dropout=0.1,
            dropout_seed=5,
            seq_lens_q=(512, 100),
            seq_lens_kv=(512, 300),
            bias="1xh",
        ),
        shape(2, 8, 8, 1024, 1024, 128, 128, dtype="fp8_e4m3", backward=True, deterministic=True),
    ],
    ids=[
        "fp8",
        "fp8-window-padding",
        "bf16-train-gqa",
        "fp16-train-det-dropout-padding-bias",
        "fp8-train-det",
    ],
)
def test_exported_fp8_and_training_scripts_run_and_agree_with_the_engine(tmp_path, config):
    """Same seed, same logical inputs, same recipe, same plan: the script's errors are the engine's
    (gradients up to the order of a non-deterministic accumulation), and so are its kernel times."""
    from exported import assert_script_agrees

    from tui.engine.runner import Engine, RunOptions

    r = Engine(cache_size=1).run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    figures = assert_script_agrees(tmp_path, r)
    if config.fp8:
        assert figures["amax_o"] == pytest.approx(r.forward.fp8.amax["amax_o"], rel=1e-3)
        assert figures["reference_max_abs"] == pytest.approx(r.forward.fp8.reference_amax["amax_o"], rel=1e-4)
    if config.backward:
        b = r.pass_of("backward")
        checks = {c.output: c for c in b.checks}
        assert figures["deterministic"] == config.deterministic
        for name in ("dQ", "dK", "dV"):
            assert figures["grad_max_abs_error"][name] == pytest.approx(
                checks[name].cudnn.max_abs, rel=1e-2
            ), name
            assert figures["grad_atol"][name] == pytest.approx(checks[name].atol, rel=1e-4), name
        if config.deterministic:
            assert figures["bitwise_repeatable"] and b.repeatable


def test_csv_says_where_each_plan_comes_from_and_a_peer_comes_from_no_engine():
    import dataclasses

    from fakes import PEERS

    from tui.model.results import PLAN_SOURCES

    fwd = PEERS.forward
    plans = tuple(dataclasses.replace(p, source=PLAN_SOURCES[1]) if p.index == 0 else p for p in fwd.plans)
    _, rows = csv_rows(dataclasses.replace(PEERS, passes=(dataclasses.replace(fwd, plans=plans),)))
    plan_rows = [r for r in rows if r["engine_id"] != "peer"]
    assert [r["source"] for r in plan_rows] == [PLAN_SOURCES[1]] + [PLAN_SOURCES[0]] * (len(plans) - 1)
    assert {r["source"] for r in rows if r["engine_id"] == "peer"} == {""}


def test_csv_of_a_run_without_plans_says_its_configuration_status_and_why():
    """A CPU-only run, a refusal or an invalid configuration has no plan: a row a pass (or one for
    the run) still names the configuration, the status and the message."""
    from fakes import NO_GPU

    from tui.engine.runner import Engine
    from tui.model.config import SdpaConfig
    from tui.model.options import RunOptions

    small = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64, backward=True)
    cpu = Engine(environment=NO_GPU).run(small, RunOptions(check=False))
    _, rows = csv_rows(cpu)
    assert [(r["config"], r["pass"], r["status"]) for r in rows] == [
        (small.label(), "forward", "cpu_only"), (small.label(), "backward", "cpu_only")
    ]  # fmt: skip
    invalid = Engine(environment=NO_GPU).run(small.replace(h_kv=3))
    (row,) = csv_rows(invalid)[1]
    assert row["status"] == "invalid" and "h_q must be a multiple of h_kv" in row["message"]
    _, rows = csv_rows(RECORDED)
    assert {r["status"] for r in rows} == {"ok"}  # a measured pass's status on each of its plans
