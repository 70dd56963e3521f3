"""A fake engine's answers with planted failure classes, for the hunt's tests (shrinker, job, CLI,
pane): a result of the engine's shape (every output checked in fp32 and cross-checked in fp64,
the peers' errors where peers were asked for) that fails exactly where a planted rule says."""

from __future__ import annotations

import signal
from collections.abc import Callable

from fakes import RECORDED

from tui.model.config import SdpaConfig
from tui.model.results import ErrorMetrics, OutputCheck, PassResult, RunResult
from tui.model.statuses import BACKWARD, FORWARD, STATUS_MISMATCH, STATUS_OK
from tui.process.client import exit_reason

GOOD = ErrorMetrics(max_abs=1e-4, max_rel=1e-3, mean_abs=1e-5, mismatched=0, total=64)
WRONG = ErrorMetrics(max_abs=0.4, max_rel=2.0, mean_abs=1e-2, mismatched=9, total=64)
NAN = ErrorMetrics(max_abs=0.0, max_rel=0.0, mean_abs=0.0, mismatched=0, total=64, nonfinite=3)
PEER = "torch FLASH fp16"

Rule = Callable[[SdpaConfig], str]  # a configuration -> the pass that fails ('' where none does)


def _check(output: str, cudnn: ErrorMetrics, peers: bool) -> OutputCheck:
    return OutputCheck(
        output, 5e-3, 3e-3, cudnn, peers={PEER: GOOD} if peers else {}, fp64=cudnn, reference_fp64=GOOD
    )


def planted_result(config: SdpaConfig, options, wrong: str = "", nan: str = "") -> RunResult:
    """A run of `config`: its forward (and backward) checked; cuDNN wrong in the pass `wrong`,
    non-finite in the pass `nan`, the fp32 reference on the fp64 one and the peer right."""
    peers = bool(getattr(options, "peers", ()))
    passes = []
    for kind, outputs in ((FORWARD, ("O",)), (BACKWARD, ("dQ", "dK", "dV"))):
        if kind == BACKWARD and not config.backward:
            continue
        metrics = WRONG if wrong == kind else NAN if nan == kind else GOOD
        status = STATUS_OK if metrics is GOOD else STATUS_MISMATCH
        checks = tuple(_check(o, metrics if i == 0 else GOOD, peers) for i, o in enumerate(outputs))
        passes.append(PassResult(kind=kind, status=status, message="" if status == STATUS_OK else f"{outputs[0]} differs",
                                 checks=checks, deterministic=config.deterministic and kind == BACKWARD,
                                 repeatable=True if kind == BACKWARD else None))  # fmt: skip
    status = next((p.status for p in passes if p.status != STATUS_OK), STATUS_OK)
    return RunResult(config=config, status=status, message=passes[0].message, device="cuda", passes=tuple(passes),
                     environment=RECORDED.environment)  # fmt: skip


def gqa_wrong_backward_nan(config: SdpaConfig, options) -> RunResult:
    """Two classes: O wrong with grouped heads and no backward; dQ not finite with any backward."""
    if config.backward:
        return planted_result(config, options, nan=BACKWARD)
    return planted_result(config, options, wrong=FORWARD if config.h_q != config.h_kv else "")


def answering(rule: Callable[[SdpaConfig, object], RunResult | None]):
    """A FakeEngine answer from a planted rule: its result, or None for a crash of the process."""

    def answer(reply, config: SdpaConfig, options: object) -> None:
        result = rule(config, options)
        if result is None:
            reply.died(exit_reason(-signal.SIGSEGV), crashed=True)
        else:
            reply.result(result)

    return answer


def fp8_crashes(config: SdpaConfig, options) -> RunResult | None:
    """FP8 crashes the engine process; everything else passes."""
    return None if config.fp8 else planted_result(config, options)
