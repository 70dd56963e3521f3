"""What cuDNN 9.19 refuses on Hopper is known, not a failure of the box: the score modifiers that
compare positions with a number (measured on the H200: docs/VARIANTS.md) match a known refusal
there and nowhere else, and `check` says KNOWN for them, counts them apart and still fails a
known crash."""

from __future__ import annotations

from rich.console import Console

from tui.jobs.check import case_line, known_refusal, run_cases
from tui.model import known_issues
from tui.model.config import SdpaConfig
from tui.model.results import Environment, RunResult
from tui.model.statuses import STATUS_KNOWN_ISSUE, STATUS_OK
from tui.store.presets import load_all

H200 = Environment(gpu_available=True, cudnn_backend_version="9.19.0", compute_capability="9.0")
KEY = "score-mod-position-compare-hopper-cudnn-9.19"


def keys(config: SdpaConfig, env: Environment = H200) -> list[str]:
    return [i.key for i in known_issues.matching(config, env)]


def test_modifiers_that_compare_positions_are_a_known_refusal_on_hopper_with_cudnn_9_19_only():
    presets, _problems = load_all()
    for name in ("gemma2-9b-softcap", "paligemma-prefix-lm", "llama3-8b-packed-documents"):
        assert keys(presets[name].config) == [KEY], name
    assert keys(presets["gemma2-9b-global-softcap"].config) == []  # no window: cuDNN 9.19 builds it
    base = SdpaConfig(b=1, h_q=8, h_kv=8, s_q=512, s_kv=512, d_qk=128, d_v=128, dtype="bf16", causal="none")
    assert (
        keys(base.replace(variant="softcap:50")) == []
        and keys(base.replace(variant="softcap-causal:50")) == []
    )
    windowed = base.replace(variant="softcap-causal:50,128")
    assert keys(windowed) == [KEY]
    assert (
        keys(
            windowed,
            Environment(gpu_available=True, cudnn_backend_version="9.20.0", compute_capability="9.0"),
        )
        == []
    )
    assert (
        keys(
            windowed,
            Environment(gpu_available=True, cudnn_backend_version="9.19.0", compute_capability="10.0"),
        )
        == []
    )


def not_run(config: SdpaConfig, outcome: str) -> RunResult:
    issue = known_issues.KnownIssueMatch("k", "it is known", outcome, "measured")
    return RunResult(config=config, status=STATUS_KNOWN_ISSUE, message=known_issues.not_run_words((issue,)),
                     known_issues=(issue,))  # fmt: skip


class Session:
    environment = H200

    def __init__(self, results):
        self.results = iter(results)

    def run(self, _config, _options):
        return next(self.results)


def test_check_says_known_for_a_refusal_counts_it_apart_and_fails_a_known_crash():
    config = SdpaConfig(variant="prefix-lm:64", causal="none")
    refused, crash = not_run(config, known_issues.REFUSED), not_run(config, known_issues.CRASH)
    assert known_refusal(refused) and not known_refusal(crash)
    assert case_line("p", refused).startswith("[yellow]KNOWN[/yellow] p ")
    assert case_line("p", crash).startswith("[red]FAIL[/red]")
    ok = RunResult(config=SdpaConfig(), status=STATUS_OK)
    console = Console(file=open("/dev/null", "w"), width=200)  # noqa: SIM115
    rows, passed, known = run_cases(
        Session([ok, refused, crash]), [("a", config), ("b", config), ("c", config)],
        lambda _name: None, console, True, 0,
    )  # fmt: skip
    assert (passed, known, len(rows)) == (1, 1, 3)
