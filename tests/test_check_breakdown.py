"""The bookkeeping of benchmarks run on the H200: check_breakdown.py puts each second in one part
(time in a part called from another counts to the inner one only); rest_signals.py finds when a
signal went quiet for good."""

import types

from benchmarks.check_breakdown import Parts


def test_time_in_a_nested_part_counts_to_it_alone():
    now = [0.0]
    parts = Parts(clock=lambda: now[0])
    box = types.SimpleNamespace()

    def rest():
        now[0] += 0.5

    def timed():
        now[0] += 0.25
        box.rest()
        now[0] += 1.0
        return "stats"

    box.rest, box.timed = rest, timed
    parts.wrap(box, "rest", "rest waits")
    parts.wrap(box, "timed", "timed replays")
    assert box.timed() == "stats" and box.rest() is None
    assert dict(parts.totals) == {"rest waits": 1.0, "timed replays": 1.25}
    assert now[0] == 2.25  # every second once


def test_a_rest_signal_is_quiet_from_the_start_of_its_last_quiet_run():
    from benchmarks.rest_signals import first_after

    rows = [{"t_s": t, "w": w} for t, w in ((0.0, 700), (0.1, 300), (0.2, 650), (0.3, 200), (0.4, 150))]
    assert first_after(rows, lambda r: r["w"] < 500) == 0.3  # not 0.1: it rose again at 0.2
    assert first_after(rows, lambda r: r["w"] < 100) is None
