from .help import HelpScreen

__all__ = ["HelpScreen"]
