"""The engine's child process, headless: stale requests skipped, silence and crashes survived."""

from __future__ import annotations

import os
import queue
import signal

import pytest

from tui.engine.config import SdpaConfig
from tui.engine.process import EngineClient, EngineDied, EngineReady, EngineResult
from tui.engine.results import Environment
from tui.engine.runner import RunOptions

NO_GPU = Environment(gpu_available=False, unavailable_reason="CPU mode requested by the test")
SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64)


def client(time_limit_s: float = 120.0) -> tuple[EngineClient, queue.Queue]:
    events: queue.Queue = queue.Queue()
    c = EngineClient(events.put, time_limit_s=time_limit_s, environment_override=NO_GPU, log_file=None)
    c.start()
    return c, events


def next_of(events: queue.Queue, kind: type, timeout: float = 60.0):
    while True:
        event = events.get(timeout=timeout)
        if isinstance(event, kind):
            return event


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
        with pytest.raises(queue.Empty):
            next_of(events, EngineResult, timeout=2.0)
        assert newest not in older
    finally:
        c.close()


def test_a_silent_engine_is_stopped_and_replaced():
    c, events = client(time_limit_s=1.0)
    try:
        next_of(events, EngineReady)
        pid = c.pid
        os.kill(pid, signal.SIGSTOP)  # a build that hangs says nothing
        request = c.submit(SMALL, RunOptions())
        died = next_of(events, EngineDied)
        assert died.request_id == request and "silent for more than 1 s" in died.reason
        next_of(events, EngineReady)
        assert c.pid != pid and c.restarts == 1
        c.time_limit_s = 120.0  # the fresh engine's first run loads torch: long, but not a hang
        c.submit(SMALL, RunOptions())
        assert next_of(events, EngineResult).result.status == "cpu_only"
    finally:
        c.close()
