"""The Mask pane's view of where K and V live (tui.present.pagemap): the page table cut to a pane,
cell for cell the table the run's graph reads, and the figures of a paged cache and of packing,
checked against arithmetic done here by hand."""

import time

from tui.engine.storage import page_table
from tui.model.config import SdpaConfig
from tui.present.pagemap import (
    MAX_DEALT,
    MORE,
    NOT_HELD,
    cache_words,
    packing_words,
    page_view,
    shown_sequences,
)

# two sequences of 256 keys in pages of 64: the second holds 65 real keys, so 2 pages, 2 not held
PAGED = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=1, s_kv=256, d_qk=64, d_v=64, causal="bottom_right",
                   seq_lens_q=(1, 1), seq_lens_kv=(256, 65), page_size=64)  # fmt: skip


def cells(line: str) -> list[str]:
    return line.split()[2:]  # after "seq N"


def test_each_cell_is_the_pool_page_the_run_reads_and_slots_past_the_real_length_are_marked():
    view = page_view(PAGED, seed=3, width=80, rows=10)
    table = page_table(PAGED, 3)
    assert view.heading.split() == ["slot", "0", "1", "2", "3"]
    (i0, first), (i1, second) = view.rows
    assert (i0, i1) == (0, 1) and view.left_out == 0
    assert cells(first) == [str(p) for p in table[0]]
    assert cells(second) == [str(table[1][0]), str(table[1][1]), NOT_HELD, NOT_HELD]
    assert sorted(int(c) for c in cells(first) + cells(second)[:2]) == list(range(6))  # a pool of 6
    assert "never read" in view.legend and MORE not in first


def test_the_seed_deals_a_shuffled_pool_and_an_ordered_one_lies_in_token_order():
    shuffled = [
        cells(line) for _, line in page_view(PAGED.replace(s_kv=4096, seq_lens_kv=(4096, 65)), 0, 400, 2).rows
    ]
    other = [
        cells(line) for _, line in page_view(PAGED.replace(s_kv=4096, seq_lens_kv=(4096, 65)), 1, 400, 2).rows
    ]
    assert shuffled != other
    ordered = page_view(PAGED.replace(page_order="ordered"), seed=0, width=80, rows=10)
    assert [cells(line) for _, line in ordered.rows] == [["0", "1", "2", "3"], ["4", "5", NOT_HELD, NOT_HELD]]
    assert "ordered" in ordered.summary and "seed" not in ordered.summary
    assert "shuffled (seed 1)" in page_view(PAGED, seed=1, width=80, rows=2).summary


def test_a_narrow_pane_cuts_the_slots_and_keeps_the_selected_sequence_among_those_shown():
    config = PAGED.replace(b=10, seq_lens_q=None, seq_lens_kv=None, s_kv=64 * 40)
    view = page_view(config, seed=0, width=30, rows=4, selected=7)
    assert all(
        line.endswith(MORE) and len(line) <= 30 for line in (view.heading, *(row for _, row in view.rows))
    )
    assert [i for i, _ in view.rows] == [0, 1, 7] and view.left_out == 7
    assert shown_sequences(3, 2, 5) == [0, 1, 2] and shown_sequences(9, 0, 1) == [0]
    assert NOT_HELD not in view.legend  # every sequence holds all its pages


def test_the_figures_of_a_paged_cache_against_a_dense_one():
    per_token = 2 * (64 + 64) * 2  # K and V of a token: h_kv 2 x (d_qk + d_v) x 2 bytes (fp16)
    held = 6 * 64 * per_token + 2 * 2 * 4 * 4  # six pages of 64 tokens, two int32 tables of (b, 4)
    dense = 2 * 256 * per_token
    words = cache_words(PAGED, seed=0)
    assert "pages of 64 tokens, 4 a sequence, shuffled (seed 0)" in words
    assert "6 pages held against 8 in a dense cache (75%)" in words
    assert f"K and V {held / 1024:.1f} KiB against {dense / 1024:.1f} KiB" in words


def test_packing_saves_the_padding_of_every_short_sequence():
    config = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=100, s_kv=100, d_qk=64, d_v=64, layout="THD",
                        seq_lens_q=(100, 25), seq_lens_kv=(100, 25))  # fmt: skip
    per_q_token, per_kv_token = 4 * 128 * 2, 2 * 128 * 2  # q and o; k and v (fp16)
    packed = 125 * (per_q_token + per_kv_token)
    padded = 200 * (per_q_token + per_kv_token)
    assert packing_words(config) == (
        f"packed: {packed / 1024:.1f} KiB of q, k, v, o against {padded / 1024:.1f} KiB padded (38% saved)"
    )


def test_a_pool_too_large_to_deal_is_described_at_once():
    config = SdpaConfig(b=64, s_q=1, s_kv=4194304, causal="bottom_right", page_size=1)
    t0 = time.perf_counter()
    view = page_view(config, seed=0, width=80, rows=10)
    assert time.perf_counter() - t0 < 1.0
    assert (
        not view.rows
        and f"more than {MAX_DEALT:,}" in view.heading
        and "268,435,456 pages held" in view.summary
    )
