"""GPU tests carry @pytest.mark.gpu and skip themselves where CUDA is not usable."""

from __future__ import annotations

import pytest


def _gpu_reason() -> str | None:
    try:
        from tui.engine.environment import collect

        env = collect()
    except Exception as exc:  # pragma: no cover
        return f"environment could not be read: {exc}"
    return None if env.gpu_available else env.unavailable_reason


def pytest_collection_modifyitems(config, items):
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
