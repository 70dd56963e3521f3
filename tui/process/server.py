"""The engine server: a process that imported torch once and forks an engine process for each
launch that asks, until it has served no one for a while (SDPA_EXPLORER_SERVER_IDLE seconds).

Importing torch is most of a fresh launch's wait for its first result (3.7-5.9 s on the H200).
The fork server of one launch (launcher.py) ends with it; this one outlives the launch that
started it, so the next launch forks an engine at once. It is still the engine process that
runs cuDNN: a crash or a hang costs that process, never the server. The server never touches
CUDA (a process that holds a CUDA context must not fork) and so holds no GPU memory.

It serves its own user only: it listens in a folder no one else can enter (private.py) and checks
each caller's uid. Its socket's name carries a key of the Python, the import path, the variables
torch reads as it loads and the files of the package, torch and the frontend
(server_client.server_key), so an upgrade or an edit starts a new server instead of forking
stale code. Every use of that folder checks it is this user's alone, and its lock is never opened
through a link.

No caller holds the others up: requests are read side by side as their bytes come, and one that
is not whole HEADER_WAIT_S after its caller connected is dropped; meanwhile other launches are
served and ended engines reaped.

One connection a request; the caller sends one JSON line, with two descriptors for an engine:
  {"op": "engine", "target": "module:function", "args": [...], "env": {...}, "cwd": "..."}
    + the engine's request pipe (read end) and reply pipe (write end), by SCM_RIGHTS
    -> "pid N"; later "exit CODE" (negative: the signal that ended it); the caller may send
    "kill". The caller's end of the connection closing ends its engine too.
  {"op": "status"} -> one JSON line;  {"op": "stop"} -> "ok", and the server ends once its
    engines have.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..store.private import FolderRefused, checked_folder, locked, peer_uid

REAP_S = 0.05  # how often a server with engines or requests coming in looks at them
IDLE_CHECK_S = 60.0  # the longest one wait of an idle server: a select cannot wait for ever
HEADER_LIMIT = 1 << 20  # bytes of a request's line; the environment is most of it
HEADER_WAIT_S = 5.0  # a caller whose request is not whole this long after it connected is dropped
SEND_WAIT_S = 5.0  # a reply of a line fits any socket's buffer: a caller that takes none is dropped


@dataclass(eq=False)
class Request:
    """A caller's request as it comes in, with the descriptors sent so far; it has until
    `deadline` (monotonic) to be whole."""

    conn: socket.socket
    deadline: float
    data: bytes = b""
    fds: list[int] = field(default_factory=list)

    def read(self) -> bool:
        """Take what the caller sent; whether the line is whole. ConnectionError: it hung up
        first, or sent more than a request may be."""
        try:
            chunk, got, _flags, _addr = socket.recv_fds(self.conn, 65536, 4)
        except BlockingIOError:
            return False
        except OSError:
            chunk, got = b"", []
        self.fds += got
        if not chunk or len(self.data) + len(chunk) > HEADER_LIMIT:
            raise ConnectionError("the caller hung up before its request was whole")
        self.data += chunk
        return self.data.endswith(b"\n")

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.conn.close()


class Server:
    def __init__(self, listener: socket.socket, path: str, lock_path: str, idle_s: float):
        self.listener, self.path, self.lock_path, self.idle_s = listener, path, lock_path, idle_s
        self.inode = os.stat(path).st_ino  # the name we bound: a newer server may take it over
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ)
        self.engines: dict[int, socket.socket] = {}  # pid -> its caller's connection
        self.coming: set[Request] = set()  # requests not whole yet
        self.started = time.time()
        self.served = 0
        self.last_busy = time.monotonic()
        self.stopping = False

    def run(self) -> None:
        while True:
            events = self.sel.select(timeout=self.wait_s())
            for key, _mask in events:
                if key.fileobj is self.listener:
                    self.accept()
                elif isinstance(key.data, Request):
                    self.take(key.data)
                else:
                    self.heard(key.fileobj, key.data)
            self.drop_late()
            self.reap()
            if self.engines:
                self.last_busy = time.monotonic()
            elif not self.coming and (self.stopping or self.idle_left() <= 0) and self.leave():
                return

    def wait_s(self) -> float:
        if self.engines or self.coming:
            return REAP_S
        return min(max(self.idle_left(), 0.01), IDLE_CHECK_S)

    def idle_left(self) -> float:
        return self.idle_s - (time.monotonic() - self.last_busy)

    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        if peer_uid(conn) not in (None, os.getuid()):  # a caller of another user
            conn.close()
            return
        conn.setblocking(False)
        request = Request(conn, time.monotonic() + HEADER_WAIT_S)
        self.coming.add(request)
        self.sel.register(conn, selectors.EVENT_READ, request)

    def take(self, request: Request) -> None:
        """Read what a caller sent; answer its request once it is whole, drop it if it is bad."""
        try:
            if not request.read():
                return
        except ConnectionError:
            self.drop(request)
            return
        self.forget(request)
        try:
            line = json.loads(request.data)
            if not isinstance(line, dict):
                raise ValueError("a request is a JSON object")
        except (ValueError, RecursionError):  # not JSON, or nested past what it parses
            request.close()
            return
        request.conn.settimeout(SEND_WAIT_S)
        try:
            self.answer(request.conn, line, request.fds)
        except OSError:
            request.conn.close()

    def drop_late(self) -> None:
        now = time.monotonic()
        for request in [r for r in self.coming if r.deadline <= now]:
            self.drop(request)

    def forget(self, request: Request) -> None:
        self.coming.discard(request)
        self.sel.unregister(request.conn)

    def drop(self, request: Request) -> None:
        self.forget(request)
        request.close()

    def answer(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        op = request.get("op")
        if op == "engine" and len(fds) == 2:
            self.last_busy = time.monotonic()  # a status or a stop does not keep the server
            pid = self.fork(conn, request, fds)
            self.engines[pid] = conn  # reaped whatever happens next
            self.served += 1
            try:
                conn.sendall(f"pid {pid}\n".encode())
            except OSError:  # the caller is gone already: so is its engine
                os.kill(pid, signal.SIGKILL)
                return
            conn.setblocking(False)
            self.sel.register(conn, selectors.EVENT_READ, pid)
            return
        for fd in fds:
            os.close(fd)
        if op == "status":
            status = {
                "pid": os.getpid(),
                "socket": self.path,
                "started": self.started,
                "idle_s": self.idle_s,
                "idle_left_s": round(self.idle_left(), 1),
                "engines": sorted(self.engines),
                "served": self.served,
            }
            conn.sendall((json.dumps(status) + "\n").encode())
        elif op == "stop":
            self.stopping = True
            self.unlink()  # no new caller finds it
            conn.sendall(b"ok\n")
        conn.close()

    def fork(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
        pid = os.fork()
        if pid == 0:  # the engine: nothing of the server's is its own
            code = 1
            try:
                self.sel.close()
                self.listener.close()
                for other in self.engines.values():
                    other.close()
                for coming in self.coming:  # another caller's pipes would outlive it in here
                    coming.close()
                conn.close()
                code = run_engine(request, fds)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        return pid

    def heard(self, conn: Any, pid: int) -> None:
        """A caller spoke (kill) or hung up (its engine ends with it)."""
        try:
            data = conn.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if pid in self.engines and (not data or b"kill" in data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # not yet reaped, so the pid is still its own
        if not data:
            self.sel.unregister(conn)

    def reap(self) -> None:
        while self.engines:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.engines.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError):
                conn.setblocking(True)
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(conn)
            conn.close()

    def leave(self) -> bool:
        """End, unless a caller came while the socket was being taken away (then serve it)."""
        try:
            with locked(Path(self.lock_path)):  # callers connect under this lock: none is halfway
                if self.sel.select(timeout=0) and not self.stopping:
                    return False
                self.close()
        except (OSError, FolderRefused):  # no lock to trust now (its folder changed): end anyway
            self.close()
        return True

    def close(self) -> None:
        self.unlink()
        self.listener.close()

    def unlink(self) -> None:
        """Take our socket's name away, unless a newer server already holds it."""
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)


def run_engine(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: the caller's environment and folder, then its target; the exit code."""
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(request.get("env", {}))
    with contextlib.suppress(OSError, TypeError):
        os.chdir(request["cwd"])
    recv, send = Connection(fds[0], writable=False), Connection(fds[1], readable=False)
    module, _, name = request["target"].partition(":")
    try:
        getattr(importlib.import_module(module), name)(recv, send, *request.get("args", ()))
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    return 0


def main(path: str, lock_path: str, idle_s: float) -> None:
    """Listen at `path`, then leave the caller (which waits for this process to exit, so it can
    connect at once) and go on in a grandchild of a session of its own: torch, then serve."""
    path, lock_path = os.path.abspath(path), os.path.abspath(lock_path)  # the same after the chdir
    checked_folder(Path(path).parent)  # raises: the caller says this server did not start
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead server's (the caller found it refusing, under the lock)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    server = Server(listener, path, lock_path, idle_s)
    if os.fork():
        os._exit(0)
    os.setsid()
    os.chdir("/")  # holds no caller's folder (each engine goes to its caller's)
    from . import server_preload  # noqa: F401 - output to the null device, then torch

    server.run()
    os._exit(0)
