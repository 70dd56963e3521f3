"""`sdpa-explorer history` and `compare`, and what `run`, `check` and `show` keep or read of the
history (tui/store/history.py) and of a check's baseline (tui/store/baseline.py).

The commands only call in here: every run is kept unless --no-history, an id is read where a file is,
and `check --baseline` turns into exit 1 when a case got slower or started failing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.text import Text

from ..model import results, statuses
from ..model.fields import quote
from ..present.comparison import comparison_renderables, environment_words
from ..present.tables import FIGURE, NAME, WORDS, FitTable
from .common import EXIT_FAIL, fail_usage, terminal
from .options import history_option

STATUSES = tuple(v for k, v in vars(statuses).items() if k.startswith("STATUS_"))
FEW_PRESETS = 5  # the presets named when none of the runs came from the one asked for


def history_options(baselines: bool = False):
    """--no-history (run, check) and, for check, --baseline and --save-baseline."""
    opts = [
        history_option,  # declared with the run options (model/options.py)
    ]
    if baselines:
        opts += [
            click.option(
                "--save-baseline",
                type=click.Path(dir_okay=False),
                help="also write every case's result here, to check against after an upgrade",
            ),
            click.option(
                "--baseline",
                type=click.Path(dir_okay=False),
                help="flag every case slower than in this saved baseline (or newly failing): exit 1",
            ),
        ]

    def add(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return add


def _warn(line: str) -> None:
    terminal(stderr=True).print(line, markup=False, soft_wrap=True)


def record_run(result: results.RunResult, values: dict) -> None:
    """`run`'s result into the history, unless --no-history; a failure only warns."""
    if not values.get("no_history"):
        from ..store.history import record

        record(result, values.get("preset"), source="run", warn=_warn)


class CheckRecorder:
    """What `check` keeps of its cases: each in the history as it comes, all of them as a
    baseline file, and their comparison with an earlier baseline. Bad options exit 2 before
    anything runs."""

    def __init__(self, options: dict, gpus: str | None) -> None:
        from ..store.baseline import BaselineError, read_baseline
        from ..store.files import write_problem

        self.keep_history = not options.get("no_history")
        self.save_path: str | None = options.get("save_baseline")
        given = [f"--{o.replace('_', '-')}" for o in ("baseline", "save_baseline") if options.get(o)]
        if gpus and given:
            fail_usage([f"{' and '.join(given)} check one GPU, not --gpus: run it once per GPU, "
                         "with CUDA_VISIBLE_DEVICES=N"])  # fmt: skip
        if self.save_path is not None and (why := write_problem(self.save_path)):
            fail_usage([f"--save-baseline: cannot write {self.save_path}: {why}"])
        self.baseline = None
        if options.get("baseline"):
            try:
                self.baseline = read_baseline(options["baseline"])
            except BaselineError as exc:
                fail_usage([f"--baseline: {exc}"])
        self.cases: list[tuple[str, results.RunResult]] = []
        self.report = None

    def add(self, name: str, result: results.RunResult) -> None:
        from ..jobs.check import SMOKE
        from ..store.history import record

        self.cases.append((name, result))
        if self.keep_history:  # after one failure, one warning: not one a case
            kept = record(result, None if name == SMOKE else name, source="check", warn=_warn)
            self.keep_history = kept is not None

    def finish(self, as_json: bool) -> dict[str, Any]:
        """Compare with the baseline and save the new one; what `--json` adds to its summary."""
        from ..store.baseline import against_baseline, save_baseline

        said: dict[str, Any] = {}
        if self.baseline is not None:
            self.report = against_baseline(self.baseline, self.cases)
            said["baseline"] = self.report.to_dict()
            if not as_json:
                for line in baseline_lines(self.report):
                    terminal().print(line, soft_wrap=True)
        if self.save_path is not None:
            try:
                save_baseline(self.save_path, self.cases)
            except OSError as exc:
                fail_usage([f"--save-baseline: cannot write {self.save_path}: {exc.strerror or exc}"])
            said["baseline_saved"] = self.save_path
            timed = sum(any(p.timing for p in r.passes) for _, r in self.cases)
            _warn(f"wrote the baseline of {len(self.cases)} cases ({timed} timed) to {self.save_path}")
        return said

    @property
    def passed(self) -> bool:
        """No case got slower than the baseline or started failing."""
        return self.report is None or not self.report.flagged


def baseline_lines(report) -> list[str]:
    """The check against its baseline for the terminal: counts, what changed in the environment,
    then a line a flagged, not comparable or newly passing case (grep finds each)."""
    from ..present.format import us
    from ..store.baseline import FAILING, NEW, NOT_COMPARABLE, NOW_PASSES, SLOWER, WITHIN

    counts = "; ".join(  # what was flagged always, the rest where there is any
        f"{report.count(v)} {v}"
        for v in (SLOWER, FAILING, WITHIN, NOT_COMPARABLE, NOW_PASSES, NEW)
        if v in (SLOWER, FAILING) or report.count(v)
    )
    lines = [escape(f"baseline {report.path} (saved {report.created or '?'}): {counts}")]
    lines.append(escape(environment_words(report.environment)))
    marks = {SLOWER: "[red]SLOWER[/red]", FAILING: "[red]FAILING[/red]",
             NOT_COMPARABLE: "[yellow]NOT COMPARABLE[/yellow]", NOW_PASSES: "[green]NOW PASSES[/green]"}  # fmt: skip
    for v in report.verdicts:
        if v.verdict not in marks:
            continue
        what = f"{v.case} {v.label}" + (f" {v.kind}" if v.kind else "")
        if v.verdict == SLOWER:
            words = (f"{us(v.before_us)} then, {us(v.after_us)} now: {v.change_pct:+.1f}% "
                     f"(allowed {v.allowed_pct:.1f}%, {v.why})")  # fmt: skip
        else:
            words = v.why
        lines.append(f"{marks[v.verdict]} {escape(what)}: {escape(words)}")
    if report.not_run:
        lines.append(escape(f"{report.not_run} baseline case(s) not run by this check"))
    return lines


@click.command()
@click.option("--json", "as_json", is_flag=True, help="print the runs as JSON")
@click.option("--preset", help="only the runs of this preset")
@click.option("--status", type=click.Choice(STATUSES), help="only the runs that ended so")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="the newest N")
def history(as_json: bool, preset: str | None, status: str | None, limit: int) -> None:
    """The runs kept in the history, newest first (`show ID` reopens one, `compare A B` two)."""
    from ..store.history import History, HistoryError

    try:
        with History(read_only=True) as store:  # a list needs no write: a read-only disk still lists
            rows = store.runs(limit=limit, preset=preset, status=status)
            total = store.count(preset=preset, status=status)
            none_found = "" if rows else none_found_words(store, preset, status)
    except HistoryError as exc:
        terminal(stderr=True).print(f"[red]Error:[/red] cannot read the history {escape(str(exc))}")
        sys.exit(EXIT_FAIL)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    console = terminal()
    if not rows:
        console.print(none_found, markup=False, soft_wrap=True)
        return
    console.print(history_table(rows, f"History: the newest {len(rows)} of {total} runs ({store.path})"))


def none_found_words(store, preset: str | None, status: str | None) -> str:
    """Why the list is empty: nothing kept yet, or none of the runs kept matches (then the presets
    that have runs, a few)."""
    kept = store.count()
    if not kept:
        return f"no runs kept yet in {store.path}"
    wanted = [w for w in (preset is not None and f"came from preset {quote(preset)}",
                          status and f"ended {status}") if w]  # fmt: skip
    words = f"none of the {kept} runs kept in {store.path} {' and '.join(wanted)}"
    if preset is not None:
        names = store.presets(FEW_PRESETS + 1)
        some = ", ".join(names[:FEW_PRESETS]) + (", ..." if len(names) > FEW_PRESETS else "")
        words += f"; runs came from the presets {some}" if names else "; no run came from a preset"
    return words


def history_table(rows, title: str) -> FitTable:
    """A row a run; the configuration and the GPU wrap at their spaces, the figures never do."""
    from ..present.format import status_style, us

    table = FitTable(title=Text(title), key_words="run")
    for name, kind in (("id", FIGURE), ("when", FIGURE), ("preset: configuration", NAME), ("status", NAME),
                       ("kernel", FIGURE), ("GPU, cuDNN", WORDS)):  # fmt: skip
        # the configuration wraps at its spaces; the GPU wraps too, or leaves for a line under the table
        table.add_column(name, kind, justify="right" if name in ("id", "kernel") else "left",
                         drop=0 if kind == WORDS else None)  # fmt: skip
    for r in rows:
        kernel = us(r.kernel_us) + (f" {r.regime}" if r.kernel_us is not None and r.regime else "")
        run = Text.assemble((f"{r.preset}: ", "bold") if r.preset else "", r.label)
        where = ", ".join(w for w in (r.gpu, r.cudnn and f"cuDNN {r.cudnn}") if w) or "-"
        table.add_row(str(r.id), r.when[:16], run, Text(r.status, style=status_style(r.status)), Text(kernel),
                      Text(where))  # fmt: skip
    return table


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON")
def compare(a: str, b: str, as_json: bool) -> None:
    """Run B against run A (history ids, or files saved with `run --save-json`): each pass's
    kernel time and each plan's with the change in %, errors, statuses, and what differs in the
    configuration and the environment."""
    from ..store.history import compare as comparison_of
    from .common import read_result  # a file, or an id (all digits, and no such file)

    found = comparison_of(read_result(a, "compare A"), read_result(b, "compare B"))
    if as_json:
        click.echo(json.dumps({"a": a, "b": b, **found.to_dict()}, indent=2))
        return
    console = terminal()
    for part in comparison_renderables(found, _name(a), _name(b)):
        console.print(part, soft_wrap=True)


def _name(text: str) -> str:
    return f"#{text}" if text.isdigit() and not Path(text).exists() else text
