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
