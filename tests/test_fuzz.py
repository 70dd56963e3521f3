"""Fuzzing the configuration path: what a user types or keeps raises nothing but ConfigError,
and Engine.run (CPU mode) raises nothing at all, whatever a buggy caller put in the fields.

CI runs a small derandomized budget (the same examples every run, about 3 s). The long run,
10,000 examples a test:  SDPA_FUZZ=long uv run pytest -n 0 tests/test_fuzz.py
"""

from __future__ import annotations

import dataclasses
import os
import random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tui.model.config import ConfigError, SdpaConfig
from tui.model.fields import FIELDS, config_from_dict, from_entries
from tui.model.options import RunOptions
from tui.model.sampling import random_config
from tui.model.statuses import STATUS_CPU_ONLY, STATUS_INVALID, STATUS_UNSUPPORTED
from tui.model.validation import validate

_QUIET = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
settings.register_profile("sdpa-ci", max_examples=60, derandomize=True, **_QUIET)
settings.register_profile("sdpa-long", max_examples=10_000, **_QUIET)
FUZZ = settings.get_profile("sdpa-" + os.environ.get("SDPA_FUZZ", "ci"))
LONG = FUZZ.max_examples >= 10_000
# a run costs milliseconds, a checked run tens of them: CI runs fewer of them than of the parser
RUNS = FUZZ if LONG else settings(FUZZ, max_examples=30)
CHECKED_RUNS = FUZZ if LONG else settings(FUZZ, max_examples=6)

NAMES = [f.name for f in FIELDS]
HUGE = st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, 2**100, 10**400, -(10**400)])
NUMBERS = st.integers() | HUGE | st.floats()  # floats include nan, inf and -0.0
TYPED = st.sampled_from(
    ["[/x]", "[bold]x", "[/]", "\ufeff64", "random", "full", "ratio 0.5", "ratio nan", "ratio 1e400",
     "1,2", "1;2 3", "9" * 5000, "1e400", "nan", "-inf", " 64 ", "١٢", "1000000000", "a+fallback", "fp8"]
)  # fmt: skip
TEXT = st.text(max_size=20) | TYPED | st.integers().map(str) | st.floats().map(repr)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
KEYS = st.sampled_from(NAMES) | st.text(max_size=8)
CHOICES = sorted({c for f in FIELDS for c in f.choices})
# values a field might hold: near its bounds, any field's choices, short lengths (with 0 and 1)
NEAR = (
    st.integers(-2, 1 << 23) | st.sampled_from(CHOICES) | st.booleans() | st.none() | st.floats(0, 2)
    | st.lists(st.integers(0, 70), min_size=1, max_size=5).map(tuple)
    | st.lists(st.sampled_from(CHOICES), min_size=1, max_size=3).map(tuple)
)  # fmt: skip
# what a buggy caller may put in a field: anything, tuples and a number no str() can print included
ANY = NEAR | JSON | st.tuples(NUMBERS) | st.lists(SCALARS).map(tuple) | st.just(10**5000) | st.builds(object)
# the project's one generator of sensible configurations, small enough for a fast CPU reference
VALID = st.integers(0, 2**32).map(lambda seed: random_config(random.Random(seed), max_elements=1 << 12))
SEEDS = st.integers(0, 2**16) | st.integers() | HUGE


def _assert_usable(config: SdpaConfig) -> None:
    """What the CLI, the form and presets do with a parsed config, whatever it holds."""
    validate(config)
    config.label()
    hash(config)  # the graph cache's key


@FUZZ
@given(st.dictionaries(KEYS, NEAR | JSON, max_size=6))
def test_from_dict_raises_only_config_error(data):
    try:
        config = config_from_dict(data)
    except ConfigError as exc:
        assert exc.errors and all(e.field in data for e in exc.errors)
    else:
        _assert_usable(config)


@FUZZ
@given(st.dictionaries(KEYS, TEXT | NEAR | JSON, max_size=6), VALID)
def test_entries_raise_only_config_error(values, base):
    """The CLI's options and the form's widgets: text parsed, typed values checked."""
    try:
        config = from_entries(values, base)
    except ConfigError as exc:
        assert exc.errors and all(e.field in values for e in exc.errors)
    else:
        _assert_usable(config)


@FUZZ
@given(st.sampled_from(FIELDS), TEXT, VALID)
def test_a_fields_text_raises_only_value_error(field, text, config):
    try:
        value = field.parse(text, config)
    except ValueError as exc:
        assert field.label in str(exc)
    else:
        field.problem(value)


@RUNS
@given(VALID, st.dictionaries(st.sampled_from(NAMES), ANY, max_size=3), SEEDS)
def test_engine_run_raises_nothing_for_any_field_values(cpu_engine, config, changes, seed):
    """A caller that bypasses from_dict: anything in any field, any seed, no reference."""
    result = cpu_engine.run(dataclasses.replace(config, **changes), RunOptions(check=False, seed=seed))
    event(result.status)
    assert result.status in (STATUS_INVALID, STATUS_CPU_ONLY, STATUS_UNSUPPORTED), result.message
    if result.status == STATUS_INVALID:
        assert result.errors and all(e["field"] in (*NAMES, "seed") for e in result.errors)


@CHECKED_RUNS
@given(VALID, st.integers(0, 2**16))
def test_engine_runs_and_checks_sensible_configs_on_the_cpu(cpu_engine, config, seed):
    """The generator's configurations, checked against the fp32 reference on the CPU."""
    result = cpu_engine.run(config, RunOptions(seed=seed))
    event(result.status)
    assert result.status in (STATUS_CPU_ONLY, STATUS_UNSUPPORTED), result.message
