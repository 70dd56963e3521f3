"""A knob search's steps (model/search_run.py), as the CLI's session and the Search pane both
follow them: after a crash under a candidate the search again without it, then the contender
pinned in a fresh process, then the answer; a search lost with its engine said as a result."""

import dataclasses

from test_knob_search import fresh_run, recorded

from tui.model.config import SdpaConfig
from tui.model.knob_search import CRASHED, Trial
from tui.model.search_results import FreshRun, SearchOptions
from tui.model.search_run import Done, RunFresh, SearchAgain, SearchRun


def test_a_crash_under_a_candidate_searches_again_without_it_then_the_contender_runs_fresh():
    run = SearchRun(SdpaConfig(), SearchOptions(budget_s=60.0))
    run.sent()
    found = recorded().trials + (Trial("1 KERNEL_CFG=19", CRASHED, error="an illegal memory access"),)
    step = run.searched(dataclasses.replace(recorded(), status="crash", trials=found))
    assert isinstance(step, SearchAgain) and "going on in a fresh one" in step.words
    assert run.options is step.options and step.options.crashes == (
        "1 KERNEL_CFG=19: an illegal memory access",
    )
    step = run.searched(recorded())
    assert isinstance(step, RunFresh) and step.config == recorded().config.replace(plan="1 KERNEL_CFG=27")
    assert step.words == "running 1 KERNEL_CFG=27 beside the pick in a fresh engine process"
    assert run.fresh_answered(fresh_run(step.config)).fresh == FreshRun("1 KERNEL_CFG=27", 163.5, 155.0)
    assert run.fresh_missing("stopped when asked").fresh == FreshRun(
        "1 KERNEL_CFG=27", message="stopped when asked"
    )


def test_a_search_with_nothing_to_run_fresh_is_done_and_a_lost_one_says_where_it_was():
    run = SearchRun(SdpaConfig(), SearchOptions())
    stopped = dataclasses.replace(recorded(), status="cancelled")
    assert run.searched(stopped) == Done(stopped)
    run.step = "searching: candidate 3, 1 KERNEL_CFG=19"
    lost = run.lost("killed by signal 11", True, None)
    assert (lost.status, lost.stopped) == ("crash", run.step)
    assert lost.message == "killed by signal 11 (searching: candidate 3, 1 KERNEL_CFG=19)"
    assert run.lost("silent for too long", False, None).status == "error"
