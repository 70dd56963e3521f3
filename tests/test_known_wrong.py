"""Known issues gain wrong results: seen on some cuDNN versions and GPUs, matched below the release
that fixed it and not at or above it (the version injected), recorded by this machine as data
beside the built-in table (a user's file, written whole), run rather than withheld, marked in the
form before they run, and named by `check` ("known wrong result", counted apart) rather than a
bare FAIL."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from tui.jobs.check import case_line, known_wrong, run_cases
from tui.model import known_issues
from tui.model.config import SdpaConfig
from tui.model.issue_records import issue_of, pattern_matches, wrong_result_record
from tui.model.results import Environment, KnownIssueMatch, RunResult
from tui.model.statuses import STATUS_MISMATCH, STATUS_OK
from tui.store import known_issues as store

DECODE = SdpaConfig(b=1, h_q=8, h_kv=2, s_q=1, s_kv=256, d_qk=64, d_v=64, softmax_out="stats", causal="none")


def env(version: str, cc: str = "9.0") -> Environment:
    return Environment(gpu_available=True, cudnn_backend_version=version, compute_capability=cc)


def record(**changes) -> dict:
    base = wrong_result_record(
        key="gqa-decode-stats",
        summary="the stats of a grouped decode are written for the first head of each group only",
        when={"s_q": 1, "gqa": True, "softmax_out": "stats"},
        cudnn_version="9.19.0",
        established="found by hunt --seed 1",
        archs=(9,),
        fixed_in="9.21.0",
    )
    return {**base, **changes}


def keys(config: SdpaConfig, environment: Environment, recorded=()) -> list[str]:
    return [i.key for i in known_issues.matching(config, environment, recorded)]


def test_a_wrong_result_matches_from_where_it_was_seen_up_to_the_release_that_fixed_it():
    issue = issue_of(record())
    assert issue.outcome == known_issues.WRONG_RESULT and issue.fixed_in == (9, 21, 0)
    for version, expected in (("9.18.9", []), ("9.19.0", ["gqa-decode-stats"]), ("9.20.3", ["gqa-decode-stats"]),
                              ("9.21.0", []), ("9.26.0", [])):  # fmt: skip
        assert keys(DECODE, env(version), (issue,)) == expected, version
    assert keys(DECODE, env("9.19.0", "10.0"), (issue,)) == []  # another architecture
    open_ended = issue_of(record(fixed_in="", archs=[]))
    assert keys(DECODE, env("9.26.0", "10.0"), (open_ended,)) == ["gqa-decode-stats"]


def test_a_pattern_covers_exactly_the_configurations_it_names():
    issue = (issue_of(record(fixed_in="")),)
    assert keys(DECODE.replace(h_kv=8), env("9.19.0"), issue) == []  # no longer grouped
    assert keys(DECODE.replace(softmax_out="none"), env("9.19.0"), issue) == []
    when = {
        "s_kv": {"mod": [128, 64], "min": 64},
        "causal": {"not": "none"},
        "dtype": {"in": ["fp16", "bf16"]},
    }
    c = SdpaConfig(s_q=192, s_kv=192)
    assert pattern_matches(when, c) and not pattern_matches(when, c.replace(s_kv=256))
    assert not pattern_matches(when, c.replace(causal="none")) and not pattern_matches(
        when, c.replace(dtype="fp8_e4m3")
    )
    assert pattern_matches({"seq_lens_kv": [3, 5]}, SdpaConfig(b=2, seq_lens_q=(1, 1), seq_lens_kv=(3, 5)))


@pytest.mark.parametrize(
    "change, words",
    [
        ({"outcome": "slow"}, "outcome must be one of"),
        ({"seen": []}, "seen must list"),
        ({"fixed_in": "soon"}, "fixed_in must be a cuDNN version"),
        ({"when": {"s_qq": 1}}, "no configuration field"),
        ({"when": {"s_q": {"around": 1}}}, "when.s_q"),
        ({"archs": ["hopper"]}, "archs must list"),
    ],
)
def test_a_record_that_is_not_one_says_which_field(change, words):
    with pytest.raises(ValueError, match=words):
        issue_of(record(**change))


def test_recorded_issues_live_in_a_file_of_their_own_beside_the_table(tmp_path, monkeypatch):
    path = tmp_path / "known.json"
    monkeypatch.setenv(store.ENV_FILE, str(path))
    assert store.load() == ((), ())  # no file: nothing recorded, nothing wrong
    assert store.record(record()) == path
    store.record(record(summary="said better"))  # the same key: replaced, not repeated
    store.record(record(key="another", when={"s_q": 2}))
    issues, problems = store.load()
    assert [i.key for i in issues] == ["gqa-decode-stats", "another"] and problems == ()
    assert issues[0].summary == "said better"
    assert json.loads(path.read_text())["format"] == store.FORMAT
    assert keys(DECODE, env("9.19.0"), store.recorded()) == ["gqa-decode-stats"]
    with pytest.raises(ValueError, match="built-in table already has"):
        store.record(record(key=known_issues.KNOWN_ISSUES[0].key))
    with pytest.raises(ValueError, match="outcome"):
        store.record(record(outcome="slow"))


def test_a_damaged_file_or_entry_is_left_out_and_said_never_raised(tmp_path):
    path = tmp_path / "known.json"
    path.write_text("{not json")
    issues, problems = store.load(path)
    assert issues == () and len(problems) == 1 and "not JSON" in problems[0]
    path.write_text(json.dumps({"format": store.FORMAT, "issues": [record(), {"key": 3}]}))
    issues, problems = store.load(path)
    assert [i.key for i in issues] == ["gqa-decode-stats"] and "known issue 2 left out" in problems[0]
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a known-issues file"):
        store.record(record(), path)  # never written over a file that is not ours


def wrong(
    config: SdpaConfig, message: str = "O differs from the fp32 reference: max abs error 0.5"
) -> RunResult:
    issue = KnownIssueMatch("gqa-decode-stats", "the stats are wrong", known_issues.WRONG_RESULT, "hunt")
    return RunResult(config=config, status=STATUS_MISMATCH, known_issues=(issue,),
                     message=known_issues.known_wrong_words((issue,), message))  # fmt: skip


class Session:
    environment = env("9.19.0")

    def __init__(self, results):
        self.results = iter(results)

    def run(self, _config, _options):
        return next(self.results)


def test_check_names_a_known_wrong_result_counts_it_apart_and_still_fails_an_unknown_one():
    known = wrong(DECODE)
    assert known.message.startswith("known wrong result: the stats are wrong [gqa-decode-stats]; O differs")
    assert known_wrong(known)
    line = case_line("decode", known)
    assert line.startswith("[yellow]KNOWN[/yellow] decode ") and "known wrong result" in line
    bare = RunResult(config=DECODE, status=STATUS_MISMATCH, message="O differs")
    assert not known_wrong(bare) and case_line("decode", bare).startswith("[red]FAIL[/red]")
    passed = RunResult(config=DECODE, status=STATUS_OK, known_issues=known.known_issues)
    assert not known_wrong(passed)  # a known issue that did not bite: a pass (fixed here?)
    console = Console(file=open("/dev/null", "w"), width=200)  # noqa: SIM115
    rows, n_passed, n_known = run_cases(Session([passed, known, bare]), [("a", DECODE), ("b", DECODE),
                                        ("c", DECODE)], lambda _n: None, console, True, 0)  # fmt: skip
    assert (n_passed, n_known, len(rows)) == (1, 1, 3)


def test_the_form_says_before_a_run_what_each_outcome_does():
    crash = KnownIssueMatch("c", "it crashes", known_issues.CRASH, "")
    refused = KnownIssueMatch("r", "it is refused", known_issues.REFUSED, "")
    bad = KnownIssueMatch("w", "dQ is wrong", known_issues.WRONG_RESULT, "")
    assert known_issues.marking_words((), False) == ""
    assert (
        known_issues.marking_words((bad,), False)
        == "known wrong result: dQ is wrong; it runs, and its check names the issue"
    )
    assert known_issues.marking_words((bad, crash), False).endswith("not run unless ticked")
    assert "graph not built unless ticked" in known_issues.marking_words((refused, bad), False)
    assert known_issues.marking_words((crash,), True).endswith("runs anyway (ticked)")
    assert not known_issues.crashes((bad, refused)) and known_issues.refusals((bad, refused)) == (refused,)


def test_the_engine_runs_a_known_wrong_result_and_withholds_a_known_crash(tmp_path, monkeypatch):
    """The engine's own decision before it builds anything (no GPU needed to make it)."""
    from tui.engine.runner import Engine
    from tui.model.options import RunOptions

    monkeypatch.setenv(store.ENV_FILE, str(tmp_path / "known.json"))
    store.record(record(fixed_in=""))
    h200 = env("9.19.0")
    engine, base = Engine(environment=h200), dict(config=DECODE, environment=h200, device="cuda")
    issues, withheld = engine._withheld(DECODE, RunOptions(), h200, base)
    assert [i.outcome for i in issues] == [known_issues.WRONG_RESULT] and withheld is None
    fp8_dropout = SdpaConfig(dtype="fp8_e4m3", dropout=0.1)  # the table's known crash on Hopper, cuDNN 9.19
    issues, withheld = engine._withheld(fp8_dropout, RunOptions(), h200, {**base, "config": fp8_dropout})
    assert withheld is not None and withheld.status == "known_issue"
    assert engine._withheld(fp8_dropout, RunOptions(run_anyway=True), h200, base)[1] is None


def test_a_hunts_finding_is_recorded_as_the_class_it_stands_for_and_marked_thereafter(tmp_path):
    """`hunt --record`: the shrunk configuration and its signature become a pattern (a size at
    least the minimal one, a choice at or past it, an option on), seen on this cuDNN and GPU."""
    path = tmp_path / "known.json"
    minimal = SdpaConfig(
        b=1, h_q=2, h_kv=1, s_q=1, s_kv=64, d_qk=64, d_v=64, softmax_out="stats", causal="none"
    )
    signature = {"h_q": "2", "softmax_out": "stats"}
    key = store.record_wrong_result(
        minimal, signature, "Stats wrong for grouped decode", env("9.19.0"), "b/1", path
    )
    store.record_wrong_result(
        minimal, signature, "Stats wrong for grouped decode", env("9.20.0", "10.0"), "b/2", path
    )
    (issue,), problems = store.load(path)
    assert (
        issue.key == key and problems == () and issue.seen == ("9.19.0", "9.20.0") and issue.archs == (9, 10)
    )
    assert keys(DECODE, env("9.19.0"), (issue,)) == [key]  # 8 query heads: at least the minimal 2
    assert keys(DECODE.replace(softmax_out="none"), env("9.19.0"), (issue,)) == []
    assert keys(DECODE, env("9.18.0"), (issue,)) == []  # before it was first seen
    with pytest.raises(ValueError, match="no cuDNN version"):
        store.record_wrong_result(minimal, signature, "x", env(""), "b/3", path)


# the minimal configurations the hunt found on the H200 (cuDNN 9.19.0), and their neighbours
TINY = dict(b=1, h_q=1, h_kv=1, s_q=2, d_qk=8, d_v=8, dtype="fp16", causal="none")
PADDED = SdpaConfig(**TINY, s_kv=12, seq_lens_q=(2,), seq_lens_kv=(11,), inputs="seed:136378655,pad:nan")
PAGED = SdpaConfig(**TINY, s_kv=65, page_size=64, inputs="seed:341662028,pad:nan")


@pytest.mark.parametrize(
    ("config", "met"),
    [
        (PADDED, True),
        (PAGED, True),
        (PADDED.replace(inputs="seed:136378655,pad:zero"), False),  # zeros there multiply in as zeros
        (PADDED.replace(inputs="seed:136378655"), False),
        (PADDED.replace(seq_lens_kv=(12,)), False),  # every key real: nothing past it
        (PAGED.replace(s_kv=128), False),  # full pages: no unused slot
    ],
)
def test_nan_past_the_real_keys_is_a_known_wrong_result_of_cudnn_9_19_on_hopper(config, met):
    key = "nan-past-real-keys-forward-hopper-cudnn-9.19"
    keys = lambda e: [i.key for i in known_issues.matching(config, e)]  # noqa: E731
    assert (key in keys(env("9.19.0"))) is met
    assert key not in keys(env("9.20.0")) and key not in keys(env("9.19.0", cc="10.0"))
    if met:
        issue = next(i for i in known_issues.matching(config, env("9.19.0")) if i.key == key)
        assert issue.outcome == known_issues.WRONG_RESULT  # it runs; its verdict names the issue


SINK_BWD = SdpaConfig(
    b=2, h_q=4, h_kv=4, s_q=128, s_kv=128, d_qk=64, d_v=64, causal="none", sink=True, backward=True
)


@pytest.mark.parametrize(
    "key, config, met",
    [
        ("dsink-dropout-backward-hopper-cudnn-9.19", SINK_BWD.replace(dropout=0.2), True),
        ("dsink-dropout-backward-hopper-cudnn-9.19", SINK_BWD, False),  # no dropout: dSink is right
        ("dsink-dropout-backward-hopper-cudnn-9.19", SINK_BWD.replace(dropout=0.2, sink=False), False),
        ("dsink-dropout-backward-hopper-cudnn-9.19", SINK_BWD.replace(dropout=0.2, backward=False), False),
        ("dsink-deterministic-backward-hopper-cudnn-9.19", SINK_BWD.replace(deterministic=True), True),
        ("dsink-deterministic-backward-hopper-cudnn-9.19", SINK_BWD.replace(deterministic=True, b=1), False),
        (
            "dsink-deterministic-backward-hopper-cudnn-9.19",
            SINK_BWD.replace(deterministic=True, sink=False),
            False,
        ),
        ("dsink-deterministic-backward-hopper-cudnn-9.19", SINK_BWD, False),  # not asked to be deterministic
    ],
)
def test_the_sinks_gradient_classes_are_known_wrong_results_of_cudnn_9_19_on_hopper(key, config, met):
    keys = lambda e: [i.key for i in known_issues.matching(config, e)]  # noqa: E731
    assert (key in keys(env("9.19.0"))) is met
    assert key not in keys(env("9.20.0")) and key not in keys(env("9.19.0", cc="10.0"))
    if met:
        issue = next(i for i in known_issues.matching(config, env("9.19.0")) if i.key == key)
        assert issue.outcome == known_issues.WRONG_RESULT
