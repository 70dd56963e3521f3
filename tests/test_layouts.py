import pytest
import torch

from tui.model.layouts import LAYOUTS, allocate, strides


def test_seed_bshd_strides():
    b, h, s, d = 4, 12, 1024, 64
    assert strides((b, h, s, d), "BSHD") == (s * h * d, d, h * d, 1)  # exactly the seed's


def test_bhsd_is_torch_contiguous_and_sbhd_is_sequence_major():
    dims = (2, 3, 5, 8)
    assert strides(dims, "BHSD") == torch.empty(dims).stride()
    assert strides(dims, "SBHD") == (3 * 8, 8, 2 * 3 * 8, 1)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_allocate_gives_logical_dims_with_layout_strides(layout):
    dims = (2, 3, 5, 8)
    t = allocate(torch, dims, layout, torch.float16, "cpu")
    assert tuple(t.shape) == dims
    assert t.stride() == strides(dims, layout)
    # a dense allocation: every element has its own address
    assert t.untyped_storage().nbytes() == 2 * 3 * 5 * 8 * 2
