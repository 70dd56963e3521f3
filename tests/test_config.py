import itertools

import pytest

from tui.model.config import ConfigError, SdpaConfig
from tui.model.fields import config_from_dict
from tui.model.validation import validate


def test_defaults_are_the_seed_configuration():
    c = SdpaConfig()
    assert (c.b, c.h_q, c.h_kv, c.s_q, c.s_kv, c.d_qk, c.d_v) == (4, 12, 12, 1024, 1024, 64, 64)
    assert (c.dtype, c.layout, c.causal, c.heuristics) == ("fp16", "BSHD", "top_left", ("A", "FALLBACK"))
    assert c.scale == pytest.approx(1 / 8)
    assert validate(c) == []


def test_validate_reports_every_problem_with_its_field():
    c = SdpaConfig(h_q=6, h_kv=4, d_qk=0, dtype="fp64", layout="XYZ", causal="left", heuristics=("A", "C"))
    errors = {e.field: e.message for e in validate(c)}
    assert errors["h_kv"] == "h_q must be a multiple of h_kv (got 6 and 4)"
    assert "d_qk" in errors and "at least 1" in errors["d_qk"]
    assert "fp64" in errors["dtype"]
    assert "XYZ" in errors["layout"]
    assert "left" in errors["causal"]
    assert "'C'" in errors["heuristics"]


@pytest.mark.parametrize("value", [-1, 0, 1 << 30])
def test_out_of_range_integers(value):
    errors = validate(SdpaConfig(s_q=value))
    assert [e.field for e in errors] == ["s_q"]


def test_bottom_right_needs_s_q_not_longer_than_s_kv():
    errors = validate(SdpaConfig(s_q=2048, s_kv=1024, causal="bottom_right"))
    assert [e.field for e in errors] == ["causal"]
    assert validate(SdpaConfig(s_q=1, s_kv=1024, causal="bottom_right")) == []


def test_memory_estimate_is_checked_against_the_gpu():
    big = SdpaConfig(b=64, h_q=64, h_kv=64, s_q=32768, s_kv=32768, d_qk=128, d_v=128)
    errors = validate(big, gpu_memory_bytes=80 << 30)
    assert errors and errors[0].field == "b" and "GPU memory" in errors[0].message
    assert validate(SdpaConfig(), gpu_memory_bytes=80 << 30) == []


def test_dict_round_trip():
    c = SdpaConfig(
        b=2,
        h_q=32,
        h_kv=8,
        s_q=1,
        s_kv=8192,
        d_qk=192,
        d_v=128,
        dtype="bf16",
        layout="SBHD",
        causal="bottom_right",
        attn_scale=0.1,
        heuristics=("B",),
    )
    d = c.to_dict()
    assert all(isinstance(v, (int, float, str, list)) for v in d.values())  # TOML/JSON friendly
    assert config_from_dict(d) == c
    assert "attn_scale" not in SdpaConfig().to_dict()


def test_from_dict_rejects_unknown_keys_and_wrong_types_by_name():
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"bb": 4, "s_q": "long", "heuristics": 3})
    fields = {e.field for e in exc.value.errors}
    assert fields == {"bb", "s_q", "heuristics"}
    assert "unknown key 'bb'" in str(exc.value)


@pytest.mark.parametrize("data", [{"attn_scale": 10**400}, {"dropout": -(10**400)}])
def test_from_dict_says_a_number_too_large_for_a_float_at_its_field(data):
    """Issue 12, item 6: OverflowError was raised, not the project's own ConfigError."""
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    assert [e.field for e in exc.value.errors] == list(data)
    assert "must be a finite number (got a number of 1329 bits)" in str(exc.value)


def test_a_number_of_thousands_of_digits_is_quoted_not_printed():
    """Python will not print an int of more than 4300 digits: the message says its size instead."""
    huge = 10**5000
    config = config_from_dict({"window": huge, "b": 1, "seq_lens_q": [huge], "seq_lens_kv": [1]})
    errors = {e.field: e.message for e in validate(config)}
    assert errors == {
        "window": f"sliding window must be at most {1 << 22} (got a number of 16610 bits)",
        "seq_lens_q": "query lengths must lie between 1 and 1024 (got a number of 16610 bits)",
    }


def test_from_dict_normalises_text():
    c = config_from_dict(
        {"layout": "bhsd", "causal": "Bottom-Right", "dtype": "BF16", "heuristics": "a+fallback"}
    )
    assert (c.layout, c.causal, c.dtype, c.heuristics) == ("BHSD", "bottom_right", "bf16", ("A", "FALLBACK"))


def _brute_kept(c: SdpaConfig) -> int:
    """Count kept scores one by one, from the mask's definition."""
    total = 0
    for bi in range(c.b):
        lq, lkv = c.lengths(bi)
        align = lkv - lq if c.causal == "bottom_right" else 0
        for i in range(lq):
            for j in range(lkv):
                causal_ok = c.causal == "none" or j <= i + align
                window_ok = c.window is None or j > i + align - c.window
                total += causal_ok and window_ok
    return total


@pytest.mark.parametrize("s_q,s_kv", list(itertools.product([1, 2, 7, 16], [1, 5, 16, 33])))
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
@pytest.mark.parametrize("window", [None, 1, 4])
def test_kept_pairs_count_exactly_the_unmasked_scores(s_q, s_kv, causal, window):
    c = SdpaConfig(b=2, s_q=s_q, s_kv=s_kv, causal=causal, window=window)
    assert c.kept_pairs() == _brute_kept(c)


@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
@pytest.mark.parametrize("window", [None, 3])
def test_kept_pairs_with_padding_count_only_real_tokens(causal, window):
    c = SdpaConfig(
        b=3, s_q=9, s_kv=12, causal=causal, window=window, seq_lens_q=(9, 4, 1), seq_lens_kv=(12, 7, 3)
    )
    assert validate(c) == []
    assert c.kept_pairs() == _brute_kept(c)
    assert c.flops() == 2 * c.h_q * _brute_kept(c) * (c.d_qk + c.d_v)


def test_mask_fields_validate_with_their_names():
    errors = {
        e.field: e.message
        for e in validate(
            SdpaConfig(
                b=2, window=0, seq_lens_q=(5,), seq_lens_kv=(1, 9999), bias="2x2", implementation="fast"
            )
        )
    }
    assert "at least 1" in errors["window"]
    assert "one length per batch entry: 2 (got 1)" in errors["seq_lens_q"]
    assert "between 1 and 1024 (got 9999)" in errors["seq_lens_kv"]
    assert "2x2" in errors["bias"] and "fast" in errors["implementation"]
    assert "needs s_q <= s_kv" in validate(SdpaConfig(s_q=2048, window=128))[0].message
    assert validate(SdpaConfig(b=1, seq_lens_q=(3,)))[0].field == "seq_lens_kv"


def test_parse_lengths():
    from tui.model.lengths import parse_lengths

    assert parse_lengths("full", 3, 100) is None
    assert parse_lengths("ratio 0.5", 3, 100) == (50, 50, 50)
    assert parse_lengths("10, 20,30", 3, 100) == (10, 20, 30)
    r = parse_lengths("random", 4, 100, seed=1)
    assert len(r) == 4 and all(1 <= x <= 100 for x in r) and r == parse_lengths("random", 4, 100, seed=1)
    for bad in ("ratio 2", "ratio x", "a,b"):
        with pytest.raises(ValueError):
            parse_lengths(bad, 2, 10)


def test_lengths_are_made_only_for_a_batch_and_length_within_their_bounds():
    """Issue 12, item 4: 'random' with b=10**9 hung; one side given made 10**9 full lengths."""
    from tui.model.config import MAX_BATCH, MAX_LENGTH
    from tui.model.lengths import parse_lengths, with_lengths

    for b, s in ((MAX_BATCH + 1, 100), (0, 100), (2, MAX_LENGTH + 1), (10**9, 100), (2, 2**2000)):
        for text in ("random", "ratio 0.5", "1,2"):
            with pytest.raises(ValueError, match="fix those first"):
                parse_lengths(text, b, s)
    assert parse_lengths("random", MAX_BATCH, MAX_LENGTH) is not None
    assert with_lengths(SdpaConfig(b=10**9), (1, 2), None).seq_lens_kv is None  # validation says b


def test_new_fields_round_trip_through_a_dict():
    c = SdpaConfig(
        b=2,
        window=64,
        seq_lens_q=(10, 20),
        seq_lens_kv=(30, 40),
        alibi=True,
        bias="bx1",
        implementation="unified",
    )
    d = c.to_dict()
    assert d["seq_lens_q"] == [10, 20] and d["window"] == 64
    assert config_from_dict(d) == c
    assert config_from_dict({"bias": "b,h"}).bias == "bxh"


def test_flops_of_the_seed_and_a_gqa_decode_step():
    seed = SdpaConfig()
    # causal keeps s(s+1)/2 scores; two matmuls of 2 FLOPs per multiply-add over d_qk and d_v
    assert seed.flops() == 2 * 4 * 12 * (1024 * 1025 // 2) * (64 + 64)
    assert SdpaConfig(causal="none").flops() == 4 * 4 * 12 * 1024 * 1024 * 64
    decode = SdpaConfig(b=1, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, causal="bottom_right")
    assert decode.flops() == 2 * 32 * 8192 * 256  # the one query sees every key
    assert decode.io_bytes() == 2 * (32 * 128 + 2 * 8 * 8192 * 128 + 32 * 128)


def test_label():
    assert SdpaConfig().label() == "b4 h12 s1024 d64 fp16 BSHD causal"
    assert (
        SdpaConfig(h_q=32, h_kv=8, s_q=1, s_kv=64, d_qk=192, d_v=128, causal="none").label()
        == "b4 h32/8 s1x64 d192/128 fp16 BSHD"
    )


def _plain(value) -> bool:
    if isinstance(value, str | int | float | bool | type(None)):
        return True
    if isinstance(value, tuple | list):
        return all(_plain(v) for v in value)
    return isinstance(value, dict) and all(_plain(k) and _plain(v) for k, v in value.items())


def test_the_config_class_needs_only_the_standard_library_and_plain_constants():
    """So that a standalone script can carry SdpaConfig's source as is, with the constants it names."""
    import ast
    import dataclasses
    import inspect
    import sys
    import typing

    from tui.model import config as module

    tree = ast.parse(inspect.getsource(module.SdpaConfig))
    in_annotations = {
        id(node)
        for parent in ast.walk(tree)
        for annotation in (getattr(parent, "returns", None), getattr(parent, "annotation", None))
        if annotation is not None
        for node in ast.walk(annotation)
    }
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in in_annotations}
    for name in sorted(used & set(vars(module))):
        value = getattr(module, name)
        stdlib = inspect.ismodule(value) and value.__name__ in sys.stdlib_module_names
        helper = value in (dataclasses.field, dataclasses.dataclass, typing.Any)
        assert stdlib or helper or _plain(value), name


def test_a_page_longer_than_the_longest_sequence_is_refused_naming_the_largest_useful_size():
    """A 4M-token page for a 1,024-token problem read as 48 GiB of I/O without a word."""
    errors = validate(SdpaConfig(s_q=1024, s_kv=1024, page_size=4194304))
    assert [(e.field, e.message) for e in errors] == [
        ("page_size", "a page of 4194304 tokens is longer than the longest sequence it holds (s_kv 1024): "
                      "at most 1024 is of use")
    ]  # fmt: skip
    assert validate(SdpaConfig(s_q=1, s_kv=1024, causal="bottom_right", page_size=1024)) == []
    assert [e.field for e in validate(SdpaConfig(s_kv=0, page_size=64))] == ["s_kv"]  # said once, at s_kv
