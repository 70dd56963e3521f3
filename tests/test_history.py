"""The run history: every run kept in SQLite (WAL, a transaction a run), listed and filtered
fast over 10,000 rows, reopened whole (older result schemas too), compared run against run; a
history that cannot be written only warns. CLI: `history`, `compare`, `show ID`, `--no-history`."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zlib

import pytest
from click.testing import CliRunner
from fakes import DATA, RECORDED, TRAINING, FakeEngine, relabelled

from tui.cli import common as cli
from tui.cli.main import main
from tui.model.config import SdpaConfig
from tui.model.results import PassResult, RunResult
from tui.model.statuses import FORWARD, STATUS_CPU_ONLY, STATUS_MISMATCH, STATUS_OK
from tui.process.session import EngineSession
from tui.store.history import COLUMN_NAMES, History, compare, record
from tui.store.places import DATA_DIR_ENV, HISTORY_FILE


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """The user data folder of these tests: their own, never the user's."""
    folder = tmp_path / "data"
    monkeypatch.setenv(DATA_DIR_ENV, str(folder))
    return folder


def engine(monkeypatch, answer=None) -> FakeEngine:
    """The commands' engine answered by the H200's recording, relabelled for what was asked."""
    fake = FakeEngine(answer or relabelled(RECORDED), environment=RECORDED.environment)
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    return fake


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def timed(result: RunResult, factor: float, kind: str = "forward") -> RunResult:
    """`result` with the pass's kernel time (the pick's and every plan's) `factor` times longer."""

    def scaled(t):
        return t and dataclasses.replace(
            t, median_us=t.median_us * factor, p10_us=t.p10_us * factor, p90_us=t.p90_us * factor
        )

    passes = tuple(
        dataclasses.replace(p, timing=scaled(p.timing),
                            plans=tuple(dataclasses.replace(x, timing=scaled(x.timing)) for x in p.plans))
        if p.kind == kind else p
        for p in result.passes
    )  # fmt: skip
    return dataclasses.replace(result, passes=passes)


def test_a_run_is_kept_whole_and_listed_by_what_the_list_filters_on(tmp_path):
    path = tmp_path / HISTORY_FILE
    with History(path) as history:
        first = history.record(RECORDED, preset="gpt2-seed", source="check")
        second = history.record(TRAINING, source="run")
        assert history.load(first) == RECORDED and history.load(second) == TRAINING
        newest, oldest = history.runs()
        assert (newest.id, oldest.id) == (second, first)  # newest first
    assert (oldest.preset, oldest.source, oldest.status, oldest.label) == (
        "gpt2-seed", "check", STATUS_OK, RECORDED.config.label()
    )  # fmt: skip
    assert oldest.kernel_us == RECORDED.forward.timing.median_us and oldest.regime == "burst"
    assert (oldest.gpu, oldest.cudnn, oldest.frontend, oldest.driver) == ("NVIDIA H200", "9.19.0", "1.32.0",
                                                                         "580.159.04")  # fmt: skip
    assert (oldest.s_q, oldest.d_qk, oldest.dtype, oldest.backward) == (1024, 64, "fp16", False)
    assert newest.backward is True and newest.preset is None
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_rows_written_under_an_older_result_schema_still_load(tmp_path):
    with History(tmp_path / HISTORY_FILE) as history:
        ids = history.record_many([(RECORDED, None, "run")] * 3)
    old = (DATA / "seed_h200.json").read_text()  # schema 1.0
    assert json.loads(old)["schema_version"] == "1.0"
    with sqlite3.connect(tmp_path / HISTORY_FILE) as conn:  # as an older version of the tool kept them
        conn.execute("UPDATE runs SET result = ? WHERE id = ?", (zlib.compress(old.encode()), ids[0]))
        conn.execute("UPDATE runs SET result = ? WHERE id = ?", (old, ids[1]))
    with History(tmp_path / HISTORY_FILE) as history:
        for run_id in ids[:2]:
            loaded = history.load(run_id)
            assert loaded.config == RECORDED.config and loaded.forward.timing.median_us > 0
        with pytest.raises(KeyError, match="no run 99"):
            history.load(99)


def test_ten_thousand_runs_load_and_filter_through_indexes(tmp_path):
    timing = dataclasses.replace(RECORDED.forward.timing, samples_us=(), telemetry=None)
    base = RunResult(RECORDED.config, STATUS_OK, passes=(PassResult(FORWARD, timing=timing),),
                     environment=RECORDED.environment)  # fmt: skip
    seeds = [
        (dataclasses.replace(base, config=SdpaConfig(s_q=64 << (i % 4), s_kv=64 << (i % 4)),
                             status=STATUS_MISMATCH if i % 5 == 0 else STATUS_OK), f"preset-{i % 10}", "run")
        for i in range(100)
    ]  # fmt: skip
    columns = ", ".join((*COLUMN_NAMES, "result"))
    with History(tmp_path / HISTORY_FILE) as history:
        history.record_many(seeds)
        conn = history._connect()
        with conn:  # the seeds 99 times more, as many runs of them would have been kept
            for _ in range(99):
                conn.execute(f"INSERT INTO runs ({columns}) SELECT {columns} FROM runs ORDER BY id LIMIT 100")
        assert history.count() == 10_000
        rows = history.runs(limit=10_000)
        assert len(rows) == 10_000 and rows[0].id == 10_000 and rows[-1].id == 1
        assert history.load(10_000).config.s_q == 64 << 99 % 4  # a copy of the hundredth seed
        page = history.runs(limit=50, offset=100, preset="preset-3", status=STATUS_OK)
        assert len(page) == 50 and all(r.preset == "preset-3" and r.status == STATUS_OK for r in page)
        assert history.count(preset="preset-3", status=STATUS_OK) == 1000  # i % 10 == 3 is never i % 5 == 0
        assert history.count(s_q=128) == 2500 and history.count(search="s512") == 2500
        assert [r.id for r in page] == sorted((r.id for r in page), reverse=True)
        for column in ("preset", "status", "s_q", "cudnn", "gpu"):
            plan = conn.execute(f"EXPLAIN QUERY PLAN SELECT id FROM runs WHERE {column} = ? ORDER BY id DESC",
                                ("x",)).fetchall()  # fmt: skip
            assert any("USING" in str(step) and "INDEX" in str(step) for step in plan), (column, plan)
        with pytest.raises(ValueError, match="cannot filter history on nonsense"):
            history.runs(nonsense=1)


def test_a_crash_mid_write_keeps_every_earlier_run(tmp_path):
    path = tmp_path / HISTORY_FILE
    with History(path) as history:
        history.record(RECORDED)
    script = (
        "import os, sys; sys.path.insert(0, 'tests')\n"
        "from fakes import RECORDED\nfrom tui.store.history import History\n"
        "def runs():\n    yield RECORDED, None, 'run'\n    os._exit(9)  # killed inside the transaction\n"
        f"History({str(path)!r}).record_many(runs())\n"
    )
    assert subprocess.run([sys.executable, "-c", script], timeout=120).returncode == 9
    with History(path) as history:
        assert history.count() == 1 and history.load(1) == RECORDED
        assert history._connect().execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("breakage", ["folder is a file", "not a database", "locked"])
def test_a_history_that_cannot_be_written_only_warns_naming_the_file(tmp_path, monkeypatch, breakage):
    from tui.store import history as history_module

    path = tmp_path / "data" / HISTORY_FILE
    if breakage == "folder is a file":
        (tmp_path / "data").write_text("a file where the folder should be")
    elif breakage == "not a database":
        path.parent.mkdir()
        path.write_bytes(b"this is not SQLite " * 100)
    else:
        History(path).record(RECORDED)
        holder = sqlite3.connect(path)
        holder.execute("BEGIN EXCLUSIVE")
        monkeypatch.setattr(history_module, "BUSY_S", 0.05)
    said: list[str] = []
    try:
        assert record(RECORDED, warn=said.append, path=path) is None
    finally:
        if breakage == "locked":
            holder.close()
    (line,) = said
    assert (
        line.startswith("warning: run not kept in the history: ") and str(path) in line and "\n" not in line
    )


def test_compare_gives_each_plans_change_the_errors_and_what_differs_in_the_environment():
    env = dataclasses.replace(RECORDED.environment, cudnn_backend_version="9.20.0", driver_version="590.10")
    b = dataclasses.replace(timed(RECORDED, 1.2), environment=env)
    dropped = b.forward.plans[-1].name
    b = dataclasses.replace(b, passes=(dataclasses.replace(b.forward, plans=b.forward.plans[:-1]),))
    c = compare(RECORDED, b)
    (forward,) = c.passes
    assert forward.change_pct == pytest.approx(20.0)
    assert (forward.a_us, forward.b_us) == (RECORDED.forward.timing.median_us, b.forward.timing.median_us)
    pick = next(p for p in forward.plans if p.a_pick)
    assert pick.b_pick and pick.change_pct == pytest.approx(20.0) and pick.a_state == pick.b_state == "ok"
    gone = next(p for p in forward.plans if p.name == dropped)
    assert (gone.b_state, gone.b_us, gone.change_pct) == ("absent", None, None)
    assert [p.name for p in forward.plans] == [p.name for p in RECORDED.forward.plans]  # in either
    (o,) = forward.outputs
    assert o.output == "O" and o.a_max_abs == o.b_max_abs == RECORDED.forward.checks[0].cudnn.max_abs
    assert [(d.name, d.a, d.b) for d in c.environment] == [("driver", "580.159.04", "590.10"),
                                                           ("cuDNN", "9.19.0", "9.20.0")]  # fmt: skip
    assert c.config == () and (c.a_status, c.b_status) == (STATUS_OK, STATUS_OK)


def test_compare_of_a_training_step_and_a_forward_names_each_pass_and_the_fields_set_differently():
    c = compare(RECORDED, TRAINING)
    assert [(p.kind, p.a_status, p.b_status) for p in c.passes] == [("forward", "ok", "ok"),
                                                                    ("backward", "absent", "ok")]  # fmt: skip
    assert {"backward", "dtype", "s_q"} <= {d.name for d in c.config}


def test_run_and_check_are_kept_and_history_lists_them(data_dir, monkeypatch):
    engine(monkeypatch)
    assert invoke("run", "--preset", "bert-base").exit_code == 0
    assert invoke("run", "--b", "2", "--no-history").exit_code == 0
    out = invoke("check", "--preset", "gpt2-seed", "--preset", "llama3-8b-decode")
    assert out.exit_code == 0, out.output
    listed = invoke("history", "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["id"], r["source"], r["preset"]) for r in rows] == [
        (3, "check", "llama3-8b-decode"), (2, "check", "gpt2-seed"), (1, "run", "bert-base")
    ]  # fmt: skip
    assert (data_dir / HISTORY_FILE).exists()
    table = invoke("history", "--preset", "gpt2-seed")
    assert table.exit_code == 0 and "1 of 1 runs" in table.output and "gpt2-seed" in table.output
    assert json.loads(invoke("history", "--json", "--status", "ok", "--limit", "1").output)[0]["id"] == 3
    assert invoke("history", "--status", "nonsense").exit_code == 2


def test_an_empty_history_says_where_it_would_be(data_dir):
    out = invoke("history")
    assert out.exit_code == 0 and "no runs kept yet" in out.output
    assert json.loads(invoke("history", "--json").output) == []


def test_a_cpu_run_is_kept_and_show_reopens_it_by_id(data_dir, monkeypatch):
    """`run --no-check` by the engine's own code for this machine (cpu_only without a GPU)."""
    from fakes import computed

    from tui.engine.environment import collect
    from tui.engine.runner import Engine

    machine = Engine(environment=collect())
    engine(monkeypatch, computed(machine)).environment = machine.environment()
    first = invoke("run", "--b", "1", "--h", "2", "--s", "64", "--no-check", "--json")
    assert first.exit_code == 0, first.output
    status = json.loads(first.output)["status"]
    (row,) = History(data_dir / HISTORY_FILE).runs()
    assert row.status == status and row.label == "b1 h2 s64 d64 fp16 BSHD causal"
    shown = invoke("show", str(row.id), "--json")
    assert shown.exit_code == 0 and json.loads(shown.output)["status"] == status
    if status == STATUS_CPU_ONLY:
        assert "CPU ONLY" in invoke("show", str(row.id)).output


def test_compare_takes_ids_and_files_and_prints_the_change(data_dir, monkeypatch, tmp_path):
    History(data_dir / HISTORY_FILE).record(RECORDED)
    slower = tmp_path / "slower.json"
    slower.write_text(timed(RECORDED, 1.2).to_json())
    out = invoke("compare", "1", str(slower))
    assert out.exit_code == 0, out.output
    assert "A #1: b4 h12 s1024 d64 fp16 BSHD causal (ok)" in out.output and "+20.0%" in out.output
    assert "environment: the same GPU, driver, CUDA, torch, cuDNN and frontend" in out.output
    data = json.loads(invoke("compare", "1", str(slower), "--json").output)
    assert data["a"] == "1" and data["passes"][0]["change_pct"] == pytest.approx(20.0)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["show", "7"], "Error: show: no run 7 in the history"),
        (["compare", "1", "7"], "Error: compare B: no run 7 in the history"),
        (["compare", "missing.json", "1"], "Error: compare A: cannot read missing.json"),
        (["compare", "1", "not-a-result.json"], "Error: compare B: not-a-result.json is not a saved result"),
    ],
)
def test_bad_ids_and_files_exit_2_on_one_line_naming_them(data_dir, monkeypatch, tmp_path, args, needle):
    History(data_dir / HISTORY_FILE).record(RECORDED)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "not-a-result.json").write_text('{"hello": 1}')
    out = invoke(*args)
    assert out.exit_code == 2 and out.output.startswith(needle) and out.output.count("\n") == 1, out.output


def test_a_run_whose_history_cannot_be_written_still_succeeds_and_warns_once(tmp_path, monkeypatch):
    (tmp_path / "data").write_text("a file where the folder should be")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    engine(monkeypatch)
    out = invoke("run", "--json")
    assert out.exit_code == 0
    report, warning = out.stdout, out.stderr
    assert json.loads(report)["status"] == STATUS_OK
    assert warning.count("warning: run not kept in the history") == 1 and str(tmp_path / "data") in warning
    checked = invoke("check", "--preset", "gpt2-seed", "--preset", "bert-base")
    assert checked.exit_code == 0 and checked.stderr.count("warning:") == 1  # once, not once a case


def test_threads_that_make_a_new_history_at_once_each_find_it_made(tmp_path):
    """The dashboard's first kept run and the History pane's first read may open a new file at the
    same moment: the file is prepared by one of them, and the other finds it made (it failed with
    "duplicate column name" when both added the searched column)."""
    import threading

    for attempt in range(12):
        path = tmp_path / f"h{attempt}.sqlite3"
        start, failures = threading.Barrier(4), []

        def open_it(path=path, start=start, failures=failures) -> None:
            start.wait()
            try:
                with History(path) as history:
                    history.record(RECORDED)
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        with History(path) as history:
            assert history.count() == 4


def test_a_limit_or_an_id_past_sqlites_integers_lists_all_or_finds_no_run(data_dir):
    """`history --limit 99999999999999999999` raised OverflowError from SQLite, as did `load` of an
    id past SQLite's integers."""
    with History(data_dir / HISTORY_FILE) as history:
        history.record_many([(RECORDED, "gpt2-seed", "run")] * 3)
        assert [r.id for r in history.runs(limit=2**64)] == [3, 2, 1]
        assert history.runs(limit=2**64, offset=2**64) == [] and len(history.runs(limit=-5, offset=-5)) == 0
        for run_id in (2**63, -(2**63) - 1, 10**400):
            with pytest.raises(KeyError, match=f"no run {run_id} in the history"):
                history.load(run_id)
        assert history.count(s_q=2**64) == 0 and history.runs(preset="\udcff") == []  # no row holds these
    out = invoke("history", "--limit", "99999999999999999999")
    assert out.exit_code == 0 and "the newest 3 of 3 runs" in out.output, out.output


def test_rows_with_wrong_typed_columns_are_listed_as_unreadable(data_dir):
    """`recorded_at='yesterday'` (another tool's, an old version's) crashed `history`."""
    path = data_dir / HISTORY_FILE
    with History(path) as history:
        history.record_many([(RECORDED, "gpt2-seed", "run")] * 4)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET recorded_at = 'yesterday' WHERE id = 1")
        conn.execute("UPDATE runs SET kernel_us = 'fast', status = NULL WHERE id = 2")
        conn.execute("UPDATE runs SET label = CAST(x'ff00' AS TEXT), recorded_at = 1e300 WHERE id = 3")
    conn.close()
    with History(path) as history:
        newest, third, second, first = history.runs()
        assert newest.status == STATUS_OK and newest.when != "?"
        assert [r.status for r in (third, second, first)] == ["unreadable"] * 3
        assert (
            first.message == "this row cannot be read: its recorded_at is 'yesterday'" and first.when == "?"
        )
        assert (first.label, first.preset) == (RECORDED.config.label(), "gpt2-seed")  # what reads, kept
        assert (
            second.message == "this row cannot be read: its kernel_us is 'fast'" and second.kernel_us is None
        )
        assert third.label == "" and third.when == "?"
        assert history.load(1) == RECORDED  # the whole result is intact
    listed = invoke("history")
    assert listed.exit_code == 0 and listed.output.count("unreadable") == 3, listed.output
    rows = json.loads(invoke("history", "--json").output)
    assert [r["status"] for r in rows] == ["ok", "unreadable", "unreadable", "unreadable"]


def test_a_column_another_tool_wrote_is_shown_as_text_never_read_as_markup(data_dir):
    """A regime of '[/]' (found by tests/test_fuzz_history.py) raised MarkupError from `history`."""
    with History(data_dir / HISTORY_FILE) as history:
        history.record(RECORDED, "gpt2-seed")
    with sqlite3.connect(data_dir / HISTORY_FILE) as conn:
        conn.execute("UPDATE runs SET regime = '[/]', gpu = '[bold]x', label = '[/x]'")
    conn.close()
    out = invoke("history")
    assert out.exit_code == 0 and "[/]" in out.output and "[bold]x" in out.output, out.output


def test_a_preset_without_runs_says_so_and_names_the_presets_that_have_them(data_dir):
    """`history --preset nonexistent` said "no runs kept yet" when runs were kept."""
    with History(data_dir / HISTORY_FILE) as history:
        history.record_many(
            [(RECORDED, name, "run") for name in ("bert-base", None, "gpt2-seed", "bert-base")]
        )
    out = invoke("history", "--preset", "nonexistent")
    assert out.exit_code == 0 and out.output == (
        f"none of the 4 runs kept in {data_dir / HISTORY_FILE} came from preset 'nonexistent'; "
        "runs came from the presets bert-base, gpt2-seed\n"
    )  # fmt: skip
    out = invoke("history", "--preset", "gpt2-seed", "--status", "mismatch")
    assert "came from preset 'gpt2-seed' and ended mismatch" in out.output
    assert "none of the 4 runs kept" in invoke("history", "--status", "mismatch").output
    with History(data_dir / HISTORY_FILE) as history:
        history.record_many([(RECORDED, f"p{i}", "run") for i in range(7)])
        assert history.presets(3) == ["p6", "p5", "p4"]
    assert "the presets p6, p5, p4, p3, p2, ...\n" in invoke("history", "--preset", "[/x]").output


def _unprivileged(folder) -> list[str]:
    """What runs a command without the rights to write a read-only `folder`: nothing more for a
    user, setpriv without the override of file modes for root; skipped where neither holds."""
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: a read-only folder stays writable")
        caps = "-dac_override,-dac_read_search,-fowner"
        prefix = ["setpriv", "--bounding-set", caps, "--inh-caps", caps]
    probe = subprocess.run([*prefix, sys.executable, "-c", f"open({str(folder / 'probe')!r}, 'w')"],
                           capture_output=True, timeout=120)  # fmt: skip
    if probe.returncode == 0:
        pytest.skip("this file system lets a read-only folder be written")
    return prefix


def test_a_read_only_history_is_still_read_and_a_run_says_it_is_not_kept(tmp_path):
    """On a read-only folder `history` said "unable to open database file" (WAL needs its -shm)
    though the database was intact; a run there warns once, and the database stays whole."""
    folder = tmp_path / "data"
    with History(folder / HISTORY_FILE) as history:
        history.record_many([(RECORDED, "gpt2-seed", "run"), (TRAINING, None, "run")])
    before = (folder / HISTORY_FILE).read_bytes()
    folder.chmod(0o555)
    try:
        prefix = _unprivileged(folder)
        script = (
            "import sys; sys.path.insert(0, 'tests')\nfrom fakes import RECORDED\n"
            "from tui.cli.main import main\nfrom tui.store.history import record\n"
            "record(RECORDED)\nmain(sys.argv[1:])\n"
        )

        def cli(*args: str) -> subprocess.CompletedProcess:
            env = {**os.environ, DATA_DIR_ENV: str(folder)}
            return subprocess.run([*prefix, sys.executable, "-c", script, *args], capture_output=True,
                                  text=True, env=env, timeout=120)  # fmt: skip

        listed = cli("history", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == [2, 1]
        (warning,) = listed.stderr.splitlines()
        assert warning.startswith("warning: run not kept in the history: ") and str(folder) in warning
        shown = cli("show", "2", "--json")
        assert shown.returncode == 0 and json.loads(shown.stdout)["config"]["backward"] is True, shown.stderr
    finally:
        folder.chmod(0o755)
    assert (folder / HISTORY_FILE).read_bytes() == before
    with History(folder / HISTORY_FILE) as history:
        assert history.count() == 2
