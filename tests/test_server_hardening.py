"""The engine server and its callers against what a fault-testing round tried: a runtime folder
that is not the user's alone, a lock file that is a link, a relative runtime folder, a caller
that trickles its request, and idle values no server can wait. Each runs the server's loop in a
thread of this process (test_server.server_here): no torch to import."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import time

import pytest
from click.testing import CliRunner
from test_server import server_here, serving, stop_server

from tui.cli.main import main
from tui.process import server, server_client
from tui.store import private

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "send_fds") or not hasattr(os, "pidfd_open"),
    reason="needs SCM_RIGHTS and pidfds (Linux)",
)
WAIT_S = 60.0  # a generous bound on what should take milliseconds
DEAD = "engine-0123456789abcdef.sock"


@pytest.fixture
def folder(monkeypatch):
    """A runtime folder of this test's (short: a socket's path is at most 107 bytes)."""
    where = serving(monkeypatch, "120")
    monkeypatch.setattr(server_client, "_warned", set())
    yield where
    stop_server(where)


def dead_socket(path: str) -> None:
    """The socket a server that died leaves behind."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()


def stop_here(here: server.Server, thread) -> None:
    """Stop a server_here straight through its socket (no check of who serves it), and wait."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(WAIT_S)
        s.connect(here.path)
        s.sendall(b'{"op": "stop"}\n')
        s.recv(64)
    thread.join(timeout=WAIT_S)


def run_cli(*args: str):
    return CliRunner().invoke(main, ["server", *args])


@pytest.mark.parametrize("why", ["writable by others", "belongs to another user"])
def test_a_runtime_folder_not_ours_alone_is_not_looked_in(folder, tmp_path, monkeypatch, why):
    """Neither its lock (a link here) is opened nor its sockets swept, by `server` or a launch."""
    target = tmp_path / "made-through-the-link"
    os.symlink(target, os.path.join(folder, server_client.LOCK_NAME))
    dead_socket(os.path.join(folder, DEAD))
    if why == "writable by others":
        os.chmod(folder, 0o777)
    else:
        monkeypatch.setattr(private, "ours", lambda _st: False)
    for args in ((), ("--stop",), ("--json",)):
        said = run_cli(*args)
        assert said.exit_code == 1 and why in said.output and "no server in it was asked" in said.output
        assert "Traceback" not in said.output
    with pytest.raises(server_client.ServerUnavailable, match=why):
        server_client.connect()
    assert not os.path.lexists(target) and os.path.exists(os.path.join(folder, DEAD))


def test_a_lock_that_is_a_link_or_no_file_is_refused(folder, tmp_path):
    lock = os.path.join(folder, server_client.LOCK_NAME)
    target = tmp_path / "made-through-the-link"
    os.symlink(target, lock)
    with pytest.raises(server_client.ServerUnavailable, match="is a link, not a lock file"):
        server_client.connect()
    dead_socket(os.path.join(folder, DEAD))
    assert server_client.ask_all("status") == ([], [])
    assert os.path.exists(os.path.join(folder, DEAD))  # not swept without its lock
    os.unlink(lock)
    os.mkfifo(lock)
    with pytest.raises(server_client.ServerUnavailable, match="is not a lock file of ours"):
        server_client.connect()
    os.unlink(lock)
    here, thread = server_here(idle_s=120)  # a server's end takes the lock too
    os.symlink(target, lock)
    stop_here(here, thread)
    assert not thread.is_alive() and not os.path.exists(here.path)
    assert not os.path.lexists(target)


def test_a_relative_runtime_folder_names_the_same_files_after_the_server_leaves_it(
    folder, tmp_path, monkeypatch
):
    """The server changes folder to /: a relative SDPA_EXPLORER_RUNTIME_DIR read as it is would
    make it lock and unlink other files than its callers."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv(server_client.ENV_FOLDER, "rt")
    path, lock = server_client.paths()
    assert os.path.isabs(path) and os.path.dirname(path) == os.path.join(folder, "rt")
    assert lock == os.path.join(folder, "rt", server_client.LOCK_NAME)
    here, thread = server_here(idle_s=120)
    away = tmp_path / "away"
    away.mkdir()
    monkeypatch.chdir(away)  # as the server does
    stop_here(here, thread)
    assert not thread.is_alive() and not os.path.exists(path)  # no stale socket
    assert list(away.iterdir()) == []


def test_a_caller_that_trickles_its_request_holds_no_other_caller_up(folder, monkeypatch):
    """Its request has a deadline (far off here): meanwhile others are answered."""
    monkeypatch.setattr(server, "HEADER_WAIT_S", 600.0)
    here, thread = server_here(idle_s=120)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
            slow.connect(here.path)
            slow.sendall(b"{")
            answers, refused = server_client.ask_all("status", wait_s=WAIT_S)
            assert [a["pid"] for a in answers] == [os.getpid()] and refused == []
            slow.setblocking(False)
            with pytest.raises(BlockingIOError):  # not hung up on: its deadline is not here yet
                slow.recv(1)
    finally:
        stop_here(here, thread)


def test_a_request_not_whole_by_its_deadline_is_dropped_with_its_descriptors(folder, monkeypatch):
    """Each byte in time for the read before is not enough: the whole request has a deadline."""
    monkeypatch.setattr(server, "HEADER_WAIT_S", 0.5)
    here, thread = server_here(idle_s=120)
    r, w = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
            slow.connect(here.path)
            socket.send_fds(slow, [b"{"], [r])
            os.close(r)
            hung_up, give_up = False, time.monotonic() + WAIT_S
            while not hung_up and time.monotonic() < give_up:
                if select.select([slow], [], [], 0.05)[0]:
                    try:
                        hung_up = slow.recv(64) == b""
                    except ConnectionResetError:  # it closed with our spaces unread: a hang-up too
                        hung_up = True
                else:
                    with contextlib.suppress(OSError):
                        slow.sendall(b" ")
            assert hung_up
        with pytest.raises(BrokenPipeError):  # the pipe it sent was closed: no reader is left
            os.write(w, b"x")
    finally:
        os.close(w)
        stop_here(here, thread)


@pytest.mark.parametrize(
    "value", ["inf", "1e309", "-inf", "nan", "-5", "soon", "1e9", pytest.param("9" * 400, id="400 nines")]
)
def test_an_idle_value_no_server_can_wait_is_the_default_said_once(folder, monkeypatch, capsys, value):
    monkeypatch.setenv(server_client.ENV_IDLE, value)
    assert server_client.idle_seconds() == server_client.DEFAULT_IDLE_S
    assert server_client.unavailable() == "" and server_client.enabled()
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("warning: SDPA_EXPLORER_SERVER_IDLE=")
    assert value[:40] in said[0] and len(said[0]) < 200
    monkeypatch.setattr(server_client, "_warned", set())  # a new launch's
    shown = run_cli()
    assert shown.exit_code == 0 and "no engine server runs" in shown.output
    assert "warning: SDPA_EXPLORER_SERVER_IDLE=" in shown.output
    assert "would start no engine server" not in shown.output


def test_a_server_told_to_wait_for_ever_still_serves(folder):
    """inf reaches no server now; one given it anyway waits in bounded steps, never overflows."""
    here, thread = server_here(idle_s=float("inf"))
    try:
        answers, _refused = server_client.ask_all("status", wait_s=WAIT_S)
        assert thread.is_alive() and [a["pid"] for a in answers] == [os.getpid()]
    finally:
        stop_here(here, thread)


def test_a_socket_another_user_serves_is_said_and_not_asked(folder, monkeypatch):
    here, thread = server_here(idle_s=120)
    try:
        monkeypatch.setattr(server_client, "peer_uid", lambda _sock: os.getuid() + 1)
        monkeypatch.setattr(server_client, "_ask", lambda *_a: pytest.fail("asked a stranger"))
        shown = run_cli()
        line = f"{here.path} is served by another user (uid {os.getuid() + 1}): not asked"
        assert shown.exit_code == 1 and line in shown.output, shown.output
        assert "no engine server runs" not in shown.output
        as_json = run_cli("--json")
        assert as_json.exit_code == 1 and json.loads(as_json.output)["refused"] == [line]
        assert thread.is_alive() and os.path.exists(here.path)  # left as it was
    finally:
        stop_here(here, thread)
