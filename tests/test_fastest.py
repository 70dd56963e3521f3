"""The fastest way to run it (model/fastest.py, present/fastest.py): the equivalent forms of a
configuration, the winner's rules (a faster kernel that failed its check is a finding, never the
winner), the words of the headline's line, and the winner in `check`, a sweep's rows, its CSV and
its table; and the chart of a recorded sweep (`sweep --plot`, `merge --plot`)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from tui.cli.main import main
from tui.jobs.check import case_line, case_row
from tui.jobs.sweep import Point, point_row, points_table
from tui.jobs.sweep_csv import csv_text
from tui.model.config import SdpaConfig
from tui.model.equivalents import equivalent_forms, same_scores
from tui.model.fastest import FORM, PEER, PICK, fastest_way
from tui.model.results import ErrorMetrics, FormResult, PeerResult, RunResult
from tui.present.fastest import fastest_lines, fastest_record
from tui.present.report import summary_text
from tui.store.presets import load_all

DATA = Path(__file__).parent / "data"
PEERS = RunResult.from_json((DATA / "peers_h200.json").read_text())  # llama3-8b-prefill, 4 peers, every plan
SEED = RunResult.from_json((DATA / "seed_h200.json").read_text())
GOOD = ErrorMetrics(max_abs=3.9e-3, max_rel=1e-2, mean_abs=1e-4, mismatched=0, total=100)
WRONG = ErrorMetrics(max_abs=0.31, max_rel=2.0, mean_abs=1e-2, mismatched=40, total=100)


def changes(config: SdpaConfig) -> list[str]:
    return [f.words() for f in equivalent_forms(config)]


# ---- equivalent forms ----------------------------------------------------------------------
def test_decode_bottom_right_is_no_mask_and_the_prefill_presets_have_no_form():
    decode = SdpaConfig(b=4, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, causal="bottom_right")
    assert changes(decode) == ["causal none"]
    assert changes(decode.replace(causal="top_left")) == []  # query 0 sees key 0 only
    assert changes(SdpaConfig(causal="bottom_right")) == ["causal top_left"]  # s_q = s_kv: one diagonal
    assert changes(SdpaConfig(s_q=512, s_kv=1024, causal="bottom_right")) == []
    presets, _ = load_all()
    with_forms = {n for n, p in presets.items() if equivalent_forms(p.config)}
    assert with_forms == {"llama3-8b-decode", "llama3-8b-paged-decode-p16", "llama3-8b-paged-decode-p64"}


def test_a_window_as_wide_as_the_keys_a_query_sees_is_no_window_and_one_less_is_not():
    assert changes(SdpaConfig(window=1024)) == ["window none"]  # causal: query 1023 sees 1024 keys
    assert changes(SdpaConfig(window=1023)) == []
    assert changes(SdpaConfig(window=1024, causal="none")) == ["window none"]
    assert changes(SdpaConfig(window=4096, s_q=1, s_kv=4096, causal="bottom_right")) == [
        "causal none", "window none", "causal none, window none",
    ]  # fmt: skip
    assert changes(SdpaConfig(window=4095, s_q=1, s_kv=4096, causal="bottom_right")) == []


def test_full_padding_lengths_are_no_padding_and_a_short_one_or_a_paged_cache_is_not():
    full = SdpaConfig(b=2, seq_lens_q=(1024, 1024), seq_lens_kv=(1024, 1024))
    assert changes(full) == ["seq lengths none"]
    assert changes(full.replace(seq_lens_q=(1024, 1000))) == []
    assert changes(full.replace(page_size=64)) == []  # a paged cache needs the lengths
    assert changes(SdpaConfig(bias="bxh")) == []  # a bias is drawn at random: never zeros


def test_same_scores_reads_every_batch_entry():
    a = SdpaConfig(b=2, s_q=1, s_kv=64, causal="bottom_right", seq_lens_q=(1, 1), seq_lens_kv=(64, 32))
    assert same_scores(a, a.replace(causal="none"))
    assert not same_scores(SdpaConfig(causal="none"), SdpaConfig())  # causal keeps fewer pairs


# ---- the winner's rules ---------------------------------------------------------------------
def with_peer(result: RunResult, name: str, median_us: float, error: ErrorMetrics) -> RunResult:
    """The recorded result with one more peer, timed at `median_us`, its O's error `error`."""
    p = result.forward
    timing = dataclasses.replace(p.timing, median_us=median_us)
    peer = PeerResult(
        name, description="a kernel", timing=timing, tflops=p.tflops * p.timing.median_us / median_us
    )
    checks = tuple(dataclasses.replace(c, peers={**c.peers, name: error}) for c in p.checks)
    forward = dataclasses.replace(p, field_peers=(*p.field_peers, peer), checks=checks)
    return dataclasses.replace(result, passes=(forward,))


def with_form(result: RunResult, median_us: float, matches: bool) -> RunResult:
    p = result.forward
    form = FormResult({"causal": "none"}, "every query sees every key it can", "eng9",
                      dataclasses.replace(p.timing, median_us=median_us), 1.0, 1e-3, matches)  # fmt: skip
    return dataclasses.replace(result, passes=(dataclasses.replace(p, forms=(form,)),))


def test_the_pick_wins_where_nothing_is_faster_and_a_faster_peer_wins_by_its_margin():
    way = fastest_way(PEERS.forward)
    assert way.winner.role == PICK and way.margin == 1.0 and not way.findings
    assert len(way.contenders) == 5  # the pick (also the fastest plan), four peers that ran
    pick_us = PEERS.forward.plan(PEERS.forward.heuristic_plan).timing.median_us
    faster = with_peer(PEERS, "FA4 bf16", pick_us / 1.25, GOOD)
    way = fastest_way(faster.forward)
    assert (way.winner.role, way.winner.name, way.winner.passed) == (PEER, "FA4", True)
    assert way.margin == pytest.approx(1.25)


def test_a_faster_kernel_whose_output_failed_is_a_finding_never_the_winner():
    pick_us = PEERS.forward.plan(PEERS.forward.heuristic_plan).timing.median_us
    wrong = with_peer(PEERS, "FA4 bf16", pick_us / 2, WRONG)
    way = fastest_way(wrong.forward)
    assert way.winner.role == PICK and [c.name for c in way.findings] == ["FA4"]
    lines = [words for words, _style in fastest_lines(wrong.forward)]
    assert lines[1] == f"finding: FA4 {pick_us / 2:.2f} µs is faster but FAILS its check (max abs 3.10e-01)"


def test_a_faster_equivalent_form_wins_and_says_which_field_to_change_and_by_how_much():
    pick_us = SEED.forward.plan(SEED.forward.heuristic_plan).timing.median_us
    form = with_form(SEED, pick_us / 1.5, True)
    way = fastest_way(form.forward)
    assert way.winner.role == FORM and way.winner.detail == "causal none"
    lines = [words for words, _style in fastest_lines(form.forward)]
    assert lines == [
        f"fastest way: cuDNN's equivalent form {pick_us / 1.5:.2f} µs, 1.50x cuDNN's pick (pass)",
        "set causal none (the same scores): 1.50x cuDNN's pick",
    ]
    wrong = fastest_way(with_form(SEED, pick_us / 1.5, False).forward)
    assert wrong.winner.role != FORM and [c.role for c in wrong.findings] == [FORM]


def test_the_line_is_in_the_report_and_fits_80_columns():
    pick_us = PEERS.forward.plan(PEERS.forward.heuristic_plan).timing.median_us
    result = with_peer(PEERS, "FA4 bf16", pick_us / 1.109, GOOD)
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(summary_text(result))
    text = console.export_text()
    line = next(x for x in text.splitlines() if "fastest way" in x)
    assert line == f"forward fastest way: FA4 {pick_us / 1.109:.2f} µs, 1.11x cuDNN's pick (pass)"
    assert "fastest way" not in "".join(x for x in text.splitlines() if x != line)  # said once
    assert all(len(x) <= 80 for x in text.splitlines())


def test_a_result_with_forms_round_trips_and_an_older_file_reads_with_none():
    form = with_form(SEED, 10.0, True)
    assert RunResult.from_json(form.to_json()) == form
    data = json.loads((DATA / "seed_h200.json").read_text())
    assert data["schema_version"] < "2.6" and RunResult.from_dict(data).forward.forms == ()


# ---- check, the sweep's rows, its CSV and its table -----------------------------------------
def test_check_prints_and_keeps_the_winner_of_each_case():
    pick_us = PEERS.forward.plan(PEERS.forward.heuristic_plan).timing.median_us
    result = with_peer(PEERS, "FA4 bf16", pick_us / 1.109, GOOD)
    assert case_line("llama3-8b-prefill", result).endswith("fastest FA4 1.11x")
    row = case_row("llama3-8b-prefill", result)
    assert row["fastest"]["name"] == "FA4"
    # every contender is kept, so a table of cuDNN against each peer comes from one check run
    fa4 = next(c for c in row["contenders"] if c["name"] == "FA4")
    assert fa4 == {"name": "FA4", "role": "peer", "kernel_us": pick_us / 1.109, "passed": True,
                   "detail": "FA4 bf16"}  # fmt: skip
    assert row["contenders"][0]["role"] == "pick" and row["contenders"][0]["kernel_us"] == pick_us
    wrong = with_peer(PEERS, "FA4 bf16", pick_us / 2, WRONG)
    assert "fastest cuDNN H [red]FA4 faster but FAILS[/red]" in case_line("x", wrong)
    assert "fastest" not in case_line("x", dataclasses.replace(SEED, passes=(
        dataclasses.replace(SEED.forward, fastest_plan=SEED.forward.heuristic_plan),)))  # fmt: skip


def recorded_rows() -> list[dict]:
    """A sweep of s recorded from two H200 results: FA4 wins the second point."""
    pick_us = PEERS.forward.plan(PEERS.forward.heuristic_plan).timing.median_us
    results = (PEERS, with_peer(PEERS, "FA4 bf16", pick_us / 1.109, GOOD))
    return [
        point_row(Point(i, {"s": s}, r.config, f"k{i}"), r)
        for i, (s, r) in enumerate(zip((4096, 8192), results, strict=True))
    ]


def test_a_sweep_row_carries_the_winner_in_its_json_csv_and_table():
    rows = recorded_rows()
    assert [r["passes"]["forward"]["fastest"]["name"] for r in rows] == ["cuDNN H", "FA4"]
    assert rows[1]["versions"] == {"cudnn": "9.19.0", "frontend": "1.32.0", "torch": "2.11.0+cu130"}
    _first, second = csv.DictReader(io.StringIO(csv_text(rows)))
    assert (second["forward.fastest.name"], second["forward.fastest.margin"]) == ("FA4", "1.109")
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(points_table(rows, "2 points"))
    table = console.export_text()
    assert "fwd fastest" in table and "FA4 1.11x" in table


# ---- the chart ------------------------------------------------------------------------------
def test_merge_plots_a_recorded_sweep_as_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib")
    sweep = tmp_path / "s.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in recorded_rows()))
    for name, magic in (("chart.png", b"\x89PNG"), ("chart.svg", b"<?xml")):
        r = CliRunner().invoke(main, ["merge", str(sweep), "--plot", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        assert (tmp_path / name).read_bytes().startswith(magic) and "wrote the chart to" in r.output
    svg = (tmp_path / "chart.svg").read_text()
    for words in ("cuDNN H", "FA4", "Flex", "cuDNN 9.19.0, frontend 1.32.0, torch 2.11.0+cu130",
                  "the fastest way at the point", "fastest: cuDNN H at 1 point, FA4 at 1 point (up to 1.11x"):  # fmt: skip
        assert words in svg, words


def test_plot_refuses_a_bad_suffix_and_says_how_to_get_matplotlib_without_it(tmp_path, monkeypatch):
    sweep = tmp_path / "s.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in recorded_rows()))
    r = CliRunner().invoke(main, ["sweep", "--vary", "s=64", "--plot", str(tmp_path / "c.txt")])
    assert r.exit_code == 2 and "--plot: " in r.output and "give a .png or .svg file name" in r.output
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # as on a machine without it
    r = CliRunner().invoke(main, ["merge", str(sweep), "--plot", str(tmp_path / "c.png")])
    assert r.exit_code == 2 and not (tmp_path / "c.png").exists()
    assert "Error: --plot: the chart needs matplotlib: uv sync --extra plots" in r.output


@pytest.mark.gpu
def test_a_decode_shape_times_its_equivalent_form_against_the_same_reference():
    from tui.engine.runner import Engine

    config = SdpaConfig(b=4, h_q=32, h_kv=8, s_q=1, s_kv=4096, d_qk=128, d_v=128, dtype="bf16",
                        causal="bottom_right")  # fmt: skip
    result = Engine().run(config)
    assert result.status == "ok", result.message
    (form,) = result.forward.forms
    assert form.changes == {"causal": "none"} and form.reason == "", form.reason
    assert form.timing is not None and form.timing.regime == result.forward.timing.regime
    assert form.matches is True and form.max_abs_error is not None
    assert fastest_record(result.forward) is not None  # the pick against its form at least


def test_the_docs_table_is_drawn_from_one_check_run_with_each_peer_and_the_step():
    from benchmarks.peers_table import table

    pick_us = PEERS.forward.plan(PEERS.forward.heuristic_plan).timing.median_us
    fwd = case_row("llama3-8b-prefill", with_peer(PEERS, "FA4 bf16", pick_us / 1.109, GOOD))
    wrong = case_row("x", with_peer(PEERS, "FA4 bf16", pick_us / 2, WRONG))

    def timed(name, role, us, passed=True):
        return {"name": name, "role": role, "kernel_us": us, "passed": passed, "detail": ""}

    train = {"case": "train", "passes": [
        {"kind": "forward", "contenders": [timed("cuDNN H", "pick", 100.0), timed("Flex", "peer", 90.0)]},
        {"kind": "backward", "contenders": [timed("cuDNN H", "pick", 300.0), timed("Flex", "peer", 400.0),
                                            timed("FA4", "peer", 10.0, False)]},
    ]}  # fmt: skip
    refused = {"case": "gemma2", "status": "known_issue", "message": "not run: it matches a known issue"}
    declined = {"case": "softcap", "passes": [{"kind": "forward", "contenders": [
        timed("Flex", "peer", 900.0), timed("FA4", "peer", 95.0, False), timed("FLASH", "peer", 300.0)]}]}  # fmt: skip
    lines = table({"cases": [fwd, wrong, train, refused, declined]}).splitlines()
    assert lines[0].startswith("| preset | pass | cuDNN pick | cuDNN fastest plan | FA4 |")
    cells = [line.strip("| ").split(" | ") for line in lines]
    assert cells[2][2] == f"{pick_us:.1f}" and cells[2][4] == f"{pick_us / 1.109:.1f}"
    assert cells[2][7] == "FA4 1.11x"
    assert cells[3][4] == f"{pick_us / 2:.1f} FAIL" and cells[3][7] == "cuDNN H"  # never the winner
    assert lines[4] == "| train | forward | 100.0 | 100.0 | - | - | 90.0 | Flex 1.11x |"
    assert lines[6] == "| train | step | 400.0 | 400.0 | - | - | 490.0 | cuDNN H |"  # FA4 ran no forward
    assert lines[7].startswith("| gemma2 | - |") and lines[7].endswith(
        "| not run: it matches a known issue |"
    )
    # cuDNN declined: the fastest peer that passed, never one that failed
    assert lines[8] == "| softcap | forward | - | - | 95.0 FAIL | 300.0 | 900.0 | FLASH (cuDNN declined) |"


def test_the_fastest_plans_line_runs_through_every_point_or_is_not_drawn():
    """Where the pick is the fastest plan at a point, the fastest plan's line passes through the
    pick's figure there (a line drawn only where they differ joins far-apart points as if measured
    between them); where the pick is the fastest everywhere, the line is not drawn at all."""
    from tui.jobs.sweep_chart import FASTEST, PICK, series

    def row(s, pick_us, fastest_us):
        forward = {"status": "ok", "kernel_us": pick_us, "fastest_us": fastest_us, "flops": 1e9 * s,
                   "tflops": 1e9 * s / pick_us / 1e6}  # fmt: skip
        return {"varied": {"s": s}, "passes": {"forward": forward}}

    xs = ["1024", "2048", "4096"]
    lines = series([row(1024, 10.0, 10.0), row(2048, 20.0, 16.0), row(4096, 40.0, 40.0)], ["s"], xs, False)
    assert [x for x, _ in lines[(FASTEST, "")]] == [1, 2, 3]
    assert (
        lines[(FASTEST, "")][0] == lines[(PICK, "")][0]
        and lines[(FASTEST, "")][1][1] > lines[(PICK, "")][1][1]
    )
    same = series([row(1024, 10.0, 10.0), row(2048, 20.0, 20.0)], ["s"], xs[:2], False)
    assert (FASTEST, "") not in same and (PICK, "") in same
