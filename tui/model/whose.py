"""Whose bug a failed run is: cuDNN's, the tool's, or not known.

A failed check says only that cuDNN and the tool's fp32 reference disagree. With the fp64
cross-check (RunOptions.cross_check: each output against fp64 math on the same tensors, and the
fp32 reference against it too) and a peer on the same inputs, the disagreement has an owner: the
fp32 reference off the fp64 one is the tool's bug (fixed, not filed), cuDNN off the fp64 reference
while a peer agrees with it is cuDNN's (a finding for the cuDNN team), and cuDNN on the fp64
reference with a peer beside it means the tool's check was wrong. A peer's error is measured
against the fp32 reference, so it stands for the fp64 one only where that reference agrees with
fp64. Without the cross-check or a peer nobody can say.
"""

from __future__ import annotations

from dataclasses import dataclass

from .results import OutputCheck, PassResult, RunResult
from .statuses import STATUS_CRASH

CUDNN, TOOL, UNKNOWN = "cuDNN", "tool", "unknown"
OWNERS = (CUDNN, TOOL, UNKNOWN)


@dataclass(frozen=True)
class Whose:
    """The owner of a failure (CUDNN, TOOL or UNKNOWN) and why, in one sentence."""

    who: str
    why: str


def whose(result: RunResult) -> Whose:
    """The owner of a failed run: a tool's bug first (it would make every other verdict moot),
    then cuDNN's, else unknown; a run that did not fail is nobody's."""
    if result.status == STATUS_CRASH:
        crash = result.crash
        if crash is not None and crash.plan:
            return Whose(CUDNN, f"it crashed executing cuDNN's plan {crash.plan} ({crash.error})")
        return Whose(UNKNOWN, f"it crashed ({result.message or 'no words'}) outside a plan's execution")
    verdicts = [v for p in result.passes for v in _pass_verdicts(p)]
    for who in (TOOL, CUDNN, UNKNOWN):
        found = next((v for v in verdicts if v.who == who), None)
        if found is not None:
            return found
    return Whose(UNKNOWN, "the run did not fail")


def _pass_verdicts(p: PassResult) -> list[Whose]:
    verdicts = [check_whose(c, p.kind) for c in p.checks if c.passed is False]
    if p.deterministic and p.repeatable is False:
        verdicts.append(Whose(CUDNN, f"the deterministic {p.kind} wrote different bits on two executions"))
    return verdicts


def agreeing_peers(check: OutputCheck) -> list[str]:
    """The peers whose output is within tolerance of the fp32 reference."""
    return [name for name, m in check.peers.items() if m.passed]


def check_whose(check: OutputCheck, kind: str = "") -> Whose:
    """The owner of one failed output check."""
    out = f"{check.output}{f' ({kind})' if kind else ''}"
    if check.fp64 is None or check.reference_fp64 is None:
        return Whose(UNKNOWN, f"{out} was not cross-checked against an fp64 reference")
    ref = check.reference_fp64
    if not ref.passed:
        return Whose(TOOL, f"the tool's fp32 reference of {out} is off the fp64 one (max abs {ref.max_abs:.3g}, "
                           f"{ref.mismatched + ref.nonfinite} of {ref.total} elements)")  # fmt: skip
    peers = agreeing_peers(check)
    cudnn = check.fp64
    if cudnn.passed:
        if peers:
            return Whose(TOOL, f"cuDNN's {out} agrees with the fp64 reference and with {peers[0]}: the fp32 "
                               "check was wrong")  # fmt: skip
        return Whose(
            UNKNOWN, f"cuDNN's {out} agrees with the fp64 reference, but no peer agreed to confirm it"
        )
    off = f"cuDNN's {out} is off the fp64 reference (max abs {cudnn.max_abs:.3g}"
    off += f", {cudnn.nonfinite} not finite)" if cudnn.nonfinite else ")"
    if peers:
        return Whose(CUDNN, f"{off} while {peers[0]} agrees with it")
    if check.peers:
        return Whose(UNKNOWN, f"{off}, and so is every peer ({', '.join(check.peers)})")
    return Whose(UNKNOWN, f"{off}; no peer ran to confirm it")
