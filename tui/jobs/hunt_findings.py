"""A hunt's findings, once each: the record of one class of failure, the table of them all with
their counts, and each one's bundle, a folder a report to the cuDNN team can carry whole.

A finding is keyed by its signature (the failure, its pass, and the options and sizes without
which its minimal configuration passes): two draws that shrink to the same signature are one
finding seen twice. Its bundle holds the short reproduction script (present/repro.py's), the
minimal configuration as JSON, the run's result, the environment, a report in Markdown (what was
expected, what came out, the boundary, the versions) and the finding itself as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..model.results import Environment, OutputCheck, RunResult
from ..model.whose import Whose
from ..present.format import versions_words
from ..present.tables import NAME, WORDS, FitTable
from ..store.files import atomic_write
from .hunt_shrink import CRASH, NOT_REPEATABLE, Shrunk


@dataclass
class Finding:
    """One class of failure: how it was shrunk, the draw that found it, the run of its minimal
    configuration that is shown (a confirmation with peers, else the draw), the inputs' seed,
    whose it is, how many draws fell in it, and where its bundle went."""

    number: int
    shrunk: Shrunk
    first: RunResult
    result: RunResult
    seed: int
    whose: Whose
    count: int = 1
    bundle: str = ""

    @property
    def key(self) -> tuple:
        failure = self.shrunk.failure
        return failure.kind, failure.where, self.shrunk.signature

    def signature_words(self) -> str:
        """'bias 1x1, causal bottom_right' (or what the minimal configuration is when no option or
        size is needed beyond it)."""
        return ", ".join(f"{name} {value}" for name, value in self.shrunk.signature) or "any configuration"

    def words(self) -> str:
        """What the finding is, in one line: the failure, where, and its signature."""
        return f"{self.shrunk.failure} with {self.signature_words()}"


def findings_table(findings: list[Finding]) -> FitTable:
    """A row a finding: its number, whose, the failure, its signature, how often it was seen and
    its minimal configuration (which moves under the table on a narrow terminal)."""
    table = FitTable(key=0, key_words="finding")
    table.add_column("#")
    table.add_column("whose", NAME)
    table.add_column("failure", NAME)
    table.add_column("signature", NAME)
    table.add_column("seen")
    table.add_column("minimal configuration", WORDS, drop=0, below="minimal")
    for f in findings:
        table.add_row(str(f.number), f.whose.who, str(f.shrunk.failure), f.signature_words(), str(f.count),
                      f.shrunk.minimal.label())  # fmt: skip
    return table


# ---- the bundle ------------------------------------------------------------------------------
def default_folder(seed: int) -> Path:
    """Where a hunt's bundles go unless told: a new folder in the tool's data folder."""
    import time

    from ..store.places import data_dir

    return data_dir() / "hunts" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}"


def _slug(finding: Finding) -> str:
    words = f"{finding.shrunk.failure.kind}-{finding.signature_words()}"
    return f"{finding.number:02d}-" + re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")[:60]


def _expected(finding: Finding) -> str:
    kind = finding.shrunk.failure.kind
    if kind == CRASH:
        return (
            "the graph builds and executes, or cuDNN refuses it in its own words; the CUDA context survives."
        )
    if kind == NOT_REPEATABLE:
        return "the deterministic backward writes identical bits on two executions of the same plan."
    return ("every output within its tolerance (atol + rtol·|ref|) of the fp64 reference computed "
            "independently on the same tensors, as the peers' are.")  # fmt: skip


def _check_lines(check: OutputCheck) -> list[str]:
    lines = []
    for who, m in (("cuDNN vs fp32 reference", check.cudnn), ("cuDNN vs fp64 reference", check.fp64),
                   ("fp32 reference vs fp64", check.reference_fp64), *check.peers.items()):  # fmt: skip
        if m is not None:
            lines.append(f"| {who} | {m.max_abs:.3g} | {m.mismatched} of {m.total} | {m.nonfinite} |")
    return lines


def _got(result: RunResult) -> list[str]:
    if result.crash is not None:
        return [f"It crashed: {result.crash.error}, during {result.crash.during}."]
    lines = [f"Status `{result.status}`: {result.message}", ""]
    for p in result.passes:
        failed = [c for c in p.checks if c.passed is False]
        if p.deterministic and p.repeatable is False:
            lines.append(f"- the deterministic {p.kind} wrote different bits on two executions")
        for c in failed:
            lines += [f"{c.output} ({p.kind}), atol {c.atol:.3g}, rtol {c.rtol:g}:", "",
                      "| against | max abs | outside tolerance | not finite |", "|---|---|---|---|",
                      *_check_lines(c), ""]  # fmt: skip
    return lines


def _versions(env: Environment | None) -> list[str]:
    if env is None:
        return ["not recorded"]
    return [f"- {versions_words(env)}", f"- CUDA runtime {env.cuda_runtime or '?'}, Python {env.python_version or '?'}",
            f"- {env.platform or 'platform not recorded'}"]  # fmt: skip


def report(finding: Finding) -> str:
    """The Markdown report for the cuDNN team."""
    s, r = finding.shrunk, finding.result
    c = s.minimal
    boundary = [f"- {n.change}: passes" + (" (twice)" if n.confirmed else " (once; the second run did not pass)")
                for n in s.boundary] or ["- none found (every neighbour fails too, or cuDNN refuses it)"]  # fmt: skip
    lines = [
        f"# cuDNN SDPA: {s.failure} ({c.label()})", "",
        f"Whose: **{finding.whose.who}**: {finding.whose.why}.", "",
        f"Found by `sdpa-explorer hunt`, seen in {finding.count} draw(s); shrunk in {s.runs} runs from "
        f"`{s.start.label()}`" + (f" ({s.stopped})" if s.stopped else "") + ".",
        "The minimal configuration failed the same way on two more runs." if s.confirmed else
        "The minimal configuration did NOT fail the same way on both runs after shrinking.", "",
        "## Expected", "", _expected(finding), "",
        "## Got", "", *_got(r),
        "## Signature", "", f"It fails with each of {finding.signature_words()}; changed as the boundary below "
        "shows, it passes.", "",
        "## Boundary (neighbouring configurations)", "", *boundary, "",
        "## Reproduce", "", f"`python repro.py` (inputs seed {finding.seed}); `config.json` is the configuration, "
        "`result.json` the tool's result, `environment.json` where it ran.", "",
        "## Versions", "", *_versions(r.environment or finding.first.environment), "",
    ]  # fmt: skip
    return "\n".join(lines)


def summary(finding: Finding) -> dict:
    """The finding as data: what failed, whose, its signature and boundary, whether confirmed."""
    s = finding.shrunk
    return {
        "number": finding.number, "failure": s.failure.kind, "pass": s.failure.where, "whose": finding.whose.who,
        "why": finding.whose.why, "signature": dict(s.signature), "seen": finding.count, "confirmed": s.confirmed,
        "boundary": [{"change": n.change, "passed twice": n.confirmed} for n in s.boundary],
        "runs": s.runs, "stopped": s.stopped, "seed": finding.seed, "drawn": s.start.to_dict(),
    }  # fmt: skip


def write_bundle(finding: Finding, folder: Path) -> Path:
    """The finding's bundle in a folder of its own under `folder`; its path (kept on the finding)."""
    from ..present.repro import script  # torch's, through the engine's constants: only when writing

    where = folder / _slug(finding)
    where.mkdir(parents=True, exist_ok=True)
    env = finding.result.environment or finding.first.environment
    atomic_write(where / "repro.py", script(finding.shrunk.minimal, finding.seed, finding.words()))
    atomic_write(where / "config.json", json.dumps(finding.shrunk.minimal.to_dict(), indent=2) + "\n")
    atomic_write(where / "result.json", finding.result.to_json() + "\n")
    atomic_write(
        where / "environment.json", json.dumps(dataclasses.asdict(env) if env else {}, indent=2) + "\n"
    )
    atomic_write(where / "report.md", report(finding))
    atomic_write(where / "finding.json", json.dumps(summary(finding), indent=2) + "\n")
    finding.bundle = str(where)
    return where
