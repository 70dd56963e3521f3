"""A scripted engine client for the dashboard's tests.

FakeEngine keeps EngineClient's contract (tui.process.client.EngineClientProtocol): events on a
thread of its own, in the engine's order (ready; progress and a result per request; died, then
ready again), only the newest waiting request answered. What it answers is a script: recordings
made on the H200 (tests/data), a recording relabelled for whatever was asked, the CPU engine run
in this process, or a failure (cuDNN's refusal, a crash, a hang). An explanation (`explain`) is
answered from recordings of `sdpa-explorer explain --json`, or by the engine dying under it. A knob
search (`search`) names each candidate as the engine does, then answers a decode search in the
H200's proportions, or what it had found when cancelled, or dies under a candidate. No child process, no torch
import of its own: a test that needs the real engine process says so and uses EngineClient.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from test_knob_search import recorded

from tui.engine.explain import Explanation
from tui.model.config import SdpaConfig
from tui.model.knob_search import (
    BUILD_FAILED,
    BUILT,
    CHECK_FAILED,
    HEURISTIC,
    STOP_CANCELLED,
    Trial,
    fastest,
)
from tui.model.results import Crash, Environment, ErrorMetrics, PeerResult, RunResult
from tui.model.search_results import SearchOptions, SearchResult
from tui.model.statuses import STATUS_CANCELLED, STATUS_CRASH, STATUS_UNSUPPORTED
from tui.process.client import (
    EXIT_CONTEXT_LOST,
    EngineDied,
    EngineExplained,
    EngineProgress,
    EngineReady,
    EngineResult,
    EngineSearched,
    exit_reason,
    silence_reason,
)

DATA = Path(__file__).parent / "data"
NO_GPU = Environment(gpu_available=False, unavailable_reason="CPU mode requested by the test")


def recording(name: str) -> RunResult:
    """A result recorded on the H200 with `run --json` (tests/data/NAME_h200.json)."""
    return RunResult.from_json((DATA / f"{name}_h200.json").read_text())


# Schema 2.1 (regime, samples, stability, the GPU's clocks and power, the peer's backend):
RECORDED = recording("seed_v21")  # the seed tutorial's configuration, burst
TRAINING = recording("train_v21")  # llama3-8b-train: forward and backward, sustained
FP8 = recording("fp8_v21")  # llama3-70b-fp8-prefill, burst
# Schema 2.3 (the peers timed beside cuDNN):
PEERS = recording("peers")  # llama3-8b-prefill with --peers all: FA3 and FlashInfer not installed


def explanation(name: str) -> Explanation:
    """An explanation recorded with `sdpa-explorer explain ... --json` on a machine without a GPU
    (cuDNN 9.26, frontend 1.32: validate() answers, each verdict says a GPU would know more)."""
    return Explanation.from_dict(json.loads((DATA / f"explain_{name}_cpu.json").read_text()))


EXPLAINED_D65 = explanation("d65")  # explain --d 65: validate() refuses; head dims 64, 72, 128 pass it
EXPLAINED_HEADS = explanation("heads_6_4")  # explain --h-q 6 --h-kv 4: the tool's rule and validate()'s
EXPLAINED_SEED = explanation("seed")  # explain: the seed passes validate(), nothing to search


def with_peers(result: RunResult, fastest: int | None = None) -> RunResult:
    """`result` as if every peer had been asked for, for what PEERS does not show: figures made up
    in the H200's proportions (FLASH 1.93x cuDNN's time, Flex 1.60x), MATH outside tolerance,
    FlashInfer not installed; `fastest` makes another plan the fastest."""
    p = result.forward
    pick = p.timing.median_us

    def timed(times: float) -> dict:
        us = pick * times
        timing = dataclasses.replace(
            p.timing, median_us=us, p10_us=0.99 * us, p90_us=1.01 * us, samples_us=()
        )
        return {"timing": timing, "tflops": p.tflops / times}

    precision = result.config.dtype
    peers = (
        PeerResult(f"torch FLASH {precision}", "FlashAttention-2 in torch", **timed(1.93)),
        PeerResult(f"torch EFFICIENT {precision}", "the memory-efficient kernel (xFormers) in torch", **timed(2.24)),
        PeerResult(f"torch CUDNN {precision}", "cuDNN's own kernel through torch", **timed(1.002)),
        PeerResult(f"torch MATH {precision}", "ATen's unfused matmul, softmax and matmul", **timed(62.3)),
        PeerResult(f"Flex {precision}", "FlexAttention, compiled", compile_seconds=3.04, **timed(1.60)),
        PeerResult(f"FA3 {precision}", reason="flash_attn_interface is not installed (FlashAttention-3)"),
        PeerResult(f"FlashInfer {precision}", reason="flashinfer is not installed: pip install flashinfer-python"),
    )  # fmt: skip
    o = p.checks[0]
    errors = {
        peer.name: dataclasses.replace(o.cudnn, max_abs=o.cudnn.max_abs * 1.5) for peer in peers if peer.ran
    }
    errors[f"torch MATH {precision}"] = ErrorMetrics(0.31, 2.0, 1e-3, 12, o.cudnn.total)  # outside tolerance
    checks = (dataclasses.replace(o, peers={**o.peers, **errors}), *p.checks[1:])
    plans = p.plans
    if fastest is not None:  # a little faster than the pick
        quicker = dataclasses.replace(plans[fastest].timing, median_us=0.9 * pick)
        plans = tuple(dataclasses.replace(x, is_fastest=x.index == fastest) for x in plans)
        plans = tuple(dataclasses.replace(x, timing=quicker) if x.index == fastest else x for x in plans)
    forward = dataclasses.replace(
        p,
        field_peers=peers,
        checks=checks,
        plans=plans,
        fastest_plan=p.fastest_plan if fastest is None else fastest,
    )
    return dataclasses.replace(result, passes=(forward, *result.passes[1:]))


def decode_candidate(cfg: int) -> Trial:
    """Engine 1 at KERNEL_CFG=cfg for a decode: every eighth (and 40) does not build, 30 and 45 run
    but fail the check, the rest take longer the further from 27, the best (146 µs)."""
    plan, name = f"1 KERNEL_CFG={cfg}", f"eng1_k24={cfg}"
    if cfg == 40 or cfg % 8 == 7:
        return Trial(plan, BUILD_FAILED, error="CUDNN_STATUS_NOT_SUPPORTED")
    if cfg in (30, 45):
        return Trial(plan, CHECK_FAILED, name=name, median_us=120.0 + cfg / 3, max_abs_error=0.5, kernels=1)
    us = 146.0 + 0.7 * abs(cfg - 27) + ((cfg - 27) * 5 % 7) * 0.4
    return Trial(plan, BUILT, name=name, median_us=us, p10_us=us - 0.5, p90_us=us + 0.5,
                 max_abs_error=2.0e-4 + cfg * 1e-6, kernels=1)  # fmt: skip


def decode_search() -> SearchResult:
    """test_knob_search's recording of llama3-8b-decode (the pick, the best confirmed, the peers),
    every KERNEL_CFG of engine 1 tried besides the pick's: 63 candidates, 9 that do not build, 2
    that fail the check; engine 8 refused by cuDNN's knob query."""
    base = recorded()
    heuristic = tuple(t for t in base.trials if t.origin == HEURISTIC)
    searched = tuple(decode_candidate(cfg) for cfg in range(64) if cfg != 3)
    return dataclasses.replace(base, trials=heuristic + searched,
                               skipped=("engine 8: CUDNN_STATUS_NOT_SUPPORTED",))  # fmt: skip


SEARCHED = decode_search()
STEPS = ("building the forward", "checking the forward", "timing plan 1 of 1")  # the engine's words
REFUSAL = "validate: hidden_dim should be multiple of 8"  # cuDNN's own words for d=65


class Reply:
    """What an answer may say about one request, as the engine process would say it."""

    def __init__(self, fake: FakeEngine, request_id: int) -> None:
        self.fake = fake
        self.request_id = request_id

    def progress(self, text: str) -> None:
        if self.fake._in_flight == self.request_id:  # the client drops words about older requests
            self.fake.on_event(EngineProgress(self.request_id, text))

    def result(self, result: RunResult) -> None:
        self.fake.wait_at_gate()
        with self.fake._lock:
            if self.fake._in_flight == self.request_id:
                self.fake._in_flight = None
            if self.request_id in self.fake._cancelled:  # stopped at its next step, as the engine would
                result = RunResult(config=result.config, status=STATUS_CANCELLED, message="stopped while "
                                   f"{STEPS[-1]}: asked to stop")  # fmt: skip
        self.fake.on_event(EngineResult(self.request_id, result))

    def explained(self, explanation: Explanation) -> None:
        self._answered()
        self.fake.on_event(EngineExplained(self.request_id, explanation))

    def searched(self, result: SearchResult) -> None:
        self._answered()
        self.fake.on_event(EngineSearched(self.request_id, result))

    def _answered(self) -> None:
        self.fake.wait_at_gate()
        with self.fake._lock:
            if self.fake._in_flight == self.request_id:
                self.fake._in_flight = None

    def pause(self) -> None:
        """A held fake waits here: the test sees the words so far, or cancels."""
        self.fake.wait_at_gate()

    @property
    def stopped(self) -> bool:
        """A cancel came for this request: a search stops at its next candidate."""
        return self.request_id in self.fake._cancelled

    def died(self, reason: str, crashed: bool = False) -> None:
        """The process is gone: the client says so, then a fresh one is ready."""
        with self.fake._lock:
            self.fake._in_flight = None
            self.fake.restarts += 1
        self.fake.on_event(EngineDied(reason, self.request_id, crashed=crashed))
        self.fake.on_event(EngineReady(self.fake.environment, 0.01, self.fake.restarts, reason))

    def silence(self) -> None:
        """A build that hangs: nothing until the client's silence limit, then it is stopped."""
        if not self.fake._closed.wait(self.fake.time_limit_s):
            self.died(silence_reason(self.fake.time_limit_s))


Answer = Callable[[Reply, SdpaConfig, object], None]
Explainer = Callable[[Reply, SdpaConfig], None]
Searcher = Callable[[Reply, SdpaConfig, SearchOptions], None]
EXPLAIN = "explain"  # what stands for a request's run options when it asks for an explanation


@dataclass(frozen=True)
class Searching:
    """What stands for a request's run options when it asks for a knob search."""

    options: SearchOptions


def searched(result: SearchResult = SEARCHED, crash_at: str = "", pause_at: int = 1) -> Searcher:
    """A search as the engine says it: the forward run first, then each candidate named (a held
    fake pauses at candidate `pause_at` and after), then `result` for the configuration and budget
    asked. A cancel answers 'cancelled' with the candidates tried so far; `crash_at` kills the
    engine process when that candidate is tried, unless a crash was already gone on from."""

    def answer(reply: Reply, config: SdpaConfig, options: SearchOptions) -> None:
        found = dataclasses.replace(result, config=config, budget_s=options.budget_s, crashes=options.crashes)
        for step in STEPS:
            reply.progress(step)
        tried = [t for t in found.trials if t.origin == HEURISTIC]
        for n, t in enumerate(found.searched(), 1):
            best = fastest(tried)
            lead = f"; best {best.time_us:.2f} µs ({best.plan})" if best else ""
            reply.progress(f"searching: candidate {n}, {t.plan}, {n // 2} of {options.budget_s:.0f} s{lead}")
            if t.plan == crash_at and not options.crashes:
                reply.died(exit_reason(-signal.SIGSEGV), crashed=True)
                return
            if n >= pause_at:
                reply.pause()
            if reply.stopped:
                reply.searched(SearchResult(config, "cancelled", "stopped: asked to", options.budget_s, n / 2,
                                            STOP_CANCELLED, trials=tuple(tried), environment=found.environment))  # fmt: skip
                return
            tried.append(t)
        reply.searched(found)

    return answer


def explained(*recordings: Explanation) -> Explainer:
    """The recorded explanation of the asked configuration if there is one, else the seed's (it
    refuses nothing and proposes nothing) relabelled for it."""
    by_config = {e.config: e for e in recordings or (EXPLAINED_D65, EXPLAINED_HEADS, EXPLAINED_SEED)}

    def answer(reply: Reply, config: SdpaConfig) -> None:
        reply.explained(by_config.get(config) or dataclasses.replace(EXPLAINED_SEED, config=config))

    return answer


def explain_crash(signum: int = signal.SIGSEGV) -> Explainer:
    """A plan build kills the engine process while it explains."""

    def answer(reply: Reply, config: SdpaConfig) -> None:
        reply.died(exit_reason(-signum), crashed=True)

    return answer


def relabelled(result: RunResult) -> Answer:
    """Any configuration gets `result`, relabelled for it: for tests that need "a result"."""

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        for step in STEPS:
            reply.progress(step)
        reply.result(dataclasses.replace(result, config=config))

    return answer


def replay(*recordings: RunResult) -> Answer:
    """The recording of the asked configuration if there is one, else the first relabelled."""
    recordings = recordings or (RECORDED, TRAINING, FP8)
    by_config = {r.config: r for r in recordings}
    fallback = relabelled(recordings[0])

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        if config in by_config:
            for step in STEPS:
                reply.progress(step)
            reply.result(by_config[config])
        else:
            fallback(reply, config, options)

    return answer


def computed(engine) -> Answer:
    """The CPU engine (tui.engine.runner.Engine) run here, its own progress words relayed."""

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        reply.result(engine.run(config, options, progress=reply.progress))

    return answer


def refused(words: str = REFUSAL) -> Answer:
    """cuDNN will not build this graph, and says why."""

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        reply.progress(STEPS[0])
        reply.result(RunResult(config=config, status=STATUS_UNSUPPORTED, message=words, wall_seconds=0.05))

    return answer


def crash(signum: int = signal.SIGSEGV) -> Answer:
    """Native code kills the engine process mid-build."""

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        reply.progress(STEPS[0])
        reply.died(exit_reason(-signum), crashed=True)

    return answer


def lost_context(plan: str = "eng2_k24=32") -> Answer:
    """A run loses the CUDA context (as FP8 forward with dropout does on cuDNN 9.19): its crash
    result, then the engine process exits and a fresh one is ready."""

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        fake = reply.fake
        reply.progress("scaling the forward")
        error = "AcceleratorError: CUDA error: an illegal memory access was encountered"
        during = f"the first execution (FP8 scaling): plan {plan} of the forward"
        crash = Crash(error=error, during=during, kind="forward", plan=plan)
        reply.result(RunResult(config=config, status=STATUS_CRASH, message=f"crashed the GPU: {error} (during {during})",
                               crash=crash, environment=fake.environment, device="cuda"))  # fmt: skip
        fake.restarts += 1
        reason = exit_reason(EXIT_CONTEXT_LOST)
        fake.on_event(EngineDied(reason, None, context_lost=True))
        fake.on_event(EngineReady(fake.environment, 0.01, fake.restarts, reason))

    return answer


def hang() -> Answer:
    """A build that never returns: the engine falls silent until the client stops it."""

    def answer(reply: Reply, config: SdpaConfig, options: object) -> None:
        reply.progress(STEPS[0])
        reply.silence()

    return answer


class FakeEngine:
    """An engine client that answers from a script (see the module's docstring).

    `answer` answers every request; `then(...)` lines up answers for the next requests first.
    `hold()` keeps the next result back until `release()`, so a test can see what the line
    says while a run is under way. `requests` lists what was submitted, in order; `overtaken`
    counts the requests submitted while another was still unanswered (only the newer is answered)."""

    def __init__(
        self,
        answer: Answer | None = None,
        environment: Environment | None = None,
        time_limit_s: float = 0.2,
        explainer: Explainer | None = None,
        searcher: Searcher | None = None,
    ) -> None:
        self.answer = answer or replay()
        self.explainer = explainer or explained()
        self.explained: list[SdpaConfig] = []  # the configurations explanations were asked for
        self.searcher = searcher or searched()
        self.searches: list[tuple[SdpaConfig, SearchOptions]] = []  # the searches asked for
        self.environment = environment or RECORDED.environment  # the H200 the recordings came from
        self.time_limit_s = time_limit_s
        self.requests: list[tuple[SdpaConfig, object]] = []
        self.overtaken = 0
        self.restarts = 0
        self.on_event: Callable = lambda _event: None
        self._script: deque[Answer] = deque()
        self._inbox: queue.Queue = queue.Queue()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._in_flight: int | None = None
        self._gate = threading.Event()
        self._gate.set()
        self._waiting = threading.Event()  # an answer waits at the closed gate
        self._closed = threading.Event()
        self._cancelled: set[int] = set()  # requests asked to stop
        self._thread: threading.Thread | None = None

    def then(self, *answers: Answer) -> FakeEngine:
        self._script.extend(answers)
        return self

    def hold(self) -> None:
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    @property
    def holding(self) -> bool:
        """An answer is kept back by hold(), waiting for release()."""
        return self._waiting.is_set()

    def wait_at_gate(self) -> None:
        if not self._gate.is_set():
            self._waiting.set()
            self._gate.wait()
            self._waiting.clear()

    # ---- EngineClientProtocol ----------------------------------------------------------
    def start(self, on_event: Callable) -> None:
        """Start (or, after close, start again: each CLI command opens its own session)."""
        self.on_event = on_event
        self._closed.clear()
        self._inbox = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="fake-engine")
        self._thread.start()

    def submit(self, config: SdpaConfig, options: object) -> int:
        return self._queue(config, options, self.requests, (config, options))

    def explain(self, config: SdpaConfig) -> int:
        return self._queue(config, EXPLAIN, self.explained, config)

    def search(self, config: SdpaConfig, options: SearchOptions) -> int:
        return self._queue(config, Searching(options), self.searches, (config, options))

    def _queue(self, config: SdpaConfig, options: object, asked: list, entry: object) -> int:
        assert self._thread is not None, "asked before start (the real client has no pipe yet)"
        request_id = next(self._ids)
        with self._lock:
            self.overtaken += self._in_flight is not None
            self._in_flight = request_id
            asked.append(entry)
        self._inbox.put((request_id, config, options))
        return request_id

    def cancel(self) -> None:
        with self._lock:
            if self._in_flight is not None:
                self._cancelled.add(self._in_flight)

    def close(self) -> None:
        self._closed.set()
        self._gate.set()
        self._inbox.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def busy(self) -> bool:
        return self._in_flight is not None

    # ---- its thread ---------------------------------------------------------------------
    def _serve(self) -> None:
        self.on_event(EngineReady(self.environment, 0.01))
        while True:
            item = self._inbox.get()
            while item is not None and not self._inbox.empty():  # only the newest request matters
                item = self._inbox.get()
            if item is None or self._closed.is_set():
                return
            request_id, config, options = item
            if options is EXPLAIN:
                self.explainer(Reply(self, request_id), config)
                continue
            if isinstance(options, Searching):
                self.searcher(Reply(self, request_id), config, options.options)
                continue
            answer = self._script.popleft() if self._script else self.answer
            answer(Reply(self, request_id), config, options)


def slowed(result: RunResult, times: float) -> RunResult:
    """`result` with every kernel time of its forward `times` as long (a run after a regression)."""
    p = result.forward

    def longer(timing):
        return timing and dataclasses.replace(timing, median_us=timing.median_us * times)

    plans = tuple(dataclasses.replace(x, timing=longer(x.timing)) for x in p.plans)
    forward = dataclasses.replace(p, timing=longer(p.timing), plans=plans)
    return dataclasses.replace(result, passes=tuple(forward if x is p else x for x in result.passes))
