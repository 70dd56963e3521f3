"""What the commands share: the consoles, bad input said on one line with exit 2, the engine
session they run in, a saved result or kept run read by file or id, and the exports a measuring
command writes (checked before the run, written after it)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from ..model.config import SdpaConfig
from ..model.results import RunResult

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def terminal(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False)


def fail_usage(messages: list[str]) -> None:
    """Bad input: each problem on one line (never wrapped: scripts read them), exit 2."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for m in messages:
        err.print(f"[red]error:[/red] {escape(m)}")
    sys.exit(EXIT_USAGE)


def check_export_paths(paths: dict) -> None:
    """Before the run: a bad export path is bad input, said before minutes of work, not after."""
    from ..present.export import path_problems

    problems = path_problems(paths)
    if problems:
        fail_usage(problems)


def save_exports(result, seed: int, paths: dict) -> None:
    """Each export written; a failure (something not a file appeared since the check) exits 2."""
    from ..present.export import write_export

    for kind, path in ((k, p) for k, p in paths.items() if p):
        try:
            said = write_export(kind, path, result, seed)
        except OSError as exc:
            fail_usage([f"--save-{kind}: cannot write {path}: {exc.strerror or exc}"])
        terminal(stderr=True).print(escape(said), soft_wrap=True)


def engine_session():
    """The engine process the commands run their configurations in."""
    from ..process.session import EngineSession

    return EngineSession()


def preset_config(name: str) -> SdpaConfig:
    from ..store.presets import find

    if not name.strip():
        fail_usage(["--preset: empty; name a preset (`sdpa-explorer presets` lists them)"])
    try:
        return find(name).config
    except KeyError as exc:
        fail_usage([f"--preset: {exc.args[0]}"])
    except ValueError as exc:
        fail_usage([f"--preset: {exc}"])
    raise AssertionError  # unreachable: fail_usage exits


def read_result(path: str, option: str):
    """A saved RunResult (any schema this version reads); exit 2 naming the file when it is not one."""
    from pathlib import Path

    from ..model.config import ConfigError

    if path.isdigit() and not Path(path).exists():  # a run's id in the history
        return run_from_history(int(path), option)
    try:
        return RunResult.from_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        fail_usage([f"{option}: cannot read {path}: {exc.strerror or exc}"])
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        fail_usage([f"{option}: {path} is not a saved result: {exc}"])
    raise AssertionError  # unreachable: fail_usage exits


def run_from_history(run_id: int, option: str) -> RunResult:
    """A run kept in the history; exit 2 naming the id when there is none."""
    from ..store.history import History, HistoryError

    try:
        with History() as history:
            return history.load(run_id)
    except KeyError as exc:
        fail_usage([f"{option}: {exc.args[0]}"])
    except HistoryError as exc:
        fail_usage([f"{option}: {exc}"])
    raise AssertionError  # unreachable: fail_usage exits
