"""A pinned plan: its text reads back as the same (engine, knobs), a typo names the part that is
wrong, and a run's note says whether the pin still exists and how it compares with the pick."""

from __future__ import annotations

import pytest

from tui.model import pins
from tui.model.config import SdpaConfig
from tui.model.fields import config_from_dict
from tui.model.results import PlanResult, TimingStats
from tui.model.sampling import PIN_ENGINES, random_configs
from tui.model.validation import validate


def timed(index: int, name: str, us: float, **kw) -> PlanResult:
    stats = TimingStats(
        median_us=us,
        min_us=us,
        max_us=us,
        p10_us=us,
        p90_us=us,
        stdev_us=0.0,
        replays=5,
        per_replay=1,
        l2_flushed=False,
    )
    return PlanResult(index=index, name=name, built=True, timing=stats, **kw)


@pytest.mark.parametrize(
    "text",
    ["1 KERNEL_CFG=27", "eng1 kernel_cfg=27", " engine1,KERNEL_CFG=27 ", "1;KERNEL_CFG=27"],
)
def test_spellings_read_as_one_plan(text):
    assert pins.parse(text) == pins.Pin(1, (("KERNEL_CFG", 27),))
    assert pins.canonical(text) == "1 KERNEL_CFG=27"


def test_knobs_are_kept_sorted_so_equal_plans_are_equal():
    a, b = pins.parse("8 SPLIT_KV=2 KERNEL_CFG=3"), pins.Pin.of(8, {"KERNEL_CFG": 3, "SPLIT_KV": 2})
    assert a == b and hash(a) == hash(b) and a.text() == "8 KERNEL_CFG=3 SPLIT_KV=2"
    assert pins.parse(a.text()) == a and a.knob_dict() == {"KERNEL_CFG": 3, "SPLIT_KV": 2}
    assert pins.Pin.of(1).text() == "1"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "engine id, then its knobs"),
        ("x KERNEL_CFG=1", "starts with its engine id"),
        ("1 KERNEL_CFG", "NAME=VALUE"),
        ("1 KERNEL_CFG=a", "NAME=VALUE"),
        ("1 KERNEL_CFG=1 KERNEL_CFG=2", "given twice"),
    ],
)
def test_a_wrong_pin_says_which_part(text, words):
    with pytest.raises(ValueError, match=words):
        pins.parse(text)


def test_the_config_field_names_itself_and_keeps_canonical_text():
    assert config_from_dict({"plan": "eng1  kernel_cfg=27"}).plan == "1 KERNEL_CFG=27"
    (error,) = validate(SdpaConfig(plan="1 KERNEL_CFG"))
    assert error.field == "plan" and error.message.startswith("pinned plan: a knob is NAME=VALUE")
    assert "plan[1 KERNEL_CFG=27]" in SdpaConfig(plan="1 KERNEL_CFG=27").label()


def test_knob_types_are_cudnns_own_and_an_unknown_one_is_named():
    class KnobType:
        KERNEL_CFG = "kt.KERNEL_CFG"

    cudnn = type("cudnn", (), {"knob_type": KnobType})
    assert pins.parse("1 KERNEL_CFG=27").knob_types(cudnn) == {"kt.KERNEL_CFG": 27}
    with pytest.raises(KeyError, match="no knob NOT_A_KNOB"):
        pins.parse("1 NOT_A_KNOB=1").knob_types(cudnn)


def test_the_note_compares_the_pin_with_the_pick():
    plans = [
        timed(0, "eng1_k24=3", 165.0, is_heuristic_pick=True),
        timed(2, "eng1_k12=27", 146.0, is_pinned=True),
    ]
    words = pins.note("1 KERNEL_CFG=27", plans, 0, 2, "", "9.19.0")
    assert words.startswith(
        "pinned plan 1 KERNEL_CFG=27 ran under cuDNN 9.19.0: 146.00 µs, 11.5% faster than"
    )
    assert "eng1_k24=3 (165.00 µs)" in words
    slower = [timed(0, "pick", 100.0), timed(2, "pin", 120.0)]
    assert "20.0% slower than the heuristic's pick pick" in pins.note("1", slower, 0, 2, "", "")


def test_the_note_says_when_the_pin_no_longer_builds():
    words = pins.note("1 KERNEL_CFG=99", [timed(0, "pick", 100.0)], 0, None, "no such config", "9.20.0")
    assert words == (
        "pinned plan 1 KERNEL_CFG=99 does not build under cuDNN 9.20.0 (no such config): the heuristic's pick ran"
    )


def test_random_configs_pin_an_engine_now_and_then():
    drawn = {c.plan for c in random_configs(7, 400)}
    assert None in drawn and drawn - {None} <= {str(e) for e in PIN_ENGINES} and len(drawn) > 1
