"""The Textual dashboard. Renders engine results only; never imports torch or cudnn."""

from .app import SdpaExplorerApp, make_app

__all__ = ["SdpaExplorerApp", "make_app"]
