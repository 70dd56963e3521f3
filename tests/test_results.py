from pathlib import Path

from tui.engine.results import RunResult

RECORDED = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())


def test_autotune_verdict_of_the_recorded_result():
    import dataclasses

    verdict = RECORDED.autotune_verdict()
    assert verdict.startswith("plan 5 (eng2) is ") and "% faster than the heuristic's pick" in verdict
    same = dataclasses.replace(RECORDED, fastest_plan=RECORDED.heuristic_plan)
    assert same.autotune_verdict() == "the heuristic's pick is the fastest of 6 timed plans"
    assert dataclasses.replace(RECORDED, plans=RECORDED.plans[:1]).autotune_verdict() == ""


def test_cli_report_of_a_gpu_result_renders_every_section():
    """The CLI's report of a real H200 result: CI has no GPU, so this is where it is drawn."""
    from rich.console import Console

    from tui.report import result_renderable

    console = Console(record=True, width=200)
    console.print(result_renderable(RECORDED))
    text = console.export_text()
    for words in (
        "OK",
        "kernel time 26.78 µs",
        "host overhead per execute()",
        "240.8 TFLOPS",
        "autotune: plan 5 (eng2)",
        "create_execution_plans",
        "eng2_k24=7",
        "KERNEL_CFG=7",
        "torch fp16 SDPA",
        "pass",
    ):
        assert words in text, words


def test_timing_summary_statistics():
    from tui.engine.timing import summarize

    stats = summarize([5.0, 1.0, 3.0, 2.0, 4.0], per_replay=10, l2_flushed=False, method="m")
    assert (stats.median_us, stats.min_us, stats.max_us) == (3.0, 1.0, 5.0)
    assert stats.p10_us == 1.4 and stats.p90_us == 4.6
    assert stats.replays == 5 and stats.spread_pct == (4.6 - 1.4) / 3.0 * 100
