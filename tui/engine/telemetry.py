"""GPU clocks, power, temperature and throttle reasons through NVML, around each timed measurement.

At large shapes the GPU's power state sets the kernel time (DESIGN.md fact 11): attention at 600+
TFLOPS reaches the H200's 700 W limit, the SW power cap lowers the SM clock from 1980 to about
1755 MHz, and the same kernel reads up to 15% slower. So a timed figure carries the GPU's state
before and after it, and the share of its wall time that NVML's violation counters say ran power-
or thermally-capped; a burst measurement first waits, for a bounded time, until the GPU is rested.

pynvml (package nvidia-ml-py) is imported inside the functions: a machine without it, or without
the NVIDIA driver, gets a one-line reason instead, and nothing here raises for that.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..model.results import GpuState, Telemetry

T = TypeVar("T")

# NVML's enum values (nvml.h); they are its ABI and never change.
CLOCK_SM = 1
CLOCK_MEM = 2
TEMPERATURE_GPU = 0
PERF_POLICY_POWER = 0
PERF_POLICY_THERMAL = 1

# The clock-event (formerly "clocks throttle") reason bits, in NVML's order, as short words.
GPU_IDLE = 0x1  # ignored: an idle GPU parks its clocks (345 MHz on the H200), which is no cap
REASON_WORDS: tuple[tuple[int, str], ...] = (
    (0x2, "app clocks setting"),
    (0x4, "sw power cap"),
    (0x8, "hw slowdown"),
    (0x10, "sync boost"),
    (0x20, "sw thermal slowdown"),
    (0x40, "hw thermal slowdown"),
    (0x80, "hw power brake"),
    (0x100, "display clocks"),
    (0x200, "board limit"),
    (0x400, "reliability"),
)
_KNOWN_BITS = GPU_IDLE | sum(bit for bit, _ in REASON_WORDS)
# The reasons that mean power or heat is holding the clock down: a rested GPU has none of them.
CAP_REASONS = frozenset(
    {"sw power cap", "hw slowdown", "hw thermal slowdown", "hw power brake", "sw thermal slowdown"}
)

MAX_REST_S = 2.0  # the longest a burst measurement waits for the GPU to rest
QUIET_S = 0.1  # how long the counters must stand still, with no cap reason, to call the GPU rested
POLL_S = 0.025  # how often the rest wait reads NVML
_TICK_S = 1e-6  # closer than this to a deadline is at it (float sums of sleeps stop short)

Counters = tuple[int | None, int | None]  # violation time (ns) so far: power, thermal


def decode_reasons(mask: int | None) -> tuple[str, ...]:
    """The active reasons of NVML's bitmask as short words ('gpu idle' left out); a bit this table
    does not know is kept as 'reason 0x...', so that a new cap is never silently dropped."""
    if not mask:
        return ()
    words = [word for bit, word in REASON_WORDS if mask & bit]
    if unknown := mask & ~_KNOWN_BITS:
        words.append(f"reason {unknown:#x}")
    return tuple(words)


def capped_pct(before_ns: int | None, after_ns: int | None, seconds: float) -> float | None:
    """The share of `seconds` a violation counter grew by, in %, within [0, 100]; None where the
    counter could not be read or no time passed."""
    if before_ns is None or after_ns is None or seconds <= 0:
        return None
    return min(100.0, max(0.0, 100.0 * (after_ns - before_ns) / 1e9 / seconds))


def _capping(mask: int | None) -> bool:
    """Whether a power or thermal reason is active in NVML's bitmask."""
    return bool(CAP_REASONS.intersection(decode_reasons(mask)))


def _import_and_init() -> Any:
    """pynvml, initialised (NVML counts its inits: pair with _shutdown), or why not as a string."""
    try:
        import pynvml
    except ImportError:
        return "pynvml not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML unavailable: {exc}"
    return pynvml


def _shutdown(nvml: Any) -> None:
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_status() -> str:
    """'NVML, driver 580.95' where clocks and power can be read, else the reason why not. Cheap:
    it opens no device, so that describing the machine stays fast."""
    nvml = _import_and_init()
    if isinstance(nvml, str):
        return nvml
    try:
        return f"NVML, driver {_text(nvml.nvmlSystemGetDriverVersion())}"
    except Exception as exc:
        return f"NVML, driver version unreadable: {exc}"
    finally:
        _shutdown(nvml)


def pci_bus_id(props: Any) -> str | None:
    """NVML's form of the device's PCI address (domain:bus:device.function) from torch's device
    properties, where this torch reports it (pci_domain_id, pci_bus_id, pci_device_id)."""
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if any(not isinstance(p, int) for p in parts):
        return None
    domain, bus, device = parts
    return f"{domain:08x}:{bus:02x}:{device:02x}.0"


def nvml_uuid(uuid: Any) -> str:
    """torch prints a device's UUID bare; NVML names it 'GPU-<uuid>' (or 'MIG-<uuid>')."""
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def device_handle(nvml: Any, device_index: int, props: Any, visible: str | None) -> Any:
    """The NVML handle of torch's CUDA device `device_index`. NVML numbers every GPU of the machine
    in PCI order; CUDA numbers only those CUDA_VISIBLE_DEVICES lets through, in its own order. So
    the device is found by identity: its PCI address, else its UUID, as torch reports them. Only
    a torch that reports neither falls back to its index through CUDA_VISIBLE_DEVICES (a list of
    NVML indices or UUIDs). Raises when NVML has no such device."""
    error: Exception | None = None
    for lookup, key in (
        ("nvmlDeviceGetHandleByPciBusId", pci_bus_id(props)),
        ("nvmlDeviceGetHandleByUUID", nvml_uuid(props.uuid) if getattr(props, "uuid", None) else None),
    ):
        if key is None:
            continue
        try:
            return getattr(nvml, lookup)(key)
        except Exception as exc:
            error = exc
    if error is not None:  # torch said which device it is, and NVML knows none such
        raise error
    if visible is None:
        return nvml.nvmlDeviceGetHandleByIndex(device_index)
    entries = [entry.strip() for entry in visible.split(",")]
    if not 0 <= device_index < len(entries):
        raise LookupError(f"CUDA device {device_index} is not among CUDA_VISIBLE_DEVICES={visible}")
    entry = entries[device_index]
    if entry.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    return nvml.nvmlDeviceGetHandleByUUID(entry)


def _torch_properties(device_index: int) -> Any:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(device_index)
    except Exception:
        pass
    return None


def identity(props: Any) -> dict[str, Any]:
    """Which physical GPU torch's device 0 is: NVML's index, UUID and serial number, where NVML
    gives them (a serial only some boards carry); what it cannot say is left out. Never raises."""
    nvml = _import_and_init()
    if isinstance(nvml, str):
        return {}
    found: dict[str, Any] = {}
    try:
        handle = device_handle(nvml, 0, props, os.environ.get("CUDA_VISIBLE_DEVICES"))
        for key, call in (("gpu_index", "nvmlDeviceGetIndex"), ("gpu_uuid", "nvmlDeviceGetUUID"),
                          ("gpu_serial", "nvmlDeviceGetSerial")):  # fmt: skip
            with contextlib.suppress(Exception):
                value = getattr(nvml, call)(handle)
                found[key] = value if isinstance(value, int) else _text(value)
    except Exception:
        pass
    finally:
        _shutdown(nvml)
    return found


class Nvml:
    """NVML opened for one CUDA device: its state now, the rest wait, and measurements around a
    callable. Make one with Nvml.open(); close() it (or use it as a context manager) when done.

    `clock` and `sleep` are injectable so that tests run on a scripted clock and never sleep."""

    def __init__(
        self,
        nvml: Any,
        handle: Any,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._nvml = nvml
        self._handle = handle
        self._clock = clock
        self._sleep = sleep
        # Counters at the last moment known to start from rest: the start of the last measurement
        # or the end of a rest wait that succeeded. Unchanged now means nothing capped since.
        self._settled: Counters | None = None

    @classmethod
    def open(
        cls,
        device_index: int = 0,
        *,
        props: Any = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Nvml | str:
        """The reader for torch's CUDA device `device_index` (its properties are read from torch
        unless given), or one line saying why there is none. Never raises."""
        nvml = _import_and_init()
        if isinstance(nvml, str):
            return nvml
        if props is None:
            props = _torch_properties(device_index)
        try:
            handle = device_handle(nvml, device_index, props, os.environ.get("CUDA_VISIBLE_DEVICES"))
        except Exception as exc:
            _shutdown(nvml)
            return f"NVML has no device for CUDA device {device_index}: {exc}"
        return cls(nvml, handle, clock=clock, sleep=sleep)

    def close(self) -> None:
        _shutdown(self._nvml)

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, name: str, *args: Any) -> Any:
        """One NVML reading, or None where it raises (a field this GPU does not support must not
        lose the others)."""
        try:
            return getattr(self._nvml, name)(self._handle, *args)
        except Exception:
            return None

    def reason_mask(self) -> int | None:
        """The active clock-event reasons as NVML's bitmask (the newer call, else the older name
        of the same one), or None where neither can be read."""
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            mask = self._read(name)
            if mask is not None:
                return int(mask)
        return None

    def state(self) -> GpuState:
        """Clocks, power against the enforced limit, temperature and active reasons, now."""
        power_mw = self._read("nvmlDeviceGetPowerUsage")
        limit_mw = self._read("nvmlDeviceGetEnforcedPowerLimit")
        return GpuState(
            sm_clock_mhz=self._read("nvmlDeviceGetClockInfo", CLOCK_SM),
            mem_clock_mhz=self._read("nvmlDeviceGetClockInfo", CLOCK_MEM),
            power_w=None if power_mw is None else power_mw / 1000.0,
            power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
            temperature_c=self._read("nvmlDeviceGetTemperature", TEMPERATURE_GPU),
            reasons=decode_reasons(self.reason_mask()),
        )

    def counters(self) -> Counters:
        """NVML's cumulative time (ns) spent power-capped and thermally capped; None where unread."""

        def violation_ns(policy: int) -> int | None:
            status = self._read("nvmlDeviceGetViolationStatus", policy)
            return None if status is None else int(status.violationTime)

        return violation_ns(PERF_POLICY_POWER), violation_ns(PERF_POLICY_THERMAL)

    def wait_until_rested(
        self, max_s: float = MAX_REST_S, quiet_s: float = QUIET_S, poll_s: float = POLL_S
    ) -> tuple[float, bool | None]:
        """Wait until the GPU is rested, at most `max_s`: (seconds waited, rested). Rested: no
        power or thermal reason active now, and the power and thermal violation counters standing
        still for the last `quiet_s`. rested is False when `max_s` ran out first, None where NVML
        reads neither reasons nor counters (nothing to wait on).

        It does not wait for the top clock: an idle GPU parks its SM clock (345 MHz on the H200).
        The issue suggested counters still for about a second; the quiet window is 0.1 s (five
        readings 25 ms apart), as measured on the H200 (driver 580.159): after 8 s of capped bf16
        matmuls the clock was back at 1965 MHz within 0.1 s of the load's end, while the SW power
        cap reason and the power counter (which moves every ~10 ms under a cap) stopped about
        0.35 s after it; a burst then read 1.39 ms a matmul after a rest of 0.1 s, of 0.3 s, after
        this wait (0.78 s) and after a 1 s window (1.43 s) alike, against 1.65 ms with no rest.
        benchmarks/rest_window.py (llama3-8b-prefill after 2 s of capped load, three trials a
        window) read 893.5, 892.4 and 894.0 µs after windows of 0.1, 0.3 and 1.0 s, which waited
        0.57, 0.75 and 1.46 s: the window was 0.3 s until then, 0.2 s of every wait (3.4 s of a
        check) bought nothing. So a second buys nothing here and the wait, before every burst,
        stays short.

        The window counts from the counters' last move, not from the reason's end: on the H200
        after a capped load the power counter stops about 0.1 s before the SW power cap reason
        clears (0.40 against 0.52 s, benchmarks/rest_signals.py), and the reason clears as the
        SM clock reaches its top (1965 MHz while it shows, 1980 once it has gone). So the wait
        ends as the reason clears, where a window from that moment added 0.1 s to every wait.

        Where the counters have not moved since the last measurement began (nothing it or
        anything after it ran was capped) and no cap reason is active, the GPU is rested at once, after one
        reading: a GPU that never reaches its limit waits nothing, and only the first burst of a
        reader, or one after capping, pays the window."""
        start = self._clock()
        mask, counters = self.reason_mask(), self.counters()
        if mask is None and counters == (None, None):
            return 0.0, None
        if not _capping(mask) and None not in counters and counters == self._settled:
            return self._clock() - start, True
        quiet_since, quiet_counters = start, counters
        while True:
            now = self._clock()
            if counters != quiet_counters:
                quiet_since, quiet_counters = now, counters
            capping = _capping(mask)
            quiet_left, time_left = quiet_s - (now - quiet_since), max_s - (now - start)
            if not capping and quiet_left <= _TICK_S:
                self._settled = counters
                return now - start, True
            if time_left <= _TICK_S:
                return now - start, False
            self._sleep(min(poll_s, time_left) if capping else min(poll_s, quiet_left, time_left))
            mask, counters = self.reason_mask(), self.counters()

    def measure_around(
        self, fn: Callable[[], T], *, rest_first: bool = False, max_rest_s: float = MAX_REST_S
    ) -> tuple[T, Telemetry]:
        """Run `fn` (which must finish its GPU work before it returns) between two readings of the
        state and the violation counters: (what fn returned, Telemetry). The capped shares are
        the counters' growth over fn's wall time: the in-run evidence, since `after` is read once
        the GPU is idle again and its clock has already recovered. With rest_first (a burst
        measurement) it first waits, at most max_rest_s, for the GPU to rest, and says how long
        and whether it did."""
        waited, rested = self.wait_until_rested(max_rest_s) if rest_first else (0.0, None)
        before = self.state()
        start_counters = self.counters()
        self._settled = start_counters
        start = self._clock()
        result = fn()
        seconds = self._clock() - start
        end_counters = self.counters()
        after = self.state()
        power, thermal = (
            capped_pct(a, b, seconds) for a, b in zip(start_counters, end_counters, strict=True)
        )
        return result, Telemetry(before, after, seconds, power, thermal, rest_wait_s=waited, rested=rested)
