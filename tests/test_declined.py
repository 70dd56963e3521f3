"""A pass cuDNN declines still runs on the peers (engine/measure.py:measure_declined): the engine's GPU path, its
tensors on the CPU and the GPU's steps scripted, for a variant cuDNN 9.19 is known to refuse on
Hopper (its graph not built) and for a graph cuDNN declines at a build phase. The pass keeps
cuDNN's refusal; the reference, torch's MATH backend and FA4 (its fake, the variant as a mask_mod)
run beside it, forward and backward; the fastest way, the check's line and the Peers pane's rows
say so."""

from __future__ import annotations

import dataclasses

import pytest
from test_peer_fa4 import FakeFA4, stats, torch_dsl

from tui.engine import faults, graph, peer_fa4, peer_runs
from tui.engine.measure import Bench
from tui.engine.runner import Engine, RunOptions
from tui.jobs.check import case_line, known_refusal
from tui.model.config import SdpaConfig
from tui.model.fastest import PEER, fastest_way
from tui.model.results import Environment
from tui.model.statuses import STATUS_KNOWN_ISSUE, STATUS_UNSUPPORTED
from tui.present.fastest import fastest_lines

KEY = "score-mod-position-compare-hopper-cudnn-9.19"
HOPPER = Environment(gpu_available=True, cudnn_backend_version="9.19.0", compute_capability="9.0")
PREFIX = SdpaConfig(b=1, h_q=4, h_kv=2, s_q=48, s_kv=48, d_qk=32, d_v=32, dtype="bf16", causal="none",
                    variant="prefix-lm:20")  # fmt: skip
PEERS = ("math", "fa4")


@pytest.fixture
def on_cpu(monkeypatch):
    """The engine's GPU path with its tensors on the CPU: a bench there, FA4's fake (mask_mods in
    torch), a waited execution that just runs, kernel time scripted (40 µs graphed, 55 µs eager)."""
    import torch

    bench = Bench(None, lambda _ptr: None, None, lambda _text: None, device="cpu")
    monkeypatch.setattr(Engine, "bench", lambda self: bench)
    monkeypatch.setattr(peer_fa4, "_module", lambda: FakeFA4())
    monkeypatch.setattr(peer_fa4, "_dsl", torch_dsl)
    monkeypatch.setattr(faults, "execute_once", lambda run, _during, _plan="": run())
    monkeypatch.setattr(peer_runs, "kernel_time", lambda run, *_a, **_k: (run(), stats(40.0))[1])
    monkeypatch.setattr(peer_runs, "profiler_kernel_time", lambda run: (run(), (55.0, ()))[1])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def assert_peers_ran_and_passed(p, outputs):
    assert [c.output for c in p.checks] == outputs and all(c.cudnn is None for c in p.checks)
    assert p.passed is None  # cuDNN's verdict: none, it did not run
    for name in ("torch MATH bf16", "FA4 bf16"):
        peer = next(x for x in p.field_peers if x.name == name)
        assert peer.ran and peer.timing is not None, peer.reason
        assert all(c.peers[name].passed for c in p.checks), (name, p.checks)
    assert p.reference.startswith("fp32") and p.check_device == "cpu"


def test_a_known_refusal_builds_no_graph_and_its_peers_still_run_forward_and_backward(on_cpu):
    r = Engine(environment=HOPPER).run(PREFIX.replace(backward=True), RunOptions(peers=PEERS))
    assert r.status == STATUS_KNOWN_ISSUE and [i.key for i in r.known_issues] == [KEY]
    assert known_refusal(r)  # check counts it apart
    forward, backward = r.passes
    for p in (forward, backward):
        assert p.status == STATUS_KNOWN_ISSUE and p.plans == () and p.phases == ()  # no graph built
        assert f"[{KEY}]" in p.message and "no cuDNN release is known to lift it yet" in p.message
        assert any(n.startswith("cuDNN did not run this pass") for n in p.notes)
    assert r.message == forward.message
    assert_peers_ran_and_passed(forward, ["O"])
    assert_peers_ran_and_passed(backward, ["dQ", "dK", "dV"])
    fa4 = next(x for x in forward.field_peers if x.short == "FA4")
    assert "prefix-lm as its mask_mod" in fa4.description


def test_the_fastest_way_is_a_peer_that_passed_and_the_check_line_names_both(on_cpu):
    r = Engine(environment=HOPPER).run(PREFIX, RunOptions(peers=PEERS))
    way = fastest_way(r.forward)
    assert way is not None and way.declined and way.margin is None
    assert way.winner.role == PEER and way.winner.passed
    ((line, _style),) = fastest_lines(r.forward)
    assert line.startswith("fastest way: ") and "of 2 peers, cuDNN declined (pass)" in line
    text = case_line("paligemma", r)
    assert text.startswith("[yellow]KNOWN[/yellow] paligemma ") and KEY in text
    assert "MATH 40.00 µs pass" in text and "FA4 40.00 µs pass" in text and "fastest " in text


def test_a_graph_cuDNN_declines_keeps_its_words_and_its_backward_is_not_built(on_cpu, monkeypatch):
    words = "No valid engine configs for the score_mod sub-graph"

    def declines(self, config, spec, built, seed, cached=True):
        raise graph.GraphBuildError("create_execution_plans", words, True, [], "{}")

    monkeypatch.setattr(Engine, "_built", declines)
    newer = dataclasses.replace(HOPPER, cudnn_backend_version="9.26.0")  # no known issue there
    r = Engine(environment=newer).run(PREFIX.replace(backward=True), RunOptions(peers=PEERS))
    forward, backward = r.passes
    assert r.status == forward.status == STATUS_UNSUPPORTED and r.known_issues == ()
    assert forward.message == f"create_execution_plans: {words}" and r.message == forward.message
    assert backward.status == STATUS_UNSUPPORTED and backward.message.startswith("not built: it reads")
    assert_peers_ran_and_passed(forward, ["O"])
    assert_peers_ran_and_passed(backward, ["dQ", "dK", "dV"])
    assert case_line("p", r).startswith("[red]FAIL[/red]") and "FA4 40.00 µs pass" in case_line("p", r)


def test_nothing_runs_without_cudnn_where_nothing_was_asked_or_dropout_draws_the_mask(on_cpu):
    quiet = Engine(environment=HOPPER).run(PREFIX.replace(backward=True), RunOptions(check=False))
    assert [p.status for p in quiet.passes] == [STATUS_KNOWN_ISSUE]  # the backward is not listed
    assert quiet.forward.checks == () and quiet.forward.field_peers == ()
    dropped = Engine(environment=HOPPER).run(PREFIX.replace(dropout=0.1), RunOptions(peers=PEERS))
    assert dropped.forward.field_peers == () and any("dropout on" in n for n in dropped.forward.notes)


def test_the_peers_pane_rows_name_cudnns_refusal(on_cpu):
    from tui.app.widgets.peers import cudnn_rows, head_words

    r = Engine(environment=HOPPER).run(PREFIX, RunOptions(peers=PEERS))
    (row,) = cudnn_rows(r.forward)
    assert row.name == "cuDNN" and row.timing is None and KEY in row.what.plain
    assert head_words(r.forward).startswith("cuDNN did not run this pass")
