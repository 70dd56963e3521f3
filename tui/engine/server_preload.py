"""Imported once, by the fork server that engine processes are forked from (launcher.py), and by
nothing else: its output goes nowhere (the UI owns the terminal; each engine process sends its
own to the engine log), then torch is imported so that no engine process imports it again.
So is torch._inductor: torch.profiler imports it as every profile starts (so that its lazy set-up
does not land in the trace), and the first kernel timing of an engine process paid it, 3.7 s on
the H200 we test on. Never CUDA here: a process that holds a CUDA context must not be forked.
"""

import contextlib
import os

_null = os.open(os.devnull, os.O_RDWR)
for _fd in (0, 1, 2):
    os.dup2(_null, _fd)
os.close(_null)

import torch  # noqa: E402

with contextlib.suppress(Exception):  # an install without it: the profile pays it, or does without
    import torch._inductor  # noqa: F401

from . import child  # noqa: E402, F401
