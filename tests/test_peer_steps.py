"""The training step against the peers: each peer's forward and backward kernel times added up,
beside cuDNN's step (its passes' plans added up), its dQ, dK, dV verdict; in the CLI's report,
whole at 80 columns, and in the Peers pane (test_peers_pane.py shows it in a dashboard)."""

from __future__ import annotations

import dataclasses

import pytest
from fakes import TRAINING, with_peers
from test_cli_width import assert_whole, rendered

from tui.model.results import ErrorMetrics, PeerResult
from tui.present.format import multiple, us
from tui.present.peer_steps import STEP_COLUMNS, step_rows, step_speed, step_standing, step_table
from tui.present.report import result_renderable

FA4_REFUSAL = "FA4: deterministic backward not supported on SM 9.0"


def with_backward_peers(result=TRAINING, fa4_dk_wrong: bool = True):
    """`result` (a training step) as if FLASH, Flex and FA4 had been timed in both passes, in
    made-up proportions of cuDNN's times: FLASH 1.9x and 1.5x, Flex 1.6x and 1.8x, FA4 0.9x and
    1.1x (its dK outside tolerance when `fa4_dk_wrong`); FA3 refusing its backward."""
    result = with_peers(result)
    forward, backward = result.passes
    precision = result.config.dtype

    def timed(p, times: float) -> dict:
        median = p.timing.median_us * times
        return {"timing": dataclasses.replace(p.timing, median_us=median, samples_us=())}

    fa4_forward = PeerResult(
        f"FA4 {precision}", "FlashAttention-4", compile_seconds=2.1, **timed(forward, 0.9)
    )
    forward = dataclasses.replace(forward, field_peers=(*forward.field_peers, fa4_forward))
    peers = (
        PeerResult(f"torch FLASH {precision}", "FlashAttention-2 in torch", **timed(backward, 1.5)),
        PeerResult(
            f"Flex {precision}", "FlexAttention, compiled", compile_seconds=5.0, **timed(backward, 1.8)
        ),
        PeerResult(f"FA3 {precision}", reason="FA3's backward is not driven here"),
        PeerResult(
            f"FA4 {precision}", "FlashAttention-4; its backward through autograd", **timed(backward, 1.1)
        ),
    )
    checks = []
    for c in backward.checks:
        errors = {p.name: dataclasses.replace(c.cudnn, max_abs=c.cudnn.max_abs * 1.2) for p in peers if p.ran}
        if fa4_dk_wrong and c.output == "dK":
            errors[f"FA4 {precision}"] = ErrorMetrics(0.5, 1.0, 1e-2, 40, c.cudnn.total)
        checks.append(dataclasses.replace(c, peers={**c.peers, **errors}))
    backward = dataclasses.replace(backward, field_peers=peers, checks=tuple(checks))
    return dataclasses.replace(result, passes=(forward, backward))


def test_each_peers_step_is_its_forward_and_backward_beside_cudnns():
    result = with_backward_peers()
    forward, backward = result.passes
    rows = step_rows(result)
    assert [r.name for r in rows] == ["cuDNN", "torch FLASH bf16", "Flex bf16", "FA3 bf16", "FA4 bf16"]
    cudnn, flash, flex, fa3, fa4 = rows
    assert cudnn.step_us == pytest.approx(result.step_us) and cudnn.passed is True
    f, b = forward.timing.median_us, backward.timing.median_us
    assert flash.step_us == pytest.approx(1.93 * f + 1.5 * b) and flash.passed is True
    assert step_speed(flash, rows) == pytest.approx((1.93 * f + 1.5 * b) / (f + b))
    assert flex.step_us == pytest.approx(1.60 * f + 1.8 * b)
    assert fa3.step_us is None and fa3.reason == "FA3's backward is not driven here" and fa3.verdict == "-"
    assert fa4.step_us == pytest.approx(0.9 * f + 1.1 * b)
    assert fa4.passed is False and fa4.verdict == "FAIL"  # a wrong dK fails the step, however fast
    assert step_standing(result).startswith(f"cuDNN step {multiple(step_speed(flash, rows))} FLASH, ")
    assert f"{multiple(step_speed(fa4, rows))} FA4" in step_standing(result)


def test_no_step_table_without_backward_peers():
    assert step_rows(TRAINING) == [] and step_table(TRAINING) is None
    assert step_rows(with_peers(TRAINING)) == []  # forward peers only
    forward_only = dataclasses.replace(TRAINING, passes=TRAINING.passes[:1])
    assert step_rows(forward_only) == []


def test_a_peer_that_refused_its_forward_says_so_in_its_step():
    result = with_backward_peers()
    forward, backward = result.passes
    refused = PeerResult("FA4 bf16", reason="FA4 takes no ALiBi")
    peers = tuple(refused if p.name == "FA4 bf16" else p for p in forward.field_peers)
    result = dataclasses.replace(result, passes=(dataclasses.replace(forward, field_peers=peers), backward))
    fa4 = step_rows(result)[-1]
    assert fa4.step_us is None and fa4.reason == "FA4 takes no ALiBi"


@pytest.mark.parametrize("width", (80, 120))
def test_the_report_has_the_step_table_whole(width):
    result = with_backward_peers()
    assert "Training step against peers" in rendered(result_renderable(result), 120)  # after the passes
    text = rendered(step_table(result), width)
    rows = step_rows(result)
    figures = [us(r.step_us) for r in rows if r.step_us is not None]
    figures += [multiple(step_speed(r, rows)) for r in rows[1:] if r.step_us is not None]
    assert_whole(
        text, width, figures=figures, names=["torch FLASH bf16", "FA4 bf16"], headers=STEP_COLUMNS[:-1]
    )
    assert "FA3's backward is not driven here" in " ".join(text.split())  # wrapped in its column
