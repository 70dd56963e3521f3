"""The dashboard: form -> SdpaConfig -> engine client -> RunResult -> panes.

The UI thread never touches torch or cuDNN: runs happen in the engine's own child
process (tui.process.client), whose replies arrive as messages. The app is handed its
engine client (tests give it a scripted one). Panes only render a RunResult.
"""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Header, TabbedContent

from ..jobs.scheduler import Scheduler
from ..model.config import SdpaConfig
from ..model.options import RunOptions, options_from
from ..model.results import Environment, RunResult
from ..process import launcher
from ..process.client import (
    EngineClient,
    EngineClientProtocol,
    EngineEvent,
    EngineReady,
)
from .actions import Keeping
from .commands import ExplorerCommands
from .explaining import Explains
from .historying import Keeper
from .hunting import Hunts
from .latency_history import LatencyHistory
from .messages import (
    BestPinned,
    ConfigEdited,
    EngineMessage,
    HistoryOpened,
    HuntAsked,
    HuntFindingChosen,
    NearestChosen,
    SearchAsked,
    SearchStopAsked,
    SweepAsked,
)
from .navigation import pane_bindings
from .pane_keys import PaneKeys
from .panes import TABS, Panes
from .running import Runs
from .screens.main import MainScreen
from .searching import Searches
from .sweeping import Sweeps
from .widgets import ConfigForm, StatusLine, SummaryPane
from .widgets.keys import KeysFooter
from .widgets.status import Status

if TYPE_CHECKING:
    from ..model.search_results import SearchResult
    from ..store.presets import Preset, PresetProblem


class SdpaExplorerApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "cuDNN SDPA Explorer"
    COMMANDS = App.COMMANDS | {ExplorerCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    BINDINGS = [
        Binding("ctrl+r", "run", "Run again", priority=True),
        Binding("ctrl+o", "presets", "Presets", priority=True),
        Binding("ctrl+s", "save_preset", "Save preset", priority=True),
        Binding("ctrl+e", "export", "Export", priority=True),
        Binding("f1", "help", "Help", priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("escape", "stop", "Stop", show=False),  # a dialog's own Esc comes first
        *pane_bindings([tab.title for tab in TABS]),  # Alt+1 ... Alt+0, then F2 for History
    ]

    def __init__(
        self,
        config: SdpaConfig | None = None,
        client: EngineClientProtocol | None = None,
        opened: RunResult | None = None,
        start_engine: bool = True,
    ) -> None:
        super().__init__()
        self.opened = opened
        self.initial_config = opened.config if opened is not None else config or SdpaConfig()
        # what the panes draw (tui.app.panes): each replaced, never changed in place
        self.environment: Environment | None = None
        self.restarts: tuple[int, str] = (0, "")  # engine restarts, and why the last
        self.result: RunResult | None = None
        self.latency_history = LatencyHistory()
        self.mask_config: tuple[SdpaConfig, int] = (self.initial_config, 0)  # the form's, with the seed
        self.client = client
        self.engine_started = False
        self._early_events: list[EngineEvent] | None = []  # what the engine said before the first frame
        self._start_engine_on_mount = start_engine
        if start_engine and client is None:
            launcher.warm()  # torch loads in the fork server while the UI imports and paints
        # who has the one engine: the form's run, an explanation, a sweep, a search, a hunt
        self.scheduler = Scheduler()
        self.sweeps = Sweeps(self)
        self.searches = Searches(self)
        self.hunts = Hunts(self)
        self.explains = Explains(self)
        self.keeper = Keeper(self)  # the run history
        self.runs = Runs(self)  # the form's own runs
        self.keeping = Keeping(self)  # presets, exports, help
        self.pane_keys = PaneKeys(self)
        self.panes = Panes(self)
        self.search_result: SearchResult | None = None  # the last knob search's answer
        self.last_request: tuple[SdpaConfig, RunOptions] | None = None
        self.presets: dict[str, Preset] = {}
        self.preset_problems: list[PresetProblem] = []

    # ---- layout -----------------------------------------------------------------------------
    def get_default_screen(self) -> MainScreen:
        return MainScreen(id="_default")

    def compose(self) -> ComposeResult:
        self._size_classes()
        yield Header()
        with Horizontal(id="main"):
            yield ConfigForm(self.initial_config, id="form")
            with Vertical(id="right"):
                with VerticalScroll(id="headline"):  # scrolls when a training step's lines outgrow 24 rows
                    yield SummaryPane("waiting for the first result ...", id="summary")
                yield from self.panes.compose()
        yield StatusLine(id="status")
        yield KeysFooter(compact=True)

    def _size_classes(self) -> None:
        """The terminal size's classes from the start: Textual sets them on the first resize, after
        the first frame, which then jumped at 80x24 (and every widget was styled twice)."""
        width, height = self.size
        classes = {}
        for breakpoints, extent in (
            (self.HORIZONTAL_BREAKPOINTS, width),
            (self.VERTICAL_BREAKPOINTS, height),
        ):
            fitting = [name for least, name in sorted(breakpoints) if extent >= least]
            classes |= {name: name == fitting[-1] for _, name in breakpoints}
        self.screen.update_classes(classes, animate=False)

    def update_styles(self, node: DOMNode, animate: bool = True) -> None:
        """A widget not in the DOM yet is not restyled: it is styled as it mounts. Textual restyled
        it (and its children) at each class set as it was made (`compact=True`, an Input's first
        validation): about 0.05 s of a start's CPU on two cores."""
        if isinstance(node, Widget) and not isinstance(node, Screen) and not node.is_attached:
            return
        super().update_styles(node, animate)

    @property
    def status(self) -> StatusLine:
        return self.query_one(StatusLine)

    @property
    def form(self) -> ConfigForm:
        return self.query_one(ConfigForm)

    @property
    def run_pending(self) -> bool:
        """An edit waits out the typing pause before it runs."""
        return self.scheduler.run_pending

    def on_mount(self) -> None:
        self.watch(self.status, "state", self._status_changed, init=False)
        self.mask_config = (self.initial_config, self.live_options(self.form.options).seed)
        if self.opened is not None:
            self.keeper.open_saved(self.opened)  # shown, not to run, nor kept in the history again

    def on_load(self) -> None:
        """The app runs: its engine process starts now, beside the UI's first layout and paint. A
        fork of a warm engine server is ready about when the first frame is; a fork server still
        importing torch (the first launch) keeps it waiting in a thread of its own."""
        if self._start_engine_on_mount:
            self._start_client()

    def on_ready(self) -> None:
        """The first frame is on screen: what the engine said meanwhile is shown, the form's
        configuration runs and the presets are read (not before: their CPU would go to the first
        frame's layout passes)."""
        early, self._early_events = self._early_events or [], None
        for event in early:
            self.on_engine_message(EngineMessage(event))
        if self._start_engine_on_mount and self.opened is None:
            self.action_run()
        self.keeping.reload_presets()  # the palette's and Ctrl+O's
        # what is alive now (the widgets, the imported modules) lives as long as the app: out of the
        # collector's full passes, which walked it all and held a key's answer past 100 ms
        gc.collect()
        gc.freeze()
        gc.enable()  # held off since launch (tui/entry.py), so that no full pass ran before this frame

    def start_engine(self) -> None:
        """Start the engine client; run the form's configuration unless a saved result is open."""
        self._start_client()
        if self.opened is None:
            self.action_run()

    def _start_client(self) -> None:
        if self.client is None:
            self.client = EngineClient()
        self.client.start(self._on_engine_event)
        self.engine_started = True

    def on_unmount(self) -> None:
        if self.client is not None:
            self.client.close()

    def _status_changed(self, state: Status) -> None:
        """The panes are dimmed, and the headline says STALE, exactly while the status line says so."""
        self.query_one("#right").set_class(state.dimmed, "-stale")
        self.query_one(SummaryPane).set_stale(state.dimmed)

    def no_gpu_reason(self) -> str:
        env = self.environment
        return "" if env is None or env.gpu_available else env.unavailable_reason

    # ---- engine events (client thread -> message -> UI thread) ----------------------------------
    def _on_engine_event(self, event: EngineEvent) -> None:
        self.post_message(EngineMessage(event))

    def on_engine_message(self, message: EngineMessage) -> None:
        if self._early_events is not None:  # no panes to tell yet: kept for the first frame
            self._early_events.append(message.event)
            return
        with contextlib.suppress(NoMatches):  # an event that arrives while the screen goes away
            event = message.event
            parts = (self.sweeps, self.searches, self.hunts, self.explains)
            if not any(part.event(event) for part in parts):
                self._engine_event(event)  # not theirs alone
            for part in parts:  # the engine may be free for a sweep's next point, the search
                part.next()  # asked while the form's run went on, a hunt's run, a question

    def _engine_event(self, event: EngineEvent) -> None:
        if not isinstance(event, EngineReady):
            self.runs.event(event)  # the form's run: its words, its answer, or the engine's end
            return
        self.environment = event.environment
        self.restarts = (event.restarts, event.last_restart)
        self.draw_shown()
        self.form.mark_known_issues(self.form.read()[0])  # now that the GPU and cuDNN are known
        self.status.state = self.status.state.ready(event.startup_seconds, self.no_gpu_reason())

    def keep_crash(self, result: RunResult) -> None:
        """A crash is a finding: its reproduction script is written at once, for an upstream report."""
        from ..present.export import save_crash_script

        try:
            words = f"Its reproduction script: {save_crash_script(result)}"
        except OSError as exc:
            words = f"Its reproduction script could not be written ({exc}); Ctrl+E exports it."
        self.notify(words, title="Crashed the GPU", severity="error", timeout=30, markup=False)

    # ---- results -----------------------------------------------------------------------------
    def show_result(self, result: RunResult) -> None:
        """A RunResult in the headline and the pane shown; the other panes draw it when shown (also
        used to show a saved result)."""
        self.result = result
        self.latency_history.add(result)
        self.query_one(SummaryPane).show(result)
        if result.environment is not None and self.environment is None:
            self.environment = result.environment
        self.draw_shown()
        status = self.status
        status.state = status.state.shown(
            result.status, result.message, result.wall_seconds, self.no_gpu_reason()
        )

    def on_sweep_asked(self, message: SweepAsked) -> None:
        with contextlib.suppress(NoMatches):  # asked as the app closes
            self.sweeps.start(message.texts)

    def on_search_asked(self, message: SearchAsked) -> None:
        with contextlib.suppress(NoMatches):
            self.searches.start(message.budget)

    def on_search_stop_asked(self, _message: SearchStopAsked) -> None:
        with contextlib.suppress(NoMatches):
            self.searches.stop()

    def on_hunt_asked(self, message: HuntAsked) -> None:
        self.hunts.start(message)

    def on_hunt_finding_chosen(self, message: HuntFindingChosen) -> None:
        self.hunts.chosen(message)

    def on_best_pinned(self, message: BestPinned) -> None:
        self.searches.pinned(message)

    def on_nearest_chosen(self, message: NearestChosen) -> None:
        self.explains.nearest_chosen(message)

    def on_history_opened(self, message: HistoryOpened) -> None:
        self.keeper.opened(message)

    # ---- editing -----------------------------------------------------------------------------
    def on_config_edited(self, message: ConfigEdited) -> None:
        with contextlib.suppress(NoMatches):  # a message queued before the screen went away (closing)
            self.runs.edited(message)
        self.explains.next()

    def cancel_pending_run(self) -> None:
        self.runs.cancel_pending()

    @staticmethod
    def live_options(options: RunOptions) -> RunOptions:
        """The form's options, timed as the dashboard times them: half the CLI's replays, of ~1 ms
        each, so that an edit answers in tens of ms, not a quarter second (the profiler's parsing
        of kernel records is most of a cached run's time)."""
        return options.with_timing(replays=10, target_replay_ms=1.0)

    def action_run(self) -> None:
        self.runs.run()

    def action_presets(self) -> None:
        self.keeping.pick_preset()

    def action_save_preset(self) -> None:
        self.keeping.save_preset()

    def action_export(self) -> None:
        self.keeping.export()

    def action_help(self) -> None:
        self.keeping.help()

    # ---- the panes (panes.py): made when first shown, drawn while shown ----------------------------
    def pane(self, name: str) -> Widget | None:
        return self.panes.pane(name)

    def draw_shown(self) -> None:
        self.panes.draw_shown()

    async def show_pane(self, tab: str) -> Widget | None:
        return await self.panes.show(tab)

    async def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        await self.panes.activated(event)
        self.explains.next()  # the Explain pane asks once it is shown

    async def action_show_pane(self, index: int) -> None:
        await self.pane_keys.show(index)

    def action_switch_region(self) -> None:
        self.pane_keys.switch_region()

    def action_stop(self) -> None:
        """Esc: stop the running work at its next step (between plans, between reference chunks)
        and drop what waits; the engine process stays. A sweep stops after its point under way, a
        knob search at its next candidate, a hunt draws no more."""
        self.cancel_pending_run()
        if self.sweeps.running:
            self.sweeps.stop()
        elif self.searches.running:  # at its next candidate, keeping what it found
            self.searches.stop()
        elif self.hunts.running:  # no more draws; what it found is kept
            self.hunts.stop()
        else:
            self.runs.stop()

    def set_layout(self, layout: str) -> None:
        self.form.set_value("layout", layout)  # through the form: its section may not be made yet

    def set_dtype(self, dtype: str) -> None:
        self.form.set_value("dtype", dtype)

    def set_peers(self, peers: tuple[str, ...]) -> None:
        """Tick these peers in the form (the palette's 'Peers: tick all'); a change reruns."""
        self.form.load_options(options_from({"peers": peers}, self.form.options))

    def action_toggle_causal(self) -> None:
        self.form.set_value("causal", "none" if self.form.value_of("causal") != "none" else "top_left")

    def action_toggle_backward(self) -> None:
        self.form.set_value("backward", not self.form.value_of("backward"))


def make_app(
    config: SdpaConfig | None = None,
    *,
    client: EngineClientProtocol | None = None,
    opened: RunResult | None = None,
    start_engine: bool = True,
) -> SdpaExplorerApp:
    """The one way the CLI, the tests and the benchmarks make the dashboard.

    `client` is the engine to talk to (default: a fresh engine process); `opened` is a saved
    result to show at start, with its configuration in the form: nothing runs until the user
    edits or presses Ctrl+R. Without `start_engine` no engine starts at all (a viewer)."""
    return SdpaExplorerApp(config, client, opened, start_engine)
