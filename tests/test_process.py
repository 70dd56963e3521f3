"""The engine's child process, headless: stale requests skipped, silence and crashes survived."""

from __future__ import annotations

import os
import queue
import signal
import threading
from pathlib import Path

import pytest
from fakes import NO_GPU, FakeEngine

from tui.model.config import SdpaConfig
from tui.model.options import RunOptions
from tui.model.statuses import STATUS_CANCELLED
from tui.process import launcher
from tui.process.client import (
    EngineClient,
    EngineClientProtocol,
    EngineDied,
    EngineProgress,
    EngineReady,
    EngineResult,
    exit_reason,
)

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64)


@pytest.fixture(autouse=True)
def fork_server_tried(monkeypatch):
    """Each test launches as a fresh launch would: the fork server tried first. A start that failed
    in an earlier test of this worker (an app's swapped stderr, say) leaves "forkserver" among the
    launcher's failures, and its engines then come straight from the test process: a restart that
    imports torch again, which these tests exist to rule out (seen once in about five full runs)."""
    monkeypatch.setattr(launcher, "_failed", set())


def client(time_limit_s: float = 120.0) -> tuple[EngineClient, queue.Queue]:
    events: queue.Queue = queue.Queue()
    c = EngineClient(time_limit_s=time_limit_s, environment_override=NO_GPU, log_file=None)
    c.start(events.put)
    return c, events


def next_of(events: queue.Queue, kind: type, timeout: float = 120.0):
    while True:
        event = events.get(timeout=timeout)
        if isinstance(event, kind):
            return event


def test_the_real_client_and_the_tests_fake_keep_one_contract():
    assert isinstance(EngineClient(log_file=None), EngineClientProtocol)
    assert isinstance(FakeEngine(), EngineClientProtocol)
    assert exit_reason(-signal.SIGSEGV) == "the engine process died (SIGSEGV, a crash in native code)"
    assert exit_reason(-signal.SIGKILL).startswith("the engine process died (SIGKILL, sent from outside it")
    assert exit_reason(-signal.SIGTERM) == "the engine process died (SIGTERM, sent from outside it)"
    assert exit_reason(3) == "the engine process exited with code 3"


def test_only_the_newest_waiting_request_runs():
    c, events = client()
    try:
        next_of(events, EngineReady)
        os.kill(c.pid, signal.SIGSTOP)  # the engine is busy: requests wait in the pipe
        older = [c.submit(SMALL.replace(s_q=s), RunOptions()) for s in (8, 16)]
        newest = c.submit(SMALL.replace(s_q=32), RunOptions())
        os.kill(c.pid, signal.SIGCONT)
        result = next_of(events, EngineResult)
        assert result.request_id == newest and result.result.config.s_q == 32
        after = c.submit(SMALL.replace(s_q=48), RunOptions())
        # The pipe keeps order: had an older request run after all, its result would come first.
        assert next_of(events, EngineResult).request_id == after
        assert newest not in older

        # Esc: a run is stopped at its next step (here: before the backward, while the forward's
        # CPU reference takes seconds), answered as cancelled; the same engine process goes on.
        step = SdpaConfig(b=1, h_q=8, h_kv=8, s_q=1024, s_kv=1024, d_qk=128, d_v=128, backward=True)
        long = c.submit(step, RunOptions())
        assert next_of(events, EngineProgress).request_id == long  # under way
        c.cancel()
        stopped = next_of(events, EngineResult)
        assert stopped.request_id == long and stopped.result.status == STATUS_CANCELLED, (
            stopped.result.message
        )
        assert stopped.result.message.endswith(": asked to stop") and not c.busy
        os.kill(c.pid, signal.SIGSTOP)  # a run cancelled before the engine read it never starts
        waiting = c.submit(step, RunOptions())
        c.cancel()
        os.kill(c.pid, signal.SIGCONT)
        skipped = next_of(events, EngineResult)
        assert skipped.request_id == waiting and skipped.result.message == "stopped before it started"
        next_run = c.submit(SMALL, RunOptions())
        assert next_of(events, EngineResult).request_id == next_run and c.restarts == 0
    finally:
        c.close()


def test_esc_stops_a_cpu_check_at_its_next_chunk():
    """A CPU check of a decode batch (its inputs drawn, torch's CPU peer, the fp32 reference:
    seconds, each in chunks) cancelled as it says its first step: it stops at the next chunk, long
    before the reference says how far it is, and the same engine process goes on."""
    decode = SdpaConfig(
        b=4, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"
    )
    c, events = client()
    try:
        next_of(events, EngineReady)
        request = c.submit(decode, RunOptions())
        first = next_of(events, EngineProgress)
        assert first.request_id == request and first.text == "validating the forward and checking on the CPU"
        c.cancel()
        stopped = next_of(events, EngineResult)
        assert stopped.request_id == request and stopped.result.status == STATUS_CANCELLED, (
            stopped.result.message
        )
        assert stopped.result.message == f"stopped while {first.text}: asked to stop"
        after = c.submit(SMALL, RunOptions())
        assert next_of(events, EngineResult).request_id == after and c.restarts == 0
    finally:
        c.close()


def test_a_silent_engine_is_stopped_and_replaced():
    c, events = client(time_limit_s=0.5)
    try:
        next_of(events, EngineReady)
        pid = c.pid
        server = parent_of(pid)
        os.kill(pid, signal.SIGSTOP)  # a build that hangs says nothing
        request = c.submit(SMALL, RunOptions())
        died = next_of(events, EngineDied)
        assert died.request_id == request and "silent for more than 0.5 s" in died.reason
        # the fresh engine is there before the death is told (its first run: the dashboard's tests)
        assert c.pid != pid and c.restarts == 1 and not c.busy
        with pytest.raises(ProcessLookupError):  # the stopped one was killed and reaped
            os.kill(pid, 0)
        ready = next_of(events, EngineReady)
        assert ready.restarts == 1
        # both were forked from one server that holds torch: a restart does not import it again
        assert parent_of(c.pid) == server != os.getpid()
        assert "libtorch" in Path(f"/proc/{server}/maps").read_text()
        assert os.getsid(c.pid) == c.pid  # a session of its own: the terminal's Ctrl+C is the UI's
    finally:
        c.close()


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_starting_never_blocks_the_caller_and_a_request_made_meanwhile_runs(monkeypatch):
    """The first start waits for the fork server to import torch; the UI's event loop must not."""
    gate = threading.Event()
    real_launch = launcher.launch

    def held_launch(*args, **kwargs):
        gate.wait(timeout=120)
        return real_launch(*args, **kwargs)

    monkeypatch.setattr(launcher, "launch", held_launch)
    c, events = client()  # returned while the launch is held
    try:
        request = c.submit(SMALL, RunOptions())  # before any engine process exists
        assert c.pid is None and c.busy
        gate.set()
        assert next_of(events, EngineResult).request_id == request and c.restarts == 0
    finally:
        gate.set()
        c.close()


def test_an_engine_that_cannot_be_started_at_all_is_said_and_tried_again_on_request(monkeypatch):
    def no_launch(*_args, **_kwargs):
        raise RuntimeError("the engine process could not be started: no processes left")

    monkeypatch.setattr(launcher, "launch", no_launch)
    c, events = client()
    try:
        died = next_of(events, EngineDied)
        assert died.reason.endswith("no processes left") and not died.restarting and not c.busy
        monkeypatch.undo()
        request = c.submit(SMALL, RunOptions())  # tries again
        assert next_of(events, EngineResult).request_id == request
    finally:
        c.close()


def test_engines_started_at_once_leave_stderr_as_it_was():
    """An engine a GPU starts at once (check --gpus, sweep --gpus): each start swaps sys.stderr for
    a moment, and two at once once left it pointing at a closed file."""
    import sys

    before = sys.stderr
    started = [client() for _ in range(3)]
    try:
        for _c, events in started:
            next_of(events, EngineReady)
        assert sys.stderr is before and not sys.stderr.closed
    finally:
        for c, _events in started:
            c.close()


def test_a_fork_server_warmed_in_advance_is_the_one_engines_fork_from():
    """The dashboard warms the fork server at launch, so torch loads while it paints: the engine
    started later is a fork of that server, and warming again starts no second one."""
    import multiprocessing.forkserver
    import sys

    before = sys.stderr
    launcher.warm()
    launcher.warm()
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    assert server is not None and sys.stderr is before
    assert_forked_from(server)


def assert_forked_from(server: int) -> None:
    """An engine started now is a fork of the process `server`."""
    c, events = client()
    try:
        next_of(events, EngineReady)
        assert parent_of(c.pid) == server
    finally:
        c.close()


def test_the_fork_server_preloads_torch_and_not_inductor(tmp_path):
    """The engines forked from the server find torch imported; torch._inductor stays out (1.5 s on
    a CPU machine, more on the H200), since the kernel timing never reaches torch.profiler's wrapper
    that imported it. A stand-in torch package shows what the preload imports, without the seconds
    the real one takes."""
    import subprocess
    import sys

    for package in ("torch", "torch/_inductor"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    seen = tmp_path / "seen"
    code = (
        "import sys, tui.process.server_preload; "
        f"open({str(seen)!r}, 'w').write(' '.join(m for m in ('torch', 'torch._inductor') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), str(root)))}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)
    assert seen.read_text().split() == ["torch"]
