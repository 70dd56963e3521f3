"""GPU tests carry @pytest.mark.gpu and skip themselves where CUDA is not usable.

The dashboard's tests talk to an engine through a fixture: `fake_engine` (recordings of the
H200, relabelled where a test only needs a result), `cpu_fake_engine` (the CPU engine run in
this process behind the same fake), or `engine_process` (the real child process, for the few
tests of start-up, crash recovery and quitting)."""

from __future__ import annotations

import gc
import os
import shutil
import sys

import pytest


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _share_the_cores() -> None:
    """Each test process's torch gets its share of the cores, not all of them (the engine processes
    it starts inherit the setting): torch's CPU threads spin while they wait, so two test processes
    of two threads each on two cores spent most of a CPU check spinning (test_cpu_chunks took 86 s
    of CPU with two threads a process, 15 s with one, on a busy 2-core machine). A thread count the
    user set is kept; one test process (`-n 0`, and on a GPU machine) keeps torch's default."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return
    threads = max(1, _cores() // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read when torch loads, here and in every child
    if "torch" in sys.modules:  # loaded already: tell it too
        sys.modules["torch"].set_num_threads(threads)


_share_the_cores()  # before collection imports torch


def _gpu_reason() -> str | None:
    try:
        from tui.engine.environment import collect

        env = collect()
    except Exception as exc:  # pragma: no cover
        return f"environment could not be read: {exc}"
    return None if env.gpu_available else env.unavailable_reason


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the default): up to 4 test processes, each loading torch and Textual once;
    where an NVIDIA GPU is present, none (one process), so GPU timings never share the device."""
    if os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi"):
        return 0
    cores = _cores()
    return min(cores, 4) if cores > 1 else 0


@pytest.fixture(scope="session", autouse=True)
def own_user_presets(tmp_path_factory):
    """No test reads the user's own presets (one of theirs must not change a test) or shares a
    folder with another test process; a test that saves presets gives itself a folder of its own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path_factory.mktemp("user-presets")))
        mp.setenv("SDPA_EXPLORER_CACHE_DIR", str(tmp_path_factory.mktemp("plan-cache")))  # plans too
        mp.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path_factory.mktemp("user-data")))  # the run history
        # engines from each test process's own fork server: no engine server outlives the suite
        # (test_server.py starts its own, in a folder of its own, and stops it)
        mp.setenv("SDPA_EXPLORER_SERVER_IDLE", "0")
        mp.setenv("SDPA_EXPLORER_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
        yield


def pytest_configure(config):
    """Collection imports torch, Textual and the package: no collector passes over them midway (a
    second of each test process's start)."""
    gc.disable()


def pytest_collection_finish(session):
    """What collection imported (torch, Textual, the package) lives as long as the process: freeze
    it, so the collector's full passes walk only what tests create. Those passes walked torch's
    objects each time and were a fifth of a dashboard test's time."""
    gc.collect()
    gc.freeze()
    gc.enable()
    # fewer passes: a dashboard test allocates in bursts, and its widgets live as long as it does;
    # (10_000, 10, 10) spent 13% of the dashboard tests' time collecting, this a third less
    gc.set_threshold(100_000, 50, 100)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """What a test leaves (a dashboard's widgets, in cycles) is frozen too, never walked or freed:
    walking and freeing each app's remains took a tenth of the dashboard tests' time, keeping
    them costs a few MB a test."""
    yield
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def no_animations():
    """Tabs and scrolls jump to where they end: a test sees the same final screen without waiting
    for an underline to slide (Textual reads the level when an app is made)."""
    import textual.constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(textual.constants, "TEXTUAL_ANIMATIONS", "none")
        yield


@pytest.fixture(scope="session", autouse=True)
def short_idle_looks():
    """Textual's pilot waits for the process to fall idle after each key it presses (twice) and at
    each pause, looking every 20 ms: a third of the dashboard tests' time was those sleeps. Looking
    every 2 ms finds the same idle process (under 1 ms of CPU in the last look); what a test
    expects it still waits for by its state (pilot_waits.wait_for)."""
    import textual._wait

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(textual._wait, "SLEEP_GRANULARITY", 1 / 500)
        yield


_SHARED_SCOPES = {"package": pytest.Package, "module": pytest.Module, "class": pytest.Class}  # broadest first


def shared_scope(item) -> str | None:
    """The node whose tests share a fixture `item` uses (a package's, a module's or a class's,
    the broadest), or None: such tests are one group for `--dist loadgroup`, so one test process
    makes the fixture once (an app started for a class, the snapshots' screens, an engine server)
    instead of each process it was split across."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {defs[-1].scope for defs in info.name2fixturedefs.values() if defs}
    for scope, node_type in _SHARED_SCOPES.items():
        if scope in scopes:
            node = item.getparent(node_type)
            if node is not None:
                return node.nodeid
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist names each test of a group by it
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = shared_scope(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_engine():
    """An Engine told there is no GPU: the CPU-mode answer on any machine."""
    import dataclasses

    from tui.engine.environment import collect
    from tui.engine.runner import Engine

    env = dataclasses.replace(
        collect(), gpu_available=False, unavailable_reason="CPU mode requested by the test"
    )
    return Engine(environment=env)


@pytest.fixture
def fake_engine():
    from fakes import FakeEngine

    fake = FakeEngine()
    yield fake
    fake.close()


@pytest.fixture
def cpu_fake_engine(cpu_engine):
    """Real CPU-mode results (the engine's own code, in this process), in the fake's envelope."""
    from fakes import FakeEngine, computed

    fake = FakeEngine(computed(cpu_engine), environment=cpu_engine.environment())
    yield fake
    fake.close()


@pytest.fixture
def engine_process():
    """The real engine child process, told there is no GPU; its output is not logged."""
    from fakes import NO_GPU

    from tui.process.client import EngineClient

    client = EngineClient(environment_override=NO_GPU, log_file=None)
    yield client
    client.close()
