"""Who has the dashboard's one engine, decided in one place.

The form's run, the Explain pane's question, a sweep's points, a knob search and a hunt's runs
share one engine client, which answers only the newest waiting request (and a newer request stops
a search at its next candidate). So they take turns, in this order of precedence: the form's run,
an explanation, a sweep's next point, a search's request, a hunt's next run. While a long job (a
sweep, a search, a hunt) runs, the form's edits wait for its end, and no other long job starts. The drivers (app/) say what they asked and
what came back; the scheduler says whose a request is and what a driver waits for.
"""

from __future__ import annotations

RUN, EXPLAIN, SWEEP, SEARCH, HUNT = "run", "explain", "sweep", "search", "hunt"
LONG_JOBS = (SWEEP, SEARCH, HUNT)
JOB_WORDS = {SWEEP: "A sweep", SEARCH: "A knob search", HUNT: "A hunt"}  # as a message starts
# what each waits for before it asks, nearest first: a long job under way, then requests in flight
WAITS = {
    RUN: (),
    EXPLAIN: (RUN,),
    SWEEP: (RUN,),
    SEARCH: (RUN, EXPLAIN),
    HUNT: (RUN, EXPLAIN),
}


class Scheduler:
    """The requests in flight by whose they are, the long job under way, and the form's run that
    waits for the typing to pause."""

    def __init__(self) -> None:
        self._asked: dict[str, int] = {}
        self.job: str | None = None  # SWEEP, SEARCH or HUNT while one runs
        self.run_pending = False  # an edit's run is due once the typing pauses
        self.run_after = False  # Ctrl+R while a long job ran: the form runs when it ends

    # ---- what the drivers say ------------------------------------------------------------------
    def asked(self, who: str, request_id: int) -> int:
        self._asked[who] = request_id
        return request_id

    def answered(self, who: str) -> None:
        self._asked.pop(who, None)

    def begin(self, job: str) -> None:
        assert job in LONG_JOBS and self.job is None, (job, self.job)
        self.job = job

    def end(self, job: str) -> bool:
        """The long job is over; whether the form's run was asked for meanwhile (it runs now)."""
        if self.job == job:
            self.job = None
        asked, self.run_after = self.run_after, False
        return asked

    # ---- what they ask -------------------------------------------------------------------------
    def in_flight(self, who: str) -> int | None:
        """The request of `who` the engine has (or will take next), if any."""
        return self._asked.get(who)

    def whose(self, request_id: int | None) -> str | None:
        return next((who for who, rid in self._asked.items() if rid == request_id), None)

    def running(self, job: str) -> bool:
        return self.job == job

    def waits_for(self, who: str) -> str | None:
        """What `who` must wait for before it asks the engine, or None when it may ask now: the
        long job under way (for anyone else), then the requests in flight that go before it (an
        explanation waits for the form's run that is due too)."""
        if self.job is not None and self.job != who:
            return self.job
        if who == EXPLAIN and self.run_pending:
            return RUN
        return next((ahead for ahead in WAITS[who] if ahead in self._asked), None)

    def may_start(self, job: str) -> str | None:
        """Why the long job `job` cannot start now (another one runs), or None."""
        return self.job if self.job is not None and self.job != job else None
