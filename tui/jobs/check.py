"""`sdpa-explorer check`: the sanity check of a GPU box. The smoke set (the seed's GPT-2 shape in
both layouts and dtypes, causal and not, and one GQA case) and every built-in preset, each run
through the same Engine as the dashboard, one line a case."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..model.config import SdpaConfig
from ..model.fastest import declined
from ..model.known_issues import REFUSED, wrong_results
from ..model.results import PassResult, RunResult, TimingStats
from ..model.statuses import (
    FORWARD,
    STATUS_CPU_ONLY,
    STATUS_CRASH,
    STATUS_KNOWN_ISSUE,
    STATUS_MISMATCH,
    STATUS_OK,
)
from ..present.fastest import contender_records, fastest_record, record_cell
from ..present.format import peer_errors, regime_note, regime_style, us, verdict_words, versions_words

SMOKE = "smoke"  # the name of the smoke set's cases (the others are named by their preset)
QUICK_REPLAYS = 5  # check --quick: enough replays for a median, the fewest for a sanity check
SMOKE_CASES: tuple[SdpaConfig, ...] = (
    SdpaConfig(),
    SdpaConfig(layout="BHSD"),
    SdpaConfig(dtype="bf16"),
    SdpaConfig(layout="BHSD", dtype="bf16", causal="none"),
    SdpaConfig(causal="none"),
    SdpaConfig(b=2, h_q=32, h_kv=8, s_q=2048, s_kv=2048, d_qk=128, d_v=128, dtype="bf16"),
)


def builtin_cases(problems_out: list[str]) -> list[tuple[str, SdpaConfig]]:
    """The smoke set, then every built-in preset (a preset that does not load is reported, not run)."""
    from ..store.presets import load_all

    presets, problems = load_all()
    problems_out += [str(p) for p in problems]
    builtins = [(name, p.config) for name, p in sorted(presets.items()) if p.origin == "builtin"]
    return [(SMOKE, c) for c in SMOKE_CASES] + builtins


def pass_figures(p: PassResult) -> dict[str, Any]:
    """A pass's line of the check: kernel time, TFLOPS, the worst output error, the heuristic's plan."""
    errors = [c.cudnn.max_abs for c in p.checks if c.cudnn is not None]
    pick = p.plan(p.pinned_plan if p.pinned_plan is not None else p.heuristic_plan)
    return {
        "kind": p.kind,
        "status": p.status,
        "kernel_us": p.timing.median_us if p.timing else None,
        "regime": p.timing.regime if p.timing else "",  # burst or sustained ('' in files before 2.1)
        "stable": p.timing.stable if p.timing else None,  # False: p90/p10 over 1.03, even when retried
        "tflops": p.tflops,
        "max_abs_error": max(errors) if errors else None,
        "plan": pick.name if pick else "-",
        "fastest": fastest_record(p),  # the fastest way (present/fastest.py); None: no contest
        "contenders": contender_records(p),  # every timed way: cuDNN's plans, forms, peers
    }


def case_row(name: str, result: RunResult) -> dict[str, Any]:
    """One case for `check --json`: the forward's figures at the top level (as scripts read them),
    every pass's in `passes`."""
    passes = [pass_figures(p) for p in result.passes]
    first = {k: v for k, v in passes[0].items() if k not in ("kind", "status")} if passes else {}
    return {
        "case": name,
        "config": result.config.to_dict(),
        "label": result.config.label(),
        "status": result.status,
        "message": result.message,
        **first,
        "passes": passes,
    }


def plan_cache_counts(results: Any) -> dict[str, Any]:
    """How the check's graphs came to be: loaded from the plan cache, or planned and built, and
    the seconds each way took (the phases after validate)."""
    counts: dict[str, Any] = {"loaded": 0, "built": 0, "loaded_seconds": 0.0, "built_seconds": 0.0}
    for result in results:
        for p in result.passes:
            names = {ph.name for ph in p.phases}
            way = "loaded" if "load_plans" in names else "built" if "build_plans" in names else None
            if way is not None:
                counts[way] += 1
                counts[f"{way}_seconds"] += sum(ph.seconds for ph in p.phases[2:])
    return counts


def known_refusal(result: RunResult) -> bool:
    """Not run because this cuDNN on this GPU is known to refuse it (model/known_issues.py): the
    box behaves as known, which is no failure of it; a known crash still is."""
    issues = result.known_issues
    return result.status == STATUS_KNOWN_ISSUE and bool(issues) and all(i.outcome == REFUSED for i in issues)


def known_wrong(result: RunResult) -> bool:
    """A failed check of a configuration known to give a wrong result on this cuDNN and GPU
    (model/known_issues.py): the box behaves as known, counted apart as a known refusal is."""
    return result.status == STATUS_MISMATCH and bool(wrong_results(result.known_issues))


def case_line(name: str, result: RunResult) -> str:
    """One case for the terminal: PASS, KNOWN or FAIL, then each pass's figures (or why not)."""
    ok = result.status == STATUS_OK
    mark = "[green]PASS[/green]" if ok else "[red]FAIL[/red]"
    peers = "".join(f"  {words}" for words in peer_verdicts(result))  # where cuDNN declined a pass
    if known_refusal(result) or known_wrong(result):  # the message opens with "known wrong result"
        return f"[yellow]KNOWN[/yellow] {name:19} {result.config.label():42} {escape(result.message)}{peers}"
    if result.status == STATUS_CPU_ONLY:  # no GPU: what cuDNN's validate() said is all there is
        return f"[yellow]VALID[/yellow] {name:20} {result.config.label():42} cuDNN's validate() accepts it (not run: no GPU)"
    if not ok:
        return f"{mark} {name:20} {result.config.label():42} {result.status}: {escape(result.message)}{peers}"
    parts = []
    for i, (p, f) in enumerate((p, pass_figures(p)) for p in result.passes):
        err = "not checked" if f["max_abs_error"] is None else f"max abs err {f['max_abs_error']:.2e}"
        lead = "" if i == 0 else f"{f['kind']} "
        parts.append(f"{lead}{us(f['kernel_us']):>11}{regime_markup(p.timing)}  {(f['tflops'] or 0):6.1f} TFLOPS  "
                     f"{err}  plan {f['plan']}")  # fmt: skip
        if f["fastest"]:  # with peers (or autotune, or an equivalent form): the winner and its margin
            parts.append(fastest_words(f["fastest"]))
    return f"{mark} {name:20} {result.config.label():42} " + "  ".join(parts)


def peer_verdicts(result: RunResult) -> list[str]:
    """For each pass cuDNN did not run, what ran without it: each peer's kernel time (where timed)
    and verdict, then the fastest ('peers MATH 40.00 µs pass, Flex 822.50 µs pass  fastest MATH')."""
    found = []
    for p in result.passes:
        errors = peer_errors(p)
        if not declined(p) or not (errors or p.field_peers):
            continue
        timed = {peer.name: f"{peer.short} {us(peer.timing.median_us)}" for peer in p.field_peers if peer.ran}
        cells = [f"{timed.get(name, name)} {verdict_words(m)}" for name, m in errors.items()]
        cells += [words for name, words in timed.items() if name not in errors]  # not checked
        record = fastest_record(p)
        lead = "" if p.kind == FORWARD else f"{p.kind} "
        fastest = f"  {fastest_words(record)}" if record else ""
        found.append(f"{lead}peers {escape(', '.join(cells) or 'none ran')}{fastest}")
    return found


def fastest_words(record: dict) -> str:
    """'fastest FA4 1.11x', and each faster kernel that failed its check, in red: a finding."""
    wrong = "".join(f" [red]{escape(name)} faster but FAILS[/red]" for name in record.get("findings") or ())
    return f"fastest {escape(record_cell(record))}{wrong}"


def regime_markup(t: TimingStats | None) -> str:
    """' (burst)' after a kernel time; an unstable or capped figure in yellow, never silently."""
    note = escape(regime_note(t))
    return f"[yellow]{note}[/yellow]" if note and regime_style(t) != "dim" else note


def run_cases(
    session: Any,
    cases: list[tuple[str, SdpaConfig]],
    options_for: Callable[[str], Any],
    console: Console,
    as_json: bool,
    seed: int,
    on_result: Callable[[str, RunResult], None] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Each case through one engine session, one line (or JSON row) a case; the rows and how
    many passed and how many this cuDNN is known to refuse or to get wrong. A case that crashes costs the session's process, not the cases after it.
    `on_result` is given each case's whole result as it comes (the history, a baseline)."""
    if not as_json:
        console.print(escape(versions_words(session.environment)))
    rows, passed, known = [], 0, 0
    for name, config in cases:
        result = session.run(config, options_for(name))
        if on_result is not None:
            on_result(name, result)
        passed += result.status == STATUS_OK
        known += known_refusal(result) or known_wrong(result)
        rows.append(case_row(name, result))
        if not as_json:
            console.print(case_line(name, result), soft_wrap=True)  # a case is one line, for grep
        follow_up(result, seed, Console(stderr=True), name)
    return rows, passed, known


def follow_up(result: RunResult, seed: int, err: Console, name: str = "") -> None:
    """What a result asks of the user: a crash's reproduction script, or how to run a known issue anyway."""
    which = f"{name}: " if name else ""
    if result.status == STATUS_CRASH:
        from ..present.export import save_crash_script

        try:
            path = save_crash_script(result, seed)
            err.print(f"{which}the script that reproduces the crash is at {path}", markup=False)
        except OSError as exc:
            err.print(f"{which}cannot write the reproduction script: {exc}", markup=False)
    elif result.status == STATUS_KNOWN_ISSUE:
        what = "cuDNN's graph not built (the rest ran)" if result.passes else "not run"
        err.print(f"{which}{what}: it matches a known issue; --run-anyway runs it", markup=False)
