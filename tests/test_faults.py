"""Which CUDA errors cost the context: a failed capture's error is reported once, by the next call
(the H200 said "operation failed due to a previous error during capture" after FA4's backward
refused a capture), and must not be taken for a lost context; a sticky one fails every call."""

from __future__ import annotations

import torch

from tui.engine import faults


class Once:
    """torch.cuda.synchronize failing the first `failures` calls, then returning."""

    def __init__(self, failures: int):
        self.failures = failures

    def __call__(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")


def test_an_error_said_once_leaves_the_context_usable_and_one_said_every_time_does_not(monkeypatch):
    ones = torch.ones
    monkeypatch.setattr(torch, "ones", lambda *a, device=None, **k: ones(*a, **k))
    monkeypatch.setattr(torch.cuda, "synchronize", Once(1))
    assert faults.usable()
    exc = RuntimeError("CUDA error: operation failed due to a previous error during capture")
    monkeypatch.setattr(torch.cuda, "synchronize", Once(1))
    assert not faults.sticky(exc)
    monkeypatch.setattr(torch.cuda, "synchronize", Once(10**6))
    assert not faults.usable() and faults.sticky(exc)
    assert faults.sticky(RuntimeError("CUDA error: an illegal memory access was encountered"))
