"""`sdpa-explorer search`: a knob search beyond the heuristic's plans (tui.model.knob_search), for
one configuration or several presets in turn, in the engine process (a candidate that crashes
native code costs that process, and the answer says which candidate it was trying).

One configuration prints the spaces searched, the counts, the heuristic's pick against the best
found and the fastest peer, and the fastest candidates; several presets print one row each.
`--save-preset` keeps the best found as a user preset pinned to it (the `plan` field).
"""

from __future__ import annotations

import csv
import io
import json
import sys

import click
from rich.markup import escape
from rich.text import Text

from ..model.search_results import CSV_COLUMNS, SearchOptions, SearchResult, parse_budget
from ..present.format import FRESH_PROCESS, fresh_words, placement_words, us
from ..present.search import (
    BEST_NAME,
    COUNTS_NAME,
    FINDING_NAME,
    PEER_NAME,
    PICK_NAME,
    PIN_NAME,
    SKIPPED_NAME,
    WENT_ON,
    counts_words,
    fresh_faster,
    gain_won,
    gain_words,
    peer_figure,
    pin_hint,
    space_words,
    time_words,
    wrong_lines,
)
from ..present.tables import FIGURE, NAME, FitTable
from . import common
from .common import EXIT_FAIL, EXIT_OK, check_export_paths, fail_usage, say_error, terminal
from .options import config_from_options, config_options

TOP = 12  # candidates the table of one search lists, fastest first


def _budget(_ctx, _param, value: str) -> float:
    try:
        return parse_budget(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _peers(_ctx, _param, value: str) -> tuple[str, ...]:
    from ..engine.peers import parse_peers

    if value.strip().lower() == "none":
        return ()
    try:
        return parse_peers(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _lead(name: str) -> str:
    """A figure's line's lead, in a column 18 wide: the figures under it line up."""
    return f"  {name:<18}"


def _pick_words(r: SearchResult) -> str:
    """The pick as cuDNN names it, then the plan a pin names; its plan twice where it has no name."""
    t = r.pick
    return f"{t.name or t.plan} ({t.plan})" if t else "-"


def summary(r: SearchResult) -> Text:
    """The search of one configuration in a few lines: where it looked, what it found."""
    out = Text()
    out.append(f"search {r.config.label()}", style="bold")
    if r.status != "ok" and not (r.status == "cancelled" and r.trials):
        return out.append(f": {r.status.upper()} {r.message}\n", style="red")
    out.append(f": {r.elapsed_s:.1f} s for a {r.budget_s:.0f} s budget ({r.stopped})\n")
    if r.status == "cancelled":
        out.append("  stopped when asked: what it had found so far\n", style="yellow")
    _searched(out, r)
    out.append(f"  {COUNTS_NAME}: {counts_words(r)}\n")
    out.append(f"{_lead(PICK_NAME)}{_pick_words(r):<40} {time_words(r.pick)}\n")
    _best_found(out, r)
    peer = peer_figure(r)
    if peer is not None:
        out.append(f"{_lead(PEER_NAME)}{peer[0]:<40} {peer[1]}\n")
    for words in wrong_lines(r):
        out.append(f"  {FINDING_NAME}: {words}\n", style="yellow")
    give, kept = pin_hint(r)
    if give:
        out.append(f"  {PIN_NAME}: {give}", style="cyan")
        out.append(f" ({kept})\n")
    return out


def _searched(out: Text, r: SearchResult) -> None:
    """Where the search looked: each engine's space, the engines not searched, the crashes."""
    for s in r.spaces:
        out.append(f"  {space_words(s, source=True)}\n")
    for words in r.skipped:
        out.append(f"  {SKIPPED_NAME}: {words}\n", style="dim")
    for words in r.crashes:
        out.append(f"  crashed an engine process ({WENT_ON}): {words}\n", style="yellow")


def _best_found(out: Text, r: SearchResult) -> None:
    """The best found against the pick, then where it moved with the inputs and a fresh process."""
    best = r.best
    if best is None:
        return
    named = f"{best.name or ''} ({best.plan})"  # blank before the plan where cuDNN gave it no name
    out.append(f"{_lead(BEST_NAME)}{named:<40} {us(best.time_us)}  ")
    out.append(gain_words(r) + "\n", style="green" if gain_won(r) else "")
    if placement_words(r):
        out.append(f"{_lead('')}{placement_words(r)}\n", style="dim")
    if fresh_words(r):
        style = "green" if fresh_faster(r) else ""
        out.append(f"{_lead('')}{FRESH_PROCESS}, {fresh_words(r)}\n", style=style)


def candidates_table(r: SearchResult) -> FitTable:
    caption = (
        "time: kernel time (CUPTI, burst regime); where a plan's kernels overlap (o), the time per "
        "execution of a CUDA graph of them, since their durations add up to more than the GPU spends"
    )
    table = FitTable(
        title=f"Fastest candidates (of {len(r.trials)})", caption=caption, caption_justify="left"
    )
    for col, kind in (("plan", NAME), ("name", NAME), ("from", NAME), ("time", FIGURE), ("kernel time", FIGURE),
                      ("kernels", FIGURE), ("max abs err", FIGURE), ("status", NAME)):  # fmt: skip
        table.add_column(col, kind, drop=0 if col == "from" else None)
    timed = sorted((t for t in r.trials if t.time_us is not None), key=lambda t: t.time_us or 0)
    for t in timed[:TOP]:
        err = "-" if t.max_abs_error is None else f"{t.max_abs_error:.2e}"
        table.add_row(t.plan, t.name, t.origin, us(t.time_us) + (" o" if t.overlapped else ""), us(t.median_us),
                      str(t.kernels or "-"), err, Text(t.status, style="" if t.passed else "red"))  # fmt: skip
    return table


def presets_table(results: list[SearchResult]) -> FitTable:
    """One row a preset: the heuristic's pick, the best found, the gain, the best peer."""
    table = FitTable(title="Knob search per preset (kernel time, burst regime)", key_words="preset")
    # at a narrow width the count, the peer and the pick's name leave for the lines under the table
    for col, kind, drop, below in (
        ("preset", NAME, None, None), ("heuristic's pick", NAME, 4, None), ("µs", FIGURE, None, "pick µs"),
        ("best found", NAME, None, None), ("µs", FIGURE, None, "best µs"), ("gain", FIGURE, None, None),
        ("fresh", FIGURE, 5, None), ("best peer", NAME, 3, None), ("µs", FIGURE, 2, "best peer µs"),
        ("tried built wrong", FIGURE, 1, "tried/built/wrong"), ("s", FIGURE, 0, "seconds"),
    ):  # fmt: skip
        table.add_column(col, kind, drop=drop, below=below)
    for r in results:
        if r.status != "ok":  # why, under the table
            table.add_row(r.preset, Text(r.status.upper(), style="red"), *[""] * 9)
            continue
        pick, best, peer, c = r.pick, r.best, r.best_peer, r.counts()
        table.add_row(
            r.preset, pick.name if pick else "-", us(pick.time_us) if pick else "-",
            (best.plan if best and best.plan != r.pick_plan else "the pick"), us(best.time_us) if best else "-",
            _gain_text(r), _fresh_text(r),
            peer.name if peer else "-",
            us(peer.timing.median_us) if peer and peer.timing else "-",
            f"{c['tried']}/{c['built']}/{c['check failed']}", f"{r.elapsed_s:.0f}",
        )  # fmt: skip
    return table


def _fresh_text(r: SearchResult) -> str:
    """The per-preset table's fresh-process gain; "(2nd)" where the runner-up ran, the pick being best."""
    f = r.fresh
    if f is None or f.gain_pct is None:
        return "-"
    return f"{f.gain_pct:.1f}%" + (" (2nd)" if r.best is not None and f.plan != r.best.plan else "")


def _gain_text(r: SearchResult) -> str:
    """The gain, and its span over the places of the inputs in memory where it moved with them."""
    gain, span = r.gain_pct, r.gain_range()
    if gain is None:
        return "-"
    return f"{gain:.1f}%" + (f" ({span[0]:.1f}-{span[1]:.1f})" if span else "")


def csv_text(results: list[SearchResult]) -> str:
    """Every candidate of every search, a row each."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for r in results:
        writer.writerows(r.csv_rows())
    return out.getvalue()


def _preset_option(fn):
    return click.option("--preset", "presets", multiple=True,
                        help="search this preset (repeatable: several are searched in turn)")(fn)  # fmt: skip


@click.command()
@click.option("--budget", default="60s", show_default=True, callback=_budget,
              help="time for the search of each configuration: 60s, 2m, ...")  # fmt: skip
@click.option("--all-presets", is_flag=True, help="search every built-in preset in turn")
@click.option("--peers", default="flash,efficient", show_default=True, callback=_peers,
              help="peers timed beside for the comparison (a list, all, or none)")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="the random draws' and the inputs' seed")
@click.option("--json", "as_json", is_flag=True, help="print the result(s) as JSON")
@click.option("--save-json", type=click.Path(dir_okay=False), help="also write the result(s) as JSON")
@click.option("--save-csv", type=click.Path(dir_okay=False), help="also write every candidate as CSV")
@click.option("--save-preset", help="keep the best found as a user preset of this name, pinned to it")
@lambda fn: config_options(fn, preset=_preset_option)
def search(
    budget, all_presets, peers, seed, as_json, save_json, save_csv, save_preset, presets, **values
) -> None:
    """Search cuDNN's knob space for plans the heuristic does not offer: every candidate built,
    checked against the fp32 reference and timed; the best found against the heuristic's pick
    and the fastest peer. Several --preset (or --all-presets) are searched in turn."""
    names = list(presets)
    if all_presets:
        from ..jobs.check import builtin_cases

        names += [n for n, _ in builtin_cases([]) if n not in names and not n.startswith("smoke")]
    if save_preset and len(names) > 1:
        fail_usage(["--save-preset keeps the best of one search: name one configuration or preset"])
    check_export_paths({"json": save_json, "csv": save_csv})
    configs = [(n, config_from_options({**values, "preset": n})) for n in names] or [
        ("", config_from_options(values))
    ]
    options = SearchOptions(budget_s=budget, peers=peers, seed=seed)
    err = terminal(stderr=True)
    results = []
    with common.engine_session() as session:
        for name, config in configs:
            with err.status(f"searching {name or config.label()}") as status:
                r = session.search(config, options, watch=lambda text, s=status: s.update(escape(text)))
            results.append(_named(r, name))
            if not as_json and len(configs) > 1:
                err.print(f"{name}: {r.status} in {r.elapsed_s:.0f} s", soft_wrap=True)
    _report(results, as_json)
    saved = _save(results, save_json, save_csv, save_preset)
    sys.exit(EXIT_OK if saved and all(r.status == "ok" for r in results) else EXIT_FAIL)


def _named(r: SearchResult, preset: str) -> SearchResult:
    import dataclasses

    return dataclasses.replace(r, preset=preset)


def _data(results: list[SearchResult]) -> dict | list[dict]:
    """The result(s) as JSON data: one search's object, or a list of them."""
    return results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]


def _report(results: list[SearchResult], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(_data(results), indent=2))
        return
    console = terminal()
    if len(results) > 1:
        console.print(presets_table(results))
        for r in results:
            if r.status != "ok":
                console.print(f"{escape(r.preset)}: {r.status.upper()} {escape(r.message)}", soft_wrap=True)
        return
    console.print(summary(results[0]), soft_wrap=True)
    if results[0].trials:
        console.print(candidates_table(results[0]))


def _save(
    results: list[SearchResult], save_json: str | None, save_csv: str | None, save_preset: str | None
) -> bool:
    """Each file asked for, written whole or not at all (a failure said in one line naming its
    option and file); whether every one was written."""
    from ..store.files import atomic_write

    err = terminal(stderr=True)
    texts = {"--save-json": (save_json, lambda: json.dumps(_data(results), indent=2)),
             "--save-csv": (save_csv, lambda: csv_text(results))}  # fmt: skip
    saved = True
    for option, (path, text) in texts.items():
        if not path:
            continue
        try:
            atomic_write(path, text())
        except OSError as exc:
            say_error(f"{option}: cannot write {path}: {exc.strerror or exc}")
            saved = False
            continue
        err.print(f"wrote {escape(path)}", soft_wrap=True)
    if save_preset:
        _save_pinned(results[0], save_preset)
    return saved


def _save_pinned(r: SearchResult, name: str) -> None:
    from ..store.presets import PresetExists, save_user

    best = r.kept
    if r.status != "ok" or best is None:
        fail_usage([f"--save-preset: nothing to keep: the search ended {r.status} ({r.message})"])
        return
    config = r.config.replace(plan=best.plan)
    fresh = r.fresh if r.fresh is not None and r.fresh.plan == best.plan and r.fresh.gain_pct else None
    if fresh is not None:
        figure = (
            f"{us(fresh.best_us)}, {fresh.gain_pct:.1f}% faster than the heuristic's pick in a fresh process"
        )
    else:
        gain = (
            f", {r.gain_pct:.1f}% faster than the heuristic's pick" if r.gain_pct and best is r.best else ""
        )
        figure = f"{us(best.time_us)}{gain}"
    words = f"pinned to {best.plan} by a knob search: {figure} (cuDNN {r.environment.cudnn_backend_version if r.environment else '?'})"
    try:
        path = save_user(name, config, description=words, overwrite=True)
    except (ValueError, PresetExists, OSError) as exc:
        fail_usage([f"--save-preset: {exc}"])
        return
    terminal(stderr=True).print(
        f"saved preset {escape(name)} pinned to {escape(best.plan)}: {escape(str(path))}", soft_wrap=True
    )
