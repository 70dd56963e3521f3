"""Who has the dashboard's one engine (jobs/scheduler.py): the form's run before an explanation
before a sweep's point before a search's request; a sweep or a search under way holds the
others back, and only one of the two runs at a time."""

import pytest

from tui.jobs.scheduler import EXPLAIN, RUN, SEARCH, SWEEP, Scheduler


def test_nothing_in_flight_everyone_may_ask():
    s = Scheduler()
    assert [s.waits_for(who) for who in (RUN, EXPLAIN, SWEEP, SEARCH)] == [None] * 4


@pytest.mark.parametrize(
    ("in_flight", "waits"),
    [
        (RUN, {RUN: None, EXPLAIN: RUN, SWEEP: RUN, SEARCH: RUN}),
        (EXPLAIN, {RUN: None, EXPLAIN: None, SWEEP: None, SEARCH: EXPLAIN}),
    ],
)
def test_a_request_in_flight_holds_back_those_after_it(in_flight, waits):
    s = Scheduler()
    s.asked(in_flight, 7)
    assert {who: s.waits_for(who) for who in waits} == waits
    assert s.whose(7) == in_flight and s.whose(8) is None
    s.answered(in_flight)
    assert s.in_flight(in_flight) is None and s.waits_for(SEARCH) is None


@pytest.mark.parametrize("job", [SWEEP, SEARCH])
def test_a_long_job_holds_back_the_form_and_the_explain_pane_and_the_other_job(job):
    s = Scheduler()
    s.begin(job)
    other = SEARCH if job == SWEEP else SWEEP
    assert s.waits_for(RUN) == job and s.waits_for(EXPLAIN) == job and s.may_start(other) == job
    assert s.waits_for(job) is None and s.may_start(job) is None and s.running(job)
    s.end(job)
    assert s.waits_for(RUN) is None and s.may_start(other) is None and not s.running(job)


def test_an_explanation_waits_for_a_run_that_is_due_once_the_typing_pauses():
    s = Scheduler()
    s.run_pending = True
    assert s.waits_for(EXPLAIN) == RUN and s.waits_for(SWEEP) is None
