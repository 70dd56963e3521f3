"""`sweep` and `merge`: the grid read from --vary, its order, slices, resuming, Ctrl+C, merging and
the CSV. The engine is the scripted fake (tests/fakes.py) behind the commands' own session, as in
tests/test_cli.py; one test runs the CPU engine's own code in this process."""

import csv
import dataclasses
import io
import json
import os
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from fakes import RECORDED, REFUSAL, FakeEngine, refused

from tui.cli import common as cli
from tui.cli.main import main
from tui.cli.sweep import resume_command
from tui.jobs.sweep import SweepError, grid, parse_shard, parse_vary, point_row, read_rows, shard
from tui.model.config import SdpaConfig
from tui.process.session import EngineSession

BASE = SdpaConfig()
SMALL = ["--b", "1", "--h", "2", "--no-autotune", "--replays", "1"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def fake(monkeypatch):
    """Every point answered by the H200's seed recording, relabelled for the point's configuration."""
    engine = FakeEngine()
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(engine))
    yield engine
    engine.close()


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---- --vary ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,names,texts",
    [
        ("d_qk=64,128", ("d_qk",), ("64", "128")),
        ("s=1024..32768x2", ("s_q", "s_kv"), ("1024", "2048", "4096", "8192", "16384", "32768")),
        ("s=1000..5000x2", ("s_q", "s_kv"), ("1000", "2000", "4000")),  # stops below B
        ("b=1..8+1", ("b",), tuple(str(i) for i in range(1, 9))),
        ("b=2..8", ("b",), ("2", "3", "4", "5", "6", "7", "8")),  # the step is +1 unless given
        ("dropout=0..0.3+0.1", ("dropout",), ("0", "0.1", "0.2", "0.3")),  # no float residue
        ("h=8,16", ("h_q", "h_kv"), ("8", "16")),
        ("d=64, 128", ("d_qk", "d_v"), ("64", "128")),
        ("h-kv=1,2", ("h_kv",), ("1", "2")),
        ("scale=0.1,0.2", ("attn_scale",), ("0.1", "0.2")),  # an option's name
        ("dtype=fp16,bf16", ("dtype",), ("fp16", "bf16")),
        ("heuristics=A,FALLBACK;B", ("heuristics",), ("A,FALLBACK", "B")),  # values with commas: ';'
    ],
)
def test_vary_reads_lists_ranges_and_shorthands(text, names, texts):
    vary = parse_vary(text, BASE)
    assert (vary.names, vary.texts) == (names, texts)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("zz=1,2", "--vary zz: unknown field"),
        ("s", "--vary s: give FIELD=VALUES"),
        ("s=", "--vary s=: give FIELD=VALUES"),
        ("s=4096..1024x2", "--vary s: the range '4096..1024x2' runs backwards"),
        ("s=1024..4096x1", "--vary s: a geometric range needs A > 0 and a factor above 1"),
        ("b=1..8+0", "--vary b: an arithmetic step must be positive"),
        ("b=1..a", "--vary b: 'a' in a range is not a number"),
        ("b=1..1000000", "--vary b: '1..1000000' gives 1000000 values"),
        ("s=0,1024", "--vary s: query length (s_q) must be at least 1 (got 0)"),
        ("dtype=fp16,fp64", "--vary dtype: dtype must be one of fp16, bf16, fp8_e4m3 (got 'fp64')"),
        ("b=1,x", "--vary b: batch (b) must be a whole number (got 'x')"),
        ("b=1,,2", "--vary b: an empty value"),
        ("b=2,2", "--vary b: '2' is the same value as '2'"),
    ],
)
def test_a_bad_vary_exits_2_naming_the_option(fake, text, needle):
    with pytest.raises(SweepError, match="^--vary"):
        parse_vary(text, BASE)
    r = invoke("sweep", "--vary", text)
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output
    assert fake.requests == []


@pytest.mark.parametrize(
    "args,needle",
    [
        ([], "--vary: give at least one"),
        (["--vary", "s=64,128", "--vary", "s_q=32"], "--vary s_q: s_q is already varied by --vary s"),
        (["--vary", "b=1..1000", "--vary", "s=1..1000"], "--vary: 1000000 points (at most 100000)"),
        (["--vary", "s=64", "--shard", "3/3"], "--shard: give I/N with 0 <= I < N"),
        (["--vary", "s=64", "--resume"], "--resume: needs --out"),
        (["--vary", "s=64", "--b", "0"], "--b: batch (b) must be at least 1"),
    ],
)
def test_other_bad_sweep_input_exits_2_naming_the_option(fake, args, needle):
    r = invoke("sweep", *args)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert fake.requests == []


def test_two_varies_run_every_combination_the_first_outermost(fake, tmp_path):
    out = tmp_path / "s.jsonl"
    r = invoke("sweep", *SMALL, "--vary", "s=64,128", "--vary", "d=32,64", "--out", out)
    assert r.exit_code == 0, r.output
    assert [(c.s_q, c.s_kv, c.d_qk, c.d_v) for c, _ in fake.requests] == [
        (64, 64, 32, 32), (64, 64, 64, 64), (128, 128, 32, 32), (128, 128, 64, 64),
    ]  # fmt: skip
    rows = lines(out)
    assert [r["varied"] for r in rows] == [
        {"s": 64, "d": 32}, {"s": 64, "d": 64}, {"s": 128, "d": 32}, {"s": 128, "d": 64},
    ]  # fmt: skip
    assert [r["index"] for r in rows] == [0, 1, 2, 3] and len({r["key"] for r in rows}) == 4
    first = rows[0]
    assert first["config"]["b"] == 1 and first["config"]["h_q"] == 2 and first["status"] == "ok"
    assert "4 points: s x d; the rest as b1 h2" in r.output and "fwd kernel" in r.output


def test_a_refused_point_is_a_row_not_an_abort(fake, tmp_path):
    out = tmp_path / "s.jsonl"
    fake.then(fake.answer, refused(), fake.answer)
    r = invoke("sweep", *SMALL, "--vary", "d=64,65,128", "--vary", "h-kv=1,3", "--out", out)
    assert r.exit_code == 0, r.output  # refused (and invalid) are answers, not failures
    rows = lines(out)
    assert [x["status"] for x in rows] == ["ok", "unsupported", "ok", "ok", "ok", "ok"]
    assert rows[1]["message"] == REFUSAL and rows[1]["passes"] == {}
    assert len(fake.requests) == 6  # h_q=2 with h_kv=3 still goes to the engine, which judges it


def test_the_slices_of_a_sweep_are_disjoint_and_cover_it(fake, tmp_path):
    points = grid(BASE, [parse_vary("s=64..4096x2", BASE), parse_vary("d=32,64", BASE)])
    for n in (1, 2, 3, 5, 12, 20):
        slices = [{p.key for p in shard(points, i, n)} for i in range(n)]
        assert sum(len(s) for s in slices) == len(points) == 14
        assert set().union(*slices) == {p.key for p in points}
    assert parse_shard(" 3 / 8 ") == (3, 8)
    keys = []
    for i in range(3):  # and through the command, as three Slurm array tasks would run it
        out = tmp_path / f"part-{i}.jsonl"
        r = invoke(
            "sweep", *SMALL, "--vary", "s=64..4096x2", "--vary", "d=32,64", "--shard", f"{i}/3", "--out", out
        )
        assert r.exit_code == 0, r.output
        keys.append([row["key"] for row in lines(out)])
    whole = tmp_path / "all.jsonl"
    assert (
        invoke("sweep", *SMALL, "--vary", "s=64..4096x2", "--vary", "d=32,64", "--out", whole).exit_code == 0
    )
    assert sorted(k for part in keys for k in part) == sorted(row["key"] for row in lines(whole))
    assert all(len(part) in (4, 5) for part in keys)


def test_resume_skips_the_points_done_and_a_cut_last_line(fake, tmp_path):
    out = tmp_path / "s.jsonl"
    args = ("sweep", *SMALL, "--vary", "s=64..512x2", "--out", out)
    assert invoke(*args).exit_code == 0
    whole = out.read_text().splitlines(keepends=True)
    out.write_text("".join(whole[:3]) + whole[3][:40])  # killed while writing the fourth point
    r = invoke(*args)
    assert r.exit_code == 2 and "--out" in r.output and "--resume" in r.output  # never replaced unasked
    fake.requests.clear()
    r = invoke(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert "3 of 4 points already in" in r.output
    assert [c.s_q for c, _ in fake.requests] == [512]
    rows = lines(out)  # every line whole again
    assert [row["varied"]["s"] for row in rows] == [64, 128, 256, 512]
    fake.requests.clear()
    assert invoke(*args, "--resume").exit_code == 0 and fake.requests == []  # nothing left to do
    other = invoke("sweep", *SMALL, "--d", "128", "--vary", "s=64..512x2", "--out", out, "--resume")
    assert other.exit_code == 0 and len(fake.requests) == 4  # another base: other points


class InterruptedSession(EngineSession):
    """Ctrl+C arrives while the third point runs."""

    def __init__(self, client):
        super().__init__(client)
        self.runs = 0

    def run(self, config, options, watch=None):
        self.runs += 1
        if self.runs == 3:
            raise KeyboardInterrupt
        return super().run(config, options, watch)


def test_ctrl_c_keeps_the_finished_points_and_says_how_to_resume(fake, monkeypatch, tmp_path):
    out, table = tmp_path / "s.jsonl", tmp_path / "s.csv"
    monkeypatch.setattr(cli, "engine_session", lambda: InterruptedSession(fake))
    args = ("sweep", *SMALL, "--vary", "s=64..512x2", "--no-check", "--out", out, "--csv", table)
    r = invoke(*args)
    assert r.exit_code == 130, r.output
    assert [row["varied"]["s"] for row in lines(out)] == [64, 128]
    assert "interrupted: 2 of 4 points done" in r.output
    said = r.output.rstrip().splitlines()[-1]  # the command that goes on with it
    assert said == f"main sweep --h 2 --b 1 --replays 1 --vary s=64..512x2 --out {out} --csv {table} " + (
        "--no-autotune --no-check --resume"
    )
    assert len(list(csv.DictReader(io.StringIO(table.read_text())))) == 2
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    fake.requests.clear()
    assert invoke(*args, "--resume").exit_code == 0
    assert [c.s_q for c, _ in fake.requests] == [256, 512]
    assert [row["varied"]["s"] for row in lines(out)] == [64, 128, 256, 512]


def test_resume_command_repeats_the_options_given():
    command = main.get_command(None, "sweep")  # imported when first named
    argv = ["--vary", "s=1..4x2", "--vary", "d=64", "--dtype", "bf16", "--no-check", "--out", "a b.jsonl"]
    with command.make_context("sdpa-explorer sweep", argv) as ctx:
        said = resume_command(ctx)
    assert said == (
        "sdpa-explorer sweep --dtype bf16 --vary s=1..4x2 --vary d=64 --out 'a b.jsonl' --no-check --resume"
    )
    assert isinstance(command, click.Command)


def test_merge_joins_slices_in_grid_order_and_says_where_files_disagree(fake, tmp_path):
    parts = [tmp_path / f"part-{i}.jsonl" for i in range(2)]
    for i, part in enumerate(parts):
        assert (
            invoke("sweep", *SMALL, "--vary", "s=64..512x2", "--shard", f"{i}/2", "--out", part).exit_code
            == 0
        )
    merged, table = tmp_path / "all.jsonl", tmp_path / "all.csv"
    r = invoke("merge", *parts, parts[0], "--out", merged, "--csv", table)  # a file twice: no quarrel
    assert r.exit_code == 0, r.output
    assert [row["varied"]["s"] for row in lines(merged)] == [64, 128, 256, 512]
    assert "4 points from 3 file(s)" in r.output and "disagree" not in r.output
    rows = lines(parts[1])
    rows[0]["status"] = "mismatch"
    quarrel = tmp_path / "other.jsonl"
    quarrel.write_text(json.dumps(rows[0]) + "\n" + '{"key": "cut sh')
    r = invoke("merge", *parts, quarrel)
    assert r.exit_code == 0, r.output
    assert (
        f"{quarrel} and {parts[1]} disagree on point s=128" in r.output
        and "status ok against mismatch" in r.output
    )
    assert invoke("merge", tmp_path / "missing.jsonl").exit_code == 2


def test_the_csv_flattens_the_rows(fake, tmp_path):
    table = tmp_path / "s.csv"
    assert (
        invoke("sweep", *SMALL, "--vary", "s=64,128", "--vary", "dtype=fp16,bf16", "--csv", table).exit_code
        == 0
    )
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    head = list(rows[0])
    assert head[:7] == ["index", "key", "vary.s", "vary.dtype", "status", "message", "label"]
    for column in ("b", "s_q", "dtype", "heuristics", "forward.kernel_us", "forward.p10_us", "forward.p90_us",
                   "forward.tflops", "forward.bandwidth_gbs", "forward.fastest_us", "forward.max_abs_error",
                   "forward.passed", "forward.roofline.share", "forward.roofline.bound", "wall_seconds"):  # fmt: skip
        assert column in head, column
    assert [(r["vary.s"], r["vary.dtype"]) for r in rows] == [
        ("64", "fp16"),
        ("64", "bf16"),
        ("128", "fp16"),
        ("128", "bf16"),
    ]
    assert rows[0]["heuristics"] == "A,FALLBACK" and rows[0]["gpu"] == "NVIDIA H200"
    assert float(rows[0]["forward.kernel_us"]) == pytest.approx(RECORDED.forward.timing.median_us)
    assert rows[0]["forward.roofline.peak"] == "H200 SXM"


def test_a_row_holds_each_pass_and_its_share_of_the_gpus_peak():
    (point,) = grid(BASE, [parse_vary("s=1024", BASE)])
    row = point_row(point, RECORDED)
    forward = row["passes"]["forward"]
    timing = RECORDED.forward.timing
    assert (forward["kernel_us"], forward["p10_us"], forward["p90_us"]) == (
        timing.median_us,
        timing.p10_us,
        timing.p90_us,
    )
    assert forward["fastest_us"] == RECORDED.forward.plan(RECORDED.forward.fastest_plan).timing.median_us
    assert forward["max_abs_error"] == RECORDED.forward.checks[0].cudnn.max_abs and forward["passed"] is True
    line = forward["roofline"]  # the seed on the H200: 256 FLOP/byte against a ridge of 989.5 / 4.8
    assert line["intensity"] == pytest.approx(6448742400 / 25165824) and line["bound"] == "compute"
    assert line["share"] == pytest.approx(RECORDED.forward.tflops / 989.5)
    assert json.loads(json.dumps(row)) == row


def test_a_sweep_on_the_cpu_engine(cpu_fake_engine, monkeypatch, tmp_path):
    """The engine's own CPU answers: no GPU figures, no peak, every point still a row."""
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(cpu_fake_engine))
    out = tmp_path / "s.jsonl"
    grid_args = ("--vary", "d=32,65", "--vary", "h-kv=1,3")  # d=65: cuDNN refuses; h_kv=3 of 2: invalid
    r = invoke("sweep", *SMALL, "--s", "64", "--causal", "none", *grid_args, "--out", out)
    assert r.exit_code == 0, r.output
    rows = lines(out)
    assert [row["status"] for row in rows] == ["cpu_only", "invalid", "unsupported", "invalid"]
    assert "hidden_dim should be multiple of 8" in rows[2]["message"]
    assert "h_q must be a multiple of h_kv (got 2 and 3)" in rows[1]["message"]
    assert (
        rows[0]["passes"]["forward"]["kernel_us"] is None and rows[0]["passes"]["forward"]["roofline"] is None
    )


def readme_commands(command: str) -> list[list[str]]:
    """The `sdpa-explorer COMMAND` lines of docs/CLI.md (continuations joined, a Slurm task's id set)."""
    text = (Path(__file__).parent.parent / "docs" / "CLI.md").read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.findall(rf"sdpa-explorer {command} ([^'\n]*)", text)
    return [shlex.split(line.split("#")[0].replace("$SLURM_ARRAY_TASK_ID", "3")) for line in found]


def test_the_docs_sweep_and_merge_commands_run(fake, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweeps, merges = readme_commands("sweep"), readme_commands("merge")
    assert len(sweeps) >= 3 and merges
    for args in sweeps:
        r = invoke("sweep", *args)
        assert r.exit_code == 0, (args, r.output)
    (tmp_path / "part-1.jsonl").write_text("")  # another task's part, empty yet
    for host in ("node1", "node2"):  # what the docs' srun line leaves: a check a host
        (tmp_path / f"check-{host}.json").write_text(
            invoke("check", "--preset", "gpt2-seed", "--json").output
        )
    for args in merges:  # the glob as the shell expands it
        globbed = sorted(tmp_path.glob(args[0])) if "*" in args[0] else None
        files = [str(p) for p in globbed] if globbed is not None else args[:1]
        r = invoke("merge", *files, *args[1:])
        assert r.exit_code == 0, (args, r.output)
    assert [row["index"] for row in lines(tmp_path / "all.jsonl")] == [3, 11]  # slice 3 of 8 of 12 points


def test_reading_rows_drops_only_a_cut_row(tmp_path):
    """A cut row at the end goes; a line that is no row is counted, never cut off."""
    path = tmp_path / "s.jsonl"
    path.write_text('{"key": "a"}\nnot json\n\n{"key": "b"}\n{"key": "c", "sta')
    rows, kept, bad = read_rows(path)
    assert [r["key"] for r in rows] == ["a", "b"] and bad == [2]
    assert path.read_bytes()[:kept].endswith(b'{"key": "b"}\n')
    path.write_text('{"key": "a"}\nsomeone else\'s words')
    assert read_rows(path) == ([{"key": "a"}], len(path.read_bytes()), [2])


def test_peers_asked_for_are_columns_of_every_point(fake, tmp_path):
    """--peers reaches every point's run; each peer's kernel time, cuDNN's speed against it and its
    error become the row's, the CSV's and the table's."""
    from tui.model.results import OutputCheck, PeerResult, TimingStats

    forward = RECORDED.forward
    flash_us = 2 * forward.timing.median_us
    flash = PeerResult("torch FLASH fp16", "FlashAttention-2 in torch", timing=TimingStats(
        flash_us, flash_us, flash_us, flash_us, flash_us, 0.0, 20, 10, False), tflops=120.0)  # fmt: skip
    flex = PeerResult("Flex fp16", reason="this torch has no FlexAttention")
    o = forward.checks[0]
    checks = (OutputCheck("O", o.atol, o.rtol, o.cudnn, {**o.peers, flash.name: o.cudnn}),)
    with_peers = dataclasses.replace(forward, field_peers=(flash, flex), checks=checks)
    recorded = dataclasses.replace(RECORDED, passes=(with_peers,))

    def answer(reply, config, options):
        assert options.peers == ("flash", "flex")
        reply.result(dataclasses.replace(recorded, config=config))

    fake.answer = answer
    out, table = tmp_path / "s.jsonl", tmp_path / "s.csv"
    result = invoke(
        "sweep", *SMALL, "--vary", "s=64,128", "--peers", "flex,flash", "--out", out, "--csv", table
    )
    assert result.exit_code == 0, result.output
    rows = lines(out)
    peers = rows[0]["passes"]["forward"]["peers"]
    assert peers["FLASH"]["cudnn_speedup"] == pytest.approx(2.0) and peers["FLASH"]["passed"] is True
    assert peers["Flex"]["kernel_us"] is None and "no FlexAttention" in peers["Flex"]["reason"]
    header, first = list(csv.reader(io.StringIO(table.read_text())))[:2]
    assert float(first[header.index("forward.peer.FLASH.kernel_us")]) == pytest.approx(flash_us)
    assert "FLASH" in result.output and "(2.00x)" in result.output


def test_a_row_of_the_wrong_shape_is_a_bad_row_said_with_its_line_number(fake, tmp_path):
    """A key that is a list (or a line that is JSON but no row) is not a row: the sweep goes on."""
    out = tmp_path / "s.jsonl"
    args = ("sweep", *SMALL, "--vary", "s=64,128", "--out", out)
    assert invoke(*args).exit_code == 0
    first = out.read_text().splitlines()[0]
    out.write_text("\n".join([first, json.dumps({"key": [1, 2]}), '"words"', json.dumps({"key": {}})]) + "\n")
    fake.requests.clear()
    r = invoke(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert f"lines 2, 3 and 4 of {out} did not read; left in place" in r.output
    assert [c.s_q for c, _ in fake.requests] == [128]
    assert read_rows(out)[2] == [2, 3, 4]


def test_a_disk_that_fills_mid_sweep_stops_it_with_whole_lines_and_the_resume_command(
    fake, tmp_path, monkeypatch
):
    from full_disk import full_after

    out, table = tmp_path / "s.jsonl", tmp_path / "s.csv"
    args = ("sweep", *SMALL, "--vary", "s=64..512x2", "--out", out, "--csv", table)
    measured = tmp_path / "measured.jsonl"  # the same sweep, to learn its rows' lengths
    assert invoke("sweep", *SMALL, "--vary", "s=64..512x2", "--out", measured).exit_code == 0
    sizes = [len(line) for line in measured.read_bytes().splitlines(keepends=True)]
    full_after(monkeypatch, sizes[0] + sizes[1] + sizes[2] // 2)  # the third row is cut part way
    fake.requests.clear()
    r = invoke(*args)
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "Exception in thread" not in r.output
    (said,) = [line for line in r.output.splitlines() if "--out" in line]
    assert said.startswith(f"Error: --out: cannot write {out}: No space left on device; stopped with 2 of 4 "
                           f"points kept in it; go on with: main sweep ")  # fmt: skip
    assert [row["varied"]["s"] for row in lines(out)] == [64, 128]  # whole lines only
    assert out.read_text().endswith("\n") and not table.exists() and len(fake.requests) == 3
    monkeypatch.undo()
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    fake.requests.clear()
    again = invoke(*shlex.split(said.split("go on with: ")[1])[1:])
    assert again.exit_code == 0, again.output
    assert [c.s_q for c, _ in fake.requests] == [256, 512]
    assert [row["varied"]["s"] for row in lines(out)] == [64, 128, 256, 512]
    assert len(list(csv.DictReader(io.StringIO(table.read_text())))) == 4


def test_the_history_database_is_never_a_sweeps_output(fake, tmp_path):
    from tui.store.places import history_path as default_path

    r = invoke("sweep", *SMALL, "--vary", "s=64", "--out", default_path(), "--csv", tmp_path / "s.csv")
    assert (
        r.exit_code == 2
        and f"--out: cannot write {default_path()}: that is the run history's database" in r.output
    )
    assert fake.requests == []


# ---- merge given what is not a sweep's output ---------------------------------------------------
def test_merge_refuses_a_fifo_or_a_device_unread(tmp_path):
    from fifos import invoke_given_fifo

    fifo = tmp_path / "part.jsonl"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    r, blocked = invoke_given_fifo(main, ["merge", str(fifo)], fifo)
    assert not blocked, "merge waited on the FIFO"
    assert (
        r.exit_code == 2
        and r.output
        == f"Error: merge: cannot read {fifo}: not a regular file (a FIFO); only files are read\n"
    )
    r = invoke("merge", "/dev/zero")  # reading it would never end
    assert (
        r.exit_code == 2
        and "merge: cannot read /dev/zero: not a regular file (a character device)" in r.output
    )


def test_merge_of_a_row_whose_key_is_a_list_says_its_line(tmp_path):
    part = tmp_path / "part.jsonl"
    part.write_text(json.dumps({"key": [1, 2], "passes": {}}) + "\n")
    r = invoke("merge", part)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert f"line 1 of {part} did not read" in r.output and "0 points" in r.output


def test_merge_says_which_lines_are_no_rows_and_joins_the_rest(fake, tmp_path):
    part = tmp_path / "part.jsonl"
    assert invoke("sweep", *SMALL, "--vary", "s=64,128", "--out", part).exit_code == 0
    good = part.read_text().splitlines()
    row = json.loads(good[0])
    wrong = [{**row, "key": [1]}, {**row, "key": "k2", "passes": []}, {**row, "key": "k3", "varied": [1]},
             {**row, "key": "k4", "index": "1"}, {**row, "key": "k5", "passes": {"forward": {"tflops": "x"}}},
             [1, 2], None, "x"]  # fmt: skip
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        "\n".join([good[1], *map(json.dumps, wrong), "[" * 100_000 + "]" * 100_000, good[0]]) + "\n"
    )
    r = invoke("merge", mixed, "--out", tmp_path / "all.jsonl")
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert f"lines 2, 3, 4, 5, 6 and 4 more of {mixed} did not read" in r.output
    assert [row["varied"]["s"] for row in lines(tmp_path / "all.jsonl")] == [64, 128]


@pytest.mark.parametrize(
    "content,words",
    [
        ('{"cases": 5}', "cases: must be a list"),
        ('{"gpus": [1]}', "gpus[0]: must be an object"),
        ('{"gpus": [{"cases": [{"case": "x", "label": "l"}]}]}', "gpus[0].cases[0]: has no 'status'"),
        (
            '{"cases": [{"case": "x", "label": "l", "status": "ok", "kernel_us": "fast"}]}',
            "cases[0].kernel_us: must be a number",
        ),
    ],
)
def test_merge_of_a_check_output_of_the_wrong_shape_exits_2_naming_it(tmp_path, content, words):
    path = tmp_path / "check.json"
    path.write_text(content)
    r = invoke("merge", path)
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert r.output.startswith(f"Error: merge: {path} is not a check --json output: {words}"), r.output
