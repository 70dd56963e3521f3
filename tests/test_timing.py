"""Timing's arithmetic and regimes on the CPU: what a measurement makes of CUPTI's records and
the replays' times, when it is stable, when the replay time and the kernel sum disagree, and
which regime waits for a rested GPU or loads it first. The GPU itself: tests/test_gpu.py."""

from __future__ import annotations

import types

import pytest

from tui.engine import timing
from tui.engine.timing import STABLE_RATIO, cross_check, summarize
from tui.model.options import TimingOptions
from tui.model.results import GpuState, Telemetry
from tui.model.statuses import REGIME_BURST, REGIME_SUSTAINED


def records(per_exec_us: list[float], per_replay: int, kernels: int = 2, name: str = "sdpa") -> list:
    """CUPTI records of replays: each replay runs `per_replay` executions of `kernels` kernels,
    and one execution of replay i lasts per_exec_us[i] in all."""
    out, t = [], 0.0
    for us in per_exec_us:
        for _ in range(per_replay):
            for k in range(kernels):
                out.append((f"{name}{k}", t, us / kernels))
                t += us / kernels + 1.0
    return out


def test_samples_are_kept_in_replay_order_and_the_spread_decides_stability():
    steady = [100.0, 100.5, 99.8, 100.2, 100.1, 99.9]
    s = summarize(steady, per_replay=10, l2_flushed=False, method="m")
    assert s.samples_us == tuple(steady) and s.stable is True
    drifting = [100.0, 101.0, 104.0, 108.0, 112.0, 115.0]  # a clock dropping under the run
    assert summarize(drifting, 10, False, "m").stable is False
    assert summarize([100.0, 120.0], 10, False, "m").stable is None  # too few samples to say
    edge = [100.0] * 5 + [100.0 * STABLE_RATIO] * 5
    assert summarize(edge, 10, False, "m").stable is True


def test_replay_time_and_kernel_sum_agree_within_the_graphs_gaps():
    assert cross_check(26.87, 30.72, kernels_per_call=1) == ""  # the seed on the H200: 3.9 µs of gap
    assert "launch gaps" in cross_check(100.0, 130.0, kernels_per_call=2)
    assert "launch gaps" in cross_check(100.0, 80.0, kernels_per_call=1)  # kernels the replay never ran
    assert cross_check(2000.0, 2080.0, kernels_per_call=1) == ""  # 4%: within 5%
    assert cross_check(100.0, None, 1) == ""


def test_samples_come_from_the_plans_kernels_and_the_flush_is_left_out():
    per_exec = [50.0, 51.0, 49.0, 50.0, 50.5]
    recs = records(per_exec, per_replay=4, kernels=2)
    flush = [("fill_kernel", 1e6 + i, 10.0) for i in range(5 * 4)]  # one flush per execution
    opts = TimingOptions(replays=5, l2_flush=True)
    replay_ms = [(us + 10.0 + 2.0) * 4 / 1000.0 for us in per_exec]  # kernels, flush, gaps
    s = timing._stats(replay_ms, recs + flush, per_replay=4, opts=opts, flush_names={"fill_kernel"})
    assert s.samples_us == pytest.approx(per_exec)
    assert s.kernels_per_call == 2 and s.l2_flushed
    assert s.replay_us == pytest.approx(50.0 + 2.0)  # the flush taken out, the gaps kept
    assert s.cross_check == ""


def test_under_load_only_the_last_replays_records_count():
    load = records([80.0] * 7, per_replay=4, kernels=2)  # the end of the load, seen by the profiler
    timed = [(name, start + 1e7, dur) for name, start, dur in records([60.0] * 5, per_replay=4, kernels=2)]
    opts = TimingOptions(replays=5, regime=REGIME_SUSTAINED)
    s = timing._stats([0.24] * 5, load + timed, per_replay=4, opts=opts, flush_names=set(), per_call=2)
    assert s.median_us == pytest.approx(60.0) and len(s.samples_us) == 5


class Watch:
    """A GPU watch that records what the timing asked of it."""

    def __init__(self, rested: bool = True):
        self.rests: list[float] = []
        self.rested = rested

    def wait_until_rested(self, max_s: float) -> tuple[float, bool]:
        self.rests.append(max_s)
        return (0.0 if self.rested else max_s), self.rested

    def measure_around(self, fn):
        value = fn()
        state = GpuState(sm_clock_mhz=1980, power_w=650.0, power_limit_w=700.0)
        return value, Telemetry(before=state, after=state, seconds=0.05, power_capped_pct=38.0)


class Graph:
    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1


@pytest.fixture
def scripted(monkeypatch):
    """The profiler's part scripted: each timed measurement reads the next set of samples."""
    script: list[list[float]] = []

    def profiled(torch, graph, stream, replays):
        per_exec = script.pop(0)
        return [us * 4 / 1000.0 for us in per_exec], records(per_exec, per_replay=4, kernels=1)

    monkeypatch.setattr(timing, "_profiled_replays", profiled)
    return script


def test_burst_waits_for_a_rested_gpu_and_says_so(scripted):
    scripted.append([100.0] * 6)
    watch, graph = Watch(rested=False), Graph()
    opts = TimingOptions(replays=6, rest_max_s=2.0)
    s = timing._measure(None, graph, None, opts, 4, set(), watch, None)
    assert watch.rests == [2.0] and graph.replays == opts.warmup  # a short warm-up after the rest
    assert s.regime == REGIME_BURST and s.telemetry.rested is False and s.telemetry.rest_wait_s == 2.0
    assert "not rested after 2.0 s" in s.regime_words and "power-capped 38%" in s.regime_words


def test_sustained_loads_the_gpu_first_and_never_waits(scripted, monkeypatch):
    scripted.append([100.0] * 6)
    clock = iter(range(0, 1000))
    monkeypatch.setattr(timing.time, "monotonic", lambda: next(clock) * 0.1)
    watch, graph = Watch(), Graph()
    stream = types.SimpleNamespace(synchronize=lambda: None)
    opts = TimingOptions(replays=6, regime=REGIME_SUSTAINED, sustain_s=1.0)
    s = timing._measure(None, graph, stream, opts, 4, set(), watch, 1)
    assert watch.rests == [] and graph.replays >= 8  # loaded for the set time, no rest asked
    assert s.regime == REGIME_SUSTAINED and s.telemetry.power_capped_pct == 38.0


def test_without_nvml_a_measurement_still_has_its_regime(scripted):
    scripted.append([100.0] * 6)
    s = timing._measure(None, Graph(), None, TimingOptions(replays=6), 4, set(), None, None)
    assert s.regime == REGIME_BURST and s.telemetry is None and s.stable is True


def test_an_unstable_measurement_is_taken_once_more_and_the_second_stands():
    taken = [summarize(x, 4, False, "m") for x in ([100, 104, 108, 112, 116], [100, 100, 100, 101, 100])]
    s = timing.retried_once(lambda: taken.pop(0))
    assert s.retried and s.stable is True and taken == []
    again = [summarize(x, 4, False, "m") for x in ([100, 104, 108, 112, 116], [100, 110, 120, 130, 140])]
    s = timing.retried_once(lambda: again.pop(0))
    assert s.retried and s.stable is False  # still unstable: said so, not hidden
    calm = [summarize([100.0] * 5, 4, False, "m")]
    assert timing.retried_once(lambda: calm.pop(0)).retried is False


def test_a_burst_of_long_kernels_fits_the_window_before_the_power_cap():
    burst, sustained = TimingOptions(replays=20), TimingOptions(replays=20, regime=REGIME_SUSTAINED)
    assert timing.executions_per_replay(1700.0, burst) == 1  # 20 x 1.7 ms: 34 ms, inside 40 ms
    assert timing.executions_per_replay(1700.0, sustained) == 3  # under load: replays of ~2 ms
    assert timing.executions_per_replay(5.0, burst) == 200  # tiny kernels: launch costs still vanish
    assert timing.executions_per_replay(100.0, burst) == 20


@pytest.mark.parametrize(
    ("kernel_us", "calls"),
    [(None, 50), (0.0, 50), (30.0, 50), (200.0, 50), (900.0, 11), (1700.0, 5), (15000.0, 5)],
)
def test_host_overhead_averages_fewer_calls_of_long_kernels(kernel_us, calls):
    # the calls queue about 10 ms of GPU work: short kernels keep 50, the 32k context's 15 ms kernel 5
    assert timing.host_overhead_calls(kernel_us) == calls
