"""The files the tool writes: only regular files are replaced (a link's target is written; a
device, a FIFO or a folder is refused, before the run), no folder is made unasked, a new file
follows the umask and a replaced one keeps its mode, concurrent saves of one name have exactly
one winner, and what a killed save left behind is cleaned up by the next save."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import NO_GPU, RECORDED, FakeEngine, relabelled
from full_disk import full_after

from tui.cli import common as cli
from tui.cli.main import main
from tui.model.config import SdpaConfig
from tui.process.session import EngineSession
from tui.store import presets as presetmod
from tui.store.files import WriteRefused, atomic_write, write_problem

SMALL = ["--b", "1", "--h", "2", "--s", "64", "--no-check"]


@pytest.fixture
def engine(monkeypatch):
    """The CLI's engine: a recording relabelled for whatever is asked; `requests` says what ran."""
    fake = FakeEngine(relabelled(RECORDED), environment=NO_GPU)
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    return fake


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A preset folder of the test's own, inside its temporary folder."""
    folder = tmp_path / "my-presets"
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
    return folder


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def run(*args: str):
    return CliRunner().invoke(main, ["run", *SMALL, *args])


def test_exports_that_would_replace_a_fifo_a_folder_or_make_one_are_refused_before_the_run(tmp_path, engine):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    missing = tmp_path / "no-such-folder" / "plans.csv"
    result = run("--save-json", str(fifo), "--save-csv", str(missing))
    assert result.exit_code == 2, result.output
    assert engine.requests == []  # said before the run, not after it
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not missing.parent.exists()
    assert f"--save-json: cannot write {fifo}: a FIFO is there, not a regular file" in result.output
    assert f"--save-csv: cannot write {missing}: the folder {missing.parent} does not exist" in result.output
    assert write_problem(tmp_path) == "a folder is there, not a regular file"  # (click says so first)


def test_a_device_node_is_never_replaced(tmp_path):
    assert write_problem("/dev/null") == "a character device is there, not a regular file"
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("no permission to make a device node here")
    with pytest.raises(WriteRefused, match="a character device is there"):
        atomic_write(node, "text")
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_an_export_through_a_link_writes_its_target_and_keeps_its_mode(tmp_path, engine):
    target = tmp_path / "kept" / "result.json"
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "result.json"
    link.symlink_to(target)
    result = run("--save-json", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(target.read_text())["config"]["s_q"] == 64
    assert mode_of(target) == 0o640
    assert "the link's target" in result.output


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_new_files_follow_the_umask(tmp_path, user_dir, engine, mask):
    with umask(mask):
        result = run("--save-csv", str(tmp_path / "plans.csv"))
        saved = presetmod.save_user("mine", SdpaConfig(b=1))
    assert result.exit_code == 0, result.output
    assert mode_of(tmp_path / "plans.csv") == 0o666 & ~mask
    assert mode_of(saved) == 0o666 & ~mask


def test_a_replaced_file_keeps_its_mode(tmp_path, user_dir):
    script = tmp_path / "repro.py"
    script.write_text("old")
    script.chmod(0o755)
    with umask(0o077):
        atomic_write(script, "new")
        presetmod.save_user("mine", SdpaConfig(b=1))
        (user_dir / "mine.toml").chmod(0o664)
        presetmod.save_user("mine", SdpaConfig(b=2), overwrite=True)
    assert script.read_text() == "new" and mode_of(script) == 0o755
    assert mode_of(user_dir / "mine.toml") == 0o664


def test_concurrent_saves_of_one_name_have_exactly_one_winner(user_dir):
    racers = 20
    start = threading.Barrier(racers)
    outcomes: dict[int, str] = {}

    def save(b: int) -> None:
        start.wait()
        try:
            presetmod.save_user("raced", SdpaConfig(b=b))
            outcomes[b] = "saved"
        except presetmod.PresetExists:
            outcomes[b] = "exists"

    threads = [threading.Thread(target=save, args=(b,)) for b in range(1, racers + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [b for b, outcome in outcomes.items() if outcome == "saved"]
    assert len(winners) == 1 and len(outcomes) == racers
    assert presetmod.find("raced").config.b == winners[0]
    assert sorted(p.name for p in user_dir.iterdir()) == ["raced.toml"]


KILLED_SAVE = """
import os, signal, sys
from tui.store import presets
from tui.model.config import SdpaConfig
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # killed mid-save, as kill -9 would
presets.save_user("half", SdpaConfig(b=3))
"""


def test_a_killed_save_leaves_a_temporary_file_that_the_next_save_removes(user_dir):
    user_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[2])}
    killed = subprocess.run([sys.executable, "-c", KILLED_SAVE], env=env, cwd=user_dir)
    assert killed.returncode == -9
    (left,) = user_dir.iterdir()
    assert left.name.startswith(".half.toml.") and left.name.endswith(".tmp")
    an_hour_ago = time.time() - 2 * 3600
    older = user_dir / ".gone.toml.ab_cd123.tmp"  # as the tool's mkstemp named them before
    older.write_text("x")
    os.utime(older, (an_hour_ago, an_hour_ago))
    live = user_dir / f".busy.toml.{os.getpid()}-0123abcd.tmp"  # a save under way right now
    live.write_text("x")
    a_minute_ago = time.time() - 60
    os.utime(left, (a_minute_ago, a_minute_ago))
    os.utime(live, (a_minute_ago, a_minute_ago))
    presetmod.save_user("next", SdpaConfig(b=1))
    assert sorted(p.name for p in user_dir.iterdir()) == [live.name, "next.toml"]


# ---- a full disk, the tool's own files ---------------------------------------------------------
def test_a_write_the_disk_cuts_short_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    target.write_text("old")
    full_after(monkeypatch, 10)
    with pytest.raises(OSError, match="No space left on device"):
        atomic_write(target, "x" * 3017)
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"] and target.read_text() == "old"


FILE_SIZE_LIMIT = """
import errno, resource, sys
from tui.store.files import LineFile, atomic_write
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))  # as `ulimit -f 1`
try:
    atomic_write(sys.argv[1], "x" * 3017)
except OSError as exc:
    print(errno.errorcode[exc.errno])
with LineFile(sys.argv[2]) as rows:
    rows.append("a" * 1000 + "\\n")
    try:
        rows.append("b" * 1000 + "\\n")
    except OSError as exc:
        print(errno.errorcode[exc.errno])
"""


def test_under_a_file_size_limit_a_file_is_written_whole_or_not_at_all(tmp_path):
    """The limit cuts the file; the writer takes the cut part back (SIGXFSZ ignored, as Python does)."""
    target, rows = tmp_path / "result.json", tmp_path / "rows.jsonl"
    target.write_text("old")
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", FILE_SIZE_LIMIT, str(target), str(rows)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["EFBIG", "EFBIG"]
    assert target.read_text() == "old" and rows.read_text() == "a" * 1000 + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json", "rows.jsonl"]


def test_a_run_whose_export_fails_is_kept_in_the_history_and_says_so(tmp_path, engine, monkeypatch):
    from tui.store.history import History

    with History() as history:
        before = history.count()
    script = tmp_path / "repro.py"
    full_after(monkeypatch, 100)
    result = run("--save-script", str(script))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    said = [line for line in result.output.splitlines() if "--save-script" in line]
    assert said == [f"Error: --save-script: cannot write {script}: No space left on device"]
    assert not script.exists()
    with History() as history:
        assert history.count() == before + 1  # the run was kept before the export failed
        assert history.runs(limit=1)[0].s_q == 64


def test_the_tools_own_files_are_never_an_exports_target(tmp_path, engine):
    from tui.store.history import History
    from tui.store.places import history_path as default_path
    from tui.store.plan_cache import PlanCache

    assert run().exit_code == 0  # the history's database is there now
    database = default_path()
    kept = database.read_bytes()
    link = tmp_path / "innocent.json"
    link.symlink_to(database)
    cache = PlanCache()
    cache.ready()
    engine.requests.clear()
    for option, path in (
        ("--save-json", database),
        ("--save-csv", link),
        ("--save-script", cache.folder / "k.json"),
    ):
        result = run(option, str(path))
        assert result.exit_code == 2, result.output
        assert f"{option}: cannot write {path}: that is " in result.output
    assert engine.requests == []  # refused before the run
    assert database.read_bytes() == kept
    with History() as history:
        assert history.count() >= 1
    assert not (cache.folder / "k.json").exists()
    with pytest.raises(WriteRefused, match="the run history's database"):
        atomic_write(database, "{}")
    with pytest.raises(WriteRefused, match="the plan cache's folder"):
        atomic_write(cache.folder / "k.json", "{}")
