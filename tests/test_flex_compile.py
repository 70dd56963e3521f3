"""One engine process compiles Flex for every configuration it meets: past torch.compile's
recompile limit (8 shapes) a compiled function silently runs eagerly, and a check on the H200 then
timed Flex 40-90x slower than its kernel for every preset after the eighth."""

import pytest

torch = pytest.importorskip("torch")


def test_a_compiled_function_stays_compiled_for_every_shape_after_the_lift():
    from torch._dynamo.utils import counters

    from tui.engine.peers import lift_recompile_limit

    def doubled(x):  # a code object of its own: dynamo's recompile count is per code object
        return x * 2 + 1

    compiled = torch.compile(doubled, backend="eager", dynamic=False)
    shapes = range(1, 13)  # 12 shapes, past the default limit of 8
    # the limits as torch sets them, put back after: the lift is for an engine process, not the tests'
    limits = dict(recompile_limit=8, accumulated_recompile_limit=256, fail_on_recompile_limit_hit=False)
    with torch._dynamo.config.patch(**limits):
        lift_recompile_limit(torch)
        before = counters["stats"]["unique_graphs"]
        for n in shapes:
            assert torch.equal(compiled(torch.ones(n)), torch.full((n,), 3.0))
        assert counters["stats"]["unique_graphs"] - before == len(shapes)  # each shape compiled
        assert (
            torch._dynamo.config.recompile_limit >= 1 << 20
            and torch._dynamo.config.fail_on_recompile_limit_hit
        )
    assert not torch._dynamo.config.fail_on_recompile_limit_hit  # nothing of the lift outlives the test


def test_without_the_lift_the_ninth_shape_runs_eagerly():
    """The failure the lift prevents, shown on the same kind of function."""
    from torch._dynamo.utils import counters

    def tripled(x):
        return x * 3

    compiled = torch.compile(tripled, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=8, fail_on_recompile_limit_hit=False):
        torch._dynamo.reset()
        before = counters["stats"]["unique_graphs"]
        for n in range(1, 13):
            compiled(torch.ones(n))
        assert counters["stats"]["unique_graphs"] - before == 8
