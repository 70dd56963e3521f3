"""A training step against the peers: each peer's forward and backward kernel times added up (each
pass timed as cuDNN's is, in the run's regime), beside cuDNN's step (its passes' plans added up:
RunResult.step_us), with the verdict of the peer's dQ, dK and dV against the reference's
gradients. The CLI's report and the Peers pane show the same rows."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ..model.fastest import declined
from ..model.results import PeerResult, RunResult
from ..model.statuses import BACKWARD
from .format import multiple, peer_errors, us
from .tables import FIGURE, NAME, WORDS, FitTable

STEP_COLUMNS = ("step of", "forward", "backward", "step", "cuDNN speed", "dQ/dK/dV", "why not")
STEP_TITLE = "Training step against peers (forward + backward kernel time; cuDNN: the plans it ran)"


@dataclass(frozen=True)
class StepRow:
    """One implementation's training step: its passes' kernel times, its gradients' verdict
    (True, False; None: not checked), or why it has no step."""

    name: str
    forward_us: float | None
    backward_us: float | None
    passed: bool | None = None
    reason: str = ""
    cudnn: bool = False

    @property
    def step_us(self) -> float | None:
        if self.forward_us is None or self.backward_us is None:
            return None
        return self.forward_us + self.backward_us

    @property
    def verdict(self) -> str:
        return {True: "pass", False: "FAIL", None: "-"}[self.passed]


def _us(peer: PeerResult | None) -> float | None:
    return peer.timing.median_us if peer is not None and peer.timing is not None else None


def step_rows(result: RunResult) -> list[StepRow]:
    """cuDNN's step, then each peer asked for in the backward, matched to its forward by name;
    none where the run has no backward or its backward timed no peers."""
    forward, backward = result.forward, result.pass_of(BACKWARD)
    if forward is None or backward is None or not backward.field_peers:
        return []
    unrun = [p.kind for p in (forward, backward) if declined(p)]  # cuDNN declined: the peers ran alone
    rows = [
        StepRow(
            "cuDNN",
            forward.timing.median_us if forward.timing else None,
            backward.timing.median_us if backward.timing else None,
            backward.passed,  # None where cuDNN's gradients were not checked (or not computed)
            f"cuDNN did not run its {' and '.join(unrun)}" if unrun else "",
            cudnn=True,
        )
    ]
    errors = peer_errors(backward)
    ahead = {peer.name: peer for peer in forward.field_peers}
    for peer in backward.field_peers:
        before = ahead.get(peer.name)
        m = errors.get(peer.name)
        reason = peer.reason or (before.reason if before is not None else "its forward was not timed")
        rows.append(StepRow(peer.name, _us(before), _us(peer), None if m is None else m.passed, reason))
    return rows


def step_speed(row: StepRow, rows: list[StepRow]) -> float | None:
    """cuDNN's step speed as a multiple of the row's: the row's step over cuDNN's (above 1:
    cuDNN's step is faster)."""
    cudnn = rows[0].step_us if rows and rows[0].cudnn else None
    if cudnn is None or row.step_us is None or not cudnn:
        return None
    return row.step_us / cudnn


def step_cells(row: StepRow, rows: list[StepRow], short: bool = False) -> tuple:
    """A row's cells, in STEP_COLUMNS' order: figures as text, the verdict and reason styled;
    `short`: each name as the headline says it (FLASH, FA4), for a pane beside the form."""
    verdict = Text(row.verdict, style="red" if row.passed is False else "")
    why = Text(row.reason, style="yellow") if row.reason else Text("")
    return (
        Text(
            PeerResult(row.name).short if short and not row.cudnn else row.name,
            style="bold cyan" if row.cudnn else "",
        ),
        us(row.forward_us),
        us(row.backward_us),
        us(row.step_us),
        multiple(step_speed(row, rows)),
        verdict,
        why,
    )


def step_standing(result: RunResult) -> str:
    """cuDNN's step speed as a multiple of each peer's that has a step ("cuDNN step 1.10x FA4,
    1.87x FLASH"); '' where none has."""
    rows = step_rows(result)
    parts = [
        f"{multiple(x)} {PeerResult(row.name).short}"
        for row in rows[1:]
        if (x := step_speed(row, rows)) is not None
    ]
    return f"cuDNN step {', '.join(parts)}" if parts else ""


def step_table(result: RunResult) -> FitTable | None:
    """The report's table of step_rows (None: no backward peers)."""
    rows = step_rows(result)
    if not rows:
        return None
    table = FitTable(title=STEP_TITLE, key_words="peer")
    for col in STEP_COLUMNS:
        kind = NAME if col == STEP_COLUMNS[0] else WORDS if col == STEP_COLUMNS[-1] else FIGURE
        table.add_column(col, kind, drop=0 if kind == WORDS else None)
    for row in rows:
        table.add_row(*step_cells(row, rows))
    return table
