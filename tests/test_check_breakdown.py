"""The check's breakdown (benchmarks/check_breakdown.py, run on the H200) puts each second in one
part: time in a part called from another counts to the inner one only."""

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
