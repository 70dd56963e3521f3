import pytest
import torch

from tui.engine.reference import empty
from tui.model.config import SdpaConfig
from tui.model.layouts import LAYOUTS, strides
from tui.model.tensor_plan import drawn_inputs


def test_seed_bshd_strides():
    b, h, s, d = 4, 12, 1024, 64
    assert strides((b, h, s, d), "BSHD") == (s * h * d, d, h * d, 1)  # exactly the seed's


def test_bhsd_is_torch_contiguous_and_sbhd_is_sequence_major():
    dims = (2, 3, 5, 8)
    assert strides(dims, "BHSD") == torch.empty(dims).stride()
    assert strides(dims, "SBHD") == (3 * 8, 8, 2 * 3 * 8, 1)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_drawn_input_has_logical_dims_with_layout_strides(layout):
    config = SdpaConfig(b=2, h_q=3, h_kv=3, s_q=5, s_kv=5, d_qk=8, d_v=8, layout=layout, causal="none")
    dims = (2, 3, 5, 8)
    t = empty(torch, drawn_inputs(config)["q"], "cpu")
    assert tuple(t.shape) == dims
    assert t.stride() == strides(dims, layout)
    # a dense allocation: every element has its own address
    assert t.untyped_storage().nbytes() == 2 * 3 * 5 * 8 * 2
