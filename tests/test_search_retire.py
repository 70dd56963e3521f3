"""After a knob search on the GPU the engine process retires: the plans it built and the memory it
used weigh on every later run there (on the H200 the decode pin read 160-162 µs in a searched
process, 155 µs in a fresh one). The client starts a fresh child quietly, and a request sent
meanwhile runs there."""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading

import pytest

from tests.fakes import NO_GPU, RECORDED
from tui.model.config import SdpaConfig
from tui.model.search_results import SearchOptions, SearchResult
from tui.process import child
from tui.process.client import EngineClient, EngineDied
from tui.process.protocol import EXIT_CONTEXT_LOST, EXIT_RETIRED, SearchRequest, Stop

GPU = dataclasses.replace(RECORDED.environment, gpu_available=True)


class Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class SearchingEngine:
    """An Engine whose search has run plans (trials) or has not (a refusal)."""

    def __init__(self, environment, **_kw) -> None:
        self.lost = None
        self.env = environment
        self.warmed_up = False

    def warm_up(self) -> None:  # an engine process on a GPU starts this as it says it is ready
        self.warmed_up = True

    def search(self, config, options, progress=None):
        if config.b == 1:  # refused before anything ran
            return SearchResult(config=config, status="invalid", message="no")
        from tui.model.knob_search import BUILT, HEURISTIC, Trial

        return SearchResult(config=config, status="ok", trials=(Trial("1", BUILT, HEURISTIC, "eng1", 1.0),))


def serve(monkeypatch, env, request):
    """The child's loop on a pipe, in a thread: the request, then a stop once it is answered; what
    the child answered and how it ended (its exit code, None when its loop returned)."""
    monkeypatch.setattr("tui.engine.runner.Engine", SearchingEngine)

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(child.os, "_exit", exit_)
    monkeypatch.setattr(child.signal, "signal", lambda *_a: None)  # Ctrl+C is the UI's: main thread only
    to_child, child_end = multiprocessing.Pipe()
    parent_end, from_child = multiprocessing.Pipe()
    ended: list[int | None] = []

    def loop() -> None:
        try:
            child._serve(child_end, from_child, dataclasses.asdict(env))
            ended.append(None)
        except Exited as exited:
            ended.append(exited.code)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    to_child.send(request)
    answers = []
    for _ in range(2):  # ready, then the answer
        assert parent_end.poll(30), f"the child said only {answers}"
        answers.append(parent_end.recv())
    to_child.send(Stop())
    thread.join(timeout=30)
    assert not thread.is_alive()
    return answers, ended[0]


def search(request_id: int, b: int = 2) -> SearchRequest:
    return SearchRequest(request_id, SdpaConfig(b=b), SearchOptions())


def test_a_child_retires_after_answering_a_search_that_ran_plans(monkeypatch):
    answers, code = serve(monkeypatch, GPU, search(1))
    assert [type(a).__name__ for a in answers] == ["Ready", "SearchReply"] and answers[1].result[
        "status"
    ] == "ok"
    assert code == EXIT_RETIRED  # the stop sent after the answer was never read: it had ended


@pytest.mark.parametrize(("env", "b"), [(GPU, 1), (NO_GPU, 2)], ids=["refused", "no GPU"])
def test_a_search_that_ran_nothing_keeps_its_process(monkeypatch, env, b):
    answers, code = serve(monkeypatch, env, search(1, b))
    assert [type(a).__name__ for a in answers] == ["Ready", "SearchReply"]
    assert code is None  # the loop went on to the stop and returned


class Proc:
    def __init__(self, code: int) -> None:
        self.returncode = code

    def release(self) -> None:
        pass


def client_after(code: int, in_flight: tuple | None):
    """A client whose child ended with `code` while `in_flight` (a request sent since) was unanswered."""
    client = EngineClient(log_file=None)
    events, spawned = [], threading.Event()
    client.on_event = events.append
    client._spawn = lambda before_reading=lambda: None: (before_reading(), spawned.set())
    client._ready = True
    client._send, client._recv = multiprocessing.Pipe()  # the old child's, closed with it
    if in_flight is not None:
        client._in_flight, client._newest = in_flight[1], in_flight
    client._died(Proc(code), "exited")
    assert spawned.is_set()
    return client, events


def test_a_retired_child_is_replaced_quietly_and_what_was_sent_since_runs_on_the_next():
    asked = ("run", 7, SdpaConfig().to_dict(), {})
    client, events = client_after(EXIT_RETIRED, asked)
    assert events == [] and client.restarts == 0  # no death to report, no restart counted
    assert client._unsent == asked  # the next child is given it once it is up
    client, events = client_after(EXIT_RETIRED, None)
    assert events == [] and client._unsent is None


def test_a_lost_context_is_still_reported_as_a_restart():
    client, events = client_after(EXIT_CONTEXT_LOST, None)
    assert len(events) == 1 and isinstance(events[0], EngineDied) and events[0].context_lost
    assert client.restarts == 1
