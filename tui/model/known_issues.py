"""Configurations known to crash, to be refused or to give a wrong result on some cuDNN versions
and GPUs.

A configuration that matches is marked before it runs. A known crash is not run unless the user
asks to run it anyway (`RunOptions.run_anyway`): an innocent edit must not take the engine's CUDA
context down. A known refusal's graph is not built (the reference and the peers still run). A known
wrong result runs as any other, and its verdict names the issue ("known wrong result") rather than
a bare failure. Each entry names the cuDNN versions (from, up to but not including; `lifted`, the
release that fixed it, where one is known), the GPU architectures (compute capability majors;
empty: any), the features, and how it was established. Versions decide: the GPU we test on runs
cuDNN 9.19 while the locked environment installs 9.26.

Beside this table, the issues recorded on this machine (`hunt --record`: store/known_issues.py)
are data: a pattern of field values (`when`, see pattern_matches) instead of a function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .config import SdpaConfig
from .inputs import recipe_of
from .results import Environment, KnownIssueMatch

CRASH = "crash"  # it takes the CUDA context down
REFUSED = "refused"  # the frontend refuses it on these versions
WRONG_RESULT = "wrong result"  # it runs, and an output is silently wrong
OUTCOMES = (CRASH, REFUSED, WRONG_RESULT)

Version = tuple[int, int, int]
UNFIXED: Version = (1 << 16, 0, 0)  # the end of a range no release is known to close


@dataclass(frozen=True)
class KnownIssue:
    key: str
    summary: str
    cudnn: tuple[Version, Version]  # from, up to but not including
    archs: tuple[int, ...]  # compute capability majors (9: Hopper); () any
    applies: Callable[[SdpaConfig], bool]
    outcome: str  # one of OUTCOMES
    established: str
    lifted: str = ""  # the cuDNN release known to lift (fix) it ('' : none is known yet)
    seen: tuple[str, ...] = ()  # the cuDNN versions it was seen on, where recorded as data

    @property
    def fixed_in(self) -> Version | None:
        """The release that fixed it: matched below it, not at or above (None: none known)."""
        return parse_version(self.lifted) if self.lifted else None

    def matches(self, config: SdpaConfig, env: Environment) -> bool:
        version = parse_version(env.cudnn_backend_version)
        if version is None or not self.cudnn[0] <= version < self.cudnn[1]:
            return False
        if self.fixed_in is not None and version >= self.fixed_in:
            return False
        if self.archs and arch(env) not in self.archs:
            return False
        return self.applies(config)

    def record(self) -> KnownIssueMatch:
        return KnownIssueMatch(self.key, self.summary, self.outcome, self.established)


def _compares_positions(c: SdpaConfig) -> bool:
    """A score modifier whose mask compares a position with a number (engine/score_mod.py)."""
    if getattr(c, "variant", "none") == "none":
        return False
    m = c.modifier
    return bool(m.window) or m.prefix is not None or len(m.documents) > 1


def _nan_past_real_keys(c: SdpaConfig) -> bool:
    """NaN filled (`inputs` pad:nan) into key/value slots a kernel's tile still covers: past a
    sequence's real key length in a padded tensor, or in the unused slots of its last page."""
    if getattr(c, "inputs", "normal") == "normal" or recipe_of(c).pad != "nan" or c.packed:
        return False
    real = [c.lengths(i)[1] for i in range(c.b)]
    if c.paged:
        return any(n % c.page_size for n in real)
    return any(n < c.s_kv for n in real)


_SUPPORT_SURFACE = "the frontend's own support check refuses it (sdpa_support_surface.h, frontend 1.32): "

KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        key="fp8-dropout-hopper-cudnn-9.19",
        summary="FP8 forward with dropout crashes inside cuDNN on Hopper (an illegal memory access; "
        "the CUDA context is lost)",
        cudnn=((9, 19, 0), (9, 20, 0)),
        archs=(9,),
        applies=lambda c: c.fp8 and c.dropout > 0,
        outcome=CRASH,
        established="measured on an H200 with cuDNN 9.19.0 and frontend 1.32: a plain frontend script "
        "(sdpa_fp8 with dropout 0.1; b=2, h=32/16, s_q=512, s_kv=4096, d=128, BSHD, causal; plan "
        "eng2_k24=32) ends with 'an illegal memory access was encountered', and so do SBHD, d=96 and "
        "s_q=s_kv=4096 through this tool; check_support() accepts the graph; the same shapes without "
        "dropout, or in bf16 with dropout, run correctly. Other cuDNN 9.19 releases are assumed alike.",
    ),
    KnownIssue(
        key="fp8-forward-cudnn-9.10.0",
        summary="FP8 forward is not supported on cuDNN 9.10.0",
        cudnn=((9, 10, 0), (9, 10, 1)),
        archs=(),
        applies=lambda c: c.fp8,
        outcome=REFUSED,
        established=_SUPPORT_SURFACE + "'sdpa fp8 forward operation is not supported on cudnn 9.10.0'",
    ),
    KnownIssue(
        key="half-forward-cudnn-9.10.0-9.10.1",
        summary="FP16/BF16 forward has known bugs on cuDNN 9.10.0 and 9.10.1 (fixed in 9.10.2)",
        cudnn=((9, 10, 0), (9, 10, 2)),
        archs=(),
        applies=lambda c: not c.fp8,
        outcome=REFUSED,
        established=_SUPPORT_SURFACE + "'SDPA FP16/BF16 forward is not supported on cuDNN 9.10.0/9.10.1 "
        "due to known bugs'",
        lifted="9.10.2",
    ),
    KnownIssue(
        key="window-non-causal-cudnn-9.14.0",
        summary="a sliding window without a causal mask over more than 1024 keys is wrong on cuDNN 9.14.0 "
        "(fixed in 9.14.1)",
        cudnn=((9, 14, 0), (9, 14, 1)),
        archs=(),
        applies=lambda c: not c.fp8 and c.window is not None and c.causal == "none" and c.s_kv > 1024,
        outcome=REFUSED,
        established=_SUPPORT_SURFACE + "'cuDNN 9.14.0 has a known bug with non-causal + s_kv > 1024 + "
        "sliding window attention'",
        lifted="9.14.1",
    ),
    KnownIssue(
        key="score-mod-position-compare-hopper-cudnn-9.19",
        summary="a score modifier that compares positions with a number (a window in the modifier, a "
        "prefix length, document starts) has no engine on Hopper in cuDNN 9.19 (the backend declines "
        "its comparison: 'get_fort_io_type_str(port.first.getKernelType()) != \"int32_t\"')",
        cudnn=((9, 19, 0), (9, 20, 0)),
        archs=(9,),
        applies=_compares_positions,
        outcome=REFUSED,
        established="measured on an H200 with cuDNN 9.19.0 and frontend 1.32 (benchmarks/variants_probe.py, "
        "docs/VARIANTS.md): softcap:50 and softcap-causal:50 build and pass forward and backward; "
        "softcap-causal:50,1024, prefix-lm:1024 and document:... are declined by every engine, with "
        "the scalars as INT32 or not",
    ),
    KnownIssue(
        key="nan-past-real-keys-forward-hopper-cudnn-9.19",
        summary="NaN in the key/value slots past a sequence's real length (a padded tensor, or a "
        "page's unused slots) reaches O in the forward: masked scores are dropped, but their values "
        "are still multiplied in (0 x NaN)",
        cudnn=((9, 19, 0), (9, 20, 0)),
        archs=(9,),
        applies=_nan_past_real_keys,
        outcome=WRONG_RESULT,
        established="found by `hunt --budget 6m` on an H200 with cuDNN 9.19.0 and frontend 1.32 "
        "(seeds 1 and 2, 2026-12-02), each shrunk to b=1, one head, d=8, fp16, BSHD: s_q=2 with "
        "s_kv=12 and 11 real keys, s_kv=489 with 488, and s_kv=65 in pages of 64; cuDNN's O not "
        "finite while the fp64 reference and a peer on the same tensors are finite; each passes "
        "with drawn values in those slots, or with every key real (the findings' signatures)",
        seen=("9.19.0",),
    ),
    KnownIssue(
        key="dropout-mask-dump-one-query-hopper-cudnn-9.19",
        summary="the dropout mask a one-query forward dumps (rng_dump, s_q=1) leaves three quarters of "
        "its positions unwritten (every other block of 64 keys, half of each other block), so it is not "
        "the mask the kernel applied: the outputs that depend on it are left unchecked",
        cudnn=((9, 19, 0), (9, 20, 0)),
        archs=(9,),
        applies=lambda c: c.dropout > 0 and c.s_q == 1,
        outcome=WRONG_RESULT,
        established="the soak's one-query dropout forward on an H200 with cuDNN 9.19.0 and frontend 1.32 "
        "(2026-12-02, benchmarks/dropout_probe.py): engine 1's dumped mask kept 18% of the positions at "
        "p=0.26 and 25% at p=0.01, the same with the same engine and knobs or the graph's own pick, "
        "twice alike; the timed plan's O equals the dumping graph's, and at p=0.01 it is within 0.03 of "
        "no dropout, but 0.15 off the reference under the dumped mask; at s_q=2 (engine 2) the mask "
        "keeps 74% and O passes",
        seen=("9.19.0",),
    ),
    KnownIssue(
        key="dsink-dropout-backward-hopper-cudnn-9.19",
        summary="with dropout, the backward's dSink comes out scaled by the keep probability: -sum P_sink "
        "(1 - p) dO.O instead of -sum P_sink dO.O, while dQ, dK and dV take the true dO.O",
        cudnn=((9, 19, 0), (9, 20, 0)),
        archs=(9,),
        applies=lambda c: c.sink and c.dropout > 0 and c.backward,
        outcome=WRONG_RESULT,
        established="found by `hunt --budget 6m` on an H200 with cuDNN 9.19.0 and frontend 1.32 (seed 1, "
        "2026-12-02), split into its parts by benchmarks/hunt_probe.py (a window, a bias, dropout alone "
        "pass; sink with dropout fails) and taken apart by benchmarks/whose_probe.py (2026-12-03): on "
        "the engine's own tensors and the mask cuDNN drew, cuDNN's dSink equals -sum P_sink (1 - p) dO.O "
        "in fp64 to 9.1e-08 (b1 h1 s2x1024 d128, p=0.35) and 7.3e-05 (b2 h4 s128 d64, p=0.2: dSink "
        "0.0447 against 0.0558), and without dropout the reference's -sum P_sink dO.O to 6.6e-08",
        seen=("9.19.0",),
    ),
    KnownIssue(
        key="dsink-deterministic-backward-hopper-cudnn-9.19",
        summary="a deterministic backward with a sink does not repeat its dSink bit for bit over a "
        "batch (dQ, dK and dV do): its sum over the batch is not ordered",
        cudnn=((9, 19, 0), (9, 20, 0)),
        archs=(9,),
        applies=lambda c: c.sink and c.deterministic and c.backward and c.b > 1,
        outcome=WRONG_RESULT,
        established="found by `hunt --budget 6m` on an H200 with cuDNN 9.19.0 and frontend 1.32 (seed 1, "
        "2026-12-02), shrunk to b4 h1 s2x1 d8 fp16 (not repeatable in 1 run of 3); in "
        "benchmarks/whose_probe.py (2026-12-03, plan eng6_k24=26) 12 of 19 executions at b=8 wrote "
        "a dSink whose bits differ from the first, none of dQ, dK, dV; b=1 repeated 20 times, b=8 "
        "without a sink too",
        seen=("9.19.0",),
    ),
)


def parse_version(text: str) -> Version | None:
    """'9.19.0' -> (9, 19, 0); None when there is no version to compare."""
    try:
        parts = [int(x) for x in text.split(".")[:3]]
    except ValueError:
        return None
    return (*parts, 0, 0)[:3] if parts else None  # type: ignore[return-value]


def arch(env: Environment) -> int | None:
    """The compute capability's major number (9 on Hopper), None without a GPU."""
    try:
        return int(env.compute_capability.split(".")[0])
    except ValueError:
        return None


def matching(
    config: SdpaConfig, env: Environment, recorded: tuple[KnownIssue, ...] = ()
) -> tuple[KnownIssueMatch, ...]:
    """The issues `config` meets on `env`: the table's, then those recorded on this machine
    (store/known_issues.py; one with a key the table has is the table's)."""
    keys = {issue.key for issue in KNOWN_ISSUES}
    issues = (*KNOWN_ISSUES, *(i for i in recorded if i.key not in keys))
    return tuple(issue.record() for issue in issues if issue.matches(config, env))


def crashes(issues: tuple[KnownIssueMatch, ...]) -> bool:
    """Whether an issue met takes the CUDA context down: the run is withheld unless run anyway."""
    return any(i.outcome == CRASH for i in issues)


def refusals(issues: tuple[KnownIssueMatch, ...]) -> tuple[KnownIssueMatch, ...]:
    """The known refusals among the issues met: cuDNN's graph is not built for them."""
    return tuple(i for i in issues if i.outcome == REFUSED)


def wrong_results(issues: tuple[KnownIssueMatch, ...]) -> tuple[KnownIssueMatch, ...]:
    """The known wrong results among the issues met: the run goes ahead, its verdict names them."""
    return tuple(i for i in issues if i.outcome == WRONG_RESULT)


def marking_words(issues: tuple[KnownIssueMatch, ...], anyway: bool) -> str:
    """What the form says, before a run, of the issues its configuration meets ('' for none)."""
    if not issues:
        return ""
    lines = [f"known {'wrong result' if i.outcome == WRONG_RESULT else 'issue'}: {i.summary}" for i in issues]
    if anyway:
        verdict = "runs anyway (ticked)"
    elif crashes(issues):
        verdict = "not run unless ticked"
    elif refusals(issues):
        verdict = "cuDNN's graph not built unless ticked (the reference and the peers still run)"
    else:
        verdict = "it runs, and its check names the issue"
    return "\n".join(lines) + f"; {verdict}"


def known_wrong_words(issues: tuple[KnownIssueMatch, ...], message: str) -> str:
    """A failed check's message when the configuration is a known wrong result."""
    what = "; ".join(f"{i.summary} [{i.key}]" for i in wrong_results(issues))
    return f"known wrong result: {what}; {message}" if what else message


def not_built_words(issues: tuple[KnownIssueMatch, ...], version: str) -> str:
    """Why cuDNN's graph was not built: each known refusal, its key, and the release that lifts
    it where one is known."""
    lifted = {i.key: f"lifted in cuDNN {i.lifted}" for i in KNOWN_ISSUES if i.lifted}
    unknown = "no cuDNN release is known to lift it yet"
    what = "; ".join(f"{i.summary} [{i.key}]; {lifted.get(i.key, unknown)}" for i in issues)
    return f"not built: cuDNN {version} is known to refuse it: {what}. Run it anyway to see cuDNN's own words"


def not_run_words(issues: tuple[KnownIssueMatch, ...]) -> str:
    """Why a configuration was not run, and how to run it anyway."""
    what = "; ".join(f"{i.summary} [{i.key}]" for i in issues)
    return f"not run, a known issue: {what}. Run it anyway to see for yourself"
