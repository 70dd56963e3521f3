"""The Explain pane's questions: the form's configuration explained (tui.engine.explain) through
the app's own engine client, so that the UI never waits on cuDNN and a plan build that crashes in
native code costs the engine process, not the dashboard.

The client answers only the newest waiting request, so an explanation is asked only when the
engine has nothing of the form's or a sweep's: the form's run comes first, the pane says it waits.
It is asked while the pane is shown and the form's configuration is not the one it explained. An
explanation that a later request overtook before the engine took it is never answered: any word
about a later request says so, and it is asked again. One that crashed the engine is not asked
again until the configuration changes (it would crash again).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, cast

from textual.css.query import NoMatches
from textual.widgets import TabbedContent

from ..jobs.scheduler import EXPLAIN, HUNT, RUN, SEARCH, SWEEP
from ..model.config import SdpaConfig
from ..process.client import EngineDied, EngineEvent, EngineExplained
from .host import Host
from .messages import NearestChosen

if TYPE_CHECKING:
    from .widgets.explain import ExplainPane

EXPLAIN_TAB = "tab-explain"


class Explains:
    """The Explain pane's questions, asked of the app's client as the scheduler lets them."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self._explaining: SdpaConfig | None = None  # what the request in flight (the scheduler's) asks
        self._explained: SdpaConfig | None = None  # what the pane shows (or failed on): not asked again

    @property
    def pane(self) -> ExplainPane:
        """The Explain pane, once made (else NoMatches, as any query)."""
        return cast("ExplainPane", self.app.query_one("#explain"))

    @property
    def shown(self) -> bool:
        """The pane is on screen with its widgets (the first time it is shown, once mounted)."""
        return (
            self.app.query_one(TabbedContent).active == EXPLAIN_TAB and self.app.pane("explain") is not None
        )

    def next(self) -> None:
        """Ask about the form's configuration as typed (the rules across fields are findings here,
        not a reason to refuse) when the pane is shown and the engine is free for it."""
        with contextlib.suppress(NoMatches):  # asked as the app closes
            if not self.shown or self.app.scheduler.in_flight(EXPLAIN) is not None:
                return
            pane = self.pane
            config, errors = self.app.form.read_as_typed()
            if config is None:
                pane.say(f"Nothing to ask cuDNN until these fields are fixed: {', '.join(sorted(errors))}.")
                return
            if config == self._explained:
                return
            ahead = self.app.scheduler.waits_for(EXPLAIN)
            if self.app.client is None or not self.app.engine_started:
                pane.say("No engine runs here (the dashboard was opened to view a saved result).", config)
            elif ahead == SWEEP:
                pane.say(f"A sweep runs: {config.label()} is asked about when it ends.", config)
            elif ahead == SEARCH:
                pane.say(f"A knob search runs: {config.label()} is asked about when it ends.", config)
            elif ahead == HUNT:
                pane.say(f"A hunt runs: {config.label()} is asked about when it ends.", config)
            elif ahead == RUN:
                pane.say(f"The form's run comes first; then cuDNN is asked about {config.label()}.", config)
            else:
                self.app.scheduler.asked(EXPLAIN, self.app.client.explain(config))
                self._explaining = config
                pane.say(
                    f"Asking cuDNN about {config.label()} under every implementation and heuristic mode ...",
                    config,
                )

    def event(self, event: EngineEvent) -> bool:
        """An engine event about the explanation asked: whether it was only the pane's."""
        request_id, config = self.app.scheduler.in_flight(EXPLAIN), self._explaining
        if request_id is None or config is None:
            return False
        said_of = getattr(event, "request_id", None)
        pane = self.pane
        if isinstance(event, EngineExplained) and said_of == request_id:
            self._asked_no_more()
            self._explained = config
            if event.explanation is not None:
                pane.show(event.explanation)
            else:
                pane.say(f"Asking about {config.label()} failed: {event.error}", config)
            return True
        if isinstance(event, EngineDied) and (said_of == request_id or not event.restarting):
            self._asked_no_more()
            self._explained = config
            pane.say(f"The engine process ended while it explained {config.label()}: {event.reason}", config)
            return False  # the app reports the lost engine too
        if said_of is not None and said_of > request_id:  # the engine took a later request instead
            self._asked_no_more()
        return False

    def _asked_no_more(self) -> None:
        self.app.scheduler.answered(EXPLAIN)
        self._explaining = None

    def nearest_chosen(self, message: NearestChosen) -> None:
        """Into the form: the edit that made the nearest configuration, over the form as it is now
        (it may have moved on since the explanation); the timing choices are not configuration."""
        with contextlib.suppress(NoMatches):
            current, _ = self.app.form.read_as_typed()
            edit = {
                f.name: getattr(message.nearest, f.name)
                for f in dataclasses.fields(SdpaConfig)
                if getattr(message.nearest, f.name) != getattr(message.explained, f.name)
            }
            self.app.form.load((current or message.explained).replace(**edit))
