"""`sdpa-explorer sweep` and `sdpa-explorer merge`: a grid of configurations through one engine
session, each point a row written as it finishes, so that neither a Ctrl+C, a killed job nor a
second host loses a finished point. The grid, the rows and their files are tui.jobs.sweep's."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from ..jobs.sweep import (
    FAILED_STATUSES,
    SweepError,
    grid,
    merge_rows,
    parse_shard,
    parse_vary,
    points_table,
    prepare_resume,
    shard,
)
from ..jobs.sweep_csv import csv_text
from ..jobs.sweep_run import SweepRun
from ..store.reading import SWEEP_ROW, ParseError, ReadError, read_check_output, read_json_lines
from . import common
from .common import EXIT_FAIL, EXIT_OK, fail_usage, say_error
from .options import (
    config_from_options,
    config_options,
    history_option,
    measure_options,
    peers_option,
    regime_of,
    run_options,
    timing_options,
)
from .sweep_workers import PointWorkers
from .sweep_workers import why as _why

EXIT_INTERRUPTED = 130  # what a shell reports for a command stopped by Ctrl+C


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _path_problems(out: str | None, csv_path: str | None, plot: str | None = None) -> list[str]:
    """Before any run: where the rows and the chart go can be written (said now, not after hours
    of work), and the chart can be drawn here (matplotlib)."""
    from ..jobs.sweep_plot import plot_problem
    from ..store.files import write_problem

    problems = [f"--plot: {why}" for why in [plot_problem(plot) if plot else ""] if why]
    for option, path in (("--out", out), ("--csv", csv_path), ("--plot", plot)):
        if path == "":
            problems.append(f"{option}: empty; give a file name")
        elif path is not None and (why := write_problem(path)):
            problems.append(f"{option}: cannot write {path}: {why}")
    return problems


def _resume_problems(out: str | None, resume: bool) -> list[str]:
    """An earlier sweep's rows are never replaced unasked."""
    if resume and not out:
        return ["--resume: needs --out, the file of the sweep to go on with"]
    if out and not resume and os.path.isfile(out) and os.path.getsize(out):
        return [f"--out: {out} already holds a sweep; add --resume to go on with it, or remove it"]
    return []


def resume_command(ctx: click.Context) -> str:
    """The command line that goes on with this sweep: the options given, and --resume."""
    words = ctx.command_path.split()
    for param in ctx.command.params:
        if (
            not isinstance(param, click.Option)
            or ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE
        ):
            continue
        value = ctx.params[param.name]
        if param.is_flag:
            words += [param.opts[0]] if value else param.secondary_opts[:1]
        else:
            words += [w for v in (value if param.multiple else (value,)) for w in (param.opts[0], str(v))]
    return shlex.join(words if "--resume" in words else [*words, "--resume"])


def _earlier_rows(out: str) -> list[dict]:
    """The rows a sweep being resumed already wrote (none where its file is not there yet)."""
    if not os.path.exists(out):
        return []
    rows, bad = prepare_resume(Path(out))
    if bad:
        _err().print(f"[yellow]{lines_words(bad)} of {escape(out)} did not read; left in place[/yellow]")
    return rows


def lines_words(numbers: list[int], shown: int = 5) -> str:
    """The lines that did not read, by number: "line 2", "lines 2 and 7", "lines 1, 2, ... and 9 more"."""
    if len(numbers) == 1:
        return f"line {numbers[0]}"
    head = ", ".join(str(n) for n in numbers[: min(shown, len(numbers) - 1)])
    rest = len(numbers) - min(shown, len(numbers) - 1)
    return f"lines {head} and " + (str(numbers[-1]) if rest == 1 else f"{rest} more")


def _write_plot(path: str | None, rows: list[dict]) -> bool:
    """The chart of the rows (jobs/sweep_plot.py), said in one line; whether it was written."""
    if not path:
        return True
    from ..jobs.sweep_plot import save_chart

    words, ok = save_chart(rows, path)
    if not ok:
        say_error(f"--plot: {words}")
        return False
    _err().print(escape(words))
    return True


def _write_csv(path: str | None, rows: list[dict]) -> None:
    """The rows as CSV; a failure now (the path was checked before the runs) is said, and the
    rows stay in --out."""
    if path:
        from ..store.files import atomic_write

        try:
            atomic_write(path, csv_text(rows))
        except OSError as exc:
            say_error(f"--csv: cannot write {path}: {_why(exc)}")
            return
        _err().print(f"wrote {len(rows)} rows to {escape(path)}")


@click.command()
@config_options
@timing_options
@click.option(
    "--vary",
    "varies",
    multiple=True,
    metavar="FIELD=VALUES",
    help="a field (or shorthand: s, d, h) and its values: 64,128 or a range 1024..32768x2 (geometric) or "
    "1..8+1 (arithmetic); twice: every combination",
)
@click.option(
    "--out", type=click.Path(dir_okay=False), help="JSON lines, one a point, each written as it finishes"
)
@click.option(
    "--csv", "csv_path", type=click.Path(dir_okay=False), help="the rows as CSV, written at the end"
)
@click.option("--plot", metavar="FILE.png|svg", help="the chart of the points (matplotlib: --extra plots)")
@click.option("--resume", is_flag=True, help="skip the points already in --out and append the others")
@click.option(
    "--shard", "shard_text", metavar="I/N", help="run only slice I of N (0 <= I < N), e.g. a Slurm array task"
)
@click.option(
    "--gpus", metavar="all|LIST", help="spread the points over these GPUs (all, or 0,1), an engine each"
)
@measure_options
@peers_option
@history_option
@click.pass_context
def sweep(
    ctx,
    varies,
    out,
    csv_path,
    plot,
    resume,
    shard_text,
    gpus,
    **values,
) -> None:
    """Run the configuration given by the options at every point of a grid (--vary), one engine
    process for all; each point is one row (status, kernel time, TFLOPS, error, share of peak)."""
    base = config_from_options(values)
    mine = _points(base, varies, shard_text)
    devices = _checked_outputs(out, csv_path, resume, gpus, plot)
    options = run_options(values, regime=regime_of(values))
    earlier = _earlier_rows(out) if resume else []
    done = {r["key"] for r in earlier}
    todo = [p for p in mine if p.key not in done]
    if done:
        _err().print(
            f"{len(mine) - len(todo)} of {len(mine)} points already in {escape(out)}; running {len(todo)}"
        )
    rows, interrupted, unwritten = _run_points(todo, options, out, devices, values.get("preset"))
    order = {p.key: p.index for p in mine}  # this grid's order (a resumed file may hold others)
    shown = sorted((r for r in earlier + rows if r["key"] in order), key=lambda r: order[r["key"]])
    if unwritten:  # --out could not take another line: what it holds is whole, and goes on later
        say_error(
            f"--out: cannot write {out}: {unwritten}; stopped with {len(shown)} of {len(mine)} points "
            f"kept in it; go on with: {resume_command(ctx)}"
        )
        sys.exit(EXIT_FAIL)
    _write_csv(csv_path, earlier + rows)
    if interrupted:
        kept = (
            f"kept in {escape(out)}; go on with:\n{escape(resume_command(ctx))}"
            if out
            else "no --out kept them"
        )
        _err().print(f"[yellow]interrupted:[/yellow] {len(shown)} of {len(mine)} points done, {kept}")
        sys.exit(EXIT_INTERRUPTED)
    part = f", slice {shard_text}" if shard_text else ""
    title = f"{len(shown)} points{part}: {' x '.join(v.split('=')[0].strip() for v in varies)}; the rest as {base.label()}"
    Console(highlight=False).print(points_table(shown, title))
    plotted = _write_plot(plot, shown)
    sys.exit(EXIT_FAIL if not plotted or any(r["status"] in FAILED_STATUSES for r in shown) else EXIT_OK)


def _points(base, varies: tuple[str, ...], shard_text: str | None) -> list:
    """The grid's points over `base` (this slice of them with --shard); bad input exits 2."""
    if not varies:
        fail_usage(["--vary: give at least one FIELD=VALUES, e.g. --vary s=1024..8192x2"])
    try:
        points = grid(base, [parse_vary(text, base) for text in varies])
        return shard(points, *parse_shard(shard_text)) if shard_text is not None else points
    except SweepError as exc:
        fail_usage([str(exc)])
        raise AssertionError from exc  # unreachable: fail_usage exits


def _checked_outputs(
    out: str | None, csv_path: str | None, resume: bool, gpus: str | None, plot: str | None = None
) -> list[int] | None:
    """Before any point runs: the files it writes and the GPUs it asks for, every problem at once
    (exit 2); the GPUs to spread the points over (None: one engine)."""
    problems = _path_problems(out, csv_path, plot) + _resume_problems(out, resume)
    devices = None
    if gpus:
        from ..jobs import fleet

        try:
            devices = fleet.parse_gpus(gpus, fleet.visible_gpus())
        except ValueError as exc:
            problems.append(f"--gpus: {exc}")
    if problems:
        fail_usage(problems)
    return devices


def _run_points(
    points, options, out: str | None, gpus: list[int] | None = None, preset: str | None = None
) -> tuple[list[dict], bool, str | None]:
    """The points through one engine session (or one a GPU, each taking the next point as it
    finishes one), each row appended to `out` and flushed as it finishes, then its run kept in the
    history (unless --no-history); the rows kept, whether Ctrl+C stopped the sweep (every
    finished point is kept; the running ones are dropped), and why `out` could not take a row,
    which stops the sweep too (None: it took every one)."""
    if not points:
        return [], False, None
    from ..jobs.fleet import gpu_session
    from ..store.files import LineFile

    try:
        sink = LineFile(out) if out else None
    except OSError as exc:
        return [], False, _why(exc)

    run = SweepRun(points, options)
    sessions = [common.engine_session] if gpus is None else [lambda g=g: gpu_session(g) for g in gpus]
    names = [""] if gpus is None else [f"GPU {g} " for g in gpus]
    workers = PointWorkers(run, sink, _err(), None if options.no_history else _history_keeper(preset))
    workers.run_all(sessions, names)
    _say_down(workers.down, len(sessions))
    return run.rows, workers.interrupted.is_set(), workers.unwritten[0] if workers.unwritten else None


def _say_down(down: list[str], engines: int) -> None:
    """The engines that could not start: a failure when none could, else their points ran on the others."""
    if down and len(down) == engines:
        for line in down:
            _err().print(f"[red]FAIL[/red] {escape(line)}")
        sys.exit(EXIT_FAIL)
    for line in down:
        _err().print(f"[yellow]{escape(line)}[/yellow]: its points ran on the other GPUs")


def _history_keeper(preset: str | None):
    """Each point's run into the history, as `run` keeps its own; after one failure (a read-only
    disk), one warning and no more tries: the history never fails a sweep."""
    from ..store.history import record

    keeping = [True]

    def remember(result) -> None:
        if keeping[0]:
            kept = record(result, preset, source="sweep", warn=lambda line: _err().print(line, markup=False))
            keeping[0] = kept is not None

    return remember


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), help="write the merged rows here as JSON lines")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="write the merged rows here as CSV")
@click.option(
    "--plot", metavar="FILE.png|svg", help="the chart of the merged points (matplotlib: --extra plots)"
)
def merge(files, out, csv_path, plot) -> None:
    """Join sweep outputs (slices from several hosts, or a sweep and its resumption): one row a
    point, said where two files disagree on one; then the table of the points. Or join many
    hosts' `check --json` outputs: one table of every GPU, stragglers across hosts flagged."""
    problems = _path_problems(out, csv_path, plot)
    if problems:
        fail_usage(problems)
    checks = _check_files(files)
    if checks:
        sys.exit(_merge_checks(checks, out))
    sources = []
    for name in files:
        try:
            rows, bad = read_json_lines(name, SWEEP_ROW)  # store/reading.py: a FIFO never blocks
        except ReadError as exc:
            fail_usage([f"merge: {exc}"])
        if bad:
            _err().print(f"[yellow]{lines_words(bad)} of {escape(name)} did not read[/yellow]")
        sources.append((name, rows))
    merged, disagreements = merge_rows(sources)
    for line in disagreements:
        _err().print(f"[yellow]{escape(line)}[/yellow]")
    if out:
        from ..store.files import atomic_write

        try:
            atomic_write(out, "".join(json.dumps(r) + "\n" for r in merged))
        except OSError as exc:  # the file as it was: a full disk, or something not a file put there
            say_error(f"--out: cannot write {out}: {_why(exc)}")
            sys.exit(EXIT_FAIL)
        _err().print(f"wrote {len(merged)} rows to {escape(out)}")
    _write_csv(csv_path, merged)
    Console(highlight=False).print(points_table(merged, f"{len(merged)} points from {len(files)} file(s)"))
    sys.exit(EXIT_OK if _write_plot(plot, merged) else EXIT_FAIL)


def _check_files(files) -> list[tuple[str, dict]]:
    """The files as `check --json` outputs, when every one is (else none: they are sweeps)."""
    found = []
    for name in files:
        try:
            data = read_check_output(name)
        except (ReadError, ParseError) as exc:
            fail_usage([f"merge: {exc}"])
        if data is not None:
            found.append((name, data))
    if found and len(found) != len(files):
        fail_usage(["merge: give sweep outputs or check --json outputs, not both"])
    return found


def _merge_checks(sources: list[tuple[str, dict]], out: str | None) -> int:
    """Many hosts' checks as one table, a GPU over 5% slower than the others on a case flagged."""
    from ..jobs.fleet import fleet_json, fleet_ok, print_stragglers, runs_from_checks, stragglers

    runs = runs_from_checks(sources)
    slow = stragglers(runs)
    if out:
        from ..store.files import atomic_write

        merged = fleet_json(runs, slow)
        for gpu, run in zip(merged["gpus"], runs, strict=True):
            gpu["where"] = run.title
        atomic_write(out, json.dumps(merged, indent=2) + "\n")
    print_stragglers(Console(highlight=False), runs, slow)
    return EXIT_OK if fleet_ok(runs, slow) else EXIT_FAIL
