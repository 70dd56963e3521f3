"""Imported once, by the fork server that engine processes are forked from (launcher.py), and by
nothing else: its output goes nowhere (the UI owns the terminal; each engine process sends its
own to the engine log), then torch and the engine's own modules are imported so that no engine
process imports them again (those were a tenth of a second of each fresh engine's start, after
the fork). Those modules read no variable and no folder as they load: an engine forked from here
finds the same as one that imported them itself. Not torch._inductor: the kernel timing enters
the autograd profiler itself (timing.cupti), never torch.profiler's wrapper, which imported it as
each profile started. Never CUDA here: a process that holds a CUDA context must not be forked.
"""

import os

_null = os.open(os.devnull, os.O_RDWR)
for _fd in (0, 1, 2):
    os.dup2(_null, _fd)
os.close(_null)

import torch  # noqa: E402, F401

from ..engine import environment, runner  # noqa: E402, F401 - what child._serve imports first
from . import child  # noqa: E402, F401
