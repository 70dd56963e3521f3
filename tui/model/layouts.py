"""Physical memory layouts of the (b, h, s, d) attention tensors.

Logical dims are always (b, h, s, d); a layout only decides the strides. This is the
one place that turns a layout name into strides, so the graph, the allocator and the
reference can never disagree about where an element lives.
"""

from __future__ import annotations

# Memory order of the logical dims, outermost first (0=b, 1=h, 2=s, 3=d).
LAYOUTS: dict[str, tuple[int, int, int, int]] = {
    "BSHD": (0, 2, 1, 3),  # the seed's layout: tokens contiguous per head group (PyTorch "NHD")
    "BHSD": (0, 1, 2, 3),  # torch's default contiguous (b, h, s, d)
    "SBHD": (2, 0, 1, 3),  # sequence-major, as Megatron-style code keeps activations
    # packed tokens (T, h, d), no padding: each sequence's tokens at a ragged offset. Its strides
    # within a sequence are BSHD's; where the sequences start is the packing's (storage.py)
    "THD": (0, 2, 1, 3),
}
PACKED = "THD"

LAYOUT_HELP = {
    "BSHD": "batch, sequence, heads, head dim (the seed's layout)",
    "BHSD": "batch, heads, sequence, head dim (torch's contiguous)",
    "SBHD": "sequence, batch, heads, head dim (sequence-major)",
    "THD": "tokens of every sequence packed, heads, head dim (ragged offsets, no padding)",
}


def strides(dims: tuple[int, int, int, int], layout: str, gap: int = 0) -> tuple[int, int, int, int]:
    """Element strides of logical (b, h, s, d) dims stored in `layout`; with `gap`, each head-dim
    row is followed by that many unused elements (a view into wider rows)."""
    order = LAYOUTS[layout]
    out = [0, 0, 0, 0]
    step = 1
    for axis in reversed(order):
        out[axis] = step
        step *= dims[axis] + (gap if axis == 3 else 0)
    return tuple(out)  # type: ignore[return-value]
