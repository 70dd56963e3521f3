"""NVML telemetry: reasons decoded, readings that fail, capped shares from the violation counters,
the rest wait, NVML missing, and which NVML device a CUDA device is. A fake pynvml scripts
clocks, power, reasons and counters over a fake clock, so no test sleeps; one GPU test reads the
real device."""

from __future__ import annotations

import sys
import time
import types

import pytest

from tui.engine import telemetry
from tui.engine.telemetry import Nvml, capped_pct, decode_reasons, device_handle, nvml_status

SW_POWER_CAP, HW_THERMAL, GPU_IDLE, SYNC_BOOST = 0x4, 0x40, 0x1, 0x10


class FakeClock:
    """time.monotonic and time.sleep on a clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.now += seconds


class NVMLError(Exception):
    pass


class FakePynvml(types.ModuleType):
    """pynvml on a scripted GPU: while the clock is before `capped_until` the SW power cap is
    active and the power violation counter grows with the clock; `power_ns` and `thermal_ns` add
    to the counters; a function named in `failing` raises NVMLError."""

    def __init__(self, clock: FakeClock, *, capped_until: float = 0.0, extra_mask: int = GPU_IDLE):
        super().__init__("pynvml")
        self.NVMLError = NVMLError
        self.clock = clock
        self.capped_until = capped_until
        self.counting_until = capped_until  # the power counter grows until then
        self.extra_mask = extra_mask
        self.power_ns = 5_000_000_000  # what earlier work left on the counters
        self.thermal_ns = 7_000_000
        self.failing: set[str] = set()
        self.inits = 0
        self.lookups: list[tuple[str, object]] = []
        self.gpus = {"00000000:18:00.0": "gpu-b", "GPU-aaaa": "gpu-a", "GPU-bbbb": "gpu-b"}

    def _check(self, name: str) -> None:
        if name in self.failing:
            raise NVMLError(f"{name}: Not Supported")

    def nvmlInit(self) -> None:
        self._check("nvmlInit")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return "580.95"

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.lookups.append(("index", index))
        return f"gpu-{index}"

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> str:
        self.lookups.append(("pci", bus_id))
        self._check("nvmlDeviceGetHandleByPciBusId")
        return self.gpus[bus_id]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.lookups.append(("uuid", uuid))
        if uuid not in self.gpus:
            raise NVMLError("Not Found")
        return self.gpus[uuid]

    def _capped(self) -> bool:
        return self.clock.now < self.capped_until

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        self._check("nvmlDeviceGetClockInfo")
        return {1: 1755 if self._capped() else 1980, 2: 3201}[kind]

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        self._check("nvmlDeviceGetPowerUsage")
        return 699_500 if self._capped() else 120_250

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        self._check("nvmlDeviceGetEnforcedPowerLimit")
        return 700_000

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        self._check("nvmlDeviceGetTemperature")
        assert sensor == 0
        return 61

    def _mask(self) -> int:
        return self.extra_mask | (SW_POWER_CAP if self._capped() else 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        self._check("nvmlDeviceGetCurrentClocksEventReasons")
        return self._mask()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: str) -> int:
        self._check("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._mask() | 0x200  # board limit: tells the two calls apart

    def nvmlDeviceGetViolationStatus(self, handle: str, policy: int) -> types.SimpleNamespace:
        self._check(f"nvmlDeviceGetViolationStatus/{policy}")
        if policy == 0:
            grown = min(self.clock.now, self.counting_until)
            return types.SimpleNamespace(referenceTime=0, violationTime=self.power_ns + int(grown * 1e9))
        assert policy == 1
        return types.SimpleNamespace(referenceTime=0, violationTime=self.thermal_ns)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake(monkeypatch, clock) -> FakePynvml:
    module = FakePynvml(clock)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return module


def opened(clock: FakeClock, device_index: int = 0) -> Nvml:
    nvml = Nvml.open(device_index, props=types.SimpleNamespace(), clock=clock, sleep=clock.sleep)
    assert isinstance(nvml, Nvml), nvml
    return nvml


def test_the_constants_are_nvmls_own():
    import pynvml

    assert (telemetry.CLOCK_SM, telemetry.CLOCK_MEM) == (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM)
    assert telemetry.TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert (telemetry.PERF_POLICY_POWER, telemetry.PERF_POLICY_THERMAL) == (
        pynvml.NVML_PERF_POLICY_POWER,
        pynvml.NVML_PERF_POLICY_THERMAL,
    )
    bits = {
        "app clocks setting": "ApplicationsClocksSetting",
        "sw power cap": "SwPowerCap",
        "hw slowdown": "HwSlowdown",
        "sync boost": "SyncBoost",
        "sw thermal slowdown": "SwThermalSlowdown",
        "hw thermal slowdown": "HwThermalSlowdown",
        "hw power brake": "HwPowerBrakeSlowdown",
        "display clocks": "DisplayClockSetting",
        "board limit": "BoardLimit",
        "reliability": "Reliability",
    }
    ours = {word: bit for bit, word in telemetry.REASON_WORDS}
    for word, name in bits.items():  # older pynvml lacks the newest bits (board limit, reliability)
        bit = getattr(pynvml, f"nvmlClocksThrottleReason{name}", None)
        assert ours[word] == bit or (bit is None and word in ("board limit", "reliability")), word
    assert set(ours) == set(bits)
    assert pynvml.nvmlClocksThrottleReasonGpuIdle == telemetry.GPU_IDLE


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        (0, ()),
        (None, ()),
        (GPU_IDLE, ()),  # an idle GPU parks its clock: no cap
        (GPU_IDLE | SW_POWER_CAP, ("sw power cap",)),
        (
            0x8 | 0x20 | 0x40 | 0x80,
            ("hw slowdown", "sw thermal slowdown", "hw thermal slowdown", "hw power brake"),
        ),
        (0x2 | 0x10 | 0x100, ("app clocks setting", "sync boost", "display clocks")),
        (SW_POWER_CAP | 0x1000, ("sw power cap", "reason 0x1000")),  # a bit NVML adds later is kept
    ],
)
def test_reasons_are_decoded_into_short_words(mask, words):
    assert decode_reasons(mask) == words


def test_state_reads_clocks_power_temperature_and_reasons(fake, clock):
    fake.capped_until = 1.0
    state = opened(clock).state()
    assert (state.sm_clock_mhz, state.mem_clock_mhz) == (1755, 3201)
    assert (state.power_w, state.power_limit_w, state.temperature_c) == (699.5, 700.0, 61)
    assert state.reasons == ("sw power cap",)


@pytest.mark.parametrize(
    ("failing", "field"),
    [
        ("nvmlDeviceGetClockInfo", ("sm_clock_mhz", "mem_clock_mhz")),
        ("nvmlDeviceGetPowerUsage", ("power_w",)),
        ("nvmlDeviceGetEnforcedPowerLimit", ("power_limit_w",)),
        ("nvmlDeviceGetTemperature", ("temperature_c",)),
    ],
)
def test_a_reading_that_raises_is_none_and_the_others_stay(fake, clock, failing, field):
    fake.capped_until = 1.0
    nvml = opened(clock)
    fake.failing.add(failing)
    state = nvml.state()
    values = {name: getattr(state, name) for name in state.__dataclass_fields__ if name != "reasons"}
    assert {name for name, value in values.items() if value is None} == set(field)
    assert state.reasons == ("sw power cap",)


def test_reasons_fall_back_to_the_older_call_and_to_none(fake, clock):
    fake.extra_mask = 0
    nvml = opened(clock)
    fake.failing.add("nvmlDeviceGetCurrentClocksEventReasons")  # a driver older than the name
    assert nvml.state().reasons == ("board limit",)
    assert nvml.reason_mask() == 0x200
    fake.failing.add("nvmlDeviceGetCurrentClocksThrottleReasons")
    assert nvml.reason_mask() is None
    assert nvml.state().reasons == ()


def test_capped_share_is_the_counters_growth_over_the_measurement(fake, clock):
    nvml = opened(clock)

    def sustained():  # 28 s of work, 11.3 s of it power-capped, 0.7 s thermally
        clock.now += 28.0
        fake.power_ns += 11_300_000_000
        fake.thermal_ns += 700_000_000
        return "timed"

    result, tel = nvml.measure_around(sustained)
    assert result == "timed"
    assert tel.seconds == 28.0
    assert tel.power_capped_pct == pytest.approx(100 * 11.3 / 28)  # 40%
    assert tel.thermal_capped_pct == pytest.approx(2.5)
    assert tel.before.power_w == 120.25 and tel.after.sm_clock_mhz == 1980
    assert (tel.rest_wait_s, tel.rested) == (0.0, None)  # no rest asked for


def test_before_and_after_are_read_around_the_run(fake, clock):
    fake.capped_until = 100.0
    nvml = opened(clock)

    def cooling():
        clock.now += 1.0
        fake.capped_until = 0.0  # the cap lifted during the run

    _, tel = nvml.measure_around(cooling)
    assert tel.before.reasons == ("sw power cap",) and tel.before.sm_clock_mhz == 1755
    assert tel.after.reasons == () and tel.after.sm_clock_mhz == 1980


def test_a_counter_that_cannot_be_read_gives_no_share(fake, clock):
    nvml = opened(clock)
    fake.failing.add("nvmlDeviceGetViolationStatus/1")

    def run():
        clock.now += 2.0
        fake.power_ns += 500_000_000

    _, tel = nvml.measure_around(run)
    assert tel.power_capped_pct == pytest.approx(25.0)
    assert tel.thermal_capped_pct is None


@pytest.mark.parametrize(
    ("before", "after", "seconds", "pct"),
    [
        (0, 11_300_000_000, 28.0, 100 * 11.3 / 28),
        (0, 3_000_000_000, 2.0, 100.0),  # the counter ran ahead of the wall clock: clamped
        (5, 3, 2.0, 0.0),  # a counter that went back
        (0, 1, 0.0, None),  # no time passed
        (None, 1, 1.0, None),
        (1, None, 1.0, None),
    ],
)
def test_capped_pct_is_clamped_to_0_100_and_none_without_a_counter(before, after, seconds, pct):
    assert capped_pct(before, after, seconds) == (pct if pct is None else pytest.approx(pct))


def test_a_rested_gpu_after_an_uncapped_measurement_waits_nothing(fake, clock):
    nvml = opened(clock)
    nvml.measure_around(lambda: setattr(clock, "now", clock.now + 0.01))
    clock.now += 5.0  # the user edits a field
    assert nvml.wait_until_rested() == (0.0, True)
    assert clock.slept == []


def test_the_first_wait_on_a_rested_gpu_costs_only_the_quiet_window(fake, clock):
    waited, rested = opened(clock).wait_until_rested(max_s=2.0, quiet_s=0.3, poll_s=0.05)
    assert rested is True
    assert waited == pytest.approx(0.3)
    assert max(clock.slept) <= 0.05 + 1e-12


def test_the_wait_lasts_while_the_power_cap_is_active(fake, clock):
    fake.capped_until = 0.8  # the reason shows until 0.8 s; the counters stand still all along
    waited, rested = opened(clock).wait_until_rested(max_s=2.0, quiet_s=0.3, poll_s=0.05)
    assert rested is True
    assert waited == pytest.approx(0.8)  # the first reading without it: still for longer than 0.3 s


def test_as_on_the_h200_the_wait_ends_as_the_reason_clears_after_the_counter_stopped(fake, clock):
    fake.capped_until, fake.counting_until = 0.52, 0.40  # rest_signals' reading after a capped load
    waited, rested = opened(clock).wait_until_rested(max_s=2.0, quiet_s=0.1, poll_s=0.025)
    assert rested is True
    assert 0.52 <= waited <= 0.52 + 0.025 + 1e-9


def test_a_reason_that_clears_before_the_counter_stops_waits_the_window_after_the_counter(fake, clock):
    fake.capped_until, fake.counting_until = 0.2, 0.6
    waited, rested = opened(clock).wait_until_rested(max_s=2.0, quiet_s=0.1, poll_s=0.025)
    assert rested is True
    assert 0.6 + 0.1 <= waited <= 0.6 + 0.1 + 0.025 + 1e-9


def test_the_wait_lasts_while_a_counter_grows_with_no_reason_shown(fake, clock):
    fake.counting_until = 0.6  # the reason bit already cleared, the counter still moves
    waited, rested = opened(clock).wait_until_rested(max_s=2.0, quiet_s=0.3, poll_s=0.05)
    assert rested is True
    assert 0.6 + 0.3 <= waited <= 0.6 + 0.3 + 0.05 + 1e-9


def test_a_thermal_reason_keeps_it_waiting_until_the_cap_and_a_sync_boost_does_not(fake, clock):
    fake.extra_mask = HW_THERMAL
    assert opened(clock).wait_until_rested(max_s=1.5) == (pytest.approx(1.5), False)
    fake.extra_mask = SYNC_BOOST
    start = clock.now
    waited, rested = opened(clock).wait_until_rested(max_s=1.5, quiet_s=0.3)
    assert rested is True and waited == pytest.approx(0.3) and clock.now - start == pytest.approx(0.3)


def test_a_cap_that_outlasts_the_wait_stops_at_max_s_not_rested(fake, clock):
    fake.capped_until = 60.0
    waited, rested = opened(clock).wait_until_rested(max_s=2.0, quiet_s=0.3, poll_s=0.05)
    assert rested is False
    assert waited == pytest.approx(2.0)
    assert clock.now == pytest.approx(2.0)  # it never slept past the cap


def test_after_a_capped_measurement_the_next_burst_waits_the_window_again(fake, clock):
    nvml = opened(clock)
    nvml.wait_until_rested()
    fake.capped_until = fake.counting_until = 1e9  # sustained work: the cap is on

    def sustained():
        clock.now += 10.0
        fake.capped_until = fake.counting_until = clock.now  # the GPU idles once it returns

    _, tel = nvml.measure_around(sustained)
    assert tel.power_capped_pct == pytest.approx(100.0)
    _, burst = nvml.measure_around(lambda: None, rest_first=True)
    assert burst.rested is True
    assert burst.rest_wait_s == pytest.approx(telemetry.QUIET_S)


def test_a_burst_says_how_long_it_waited_and_that_it_did_not_rest(fake, clock):
    fake.capped_until = 60.0
    _, tel = opened(clock).measure_around(lambda: None, rest_first=True, max_rest_s=1.0)
    assert (tel.rest_wait_s, tel.rested) == (pytest.approx(1.0), False)
    assert "not rested after 1.0 s" in tel.capped_words


def test_with_nothing_to_read_the_wait_returns_at_once_and_cannot_say(fake, clock):
    fake.failing |= {
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetViolationStatus/0",
        "nvmlDeviceGetViolationStatus/1",
    }
    assert opened(clock).wait_until_rested() == (0.0, None)
    assert clock.slept == []


def test_without_pynvml_open_and_status_give_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert Nvml.open(0) == "pynvml not installed"
    assert nvml_status() == "pynvml not installed"


def test_without_the_driver_open_and_status_give_nvmls_reason(fake):
    fake.failing.add("nvmlInit")
    assert Nvml.open(0, props=types.SimpleNamespace()) == "NVML unavailable: nvmlInit: Not Supported"
    assert nvml_status() == "NVML unavailable: nvmlInit: Not Supported"


def test_status_names_the_driver_and_shuts_nvml_down(fake):
    assert nvml_status() == "NVML, driver 580.95"
    assert fake.inits == 0
    fake.failing.add("nvmlSystemGetDriverVersion")
    assert nvml_status().startswith("NVML, driver version unreadable")
    assert fake.inits == 0


def test_the_environment_says_what_nvml_said(fake):
    from tui.engine.environment import collect

    assert collect().telemetry == "NVML, driver 580.95"
    assert fake.inits == 0


def test_the_environment_on_this_machine_says_whether_nvml_answers():
    status = nvml_status()
    assert status.startswith(("NVML, driver ", "NVML unavailable: ", "pynvml not installed"))


def test_a_device_found_by_pci_address(fake):
    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x18, pci_device_id=0, uuid="aaaa")
    assert device_handle(fake, 0, props, visible="3,1") == "gpu-b"
    assert fake.lookups == [("pci", "00000000:18:00.0")]


def test_a_device_found_by_uuid_when_torch_gives_no_pci_address_or_nvml_finds_none(fake):
    assert device_handle(fake, 0, types.SimpleNamespace(uuid="aaaa"), visible="1") == "gpu-a"
    assert fake.lookups == [("uuid", "GPU-aaaa")]
    fake.failing.add("nvmlDeviceGetHandleByPciBusId")
    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x18, pci_device_id=0, uuid="GPU-bbbb")
    assert device_handle(fake, 0, props, visible=None) == "gpu-b"


def test_a_device_nvml_does_not_know_is_an_error_not_a_guess_by_index(fake, clock):
    props = types.SimpleNamespace(uuid="cccc")
    with pytest.raises(NVMLError):
        device_handle(fake, 0, props, visible=None)
    assert ("index", 0) not in fake.lookups
    reason = Nvml.open(0, props=props)
    assert reason == "NVML has no device for CUDA device 0: Not Found"
    assert fake.inits == 0  # NVML was shut down again


@pytest.mark.parametrize(
    ("index", "visible", "lookup"),
    [
        (1, None, ("index", 1)),
        (1, "2,3", ("index", 3)),
        (0, " 5 , 4", ("index", 5)),
        (1, "GPU-aaaa,GPU-bbbb", ("uuid", "GPU-bbbb")),
    ],
)
def test_without_an_identity_the_index_goes_through_cuda_visible_devices(fake, index, visible, lookup):
    device_handle(fake, index, None, visible)
    assert fake.lookups == [lookup]


def test_an_index_past_cuda_visible_devices_is_refused(fake, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    reason = Nvml.open(1, props=types.SimpleNamespace())
    assert reason == "NVML has no device for CUDA device 1: CUDA device 1 is not among CUDA_VISIBLE_DEVICES=2"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,6")
    nvml = Nvml.open(1, props=types.SimpleNamespace())
    assert isinstance(nvml, Nvml) and fake.lookups[-1] == ("index", 6)
    nvml.close()
    assert fake.inits == 0


@pytest.mark.gpu
def test_nvml_reads_the_real_gpu_around_a_busy_loop():
    import torch

    nvml = Nvml.open(0)
    assert isinstance(nvml, Nvml), nvml
    with nvml:
        state = nvml.state()
        assert state.sm_clock_mhz and state.sm_clock_mhz > 0
        assert state.power_limit_w and state.power_limit_w > 0
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

        def busy():
            start = time.monotonic()
            while time.monotonic() - start < 0.2:
                for _ in range(8):
                    a @ a
                torch.cuda.synchronize()

        waited, rested = nvml.wait_until_rested(max_s=2.0)
        assert 0.0 <= waited <= 2.5 and rested is not None
        _, tel = nvml.measure_around(busy)
        assert tel.seconds >= 0.2
        assert tel.after.sm_clock_mhz and tel.after.sm_clock_mhz > 0
        assert tel.power_capped_pct is not None
        for pct in (tel.power_capped_pct, tel.thermal_capped_pct):
            assert pct is None or 0.0 <= pct <= 100.0
