"""What the dashboard's parts (the form's runs, the sweep, search, hunt and explain drivers, the history
keeper) need of the app that holds them: its engine client and scheduler, its form, status line
and panes, and the few things it does for all of them. The App is one (app.py); a part is given
it when made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.timer import Timer
    from textual.widget import Widget

    from ..jobs.scheduler import Scheduler
    from ..model.config import SdpaConfig
    from ..model.options import RunOptions
    from ..model.results import Environment, RunResult
    from ..model.search_results import SearchResult
    from ..process.client import EngineClientProtocol
    from ..store.presets import Preset, PresetProblem
    from .widgets import ConfigForm, StatusLine


class KeepsRuns(Protocol):
    loaded_preset: Preset | None

    def keep_run(self, result: RunResult) -> None: ...


class AsksWhenFree(Protocol):
    def next(self) -> None: ...


class Host(Protocol):
    client: EngineClientProtocol | None
    scheduler: Scheduler
    environment: Environment | None
    engine_started: bool
    last_request: tuple[SdpaConfig, RunOptions] | None
    search_result: SearchResult | None
    result: RunResult | None
    presets: dict[str, Preset]
    preset_problems: list[PresetProblem]
    focused: Widget | None
    screen_stack: list[Any]
    screen: Any
    latency_history: Any  # latency_history.LatencyHistory
    restarts: tuple[int, str]
    mask_config: tuple[SdpaConfig, int]
    keeper: KeepsRuns
    explains: AsksWhenFree

    @property
    def form(self) -> ConfigForm: ...
    @property
    def status(self) -> StatusLine: ...
    def pane(self, name: str) -> Widget | None: ...
    def query_one(self, selector: Any, expect_type: Any = None) -> Any: ...
    def live_options(self, options: RunOptions) -> RunOptions: ...
    def cancel_pending_run(self) -> None: ...
    def action_run(self) -> None: ...
    def keep_crash(self, result: RunResult) -> None: ...
    def no_gpu_reason(self) -> str: ...
    def draw_shown(self) -> None: ...
    async def show_pane(self, tab: str) -> Widget | None: ...
    def notify(self, message: str, **kwargs: Any) -> None: ...
    def show_result(self, result: RunResult) -> None: ...
    def run_worker(self, work: Any, **kwargs: Any) -> Any: ...
    def call_from_thread(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    def set_timer(self, delay: float, callback: Any) -> Timer: ...
    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...
