"""Every table the CLI prints, at 80 and 120 columns, from recorded results: no figure, plan name,
preset name or column header is ever cut (ellipsised, cropped or wrapped inside itself); the
descriptions and notes wrap, or move under the table, instead."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from test_knob_search import placed, recorded

from tui.cli.explain import cells_table
from tui.cli.main import main
from tui.cli.search import candidates_table, presets_table
from tui.engine.environment import describe
from tui.engine.explain import Explanation
from tui.jobs.sweep import Point, point_row, points_table
from tui.model.results import RunResult
from tui.present.explain import cell_text, numbered
from tui.present.format import format_bytes, ms, multiple, peer_errors, peer_speedup, sci, us
from tui.present.report import checks_table, environment_table, peers_table, phases_table, plans_table
from tui.store.history import History
from tui.store.places import CACHE_DIR_ENV, DATA_DIR_ENV, HISTORY_FILE
from tui.store.plan_cache import PlanCache
from tui.store.presets import load_all

DATA = Path(__file__).parent / "data"
RESULTS = {
    name: RunResult.from_json((DATA / f"{name}.json").read_text())
    for name in ("seed_h200", "train_h200", "fp8_h200", "peers_h200")
}
EXPLAINED = {
    p.stem: Explanation.from_dict(json.loads(p.read_text())) for p in sorted(DATA.glob("explain_*_cpu.json"))
}
WIDTHS = (80, 120)
CUT_FIGURE = re.compile(r"\d\.\d+e(?![-+]\d\d)|\d\.\d+e[-+]\d(?!\d)")  # 1.03e, 1.03e-, 1.03e-0


def rendered(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"), highlight=False)  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def assert_whole(text: str, width: int, figures=(), names=(), headers=(), every_line: bool = True) -> None:
    """Nothing ellipsised, no line past the width (but for the lines a command keeps whole on
    purpose: a path), each figure and name on one line as a whole word, each header's words whole."""
    assert "…" not in text and not CUT_FIGURE.search(text), text
    assert not every_line or all(len(line) <= width for line in text.splitlines()), text
    for figure in [*figures, *names]:
        pattern = rf"(?<![\w.+-]){re.escape(figure)}(?![\w.])"
        assert re.search(pattern, text), f"{figure!r} is not whole at {width} columns:\n{text}"
    for header in headers:
        for word in header.split():
            assert re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text), f"header {header!r} cut:\n{text}"


def cli(width: int, *args: str) -> str:
    """A command's output at `width` columns, as a terminal of that width gives it."""
    r = CliRunner().invoke(main, list(args), env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    return r.output


def plan_figures(p) -> list[str]:
    out = []
    for plan in p.plans:
        out += [ms(plan.build_seconds), sci(plan.max_abs_error), *plan.behavior_notes]
        out += [f"{k}={v}" for k, v in plan.knobs.items()]
        out += [us(plan.timing.median_us)] if plan.timing else []
        out += [f"{plan.tflops:.1f}"] if plan.tflops else []
        out += [format_bytes(plan.workspace_bytes)] if plan.workspace_bytes is not None else []
    return out


def check_figures(p) -> list[str]:
    out = []
    for c in p.checks:
        out += [c.output, f"{c.atol:.2e}", f"{c.rtol:g}"]
        for m in (c.cudnn, *c.peers.values()):
            out += [sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs)] if m else []
    return out


def peer_figures(p) -> list[str]:
    errors, out = peer_errors(p), []
    for peer in p.field_peers:
        out += [us(peer.timing.median_us)] if peer.timing else []
        out += [f"{peer.tflops:.1f}"] if peer.tflops else []
        out += [multiple(peer_speedup(p, peer))] if peer_speedup(p, peer) else []
        out += [sci(errors[peer.name].max_abs)] if errors.get(peer.name) else []
    return out


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", RESULTS)
def test_the_reports_tables_keep_every_figure_and_name_whole(name, width):
    for p in RESULTS[name].passes:
        text = rendered(phases_table(p), width)
        assert_whole(text, width, [ms(ph.seconds) for ph in p.phases], [ph.name for ph in p.phases],
                     ["phase", "time", "what it does here"])  # fmt: skip
        text = rendered(plans_table(p), width)
        assert_whole(text, width, plan_figures(p), [plan.name for plan in p.plans],
                     ["plan", "engine", "knobs", "workspace", "build", "kernel time", "TFLOPS", "max abs err"])  # fmt: skip
        text = rendered(checks_table(p), width)
        peers = [who for c in p.checks for who in c.peers]
        assert_whole(text, width, check_figures(p), [w for who in peers for w in who.split()],
                     ["output", "atol", "rtol", "max abs", "max rel", "mean abs", "nonfin", "verdict"])  # fmt: skip
        if p.field_peers:
            table = peers_table(p)
            names = [w for peer in p.field_peers for w in peer.name.split()]
            assert_whole(rendered(table, width), width, peer_figures(p), names, ["peer", "kernel", "TFLOPS"])


@pytest.mark.parametrize("width", WIDTHS)
def test_show_prints_the_whole_report_with_no_cut_figure(width):
    """Through the command as a user runs it: the accuracy figures of the issue come out whole."""
    text = cli(width, "show", str(DATA / "seed_h200.json"))
    assert_whole(text, width, ["5.00e-03", "9.74e-04", "4.06e-02", "1.94e-05", "26.78 µs"],
                 ["eng2_k24=7", "eng1_k24=6"], ["nonfin", "verdict"])  # fmt: skip


@pytest.mark.parametrize("width", WIDTHS)
def test_the_environment_table_keeps_its_names(width):
    env = RESULTS["peers_h200"].environment
    assert env is not None
    rows = describe(env)
    text = rendered(environment_table(env), width)
    assert_whole(text, width, names=[w for key, _ in rows for w in key.split()])


@pytest.mark.parametrize("width", WIDTHS)
def test_presets_name_every_preset_whole_so_none_can_be_mistaken(width):
    found, _ = load_all()
    text = cli(width, "presets")
    assert_whole(text, width, names=list(found), headers=["name", "from", "configuration"])
    assert all(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text) for n in found)  # -p16 and -p64 apart


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A history holding the recorded runs, in a folder of this test's own."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with History(tmp_path / HISTORY_FILE) as history:
        return [history.record(r, preset="llama3-8b-paged-decode" if i % 2 else None) for i, r in
                enumerate(RESULTS.values())]  # fmt: skip


@pytest.mark.parametrize("width", WIDTHS)
def test_history_and_compare_keep_ids_times_and_plan_names_whole(kept, width):
    ids = kept
    text = cli(width, "history")
    figures = [us(r.forward.timing.median_us) for r in RESULTS.values() if r.forward.timing]
    assert_whole(text, width, figures, ["llama3-8b-paged-decode"], ["id", "when", "status", "kernel"])
    a, b = RESULTS["train_h200"], RESULTS["peers_h200"]
    text = cli(width, "compare", str(ids[1]), str(ids[3]))
    names = [plan.name for r in (a, b) for plan in r.forward.plans]
    times = [us(plan.timing.median_us) for r in (a, b) for plan in r.forward.plans if plan.timing]
    assert_whole(
        text, width, times, names, ["plan", "change", "in A", "in B"], every_line=False
    )  # soft-wrapped lines


@pytest.mark.parametrize("width", WIDTHS)
def test_the_search_tables_keep_gains_times_and_names_whole(width):
    text = rendered(presets_table([placed(), recorded()]), width)
    assert_whole(text, width, ["3.8% (2.1-7.4)", "11.3%", us(recorded().pick.time_us)],
                 ["llama3-8b-decode", "eng1_k24=3"], ["preset", "gain", "best found"])  # fmt: skip
    r = recorded()
    text = rendered(candidates_table(r), width)
    timed = [t for t in r.trials if t.time_us is not None]
    assert_whole(text, width, [us(t.time_us) for t in timed] + [f"{t.max_abs_error:.2e}" for t in timed],
                 [t.name for t in timed], ["plan", "name", "kernel time", "max abs err"])  # fmt: skip


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", EXPLAINED)
def test_explains_grid_keeps_each_cell_whole(name, width):
    e = EXPLAINED[name]
    numbers = numbered(e)
    cells = {cell_text(e.cell(i, m), numbers).plain for i in e.implementations for m in e.modes}
    words = [w for c in cells for w in c.split()]
    assert_whole(rendered(cells_table(e), width), width, names=[*e.implementations, *words], headers=e.modes)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_sweeps_table_keeps_its_figures_whole(width):
    rows = [
        point_row(Point(i, {"preset": name, "s": r.config.s_q}, r.config, f"k{i}"), r)
        for i, (name, r) in enumerate(RESULTS.items())
    ]
    figures = [us(p["kernel_us"]) for row in rows for p in row["passes"].values() if p.get("kernel_us")]
    figures += [
        sci(p["max_abs_error"]) for row in rows for p in row["passes"].values() if p.get("max_abs_error")
    ]
    text = rendered(points_table(rows, "4 points"), width)
    assert_whole(text, width, figures, list(RESULTS), ["status", "fwd kernel", "fwd TFLOPS"])


@pytest.mark.parametrize("width", WIDTHS)
def test_the_cache_table_keeps_sizes_and_plan_names_whole(tmp_path, monkeypatch, width):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    plans = [dataclasses.asdict(p) for p in RESULTS["seed_h200"].forward.plans]
    assert PlanCache(tmp_path).store("a" * 64, plans, {0: b"x" * 3000}, {"Q": 1}, 0, 0.5)
    text = cli(width, "cache")
    names = [p["name"] for p in plans]
    assert_whole(
        text, width, ["2.9 KiB", "just now"], names, ["graph", "plan names"], every_line=False
    )  # the path
