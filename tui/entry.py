"""The installed command's entry point: the cyclic collector is held off while the tool imports
(its full passes over every module just imported cost a launch about 0.15 s) and, for the
dashboard, until the first frame is on screen; a command turns it back on as it starts."""

import gc

gc.disable()

from .cli.main import main  # noqa: E402

__all__ = ["main"]
