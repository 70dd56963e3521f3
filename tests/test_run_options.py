"""Every run option is declared once (model/options.py): the commands that take it, the form's
order, what a saved kernel time says of it and the words for the L2 follow from the declaration."""

from __future__ import annotations

import dataclasses

from fakes import RECORDED
from measured import flushed, measured
from rich.console import Console

from tui.app.widgets.config_form import measured_as
from tui.app.widgets.summary import lead_text
from tui.cli.main import main
from tui.model.options import (
    FORM_OPTIONS,
    MEASURED,
    OPTION,
    OPTIONS,
    PLANS,
    RunOptions,
    TimingOptions,
    measured_under,
)
from tui.model.results import TimingStats, l2_words


def declared(group: str) -> list[str]:
    return [o.name for o in OPTIONS if o.cli == group]


def taken(command: str) -> list[str]:
    """The run options a command takes, by name, in its --help order."""
    params = main.get_command(None, command).params  # imported when first named
    return [p.name for p in params if p.name in OPTION]


def test_each_command_takes_its_groups_options_in_their_declared_order():
    assert declared(MEASURED) == ["replays", "l2_flush", "regime", "seed", "run_anyway", "plan_cache"]
    assert declared(PLANS) == ["autotune", "check", "cross_check"]
    for command in ("run", "sweep"):
        names = taken(command)
        for group in (MEASURED, PLANS):
            assert [n for n in names if OPTION[n].cli == group] == declared(group), command
    check = taken("check")
    assert [n for n in check if OPTION[n].cli == MEASURED] == declared(MEASURED)
    assert "autotune" not in check and "cross_check" in check and "peers" in check


def test_the_form_shows_its_choice_first_then_its_ticks_in_their_declared_order():
    assert [o.name for o in FORM_OPTIONS] == ["regime", "l2_flush", "autotune", "peers", "run_anyway"]


def test_a_saved_kernel_time_says_the_options_it_was_measured_under():
    fields = {f.name for f in dataclasses.fields(TimingStats)}
    assert all(o.recorded in fields for o in OPTIONS if o.recorded)
    result = flushed(measured(RECORDED, regime="sustained"))
    timed = result.forward.timing
    assert measured_under(timed) == {"l2_flush": True, "regime": "sustained"}
    options = measured_as(result, RunOptions(autotune=False))
    assert options.timing == TimingOptions(l2_flush=True, regime="sustained") and not options.autotune
    warm = measured(RECORDED, regime="burst")
    assert measured_as(warm, options).timing == TimingOptions(regime="burst")


def test_the_l2_is_said_warm_or_flushed_and_by_how_much():
    timed = measured(RECORDED).forward.timing
    assert (timed.l2_state, l2_words(timed)) == ("warm", "warm")
    hot = flushed(measured(RECORDED)).forward.timing
    assert (hot.l2_state, l2_words(hot)) == ("flushed", "flushed, 100.0 MiB before each execution")
    assert l2_words(dataclasses.replace(hot, l2_flush_bytes=None)) == "flushed"
    console = Console(record=True, width=200)
    console.print(lead_text(flushed(measured(RECORDED))))
    assert "L2 flushed" in console.export_text() and "L2 warm" not in console.export_text()
