"""A launch's side of the engine server (server.py): find the one for this install, or start it,
and ask it for engine processes.

SDPA_EXPLORER_SERVER_IDLE says how long (seconds) a server waits for the next launch before it
ends; 0 never starts one (each launch then forks its engines from a fork server of its own,
launcher.py); a value that is no number of seconds up to a week is said on stderr and the default
used. SDPA_EXPLORER_RUNTIME_DIR moves the folder its socket and its lock live in; every use of
that folder checks it is this user's alone (private.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import multiprocessing
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..store.private import FolderRefused, checked_folder, locked, peer_uid, private_folder

ENV_IDLE = "SDPA_EXPLORER_SERVER_IDLE"
ENV_FOLDER = "SDPA_EXPLORER_RUNTIME_DIR"
DEFAULT_IDLE_S = 600.0
MAX_IDLE_S = 7 * 24 * 3600.0  # a week: a server's select cannot wait past 24.8 days in one call
# what torch and the frontend read as they load: a server started under other values would fork
# engines that loaded other libraries than this launch asks for
KEY_VARIABLES = ("LD_", "CUDA_HOME", "CUDA_PATH", "CUDNN", "TORCH", "PYTORCH", "NVIDIA_", "PYTHON")
START_WAIT_S = 10.0  # a new server binds its socket before it imports anything heavy
LOCK_NAME = "server.lock"  # callers connect, servers start and end under it, one at a time
REPLY_WAIT_S = 300.0  # a server still importing torch on a cold disk answers once it has
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (Linux)
_warned: set[str] = set()  # the bad idle values said already: once a process, before any UI


class ServerUnavailable(Exception):
    """No engine server here: turned off, not this platform, or it cannot start (message says)."""


def idle_seconds() -> float:
    """How long a server waits for the next launch: SDPA_EXPLORER_SERVER_IDLE, else 600 s; a
    value no server can wait (not a number, nan, inf, negative, past a week) is warned of once,
    on one line, and 600 s used: a typo costs no launch its server."""
    text = os.environ.get(ENV_IDLE, "").strip()
    if not text:
        return DEFAULT_IDLE_S
    try:
        idle = float(text)
    except ValueError:
        idle = math.nan
    if 0 <= idle <= MAX_IDLE_S:
        return abs(idle)  # -0 is 0
    if text not in _warned:
        _warned.add(text)
        shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
        print(
            f"warning: {ENV_IDLE}={shown} is not a number of seconds from 0 to {MAX_IDLE_S:.0f}; "
            f"the default, {DEFAULT_IDLE_S:.0f}, is used",
            file=sys.stderr,
        )
    return DEFAULT_IDLE_S


def unavailable() -> str:
    """Why launches here ask no engine server ('' when they do): not Linux, or turned off."""
    if sys.platform != "linux":
        return "the engine server runs on Linux only"
    return "" if idle_seconds() > 0 else f"turned off ({ENV_IDLE}=0)"


def enabled() -> bool:
    return not unavailable()


def folder() -> Path:
    """Where the servers' sockets and their lock are, as an absolute path: a server leaves the
    folder it was started in, and must find the same files as its callers."""
    if os.environ.get(ENV_FOLDER):
        return Path(os.path.abspath(os.environ[ENV_FOLDER]))
    import platformdirs

    with warnings.catch_warnings():  # no XDG_RUNTIME_DIR: its fallback (in /tmp, ours alone) serves
        warnings.simplefilter("ignore")
        return Path(os.path.abspath(platformdirs.user_runtime_dir("sdpa-explorer")))


def server_key() -> str:
    """What the server's imports depend on: the Python, the import path, the variables torch reads
    as it loads, and the files of this package, torch and the frontend (their sizes and times)."""
    h = hashlib.sha256()
    variables = sorted((k, v) for k, v in os.environ.items() if k.startswith(KEY_VARIABLES))
    h.update(repr((sys.executable, sys.version, import_path(), variables)).encode())
    package = Path(__file__).resolve().parents[1]
    files = sorted(package.rglob("*.py"))
    for name in ("torch", "cudnn"):
        with contextlib.suppress(Exception):
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin:
                files += [Path(spec.origin), Path(spec.origin).parent]
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def import_path() -> list[str]:
    """sys.path with '' made the folder it means: `python -c`, `-m` and a script from one folder
    import alike, and the server (which outlives this folder as its own) imports as they do."""
    return [os.path.abspath(p) if not p or not os.path.isabs(p) else p for p in sys.path]


def paths() -> tuple[str, str]:
    """This install's server socket and the lock its callers and its end take turns on."""
    if sys.platform != "linux":
        raise ServerUnavailable("the engine server runs on Linux only")
    try:
        where = private_folder(folder())
    except (OSError, FolderRefused) as exc:
        raise ServerUnavailable(f"no folder for its socket: {exc}") from None
    path = str(where / f"engine-{server_key()}.sock")
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise ServerUnavailable(
            f"{path} is over {SOCKET_PATH_MAX} bytes, a socket's most: set a shorter {ENV_FOLDER}"
        )
    return path, str(where / LOCK_NAME)


def _connect(path: str) -> socket.socket | None:
    """A connection to the server listening at `path`, or None where none listens. A socket
    served by another user is refused: what comes back from an engine is unpickled here."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    uid = peer_uid(sock)
    if uid not in (None, os.getuid()):
        sock.close()
        raise ServerUnavailable(f"{path} is served by another user (uid {uid})")
    return sock


def _start(path: str, lock_path: str, idle_s: float) -> None:
    """Start a server in a session of its own (it outlives us); return once it listens."""
    code = (
        "import json, os, sys; sys.path[:] = json.loads(os.environ.pop('SDPA_EXPLORER_SYS_PATH')); "
        "from tui.process.server import main; main(sys.argv[1], sys.argv[2], float(sys.argv[3]))"
    )
    null = subprocess.DEVNULL
    done = subprocess.run(
        [sys.executable, "-c", code, path, lock_path, str(idle_s)],
        env={**os.environ, "SDPA_EXPLORER_SYS_PATH": json.dumps(import_path())},  # imports as the caller's
        stdin=null,
        stdout=null,
        stderr=null,
        start_new_session=True,
        timeout=START_WAIT_S,
    )
    if done.returncode != 0:
        raise ServerUnavailable(f"the engine server did not start (exit {done.returncode})")


def connect() -> socket.socket:
    """A connection to this install's server, started first when there is none."""
    idle_s = idle_seconds()
    if idle_s <= 0:
        raise ServerUnavailable(f"turned off ({ENV_IDLE}=0)")
    path, lock_path = paths()
    try:
        with locked(Path(lock_path)):
            sock = _connect(path)
            if sock is None:
                _start(path, lock_path, idle_s)
                sock = _connect(path)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServerUnavailable(f"the engine server did not start: {exc}") from None
    except FolderRefused as exc:
        raise ServerUnavailable(f"no lock for it: {exc}") from None
    if sock is None:
        raise ServerUnavailable("the engine server refused")
    return sock


def warm() -> None:
    """Make sure a server is up (torch loads there while the caller goes on); never raises."""
    with contextlib.suppress(ServerUnavailable):
        connect().close()


class ServedProcess:
    """An engine process the server forked, as the caller sees it (launcher.EngineProcess's face):
    its exit code comes over the connection, a kill is asked of the server (its parent, so the pid
    cannot have been reused yet)."""

    def __init__(self, sock: socket.socket, pid: int, pending: bytes = b""):
        self.pid = pid
        self._sock = sock
        self._buffer = pending
        self._code: int | None = None
        self._gone = False  # the server hung up without a code: ours to find out
        self._lock = threading.Lock()
        sock.setblocking(False)

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def _take(self) -> None:
        with self._lock:
            while self._code is None and not self._gone:
                try:
                    chunk = self._sock.recv(256)
                except BlockingIOError:
                    break
                except OSError:
                    chunk = b""
                if not chunk:
                    self._gone = True
                    break
                self._buffer += chunk
                for line in self._buffer.split(b"\n")[:-1]:
                    if line.startswith(b"exit "):
                        self._code = int(line.split()[1])
            if self._code is None and self._gone and not _alive(self.pid):
                self._code = -signal.SIGKILL  # its server ended first: how it ended is not known

    def poll(self) -> int | None:
        self._take()
        return self._code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self._gone:
                time.sleep(min(0.05, left))
            else:
                with contextlib.suppress(OSError, ValueError):
                    select.select([self._sock], [], [], left)
        return self._code

    def kill(self) -> None:
        if self.poll() is not None:
            return
        try:
            self._sock.send(b"kill\n")
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def release(self) -> None:
        if self.poll() is not None:
            self._sock.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def launch(target: Any, args: tuple, log_file: str | None) -> tuple[ServedProcess, Connection, Connection]:
    """`target(recv, send, *args, log_file)` in an engine process forked by the server; raises
    ServerUnavailable when there is none to ask (the caller then starts one itself)."""
    for attempt in range(2):  # a server that ended as we came: start another, once
        sock = connect()
        to_child_r, to_child_w = multiprocessing.Pipe(duplex=False)
        to_parent_r, to_parent_w = multiprocessing.Pipe(duplex=False)
        request = {
            "op": "engine",
            "target": f"{target.__module__}:{target.__qualname__}",
            "args": [*args, log_file],
            "env": dict(os.environ),
            "cwd": os.getcwd(),
        }
        try:
            socket.send_fds(
                sock, [json.dumps(request).encode() + b"\n"], [to_child_r.fileno(), to_parent_w.fileno()]
            )
            pid, pending = _pid_reply(sock)
        except (OSError, ConnectionError) as exc:
            sock.close()
            to_child_w.close()
            to_parent_r.close()
            if attempt or isinstance(exc, TimeoutError):  # one that hangs is not asked twice
                raise ServerUnavailable(f"the engine server did not answer: {exc}") from None
            continue
        finally:
            to_child_r.close()  # the engine's ends live in the engine only: its death reads as EOF
            to_parent_w.close()
        return ServedProcess(sock, pid, pending), to_child_w, to_parent_r
    raise ServerUnavailable("the engine server did not answer")  # pragma: no cover - loop returns


def _pid_reply(sock: socket.socket) -> tuple[int, bytes]:
    sock.settimeout(REPLY_WAIT_S)
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(256)
        if not chunk:
            raise ConnectionError("it hung up before it forked an engine")
        data += chunk
    line, _, rest = data.partition(b"\n")
    if not line.startswith(b"pid "):
        raise ConnectionError(f"it said {line[:80]!r}")
    return int(line.split()[1]), rest


def _ask(sock: socket.socket, op: str, wait_s: float) -> dict[str, Any] | None:
    with sock:
        sock.settimeout(wait_s)
        sock.sendall(json.dumps({"op": op}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    line = data.strip()
    return {"stopping": True} if line == b"ok" else json.loads(line) if line else None


def ask_all(op: str, wait_s: float = 5.0) -> tuple[list[dict[str, Any]], list[str]]:
    """The answer of every server of this user's (this install's and others': an older version's,
    another virtual environment's) to `status` or `stop`, and what was not asked, in words: a
    folder that is not this user's alone, a socket another user serves. One that has not answered
    in `wait_s` (still importing torch, say) is left out."""
    answers: list[dict[str, Any]] = []
    try:
        where = checked_folder(folder())
        sockets = sorted(where.glob("engine-*.sock"))
    except FileNotFoundError:
        return answers, []
    except (OSError, FolderRefused) as exc:
        return answers, [f"{exc}: no server in it was asked"]
    refused = []
    for path in sockets:
        try:
            sock = _connect(str(path))
        except ServerUnavailable as exc:
            refused.append(f"{exc}: not asked")
            continue
        if sock is None:
            _sweep(path)
            continue
        with contextlib.suppress(OSError, ValueError, TypeError):
            answer = _ask(sock, op, wait_s)
            if answer is not None:
                answers.append({**answer, "socket": str(path)})
    return answers, refused


def _sweep(path: Path) -> None:
    """Remove the socket of a server that died without taking it away, under the lock a starting
    server binds under (so never one that is about to listen)."""
    with contextlib.suppress(OSError, FolderRefused, ServerUnavailable), locked(path.parent / LOCK_NAME):
        sock = _connect(str(path))
        if sock is None:
            path.unlink()
        else:
            sock.close()
