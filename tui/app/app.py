"""The dashboard: form -> SdpaConfig -> engine process -> RunResult -> panes.

The UI thread never touches torch or cuDNN: runs happen in the engine's own child
process (tui.engine.process), whose replies arrive as messages. Panes only render a
RunResult.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Checkbox, Footer, Header, Select, TabbedContent, TabPane

from ..engine.config import SdpaConfig
from ..engine.process import EngineClient, EngineDied, EngineEvent, EngineProgress, EngineReady, EngineResult
from ..engine.results import Environment, RunResult
from ..engine.runner import RunOptions
from ..engine.timing import TimingOptions
from ..export import render, script
from ..files import atomic_write
from ..presets import Preset, PresetExists, PresetProblem, load_all, save_user
from .commands import ExplorerCommands
from .messages import ConfigEdited, EngineMessage
from .screens import Confirm, ExportDialog, HelpScreen, PresetPicker, SavePreset
from .widgets import (
    AccuracyPane,
    ConfigForm,
    EnvironmentPane,
    GraphPane,
    LatencyPane,
    MaskPane,
    PhasesPane,
    PlansPane,
    StatusLine,
    SummaryPane,
)

DEBOUNCE_S = 0.25  # typing "4096" must not start four builds


def LIVE_TIMING(l2_flush: bool) -> TimingOptions:  # noqa: N802 - a named preset
    """Half the CLI's replays, of ~1 ms each: an edit answers in tens of ms, not a quarter second
    (the profiler's parsing of kernel records is most of a cached run's time)."""
    return TimingOptions(replays=10, target_replay_ms=1.0, l2_flush=l2_flush)


# the tabs, in order; all but Environment render a RunResult
TABS = (
    ("Plans", PlansPane),
    ("Phases", PhasesPane),
    ("Accuracy", AccuracyPane),
    ("Latency", LatencyPane),
    ("Mask", MaskPane),
    ("Environment", EnvironmentPane),
    ("Graph", GraphPane),
)
RESULT_PANES = tuple(pane for _, pane in TABS if pane not in (EnvironmentPane, MaskPane))


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
    ]

    def __init__(
        self,
        config: SdpaConfig | None = None,
        environment_override: Environment | None = None,
        time_limit_s: float = 180.0,
        start_engine: bool = True,
    ) -> None:
        super().__init__()
        self.initial_config = config or SdpaConfig()
        self.environment: Environment | None = None
        self.result: RunResult | None = None
        self.client: EngineClient | None = None
        self.edit_to_result_s: list[tuple[bool, float]] = []  # (cache hit, seconds) of each result shown
        self._environment_override = environment_override
        self._time_limit_s = time_limit_s
        self._start_engine_on_mount = start_engine
        self._latest: int | None = None
        self._submitted_at = 0.0
        self._debounce: Timer | None = None
        self._last_request: tuple[SdpaConfig, RunOptions] | None = None
        self.last_error = ""
        self.presets: dict[str, Preset] = {}
        self.preset_problems: list[PresetProblem] = []

    # ---- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield ConfigForm(self.initial_config, id="form")
            with Vertical(id="right"):
                with VerticalScroll(id="headline"):  # scrolls when a training step's lines outgrow 24 rows
                    yield SummaryPane("waiting for the first result ...", id="summary")
                with TabbedContent(initial="tab-plans", id="tabs"):
                    for title, pane in TABS:
                        name = title.lower()
                        with TabPane(title, id=f"tab-{name}"):
                            yield pane(id=name)
        yield StatusLine(id="status")
        yield Footer(compact=True)

    @property
    def status(self) -> StatusLine:
        return self.query_one(StatusLine)

    @property
    def form(self) -> ConfigForm:
        return self.query_one(ConfigForm)

    def on_mount(self) -> None:
        self.reload_presets()
        self.query_one(MaskPane).show_config(self.initial_config)
        self.status.set("starting the engine process (it loads torch and cuDNN) ...")
        if self._start_engine_on_mount:
            self.call_after_refresh(self.start_engine)

    def start_engine(self) -> None:
        self.client = EngineClient(self._on_engine_event, self._time_limit_s, self._environment_override)
        self.client.start()
        self.action_run()

    def on_unmount(self) -> None:
        if self.client is not None:
            self.client.close()

    # ---- engine events (reader thread -> message -> UI thread) ---------------------------------
    def _on_engine_event(self, event: EngineEvent) -> None:
        self.post_message(EngineMessage(event))

    def on_engine_message(self, message: EngineMessage) -> None:
        event = message.event
        if isinstance(event, EngineReady):
            self._engine_ready(event)
        elif isinstance(event, EngineProgress):
            if event.request_id == self._latest:
                self.status.set(f"{event.text} ...", self.last_error)
        elif isinstance(event, EngineResult):
            self._engine_result(event)
        elif isinstance(event, EngineDied):
            self._engine_died(event)

    def _engine_ready(self, event: EngineReady) -> None:
        self.environment = event.environment
        self.query_one(EnvironmentPane).show(event.environment)
        if not event.environment.gpu_available and not self.last_error.startswith("engine restarted"):
            self.last_error = f"no GPU: {event.environment.unavailable_reason}"
        if self._latest is None:
            self.status.set(f"engine ready in {event.startup_seconds:.1f} s", self.last_error)

    def _engine_result(self, event: EngineResult) -> None:
        if event.request_id != self._latest:
            return  # a configuration the user has already left
        self._latest = None
        self.show_result(event.result)
        self.edit_to_result_s.append((event.result.cache_hit, time.perf_counter() - self._submitted_at))

    def _engine_died(self, event: EngineDied) -> None:
        self._latest = None
        self.last_error = f"engine restarted: {event.reason}"
        self.status.set("the form is as you left it; edit or press Ctrl+R to run again", self.last_error)
        self.notify(
            event.reason + ". A fresh engine process was started.", title="Engine crashed", severity="error"
        )

    # ---- results -----------------------------------------------------------------------------
    def show_result(self, result: RunResult) -> None:
        """Render a RunResult in every pane (also used to show a saved result)."""
        self.result = result
        for pane in (SummaryPane, *RESULT_PANES):
            self.query_one(pane).show(result)
        if result.environment is not None and self.environment is None:
            self.environment = result.environment
            self.query_one(EnvironmentPane).show(result.environment)
        self.query_one("#right").remove_class("-stale")
        if result.status == "error" or result.status == "unsupported":
            self.last_error = result.message
        elif self.environment is not None and not self.environment.gpu_available:
            self.last_error = f"no GPU: {self.environment.unavailable_reason}"
        else:
            self.last_error = ""
        self.status.set(f"{result.status} in {result.wall_seconds:.2f} s", self.last_error)

    # ---- editing -----------------------------------------------------------------------------
    def on_config_edited(self, message: ConfigEdited) -> None:
        with contextlib.suppress(NoMatches):  # a message queued before the screen went away (closing)
            self._config_edited(message)

    def _config_edited(self, message: ConfigEdited) -> None:
        if message.config is not None:
            self.query_one(MaskPane).show_config(message.config)
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        if message.config is None:
            self.query_one("#right").add_class("-stale")
            fields = ", ".join(sorted(message.errors))
            self.status.set(f"not run: fix {fields}; the panes show the last good configuration (stale)")
            return
        options = self._options(message.l2_flush, message.autotune)
        if (message.config, options) == self._last_request:
            self.query_one("#right").remove_class("-stale")
            return  # back to what was last run (or the form's own mount): nothing new to measure
        self._debounce = self.set_timer(DEBOUNCE_S, self.action_run)

    @staticmethod
    def _options(l2_flush: bool, autotune: bool) -> RunOptions:
        return RunOptions(timing=LIVE_TIMING(l2_flush=l2_flush), autotune=autotune)

    def action_run(self) -> None:
        try:
            form = self.form
        except NoMatches:
            return  # a debounce timer firing while the app closes
        config, errors = form.read()
        if config is None:
            form.show_errors(errors)
            self.status.set(f"not run: fix {', '.join(sorted(errors))}")
            return
        if self.client is None:
            return
        options = self._options(form.l2_flush, form.autotune)
        self._last_request = (config, options)
        self._submitted_at = time.perf_counter()
        self._latest = self.client.submit(config, options)
        self.status.set(f"queued {config.label()} ...", self.last_error)

    def set_layout(self, layout: str) -> None:
        self.query_one("#f-layout", Select).value = layout

    def action_toggle_causal(self) -> None:
        select = self.query_one("#f-causal", Select)
        select.value = "none" if select.value != "none" else "top_left"

    def action_toggle_backward(self) -> None:
        switch = self.query_one("#f-backward", Checkbox)
        switch.value = not switch.value

    # ---- presets and exports ---------------------------------------------------------------
    def reload_presets(self) -> None:
        self.presets, self.preset_problems = load_all()
        for problem in self.preset_problems:
            self.notify(str(problem), title="Preset not loaded", severity="warning", timeout=10)

    def action_presets(self) -> None:
        self.push_screen(PresetPicker(self.presets, self.preset_problems), self.load_preset)

    def load_preset(self, preset: Preset | None) -> None:
        if preset is not None:
            self.form.load(preset.config)
            self.status.set(f"preset {preset.name}: {preset.description}", self.last_error)

    def _form_config(self, what: str) -> SdpaConfig | None:
        config, errors = self.form.read()
        if config is None:
            self.notify(f"fix {', '.join(sorted(errors))} first", title=f"Cannot {what}", severity="error")
        return config

    def action_save_preset(self) -> None:
        config = self._form_config("save a preset")
        if config is not None:
            self.push_screen(SavePreset(config.label()), lambda answer: self._save_preset(config, answer))

    def _save_preset(
        self, config: SdpaConfig, answer: tuple[str, str] | None, overwrite: bool = False
    ) -> None:
        if answer is None:
            return
        name, description = answer
        try:
            path = save_user(name, config, description, overwrite=overwrite)
        except PresetExists:
            question = f"You already have a preset named {name!r}. Overwrite it?"
            self.push_screen(Confirm(question), lambda yes: yes and self._save_preset(config, answer, True))
            return
        except ValueError as exc:
            self.push_screen(
                SavePreset(config.label(), str(exc)), lambda again: self._save_preset(config, again)
            )
            return
        except OSError as exc:
            self.notify(f"{exc}", title=f"Preset {name!r} not saved", severity="error")
            return
        self.reload_presets()
        self.notify(str(path), title=f"Saved preset {name!r}")

    def action_export(self) -> None:
        config = self._form_config("export")
        if config is not None:
            has_result = self.result is not None and self.result.config == config
            self.push_screen(ExportDialog(config, has_result), lambda answer: self._export(config, answer))

    def _export(self, config: SdpaConfig, answer: tuple[str, str] | None) -> None:
        if answer is None:
            return
        kind, path = answer
        try:
            text = script(config) if kind == "script" else render(kind, self.result)
            written = atomic_write(Path(path).expanduser(), text)
        except OSError as exc:
            self.notify(f"{path}: {exc.strerror or exc}", title=f"{kind} not written", severity="error")
            return
        self.notify(str(written.resolve()), title=f"Wrote {kind}")

    def action_help(self) -> None:
        focused = self.focused
        bindings = []
        if focused is not None:
            for binding in getattr(focused, "BINDINGS", []):
                if isinstance(binding, Binding) and binding.description:
                    bindings.append((binding.key, binding.description))
        self.push_screen(HelpScreen(bindings))


def make_app(config: SdpaConfig | None = None, **kwargs) -> SdpaExplorerApp:
    """The one way the CLI, the tests and the benchmarks make the dashboard."""
    return SdpaExplorerApp(config, **kwargs)
