"""`sdpa-explorer check`: sanity-check a GPU box with the smoke set and every built-in preset, in
one engine process for all (restarted after a crash), or on several GPUs at once (--gpus)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable

import click
from rich.markup import escape

from ..jobs.check import QUICK_REPLAYS, SMOKE, SMOKE_CASES
from ..model.config import SdpaConfig
from ..model.statuses import STATUS_CPU_ONLY
from . import common
from .common import EXIT_FAIL, EXIT_OK, fail_usage, preset_config, terminal
from .history import CheckRecorder, history_options
from .options import cross_check_option, peers_option, preset_regimes, regime_of, run_options, timing_options


def check_cases(preset_names: tuple[str, ...]) -> list[tuple[str, SdpaConfig]]:
    """The smoke set and every built-in preset; or only the presets named."""
    from ..jobs.check import builtin_cases

    if preset_names:
        return [(name, preset_config(name)) for name in preset_names]
    problems: list[str] = []
    cases = builtin_cases(problems)
    for p in problems:
        terminal(stderr=True).print(f"[yellow]preset skipped:[/yellow] {escape(p)}", soft_wrap=True)
    return cases


@click.command()
@timing_options
@click.option("--preset", "preset_names", multiple=True, help="check only this preset (repeatable)")
@click.option(
    "--quick",
    is_flag=True,
    help=f"the smoke set only, timed over {QUICK_REPLAYS} replays: a box's check in seconds",
)
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@click.option(
    "--gpus", metavar="all|LIST", help="check these GPUs at once (all, or 0,1), flagging stragglers"
)
@peers_option
@cross_check_option
@history_options(baselines=True)
def check(preset_names, quick, as_json, gpus, **values) -> None:
    """Sanity-check this GPU box: the smoke set and every built-in preset, one engine process for
    all (restarted after a crash); exit non-zero on any mismatch, failure or unavailable GPU.
    Without a GPU, cuDNN's own validate() still judges every case."""
    from ..jobs.check import known_wrong, plan_cache_counts, run_cases

    if quick and preset_names:
        fail_usage(["--quick checks the smoke set only: leave out --preset"])
    cases = [(SMOKE, c) for c in SMOKE_CASES] if quick else check_cases(preset_names)
    if quick:
        values["replays"] = min(values["replays"], QUICK_REPLAYS)
    recorder = CheckRecorder(values, gpus)  # the history, and the baseline: read (or refused) now
    regimes = preset_regimes()  # read once, not once a case

    def options_for(name: str, env):
        regime = regime_of({**values, "preset": name}, regimes)
        # with peers, every plan is timed too: the fastest way is of cuDNN's fastest plan and theirs
        peers = values.get("peers") or ()
        return run_options(values, regime=regime, autotune=bool(peers), check=env.gpu_available, peers=peers)

    if gpus:
        sys.exit(check_gpus(gpus, cases, options_for, as_json, values["seed"], recorder.add))
    with common.engine_session() as session:
        env = session.ready()
        if env is None:
            _fail_run([f"the engine process cannot start: {session.down}"], as_json)
        rows, passed, known = run_cases(
            session,
            cases,
            lambda name: options_for(name, env),
            terminal(),
            as_json,
            values["seed"],
            recorder.add,
        )
        restarts = (session.restarts, session.restart_reasons)
    failed = len(cases) - passed - known
    from ..jobs.fleet import identity_of

    summary = {
        "gpu": identity_of(env),
        "gpu_available": env.gpu_available,
        "passed": passed,
        "failed": failed,
        "known": known,  # this cuDNN on this GPU is known to refuse it, or to get it wrong (known_wrong)
        "restarts": restarts[0],
        "plan_cache": plan_cache_counts(result for _name, result in recorder.cases),
        **recorder.finish(as_json),
    }
    if not env.gpu_available:
        summary["reason"] = env.unavailable_reason
    if as_json:
        click.echo(json.dumps({**summary, "restart_reasons": restarts[1], "cases": rows}, indent=2))
    elif not env.gpu_available:
        valid = sum(r["status"] == STATUS_CPU_ONLY for r in rows)
        terminal().print(
            f"[red]FAIL[/red] no usable GPU: {escape(env.unavailable_reason)}; cuDNN's validate() "
            f"accepted {valid} of {len(cases)} cases",
            soft_wrap=True,
        )
    else:
        again = f"; the engine process was restarted {restarts[0]} time(s)" if restarts[0] else ""
        cache = summary["plan_cache"]
        cached = f"; graphs: {cache['loaded']} loaded from the plan cache, {cache['built']} built"
        wrong = sum(known_wrong(result) for _name, result in recorder.cases)
        refused = f", {known - wrong} known to be refused here" if known - wrong else ""
        refused += f", {wrong} known wrong results here" if wrong else ""
        terminal().print(f"{passed} passed, {failed} failed{refused}{again}{cached}")
    sys.exit(EXIT_OK if failed == 0 and env.gpu_available and recorder.passed else EXIT_FAIL)


def _fail_run(messages: list[str], as_json: bool) -> None:
    """Nothing could be run at all: say why and exit 1."""
    if as_json:
        click.echo(json.dumps({"gpu_available": False, "reason": "; ".join(messages), "cases": []}, indent=2))
    else:
        for m in messages:
            terminal().print(f"[red]FAIL[/red] {escape(m)}")
    sys.exit(EXIT_FAIL)


def check_gpus(
    text: str, cases: list, options_for: Callable, as_json: bool, seed: int, on_result: Callable | None = None
) -> int:
    """`check --gpus`: the exit code (1 on a failure, a GPU that could not start, or a straggler)."""
    from ..jobs.fleet import (
        fleet_json,
        fleet_ok,
        gpu_session,
        parse_gpus,
        print_stragglers,
        run_on_gpus,
        stragglers,
        visible_gpus,
    )

    try:
        gpus = parse_gpus(text, visible_gpus())
    except ValueError as exc:
        fail_usage([f"--gpus: {exc}"])
    console, lock = terminal(), threading.Lock()

    def say(line: str) -> None:
        if not as_json:
            with lock:
                console.print(line, soft_wrap=True)

    runs = run_on_gpus(gpus, cases, options_for, say, seed, lambda g: gpu_session(g), on_result)
    slow = stragglers(runs)
    if as_json:
        print(json.dumps(fleet_json(runs, slow), indent=2))
    else:
        print_stragglers(console, runs, slow)
    return EXIT_OK if fleet_ok(runs, slow) else EXIT_FAIL
