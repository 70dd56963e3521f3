"""The deterministic check: which outputs of two executions differ bit for bit, named in the pass's
notes (cuDNN 9.19's dSink over a batch: its gradients repeat, its dSink does not)."""

import types

import torch

from tui.engine.measure import Bench, Measurement
from tui.engine.passes import BACKWARD_PASS, BuiltPass
from tui.model.config import SdpaConfig

CHECKED = types.SimpleNamespace(check=True)


def measurement(executions):
    config = SdpaConfig(b=8, h_q=1, h_kv=1, s_q=2, s_kv=1, d_qk=8, d_v=8, sink=True, backward=True,
                        deterministic=True)  # fmt: skip
    graph = types.SimpleNamespace(config=config, chosen=0, plans=())
    bench = Bench(handle=None, set_stream=lambda s: None, l2_bytes=None, progress=lambda s: None)
    m = Measurement(BACKWARD_PASS, BuiltPass("backward", graph, {}, None, config=config), {}, bench)
    runs = iter(executions)
    m.outputs_of = lambda index: next(runs)  # each execution's outputs, as cuDNN wrote them
    return m


def test_only_the_outputs_whose_bits_differ_are_named():
    same = {name: torch.ones(4) for name in ("dQ", "dK", "dV")}
    first = {**same, "dSink": torch.tensor([0.1])}
    second = {**{n: t.clone() for n, t in same.items()}, "dSink": torch.tensor([0.1000001])}
    assert measurement([first, second]).repeats(CHECKED) == (
        False,
        ("not repeatable: dSink differed between two executions",),
    )
    assert measurement([first, {n: t.clone() for n, t in first.items()}]).repeats(CHECKED) == (True, ())


def test_repeatability_is_not_asked_without_a_check():
    """The plan is not run twice: `None` says the question was not asked, not that it repeated."""
    assert measurement([]).repeats(types.SimpleNamespace(check=False)) == (None, ())
