import pytest

from tui.model.config import SdpaConfig
from tui.present.maskmap import kept_in_row, mask_grid


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(
            b=2, s_q=9, s_kv=12, causal="bottom_right", window=3, seq_lens_q=(9, 4), seq_lens_kv=(12, 7)
        ),
        SdpaConfig(b=1, s_q=16, s_kv=16, causal="top_left", window=5),
        SdpaConfig(b=1, s_q=5, s_kv=8, causal="none"),
    ],
)
def test_rows_add_up_to_the_kept_pairs(config):
    total = sum(
        kept_in_row(config, bi, i, 0, config.s_kv) for bi in range(config.b) for i in range(config.s_q)
    )
    assert total == config.kept_pairs()


def test_grid_of_a_causal_mask_is_a_triangle():
    grid = mask_grid(SdpaConfig(s_q=4, s_kv=4), 0, 4, 4)
    assert grid == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    big = mask_grid(SdpaConfig(s_q=8192, s_kv=8192, window=1024), 0, 16, 32)
    assert len(big) == 16 and len(big[0]) == 32
    assert big[-1][0] == 0 and big[-1][-1] > 0  # the window leaves the early keys out of late queries
