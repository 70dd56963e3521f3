"""The dashboard's runs kept in the run history (tui/store/history.py), and kept runs opened again.

Every result the engine sends for the form is appended in a thread worker, never on the UI
thread and never failing the UI (a problem is a warning toast); the History pane then reads its
list again. A saved result opened (--open, or Enter in the History pane) is shown as it was, its
configuration in the form, and is not recorded again.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from textual.css.query import NoMatches

from ..model.results import RunResult
from .host import Host
from .messages import HistoryOpened

if TYPE_CHECKING:
    from ..store.presets import Preset


class Keeper:
    """The dashboard's side of the run history: each result kept off the UI thread, a kept run
    opened in the panes and the form."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.loaded_preset: Preset | None = None  # the preset last loaded into the form

    def preset_of(self, result: RunResult) -> str | None:
        """The preset the form holds, if the run's configuration is still that preset's."""
        preset = self.loaded_preset
        return preset.name if preset is not None and preset.config == result.config else None

    def keep_run(self, result: RunResult) -> None:
        preset = self.preset_of(result)
        self.app.run_worker(lambda: self._keep(result, preset), thread=True, group="history-record")

    def _keep(self, result: RunResult, preset: str | None) -> None:
        from ..store.history import record

        def warn(line: str) -> None:
            self._from_thread(self.app.notify, line, title="History", severity="warning", markup=False)

        if record(result, preset, source="dashboard", warn=warn) is not None:
            self._from_thread(self.kept)

    def _from_thread(self, callback, *args, **kwargs) -> None:
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.app.call_from_thread(callback, *args, **kwargs)

    def kept(self) -> None:
        """The History pane lists the run kept (once it exists: when made, it reads the list)."""
        with contextlib.suppress(NoMatches):
            pane = self.app.pane("history")
            if pane is not None:
                pane.reload()

    def open_saved(self, result: RunResult) -> None:
        """Show a saved result in the panes with its configuration and timing in the form: nothing
        runs until the user edits or presses Ctrl+R."""
        from .widgets.config_form import measured_as

        self.app.show_result(result)
        form = self.app.form
        if form.read()[0] != result.config:
            form.load(result.config)
        form.load_options(measured_as(result, form.options))  # Ctrl+R measures it so
        self.app.last_request = (result.config, self.app.live_options(form.options))

    def opened(self, message: HistoryOpened) -> None:
        """Enter in the History pane: that run shown as it was kept."""
        with contextlib.suppress(NoMatches):
            self.app.cancel_pending_run()
            self.open_saved(message.result)
            self.app.notify(f"Run #{message.run_id} as it was kept; Ctrl+R runs it again.", title="History")
