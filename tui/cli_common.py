"""What the commands share: the consoles, bad input said on one line with exit 2, the exports a
measuring command writes (checked before the run, written after it), and the timing options of
the commands that measure."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markup import escape

from .engine.config import SEED_MAX
from .engine.results import REGIMES

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False)


def _fail_usage(messages: list[str]) -> None:
    """Bad input: each problem on one line (never wrapped: scripts read them), exit 2."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for m in messages:
        err.print(f"[red]error:[/red] {escape(m)}")
    sys.exit(EXIT_USAGE)


def check_export_paths(paths: dict) -> None:
    """Before the run: a bad export path is bad input, said before minutes of work, not after."""
    from .export import path_problems

    problems = path_problems(paths)
    if problems:
        _fail_usage(problems)


def save_exports(result, seed: int, paths: dict) -> None:
    """Each export written; a failure (something not a file appeared since the check) exits 2."""
    from .export import write_export

    for kind, path in ((k, p) for k, p in paths.items() if p):
        try:
            said = write_export(kind, path, result, seed)
        except OSError as exc:
            _fail_usage([f"--save-{kind}: cannot write {path}: {exc.strerror or exc}"])
        _console(stderr=True).print(escape(said), soft_wrap=True)


# ---- the options of the commands that measure (run, check) -----------------------------------
def timing_options(fn):
    for opt in reversed(
        [
            click.option(
                "--replays", type=int, default=20, show_default=True, help="timed replays of the CUDA graph"
            ),
            click.option(
                "--l2-flush/--no-l2-flush",
                default=False,
                show_default=True,
                help="flush the L2 before each execution (cold-cache kernel time)",
            ),
            click.option(
                "--regime",
                type=click.Choice(REGIMES, case_sensitive=False),
                default=None,
                help="burst: a short run on a rested GPU (published tables); sustained: timed after "
                "2 s of load (a training step). Default: the preset's, else burst",
            ),
            click.option(
                "--seed",
                type=click.IntRange(0, SEED_MAX),
                default=0,
                show_default=True,
                help="random seed of the inputs (0 to 2**63-1)",
            ),
            click.option(
                "--run-anyway",
                is_flag=True,
                help="run a configuration that matches a known issue (it may crash the engine process)",
            ),
            click.option(
                "--cache/--no-cache",
                default=True,
                show_default=True,
                help="load plans built before from the plan cache on disk (`cache` shows it); "
                "--no-cache builds every plan",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def _run_options(replays, l2_flush, regime, autotune, check, seed, anyway, peers=(), cache=True):
    from .engine.options import RunOptions
    from .engine.timing import TimingOptions

    if replays < 1:
        _fail_usage([f"--replays: must be at least 1 (got {replays})"])
    timing = TimingOptions(replays=replays, l2_flush=l2_flush, regime=regime)
    return RunOptions(
        timing=timing,
        autotune=autotune,
        check=check,
        seed=seed,
        run_anyway=anyway,
        peers=peers,
        plan_cache=cache,
    )
