"""A sweep under way (jobs/sweep_run.py), the one the CLI's `sweep` and the Sweep pane both run:
points handed out once each, in grid order, to however many engines ask; a stop hands out no
more; every answer is a row."""

import threading

from fakes import RECORDED

from tui.jobs.sweep import grid, parse_vary
from tui.jobs.sweep_run import SweepRun
from tui.model.config import SdpaConfig
from tui.model.options import RunOptions

BASE = SdpaConfig(b=1, h_q=2, h_kv=2)


def points(text: str = "s=64..1024x2"):
    return grid(BASE, [parse_vary(text, BASE)])


def test_points_are_handed_out_once_each_in_grid_order_and_each_answer_is_a_row():
    run = SweepRun(points(), RunOptions())
    taken = []
    while (point := run.take()) is not None:
        taken.append(point)
        run.answered(point, RECORDED)
    assert [p.index for p in taken] == [p.index for p in points()]
    assert run.all_handed_out and [r["key"] for r in run.rows] == [p.key for p in taken]
    assert run.take() is None


def test_a_stop_hands_out_no_more_points_and_keeps_the_rows_answered():
    run = SweepRun(points(), RunOptions())
    first = run.take()
    run.stop()
    assert run.take() is None and not run.all_handed_out
    run.answered(first, RECORDED)  # the point under way finishes and is kept
    assert [r["key"] for r in run.rows] == [first.key]


def test_engines_on_threads_share_the_points_without_running_one_twice():
    run = SweepRun(points("s=1..4096x2"), RunOptions())
    done: list[list[str]] = [[] for _ in range(4)]

    def engine(i: int) -> None:
        while (point := run.take()) is not None:
            done[i].append(point.key)
            run.answered(point, RECORDED)

    threads = [threading.Thread(target=engine, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = [k for d in done for k in d]
    assert sorted(keys) == sorted(p.key for p in run.points) and len(run.rows) == len(run.points)
