import itertools

import pytest

from tui.engine.config import ConfigError, SdpaConfig


def test_defaults_are_the_seed_configuration():
    c = SdpaConfig()
    assert (c.b, c.h_q, c.h_kv, c.s_q, c.s_kv, c.d_qk, c.d_v) == (4, 12, 12, 1024, 1024, 64, 64)
    assert (c.dtype, c.layout, c.causal, c.heuristics) == ("fp16", "BSHD", "top_left", ("A", "FALLBACK"))
    assert c.scale == pytest.approx(1 / 8)
    assert c.validate() == []


def test_validate_reports_every_problem_with_its_field():
    c = SdpaConfig(h_q=6, h_kv=4, d_qk=0, dtype="fp64", layout="XYZ", causal="left", heuristics=("A", "C"))
    errors = {e.field: e.message for e in c.validate()}
    assert errors["h_kv"] == "h_q must be a multiple of h_kv (got 6 and 4)"
    assert "d_qk" in errors and "at least 1" in errors["d_qk"]
    assert "fp64" in errors["dtype"]
    assert "XYZ" in errors["layout"]
    assert "left" in errors["causal"]
    assert "'C'" in errors["heuristics"]


@pytest.mark.parametrize("value", [-1, 0, 1 << 30])
def test_out_of_range_integers(value):
    errors = SdpaConfig(s_q=value).validate()
    assert [e.field for e in errors] == ["s_q"]


def test_bottom_right_needs_s_q_not_longer_than_s_kv():
    errors = SdpaConfig(s_q=2048, s_kv=1024, causal="bottom_right").validate()
    assert [e.field for e in errors] == ["causal"]
    assert SdpaConfig(s_q=1, s_kv=1024, causal="bottom_right").validate() == []


def test_memory_estimate_is_checked_against_the_gpu():
    big = SdpaConfig(b=64, h_q=64, h_kv=64, s_q=32768, s_kv=32768, d_qk=128, d_v=128)
    errors = big.validate(gpu_memory_bytes=80 << 30)
    assert errors and errors[0].field == "b" and "GPU memory" in errors[0].message
    assert SdpaConfig().validate(gpu_memory_bytes=80 << 30) == []


def test_dict_round_trip():
    c = SdpaConfig(b=2, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=192, d_v=128, dtype="bf16",
                   layout="SBHD", causal="bottom_right", attn_scale=0.1, heuristics=("B",))
    d = c.to_dict()
    assert all(isinstance(v, (int, float, str, list)) for v in d.values())  # TOML/JSON friendly
    assert SdpaConfig.from_dict(d) == c
    assert "attn_scale" not in SdpaConfig().to_dict()


def test_from_dict_rejects_unknown_keys_and_wrong_types_by_name():
    with pytest.raises(ConfigError) as exc:
        SdpaConfig.from_dict({"bb": 4, "s_q": "long", "heuristics": 3})
    fields = {e.field for e in exc.value.errors}
    assert fields == {"bb", "s_q", "heuristics"}
    assert "unknown key 'bb'" in str(exc.value)


def test_from_dict_normalises_text():
    c = SdpaConfig.from_dict({"layout": "bhsd", "causal": "Bottom-Right", "dtype": "BF16", "heuristics": "a+fallback"})
    assert (c.layout, c.causal, c.dtype, c.heuristics) == ("BHSD", "bottom_right", "bf16", ("A", "FALLBACK"))


def _brute_kept(c: SdpaConfig) -> int:
    off = c.causal_offset
    return sum(1 for i in range(c.s_q) for j in range(c.s_kv) if off is None or j <= i + off)


@pytest.mark.parametrize("s_q,s_kv", list(itertools.product([1, 2, 7, 16], [1, 5, 16, 33])))
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
def test_kept_pairs_count_exactly_the_unmasked_scores(s_q, s_kv, causal):
    c = SdpaConfig(s_q=s_q, s_kv=s_kv, causal=causal)
    assert c.kept_pairs() == _brute_kept(c)


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
    assert SdpaConfig(h_q=32, h_kv=8, s_q=1, s_kv=64, d_qk=192, d_v=128, causal="none").label() == \
        "b4 h32/8 s1x64 d192/128 fp16 BSHD"
