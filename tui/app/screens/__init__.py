from .export import ExportDialog
from .help import HelpScreen
from .presets import Confirm, PresetPicker, SavePreset

__all__ = ["Confirm", "ExportDialog", "HelpScreen", "PresetPicker", "SavePreset"]
