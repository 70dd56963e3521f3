"""Errors that leave the CUDA context unusable, and naming the plan that caused one.

After an illegal address, a launch failure, a misaligned address or an ECC error, every later
CUDA call of the process fails with the same words: the context is lost, and only a new process
gets a new one. CUDA reports a kernel's fault at the next synchronisation, not at its launch, so
a plan's first execution is waited for (`execute_once`): the fault is then the plan's, not the
next innocent call's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.results import Crash, PassResult
from ..model.statuses import STATUS_CRASH

# CUDA's words for the errors that poison a context (cudaErrorIllegalAddress, LaunchFailure,
# MisalignedAddress, IllegalInstruction, InvalidPc, HardwareStackError, Assert, ECCUncorrectable,
# LaunchTimeout); a lost context is also detected by trying it (`usable`), whatever the words.
STICKY_WORDS = (
    "illegal memory access",
    "illegal address",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "invalid program counter",
    "hardware stack error",
    "device-side assert",
    "uncorrectable ecc",
    "launch timed out",
)


class ContextLost(Exception):
    """The CUDA context is gone: `during` says what the engine was doing, `error` CUDA's words."""

    def __init__(self, during: str, error: str, plan: str = "") -> None:
        super().__init__(f"{error} (while {during})")
        self.during, self.error, self.plan = during, error, plan


def usable() -> bool:
    """Whether the context still runs work: after a sticky error every call fails. A failed
    capture's error is reported once, by the next call, and then gone: so a second try decides."""
    import torch

    for _ in range(2):
        try:
            torch.cuda.synchronize()
            if int(torch.ones(1, device="cuda").add_(1).item()) == 2:
                return True
        except Exception:
            continue
    return False


def sticky(exc: BaseException) -> bool:
    """Whether `exc` left the context unusable: by CUDA's words, or by a failed try."""
    if isinstance(exc, ContextLost):
        return True
    text = str(exc).lower()
    return any(words in text for words in STICKY_WORDS) or not usable()


def execute_once(run: Callable[[], Any], during: str, plan: str = "") -> None:
    """Run once and wait for it, so a fault is reported as this execution's."""
    import torch

    try:
        run()
        torch.cuda.synchronize()
    except Exception as exc:
        if sticky(exc):
            raise ContextLost(during, first_line(exc), plan) from exc
        raise


def lost(exc: BaseException, during: str, counts: dict[str, Any]) -> tuple[Crash, PassResult]:
    """A fault that lost the context as the run reports it: the crash (CUDA's words, and what was
    running: `during` where the fault does not say) and the result of the pass it ended (`counts`
    says what the pass is: measure.counts)."""
    if not isinstance(exc, ContextLost):
        exc = ContextLost(during, first_line(exc))
    crash = Crash(error=exc.error, during=exc.during, kind=counts["kind"], plan=exc.plan)
    words = f"crashed the GPU: {exc.error} (during {exc.during})"
    return crash, PassResult(status=STATUS_CRASH, message=words, **counts)


def first_line(exc: BaseException) -> str:
    """The error in one line (torch appends hints about CUDA_LAUNCH_BLOCKING over several)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def poison_context(built: Any, handle: Any) -> None:
    """Lose the context on purpose: execute a built pass whose query points at an address
    nobody mapped, so its kernel faults with an illegal address. The soak uses it to prove
    that a lost context costs one engine process and no more."""
    unmapped = 0x7F0000000000  # far above any allocation of this process
    pack = built.graph.variant_pack({**built.data, "q": unmapped})
    g = built.graph.graph
    execute_once(lambda: g.execute(pack, built.workspace, handle=handle), "losing the context on purpose")
