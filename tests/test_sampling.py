"""The random configurations the GPU soak and these fuzz tests share (tui/model/sampling.py):
each one valid, the same seed giving the same ones, small, and together spread over every field."""

import json
import math
import random
from collections import Counter

import pytest

from tui.model import statuses
from tui.model.config import FP8_DTYPES, SdpaConfig
from tui.model.fields import FIELDS, config_from_dict
from tui.model.sampling import MAX_ELEMENTS, NoConfigFound, draw_config, random_config, random_configs
from tui.model.validation import validate

SEED, N = 2024, 500


@pytest.fixture(scope="module")
def draws() -> list[SdpaConfig]:
    return random_configs(SEED, N)


def test_every_draw_validates(draws):
    assert len(draws) == N and all(isinstance(c, SdpaConfig) for c in draws)
    refused = {c.label(): [e.message for e in validate(c)] for c in draws if validate(c)}
    assert not refused


def test_the_same_seed_gives_the_same_configs(draws):
    assert random_configs(SEED, N) == draws
    assert random_configs(SEED + 1, 20) != draws[:20]
    one, other = random.Random(9), random.Random(9)
    assert [random_config(one) for _ in range(20)] == [random_config(other) for _ in range(20)]


def test_most_draws_are_accepted_at_the_first_try():
    """The draws follow the rules across fields (GQA heads, O's dtype, both padding sides, ...);
    only a few are refused and drawn again (measured: 94%). A rule the draws do not follow yet
    brings this down to 56-83%: teach it to sampling.py."""
    rng = random.Random(SEED)
    refusals = [validate(draw_config(rng)) for _ in range(N)]
    accepted = sum(not errors for errors in refusals) / N
    refused = Counter(e.field for errors in refusals for e in errors)
    assert accepted > 0.85, f"{accepted:.0%} accepted; refused at {dict(refused)}"


@pytest.mark.parametrize("field", [f for f in FIELDS if f.choices], ids=lambda f: f.name)
def test_every_declared_choice_is_drawn(draws, field):
    """dtype, layout, causal, bias, implementation, out dtype, heuristic modes: from FIELDS, so a
    choice added to a declaration is drawn, and this test asks for it."""
    drawn = {getattr(c, field.name) for c in draws}
    if field.kind == "modes":
        drawn = {mode for modes in drawn for mode in modes}
    assert drawn == set(field.choices)


def test_every_field_takes_more_than_one_value(draws):
    fixed = [f.name for f in FIELDS if len({getattr(c, f.name) for c in draws}) < 2]
    assert not fixed, f"never drawn away from the default: {fixed}"


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


COVERED = {
    "GQA": lambda c: 1 < c.h_kv < c.h_q,
    "MQA": lambda c: c.h_kv == 1 < c.h_q,
    "decode (s_q = 1)": lambda c: c.s_q == 1 < c.s_kv,
    "one key (s_kv = 1)": lambda c: c.s_kv == 1 < c.s_q,
    "more queries than keys": lambda c: c.s_q > c.s_kv > 1,
    "fewer queries than keys": lambda c: 1 < c.s_q < c.s_kv,
    "lengths not a power of two": lambda c: not _pow2(c.s_q) and not _pow2(c.s_kv),
    "d_qk != d_v": lambda c: c.d_qk != c.d_v,
    "head dim not a power of two": lambda c: not _pow2(c.d_qk),
    "head dim 512": lambda c: 512 in (c.d_qk, c.d_v),
    "batch above one": lambda c: c.b > 1,
    "sliding window": lambda c: c.window is not None,
    "padding mask": lambda c: c.padded and c.seq_lens_q != (c.s_q,) * c.b,
    "bias": lambda c: c.bias != "none",
    "ALiBi": lambda c: c.alibi,
    "dropout": lambda c: c.dropout > 0,
    "backward": lambda c: c.backward,
    "deterministic backward": lambda c: c.deterministic,
    "FP8 with another output dtype": lambda c: c.fp8 and c.o_dtype != c.dtype,
    "a scale of its own": lambda c: c.attn_scale is not None,
}


@pytest.mark.parametrize("feature", COVERED)
def test_the_draws_cover(draws, feature):
    """Each case at least once in 500 draws, and not in all of them."""
    assert 0 < sum(map(COVERED[feature], draws)) < N


def _elements(c: SdpaConfig) -> list[int]:
    """The scores and each tensor, in elements."""
    scores = c.b * c.h_q * c.s_q * c.s_kv
    return [scores, *(math.prod(dims) for dims in (c.q_dims, c.k_dims, c.v_dims, c.o_dims))]


@pytest.mark.parametrize("max_elements", [MAX_ELEMENTS, 1 << 16, 64])
def test_sizes_stay_within_the_budget_and_use_it(draws, max_elements):
    configs = draws if max_elements == MAX_ELEMENTS else random_configs(1, 200, max_elements=max_elements)
    assert max(max(_elements(c)) for c in configs) <= max_elements
    assert max(c.b * c.h_q * c.s_q * c.s_kv for c in configs) > max_elements // 8  # not a corner of it
    assert all(d % 8 == 0 and d <= 512 for c in configs for d in (c.d_qk, c.d_v))


def test_the_default_budget_keeps_a_checked_run_small(draws):
    assert MAX_ELEMENTS <= 1 << 27
    assert max(c.memory_estimate() for c in draws) < 8 << 30


def test_shares_steer_fp8_and_the_backward():
    none = random_configs(3, 50, fp8_share=0, backward_share=0)
    every = random_configs(3, 50, fp8_share=1, backward_share=1)
    assert not any(c.fp8 or c.backward for c in none)
    assert all(c.dtype in FP8_DTYPES and c.backward for c in every)


def test_a_draw_round_trips_through_its_dict(draws):
    for c in draws:
        assert config_from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_bounds_that_admit_nothing_say_so():
    with pytest.raises(NoConfigFound, match=r"in 5 draws.*GPU memory"):
        random_config(random.Random(0), gpu_memory_bytes=1 << 20, attempts=5)
    with pytest.raises(ValueError, match="max_elements must be at least 8"):
        random_config(random.Random(0), max_elements=4)


STATUSES = {value for name, value in vars(statuses).items() if name.startswith("STATUS_")}


def test_a_few_draws_run_through_the_cpu_engine(cpu_engine):
    """No exception, and no draw the engine finds invalid or fails on: each gets a verdict."""
    for c in random_configs(SEED, 5, max_elements=1 << 12):
        r = cpu_engine.run(c)
        assert r.status in STATUSES - {statuses.STATUS_INVALID, statuses.STATUS_ERROR}, (c.label(), r.message)
