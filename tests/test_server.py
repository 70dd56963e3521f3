"""The engine server: engines of several launches forked from one process that imported torch
once, crashes still costing only the engine, and nothing of the server's outliving its use."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import tempfile
import threading

import pytest
from fakes import NO_GPU
from test_process import SMALL, assert_forked_from, client, next_of, parent_of

from tui.model.options import RunOptions
from tui.model.statuses import STATUS_CPU_ONLY
from tui.process import launcher, server_client
from tui.process.client import EngineDied, EngineReady, EngineResult
from tui.process.protocol import Ready
from tui.process.server import Server

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "send_fds") or not hasattr(os, "pidfd_open"),
    reason="needs SCM_RIGHTS and pidfds (Linux)",
)


def end_of(pid: int, what: str, timeout: float = 60.0) -> None:
    """Wait until process `pid` (not ours to reap) has exited: its pidfd turns readable then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([fd], [], [], timeout)[0], f"timed out waiting for {what}"
    finally:
        os.close(fd)


def serving(mp: pytest.MonkeyPatch, idle_s: str) -> str:
    """Engine servers on, in a short folder of their own (a socket's path is at most 107 bytes)."""
    folder = tempfile.mkdtemp(prefix="sdpa-rt-")
    mp.setenv(server_client.ENV_FOLDER, folder)
    mp.setenv(server_client.ENV_IDLE, idle_s)
    mp.setattr(launcher, "_failed", set())
    return folder


def server_status(wait_s: float = 5.0) -> dict | None:
    """The status the server in this test's folder gives (None when none runs there), waiting up
    to `wait_s` for its answer."""
    answers, _refused = server_client.ask_all("status", wait_s)
    return answers[0] if answers else None


def stop_server(folder: str) -> None:
    status = server_status()
    if status is not None:
        server_client.ask_all("stop")
        end_of(status["pid"], "the server to end")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    """One server for the module's tests: each of its starts imports torch."""
    with pytest.MonkeyPatch.context() as mp:
        folder = serving(mp, "120")
        launcher.warm().join()
        # a server just started answers once it has imported torch: 5-7 s where bytecode is not
        # compiled yet, so its answer is waited for, not its speed assumed
        status = server_status(wait_s=server_client.REPLY_WAIT_S)
        assert status is not None
        yield status["pid"]
        stop_server(folder)


def test_the_engines_of_two_launches_are_forks_of_one_server(server):
    pids = []
    for _launch in range(2):
        c, events = client()
        try:
            next_of(events, EngineReady)
            assert parent_of(c.pid) == server
            pids.append(c.pid)
            request = c.submit(SMALL, RunOptions())
            result = next_of(events, EngineResult)
            assert result.request_id == request and result.result.status == STATUS_CPU_ONLY
        finally:
            c.close()
    status = server_status()
    assert pids[0] != pids[1] and status["pid"] == server and status["engines"] == []
    assert status["served"] >= 2
    with open(f"/proc/{server}/maps", encoding="utf-8") as maps:  # torch imported once, there
        assert "libtorch" in maps.read(), "the engine server did not import torch"


def test_a_crash_costs_the_engine_and_says_which_signal(server):
    c, events = client()
    try:
        next_of(events, EngineReady)
        first = c.pid
        request = c.submit(SMALL, RunOptions())
        next_of(events, EngineResult)
        os.kill(first, signal.SIGSEGV)
        died = next_of(events, EngineDied)
        assert died.crashed and "SIGSEGV" in died.reason and died.restarting
        next_of(events, EngineReady)
        assert c.pid != first and parent_of(c.pid) == server  # the next engine: the same server's
        request = c.submit(SMALL, RunOptions())
        assert next_of(events, EngineResult).request_id == request
    finally:
        c.close()


def test_an_engine_ends_with_the_launch_that_asked_for_it(server):
    """A launch that dies leaves no engine behind: its connection's end is the engine's end."""
    from tui.process.child import engine_main

    proc, send, recv = server_client.launch(engine_main, (NO_GPU.__dict__, None), None)
    try:
        assert isinstance(recv.recv(), Ready)
        proc._sock.close()  # the launch gone, without a word
        end_of(proc.pid, "the engine to end")
    finally:
        send.close()
        recv.close()


def test_a_bad_caller_is_dropped_and_the_server_serves_on(server):
    path, _lock = server_client.paths()
    r, w = os.pipe()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        socket.send_fds(s, [b"not json\n"], [r])
        os.close(r)
        assert s.recv(64) == b""  # hung up on
    with pytest.raises(BrokenPipeError):  # and the descriptor it was sent, closed: no reader is left
        os.write(w, b"x")
    os.close(w)
    assert_forked_from(server)


def server_here(idle_s: float) -> tuple[Server, threading.Thread]:
    """The server's loop in a thread of this process, at this install's socket: its idle end and
    its stop, without the seconds a server process takes to import torch."""
    path, lock = server_client.paths()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    here = Server(listener, path, lock, idle_s)
    thread = threading.Thread(target=here.run, daemon=True)
    thread.start()
    return here, thread


def test_an_idle_server_ends_and_takes_its_socket_away(monkeypatch):
    folder = serving(monkeypatch, "60")
    try:
        here, thread = server_here(idle_s=0.3)
        thread.join(timeout=30)
        assert not thread.is_alive() and here.listener.fileno() == -1
        assert not os.path.exists(here.path) and server_status() is None
    finally:
        stop_server(folder)


def test_a_server_that_does_not_answer_is_asked_once_and_this_launch_forks_its_own(monkeypatch):
    import multiprocessing.forkserver

    folder = serving(monkeypatch, "60")
    monkeypatch.setattr(server_client, "REPLY_WAIT_S", 0.5)
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # listens, and never answers
    mute.bind(server_client.paths()[0])
    mute.listen(8)
    try:
        c, events = client()
        try:
            next_of(events, EngineReady)
            assert "server" in launcher._failed
            assert parent_of(c.pid) == multiprocessing.forkserver._forkserver._forkserver_pid
        finally:
            c.close()
        mute.setblocking(False)
        callers = []
        with contextlib.suppress(BlockingIOError):
            while True:
                callers.append(mute.accept()[0])
        assert len(callers) == 1  # asked once: a hang is not waited out twice
        for caller in callers:
            caller.close()
    finally:
        mute.close()
        stop_server(folder)


def test_a_changed_install_has_a_server_of_its_own(monkeypatch):
    key = server_client.server_key()
    monkeypatch.setenv("SDPA_EXPLORER_UNRELATED", "1")
    assert server_client.server_key() == key
    monkeypatch.setenv("LD_LIBRARY_PATH", "/elsewhere/lib")
    assert server_client.server_key() != key  # torch would load other libraries


def test_off_or_untrusted_means_this_launch_forks_its_own(monkeypatch, tmp_path):
    monkeypatch.setattr(launcher, "_failed", set())
    monkeypatch.setenv(server_client.ENV_IDLE, "0")
    assert not server_client.enabled()
    with pytest.raises(server_client.ServerUnavailable, match=r"turned off \(SDPA_EXPLORER_SERVER_IDLE=0\)"):
        server_client.connect()
    monkeypatch.setenv(server_client.ENV_IDLE, "60")
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    monkeypatch.setenv(server_client.ENV_FOLDER, str(folder))
    with pytest.raises(server_client.ServerUnavailable, match="writable by others"):
        server_client.connect()
    c, events = client()  # served anyway: by this launch's own fork server
    try:
        next_of(events, EngineReady)
        assert "server" in launcher._failed and not list(folder.iterdir())
    finally:
        c.close()


def test_the_server_command_shows_and_stops_the_servers(monkeypatch):
    from click.testing import CliRunner

    from tui.cli.main import main

    folder = serving(monkeypatch, "120")
    try:
        assert "no engine server runs" in CliRunner().invoke(main, ["server"]).output
        _here, thread = server_here(idle_s=120)
        shown = CliRunner().invoke(main, ["server"]).output
        assert f"engine server pid {os.getpid()}, this install's" in shown and "ends after 120 s" in shown
        stopped = CliRunner().invoke(main, ["server", "--stop", "--json"])
        assert stopped.exit_code == 0 and '"stopped": true' in stopped.output
        thread.join(timeout=30)
        assert not thread.is_alive() and server_status() is None
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a server that died, its socket left
        dead.bind(os.path.join(folder, "engine-0123456789abcdef.sock"))
        dead.close()
        assert "no engine server runs" in CliRunner().invoke(main, ["server"]).output
        assert not [f for f in os.listdir(folder) if f.endswith(".sock")]  # swept
        monkeypatch.setenv(server_client.ENV_IDLE, "0")
        assert "would start no engine server: turned off" in CliRunner().invoke(main, ["server"]).output
        monkeypatch.setenv(server_client.ENV_IDLE, "ten minutes")  # the default, said
        monkeypatch.setattr(server_client, "_warned", set())
        said = CliRunner().invoke(main, ["server"]).output
        assert "warning: SDPA_EXPLORER_SERVER_IDLE='ten minutes' is not a number of seconds" in said
        assert "would start no engine server" not in said
    finally:
        stop_server(folder)


@pytest.mark.gpu
def test_on_the_gpu_engines_forked_by_the_server_run_lose_their_context_and_are_replaced(monkeypatch):
    """The engine server imported torch and never CUDA: each engine it forks makes a context of its
    own, a lost one costs that engine only, and the next launch's engine runs at once."""
    from tui.model.config import SdpaConfig
    from tui.model.statuses import STATUS_CRASH, STATUS_OK
    from tui.process.session import EngineSession

    folder = serving(monkeypatch, "120")
    try:
        with EngineSession() as session:
            assert session.ready().gpu_available
            server = server_status()["pid"]
            assert parent_of(session.client.pid) == server
            lost = session.inject_fault()
            assert lost.status == STATUS_CRASH and lost.crash.context_lost, lost.message
            after = session.run(SdpaConfig(), RunOptions())
            assert after.status == STATUS_OK and session.restarts == 1, after.message
            assert parent_of(session.client.pid) == server
        with EngineSession() as later:  # the next launch: no torch to import
            assert later.ready().gpu_available and parent_of(later.client.pid) == server
            second = later.run(SdpaConfig(dtype="bf16"), RunOptions())
            assert second.status == STATUS_OK, second.message
    finally:
        stop_server(folder)


def test_a_socket_another_user_serves_is_never_asked(server, monkeypatch):
    """What an engine sends back is unpickled by its caller: a server of another user's (a socket
    put in a shared /tmp fallback folder) is refused before anything is sent to it."""
    from click.testing import CliRunner

    from tui.cli.main import main

    monkeypatch.setattr(server_client, "peer_uid", lambda _sock: os.getuid() + 1)
    with pytest.raises(server_client.ServerUnavailable, match="is served by another user"):
        server_client.connect()
    shown = CliRunner().invoke(main, ["server"])
    assert shown.exit_code == 1 and "is served by another user" in shown.output
    assert "not asked" in shown.output and "no engine server runs" not in shown.output
    monkeypatch.undo()
    assert server_status()["pid"] == server  # left as it was
