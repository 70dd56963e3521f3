"""Whose bug a failed run is (tui/model/whose.py): cuDNN's when it is off the fp64 reference and a
peer agrees with that; the tool's when its fp32 reference is off fp64, or cuDNN is on fp64 with a
peer beside it; unknown without the cross-check or a peer."""

from __future__ import annotations

import dataclasses

from hunt_fakes import GOOD, NAN, PEER, WRONG, planted_result

from tui.model.config import SdpaConfig
from tui.model.results import Crash, RunResult
from tui.model.statuses import BACKWARD, FORWARD, STATUS_CRASH
from tui.model.whose import CUDNN, TOOL, UNKNOWN, check_whose, whose

CONFIG = SdpaConfig(backward=True)
WITH_PEERS = type("Options", (), {"peers": ("flash",)})()


def with_o(result: RunResult, **changes) -> RunResult:
    """`result` with its forward's O check changed."""
    forward = result.passes[0]
    o = dataclasses.replace(forward.checks[0], **changes)
    return dataclasses.replace(result, passes=(dataclasses.replace(forward, checks=(o,)), *result.passes[1:]))


def test_cudnn_off_fp64_while_a_peer_agrees_is_cudnns():
    verdict = whose(planted_result(CONFIG, WITH_PEERS, wrong=BACKWARD))
    assert verdict.who == CUDNN and "dQ (backward)" in verdict.why and PEER in verdict.why
    assert whose(planted_result(CONFIG, WITH_PEERS, nan=FORWARD)).who == CUDNN


def test_the_fp32_reference_off_fp64_is_the_tools_and_comes_first():
    wrong = planted_result(CONFIG, WITH_PEERS, wrong=FORWARD)
    assert whose(with_o(wrong, reference_fp64=WRONG)).who == TOOL
    cudnn_right = with_o(wrong, fp64=GOOD)  # cuDNN on the fp64 reference, the peer too: the check was wrong
    assert whose(cudnn_right).who == TOOL and "the fp32 check was wrong" in whose(cudnn_right).why


def test_without_the_cross_check_or_a_peer_nobody_can_say():
    wrong = planted_result(CONFIG, WITH_PEERS, wrong=FORWARD)
    assert whose(with_o(wrong, fp64=None, reference_fp64=None)).who == UNKNOWN
    assert whose(planted_result(CONFIG, None, wrong=FORWARD)).who == UNKNOWN  # no peer ran
    assert check_whose(dataclasses.replace(wrong.passes[0].checks[0], peers={PEER: NAN})).who == UNKNOWN
    assert whose(planted_result(CONFIG, WITH_PEERS)).why == "the run did not fail"


def test_a_crash_in_a_plan_is_cudnns_and_a_repeat_that_differs_too():
    crash = Crash("illegal memory access", "the first execution", plan="eng2_k24=32")
    assert whose(RunResult(CONFIG, STATUS_CRASH, "x", crash=crash)).who == CUDNN
    assert whose(RunResult(CONFIG, STATUS_CRASH, "SIGSEGV")).who == UNKNOWN
    ran = planted_result(CONFIG.replace(deterministic=True), None)
    backward = dataclasses.replace(ran.passes[1], repeatable=False)
    assert whose(dataclasses.replace(ran, passes=(ran.passes[0], backward))).who == CUDNN
