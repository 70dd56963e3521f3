"""The CLI's report (tui.present.report): the summary, then each pass's phases, plans and output checks."""

import dataclasses
from pathlib import Path

import pytest
from measured import GAPS, NO_NVML, flushed, measured
from rich.console import Console
from rich.text import Text

from tui.jobs.check import case_line, case_row
from tui.model.config import SdpaConfig
from tui.model.results import ErrorMetrics, Fp8Scaling, RunResult
from tui.model.statuses import BACKWARD
from tui.present.format import timing_text, us
from tui.present.report import checks_table, phases_table, plans_table, result_renderable

DATA = Path(__file__).parent / "data"
SEED = RunResult.from_json((DATA / "seed_h200.json").read_text())  # the seed's forward, on the H200
TRAINING = RunResult.from_json(
    (DATA / "train_h200.json").read_text()
)  # Llama-3-8B prefill's training step, bf16
FP8 = RunResult.from_json((DATA / "fp8_h200.json").read_text())  # Llama-3-70B prefill in FP8, forward only


def text_of(renderable) -> str:
    console = Console(record=True, width=220)
    console.print(renderable)
    return console.export_text()


def with_backward(result: RunResult, **changes) -> RunResult:
    fwd, bwd = result.passes
    return dataclasses.replace(result, passes=(fwd, dataclasses.replace(bwd, **changes)))


@pytest.fixture(scope="module")
def cpu_training(cpu_engine):
    """A real run of a training configuration in CPU mode (as on a machine without a GPU)."""
    return cpu_engine.run(SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, backward=True, deterministic=True))


def test_a_cpu_backward_result_renders_each_pass(cpu_training):
    r = cpu_training
    bwd = r.pass_of(BACKWARD)
    assert r.status == "cpu_only" and bwd.status == "cpu_only" and all(c.peers for c in bwd.checks)
    text = text_of(result_renderable(r))
    for words in (
        "CPU ONLY",
        "backward CPU ONLY",
        "backward FLOPs",
        "2.5x the forward's",
        "backward: deterministic algorithm asked for; repeatability not checked",
        "Forward build phases",
        "Backward build phases",
        "Backward outputs against fp32 autograd",
        "not run",
        *bwd.peers,  # the peer by its own name (the torch backend it was forced to)
    ):
        assert words in text, words
    said = " ".join(text.split())
    assert said.count("cuDNN's backward did not run") == 1  # the note, under the outputs, once
    assert said.count("cuDNN's forward did not run") == 1
    assert (
        text.index("Forward build phases")
        < text.index("Backward build phases")
        < text.index("Backward outputs")
    )
    for c in bwd.checks:
        assert f"{c.atol:.2e}" in text  # each gradient's own atol
    assert "Backward plans" not in text  # no plan was built without a GPU


def test_a_recorded_training_step_renders_both_passes():
    """The Llama-3-8B training step measured on the H200: CI has no GPU, so this is where it is drawn."""
    text = text_of(result_renderable(TRAINING))
    for words in (
        "backward OK  outputs pass (dQ, dK, dV)",
        "backward FLOPs 1374.56 G (2.5x the forward's, five matmuls against two)",
        "backward kernel time 2.855 ms",
        "backward 481.5 TFLOPS",
        "step (forward + backward kernel time) 3.752 ms",
        "backward autotune: the heuristic's pick is the fastest of 2 timed plans",
        "backward: deterministic algorithm not asked for; not bitwise repeatable (two executions differed)",
        "Backward build phases",
        "Backward plans (H: the heuristic's pick, *: fastest measured; max abs err: the largest of dQ, dK, dV)",
        "eng6_k24=26",
        "eng7_k24=26",
        "257.0 MiB",
        "Backward outputs against fp32 autograd",
        "torch bf16: torch SDPA backward",
    ):
        assert words in text, words
    assert (
        text.index("Forward outputs against")
        < text.index("Backward build phases")
        < text.index("Backward plans")
    )
    assert text.count("pass") >= 9  # the forward's two rows, the six gradient rows, the headline
    for c in TRAINING.pass_of(BACKWARD).checks:
        assert f"{c.atol:.2e}" in text  # each gradient's own atol


def test_a_recorded_fp8_result_renders_its_scales_and_amax():
    text = text_of(result_renderable(FP8))
    for words in (
        "forward FP8 scales: descale_q 0.01298",
        "scale_s 448, scale_o 136.3",
        "forward FP8 amax: amax_o 3.286 (reference max 3.286)",
        "FP8 recipe: per-tensor",
        "torch fp16",
    ):  # torch has no FP8 attention: its fp16 SDPA on the dequantised inputs
        assert words in text, words
    assert "torch fp8_e4m3" not in text and "backward" not in text.lower()


def test_an_fp8_backward_renders_its_scales_and_amax_beside_the_reference():
    """Scales and amax as an FP8 backward (b=2, h=8, s=1024, d=128, causal) gave them on the H200."""
    fp8 = Fp8Scaling(
        recipe="per-tensor",
        scales={
            "descale_o": 0.007344,
            "descale_dO": 0.01169,
            "scale_dQ": 153.97,
            "scale_dK": 162.67,
            "scale_dV": 96.08,
            "scale_dP": 618.85,
            "descale_dP": 0.001616,
        },  # fmt: skip
        amax={"amax_dq": 2.8907, "amax_dk": 2.6781, "amax_dv": 4.6627, "amax_dp": 0.7239},
        reference_amax={"amax_dq": 2.8709, "amax_dk": 2.6888, "amax_dv": 4.6762},
    )
    text = text_of(result_renderable(with_backward(TRAINING, fp8=fp8)))
    assert "backward FP8 scales: descale_o 0.007344, descale_dO 0.01169, scale_dQ 154" in text
    assert "backward FP8 amax: amax_dq 2.891 (reference max 2.871)" in text and "amax_dp 0.7239" in text


def test_a_forward_only_result_renders_no_other_pass():
    text = text_of(result_renderable(SEED))
    assert "Forward plans (H: the heuristic's pick" in text and "Forward build phases" in text
    for words in ("backward", "Backward", "step", "FP8", "deterministic"):
        assert words not in text, words
    forward = dataclasses.replace(
        TRAINING, passes=TRAINING.passes[:1], config=TRAINING.config.replace(backward=False)
    )
    assert "backward" not in text_of(result_renderable(forward)).lower()


def test_a_failing_backward_says_which_gradient_and_that_it_was_not_repeatable():
    bwd = TRAINING.pass_of(BACKWARD)
    bad = ErrorMetrics(max_abs=3.0, max_rel=9.0, mean_abs=0.1, mismatched=17, total=2097152)
    checks = tuple(dataclasses.replace(c, cudnn=bad) if c.output == "dK" else c for c in bwd.checks)
    r = with_backward(TRAINING, checks=checks, status="mismatch", message="dK differs from fp32 autograd",
                      deterministic=True, repeatable=False)  # fmt: skip
    r = dataclasses.replace(r, status="mismatch", message="backward: dK differs from fp32 autograd")
    text = text_of(result_renderable(r))
    assert "backward MISMATCH  outputs FAIL (dQ, dK, dV)" in text and "FAIL (17 of 2097152)" in text
    assert "backward: deterministic algorithm asked for; not bitwise repeatable" in text
    assert text.count("dK differs from fp32 autograd") == 1  # said once, not again under the backward


def test_each_table_is_titled_by_its_pass():
    fwd, bwd = TRAINING.passes
    assert text_of(phases_table(SEED.forward)).startswith("Forward build phases")
    assert text_of(plans_table(SEED.forward)).startswith(
        "Forward plans (H: the heuristic's pick, *: fastest measured)"
    )
    assert text_of(phases_table(bwd, cache_hit=True)).startswith(
        "Backward build phases (cache hit: built earlier)"
    )
    assert "eng6_k24=26" in text_of(plans_table(bwd))
    table = text_of(checks_table(fwd))
    assert table.startswith("Forward outputs against fp32 math") and "torch bf16" in table


# ---- a figure's regime, stability and the GPU around it (schema 2.1) --------------------------------


def test_a_figure_says_its_regime_that_it_was_unstable_and_capped_and_the_gpu_around_it():
    r = flushed(measured(SEED))
    t = r.forward.timing
    text = " ".join(text_of(result_renderable(r)).split())
    words = f"sustained, unstable (p90/p10 {t.p90_us / t.p10_us:.3f}), power-capped 38%"
    assert t.stable is False and words == t.regime_words
    assert (
        f"forward kernel time {us(t.median_us)} (p10 {us(t.p10_us)}, p90 {us(t.p90_us)}) ({words}) via "
        in text
    )
    assert "L2 flushed, 100.0 MiB before each execution" in text
    assert f"forward samples 20, retried; p90/p10 {t.p90_us / t.p10_us:.3f}, UNSTABLE" in text
    assert (
        "forward GPU SM clock 1980 → 1755 MHz; mem clock 3201 → 3201 MHz; power 121 → 699 W of 700 W; "
        "temperature 38 → 61 °C; reasons none → sw power cap; capped power 38%, thermal 0%; timed for 2.10 s; "
        "rest wait 0.40 s, rested"
    ) in text
    assert f"forward cross-check: {GAPS}" in text
    assert f"forward {r.forward.tflops:.1f} TFLOPS" in text and "TFLOPS, " in text and "(sustained)" in text
    table = text_of(plans_table(r.forward))
    assert "fastest measured; kernel time sustained)" in " ".join(table.split())
    assert table.count("unstable") == 1  # the heuristic's plan, the one that did not hold still


def test_an_older_result_reads_as_before():
    text = text_of(result_renderable(SEED))
    t = SEED.forward.timing
    assert f"forward kernel time {us(t.median_us)} (p10 {us(t.p10_us)}, p90 {us(t.p90_us)}) via cupti" in text
    for words in ("burst", "sustained", "samples", "telemetry", "GPU SM", "unstable", "cross-check"):
        assert words not in text, words


def test_a_burst_figure_without_nvml_says_why_in_one_line():
    r = measured(SEED, regime="burst", telemetry=None, unstable=(), environment_telemetry=NO_NVML)
    text = text_of(result_renderable(r))
    assert f"forward kernel time {timing_text(r.forward.timing)} (burst) via" in text
    assert text.count(f"forward no telemetry: {NO_NVML}") == 1 and "GPU SM" not in text
    assert "p90/p10 1.00" in text and ", stable" in text and "unstable" not in text


def test_a_step_says_its_regime_and_that_a_pass_was_unstable():
    step = "step (forward + backward kernel time)"
    r = measured(TRAINING, unstable=("backward",))
    unstable = text_of(result_renderable(r))
    assert f"{step} {us(r.step_us)} (sustained, unstable)" in unstable
    assert "backward samples 20, retried" in unstable and "forward samples 20;" in unstable
    r = measured(TRAINING, regime="burst", unstable=())
    assert f"{step} {us(r.step_us)} (burst)\n" in text_of(result_renderable(r))
    assert f"{step} {us(TRAINING.step_us)}\n" in text_of(result_renderable(TRAINING))  # older: as before


def test_the_check_line_says_each_figures_regime_and_marks_an_unstable_one():
    r = measured(TRAINING, unstable=("backward",))
    fwd, bwd = (p.timing for p in r.passes)
    line = case_line("llama3-8b-train", r)
    assert (
        f"{us(fwd.median_us)}[yellow] (sustained, power-capped 38%)[/yellow]" in line
    )  # capped: it may not repeat
    assert f"backward {us(bwd.median_us):>11}[yellow] (sustained, unstable (p90/p10 " in line
    plain = Text.from_markup(
        case_line("llama3-8b-train", measured(TRAINING, regime="burst", telemetry=None, unstable=()))
    )
    assert plain.plain.count("(burst)") == 2 and not plain.spans[1:]  # PASS green; nothing else marked
    assert "(" not in case_line("seed", SEED).split("µs")[1][:3]  # an older figure: no regime to say
    row = case_row("llama3-8b-train", r)
    assert (row["regime"], row["stable"]) == ("sustained", True)
    assert [(p["regime"], p["stable"]) for p in row["passes"]] == [("sustained", True), ("sustained", False)]


def test_the_plans_table_says_where_each_plan_comes_from_and_what_the_words_mean():
    from tui.model.results import PLAN_SOURCES

    fwd = SEED.forward
    plans = tuple(dataclasses.replace(p, source=PLAN_SOURCES[2]) if p.index == 1 else p for p in fwd.plans)
    text = text_of(plans_table(dataclasses.replace(fwd, plans=plans)))
    header = next(line for line in text.splitlines() if "plan" in line and "engine" in line)
    assert header.index("plan") < header.index("from") < header.index("engine")
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert "delegated" in rows[1] and all("backend" in r for i, r in enumerate(rows) if i != 1)
    legend = "from: backend = an engine of the cuDNN backend library; delegated = left to the backend's"
    assert legend in " ".join(text.split())
