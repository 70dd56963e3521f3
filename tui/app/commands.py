"""The command palette's entries: run, every pane (Explain and Search among them), a knob search and
pinning its best, every preset, dtype and layout, toggle causal or the backward pass, tick or untick
every peer (Quit is the palette's own)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..model.fields import FIELD
from ..model.layouts import LAYOUTS
from ..model.options import PEER_KEYS
from .navigation import pane_key


class ExplorerCommands(Provider):
    def _commands(self) -> list[tuple[str, object, str]]:
        app = self.app
        cmds = [
            ("Run again", app.action_run, "rebuild nothing, run and measure the current configuration"),
            ("Toggle causal mask", app.action_toggle_causal, "none <-> top-left causal"),
            (
                "Toggle backward pass",
                app.action_toggle_backward,
                "forward only <-> training step (dQ, dK, dV)",
            ),
            ("Help", app.action_help, "what each pane means"),
            ("Presets ...", app.action_presets, "pick a model's shape"),
            ("Save preset ...", app.action_save_preset, "save the form as your preset"),
            ("Export ...", app.action_export, "reproduction script, JSON or CSV"),
            ("Peers: tick all", partial(app.set_peers, PEER_KEYS), "time every peer beside cuDNN (GPU only)"),
            ("Peers: untick all", partial(app.set_peers, ()), "time cuDNN alone"),
            (
                "Search: start",
                app.searches.start_shown,
                "a knob search of the form's configuration (the Search pane)",
            ),
            (
                "Search: pin the best found",
                app.searches.pin_best,
                "into the form's pinned plan; Ctrl+S keeps it",
            ),
        ]
        for name, preset in sorted(app.presets.items()):
            cmds.append((f"Preset: {name}", partial(app.keeping.load_preset, preset), preset.description))
        from .panes import TABS

        for i, title in enumerate(tab.title for tab in TABS):
            cmds.append(
                (
                    f"Pane: {title}",
                    partial(app.action_show_pane, i),
                    f"show the {title} pane ({pane_key(i)})",
                )
            )
        for dtype in FIELD["dtype"].choices:
            cmds.append((f"Dtype: {dtype}", partial(app.set_dtype, dtype), f"q, k, v in {dtype}"))
        for layout in LAYOUTS:
            cmds.append(
                (f"Layout: {layout}", partial(app.set_layout, layout), f"store q, k, v, o as {layout}")
            )
        return cmds

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
