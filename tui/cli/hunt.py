"""`sdpa-explorer hunt`: random hazardous configurations run on the GPU, every output checked
in fp32 and fp64, each failure shrunk to its smallest form and kept once (tui.jobs.hunt, which the
Hunt pane drives too). The table of findings goes to stdout, the progress to stderr; each finding
gets a bundle folder under --out. Exit 1 when something was found, 0 when nothing was.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from rich.markup import escape

from ..jobs.hunt import DEFAULT_BUDGET_S, Hunt, HuntOptions
from ..jobs.hunt_draw import FOCUS, parse_focus
from ..jobs.hunt_findings import Finding, default_folder, findings_table, write_bundle
from ..model.config import SEED_MAX
from ..model.results import RunResult
from ..model.search_results import parse_budget
from ..model.statuses import STATUS_CANCELLED
from ..model.whose import CUDNN
from . import common
from .common import EXIT_FAIL, EXIT_OK, fail_usage, say_error, terminal


def _budget(_ctx, _param, value: str) -> float:
    try:
        return parse_budget(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _focus(_ctx, _param, value: str | None) -> tuple[str, ...]:
    try:
        return parse_focus(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.option("--budget", "budget_s", default=f"{DEFAULT_BUDGET_S / 60:g}m", callback=_budget, show_default=True,
              help="the whole hunt's time, shrinking and bundles included: 90s, 6m, 1h")  # fmt: skip
@click.option("--seed", type=click.IntRange(0, SEED_MAX), default=0, show_default=True,
              help="the draws' seed: the same seed, the same configurations")  # fmt: skip
@click.option("--focus", callback=_focus, metavar="LIST",
              help="features every draw has, a comma list of " + ", ".join(FOCUS))  # fmt: skip
@click.option("--max-configs", type=click.IntRange(1), default=None,
              help="stop drawing after this many configurations (default: the budget decides)")  # fmt: skip
@click.option("--record", is_flag=True, help="add cuDNN's findings to the known issues as wrong results")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="the folder for the findings' bundles (default: a new one in the tool's data folder)")  # fmt: skip
def hunt(budget_s: float, seed: int, focus: tuple[str, ...], max_configs: int | None, record: bool,
         out_dir: str | None) -> None:  # fmt: skip
    """Hunt for wrong answers: random configurations with hazards (one query with grouped heads,
    lengths 64 mod 128 under a mask, head counts at their limits, NaN in padded parts, extreme
    scores) run in the engine process, each failure shrunk to the smallest configuration that
    fails the same way, said whose bug it is, and bundled once for a report."""
    folder = Path(out_dir) if out_dir else default_folder(seed)
    if out_dir is not None and folder.exists() and not folder.is_dir():
        fail_usage([f"--out: {out_dir} is not a folder"])
    err = terminal(stderr=True)
    started = time.monotonic()
    job = Hunt(HuntOptions(budget_s, seed, focus, max_configs), on_finding=lambda f: _found(f, err))
    with common.engine_session() as session:
        if session.ready() is None:
            say_error(f"the engine process cannot start: {session.down}")
            sys.exit(EXIT_FAIL)
        _drive(job, session, err)
    _report(job, folder, record, time.monotonic() - started)
    sys.exit(EXIT_FAIL if job.findings else EXIT_OK)


def _found(finding: Finding, err) -> None:
    """A new finding said as it comes (one seen again is counted in the table)."""
    if finding.count == 1:
        err.print(
            f"finding {finding.number}: {escape(finding.words())} ({finding.whose.who}'s)", soft_wrap=True
        )


def _drive(job: Hunt, session, err) -> None:
    """Each of the hunt's runs in the session, its words on the status line; Ctrl+C stops the
    drawing and the shrinking, keeping what was found."""
    ask = job.first()
    with err.status("hunting") as status:
        while ask is not None:
            status.update(escape(f"{job.elapsed_s:.0f}/{job.options.budget_s:.0f} s  {ask.words}"))
            try:
                result = session.run(ask.config, ask.options)
            except KeyboardInterrupt:  # the run under way is stopped at its next step, not waited for
                job.stop()
                session.client.cancel()
                result = RunResult(config=ask.config, status=STATUS_CANCELLED, message="stopped when asked")
            ask = job.answered(result)


def _report(job: Hunt, folder: Path, record: bool, wall_s: float) -> None:
    out, err = terminal(), terminal(stderr=True)
    out.print(f"hunt seed {job.options.seed}: {job.drawn} configurations in {wall_s:.0f} s ({job.tally_words()}); "
              f"{len(job.findings)} finding(s); {escape(job.end_words())}", soft_wrap=True)  # fmt: skip
    if job.refusals:
        top = "; ".join(f"{n} x {escape(words)}" for words, n in job.refusals.most_common(3))
        out.print(f"cuDNN's refusals, the most frequent: {top}", soft_wrap=True)
    if not job.findings:
        return
    out.print(findings_table(job.findings))
    for f in job.findings:
        try:
            where = write_bundle(f, folder)
        except OSError as exc:
            say_error(
                f"--out: cannot write the bundle of finding {f.number} in {folder}: {exc.strerror or exc}"
            )
            continue
        err.print(f"finding {f.number}: {escape(str(where))}", soft_wrap=True)
    if record:
        _record([f for f in job.findings if f.whose.who == CUDNN])


def _record(findings: list[Finding]) -> None:
    """cuDNN's findings kept as known wrong results (store/known_issues.py: the form marks them)."""
    from ..store.known_issues import record_wrong_result

    err = terminal(stderr=True)
    for f in findings:
        try:
            env = f.result.environment or f.first.environment
            key = record_wrong_result(f.shrunk.minimal, dict(f.shrunk.signature), f.words(), env, f.bundle)
        except (OSError, ValueError) as exc:
            say_error(f"--record: finding {f.number} was not recorded: {exc}")
            continue
        err.print(f"recorded finding {f.number} as the known issue {escape(key)}", soft_wrap=True)
    if not findings:
        err.print("--record: no finding is cuDNN's: nothing recorded")
