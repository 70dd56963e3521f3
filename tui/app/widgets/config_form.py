"""The configuration form: every field validated as typed, the problem shown at the field."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Checkbox, Input, Label, Select

from ...engine.config import (
    BIAS_SHAPES,
    CAUSAL_MODES,
    DTYPES,
    FIELD_LABELS,
    IMPLEMENTATIONS,
    ConfigError,
    SdpaConfig,
    format_lengths,
    parse_lengths,
    with_lengths,
)
from ...engine.layouts import LAYOUTS
from ..messages import ConfigEdited

INT_FIELDS = ("b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v")
CAUSAL_LABELS = {"none": "none", "top_left": "top-left", "bottom_right": "bottom-right"}


class ConfigForm(VerticalScroll):
    """Edits an SdpaConfig; posts ConfigEdited on every change."""

    def __init__(self, config: SdpaConfig | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._initial = config or SdpaConfig()
        self._loading = False

    def compose(self) -> ComposeResult:
        c = self._initial
        for name in INT_FIELDS:
            with Horizontal(classes="field"):
                yield Label(FIELD_LABELS[name], classes="field-label")
                yield Input(str(getattr(c, name)), id=f"f-{name}", compact=True)
            yield Label("", id=f"err-{name}", classes="field-error")
        with Horizontal(classes="field"):
            yield Label("dtype", classes="field-label")
            yield Select([(d, d) for d in DTYPES], value=c.dtype, allow_blank=False, id="f-dtype", compact=True)
        with Horizontal(classes="field"):
            yield Label("layout", classes="field-label")
            yield Select([(k, k) for k in LAYOUTS], value=c.layout, allow_blank=False, id="f-layout", compact=True)
        with Horizontal(classes="field"):
            yield Label("causal mask", classes="field-label")
            yield Select([(CAUSAL_LABELS[m], m) for m in CAUSAL_MODES], value=c.causal, allow_blank=False,
                         id="f-causal", compact=True)
        yield Label("", id="err-causal", classes="field-error")
        with Horizontal(classes="field"):
            yield Label("scale (blank: 1/√d_qk)", classes="field-label")
            yield Input("" if c.attn_scale is None else repr(c.attn_scale), id="f-attn_scale", compact=True)
        yield Label("", id="err-attn_scale", classes="field-error")
        with Horizontal(classes="field"):
            yield Label("window (blank: none)", classes="field-label")
            yield Input("" if c.window is None else str(c.window), id="f-window", compact=True)
        yield Label("", id="err-window", classes="field-error")
        for name in ("seq_lens_q", "seq_lens_kv"):
            with Horizontal(classes="field"):
                yield Label(FIELD_LABELS[name], classes="field-label")
                yield Input(format_lengths(getattr(c, name)), id=f"f-{name}", compact=True,
                            tooltip="full, random, ratio 0.5, or one length per batch entry: 512,384,...")
            yield Label("", id=f"err-{name}", classes="field-error")
        with Horizontal(classes="field"):
            yield Label("bias", classes="field-label")
            yield Select([(x, x) for x in BIAS_SHAPES], value=c.bias, allow_blank=False, id="f-bias", compact=True)
        with Horizontal(classes="field"):
            yield Label("implementation", classes="field-label")
            yield Select([(x, x) for x in IMPLEMENTATIONS], value=c.implementation, allow_blank=False,
                         id="f-implementation", compact=True)
        yield Checkbox("ALiBi position biases", c.alibi, id="f-alibi", compact=True)
        for name, value in (("dropout", c.dropout), ("dropout_seed", c.dropout_seed)):
            with Horizontal(classes="field"):
                yield Label(FIELD_LABELS[name], classes="field-label")
                yield Input(f"{value:g}" if name == "dropout" else str(value), id=f"f-{name}", compact=True)
            yield Label("", id=f"err-{name}", classes="field-error")
        yield Label("heuristic modes", classes="section-label")
        with Horizontal(classes="checks"):
            for mode in ("A", "B", "FALLBACK"):
                yield Checkbox(mode, mode in c.heuristics, id=f"f-heur-{mode}", compact=True)
        yield Label("", id="err-heuristics", classes="field-error")
        yield Label("timing", classes="section-label")
        yield Checkbox("flush L2 before each execution", False, id="f-l2_flush", compact=True)
        yield Checkbox("time every plan (autotune)", True, id="f-autotune", compact=True)
        yield Label("", id="err-b-memory", classes="field-error")

    # ---- reading and writing ------------------------------------------------------------
    def read(self) -> tuple[SdpaConfig | None, dict[str, str]]:
        """The config the form shows, or None with the problem of each bad field."""
        data: dict = {}
        errors: dict[str, str] = {}
        for name in INT_FIELDS:
            text = self.query_one(f"#f-{name}", Input).value.strip()
            try:
                data[name] = int(text)
            except ValueError:
                errors[name] = f"{FIELD_LABELS[name]} must be a whole number (got {text!r})"
        for name in ("dtype", "layout", "causal", "bias", "implementation"):
            data[name] = self.query_one(f"#f-{name}", Select).value
        data["alibi"] = self.query_one("#f-alibi", Checkbox).value
        window = self.query_one("#f-window", Input).value.strip()
        if window:
            try:
                data["window"] = int(window)
            except ValueError:
                errors["window"] = f"sliding window must be a whole number or blank (got {window!r})"
        for name, kind in (("dropout", float), ("dropout_seed", int)):
            text = self.query_one(f"#f-{name}", Input).value.strip() or "0"
            try:
                data[name] = kind(text)
            except ValueError:
                errors[name] = f"{FIELD_LABELS[name]} must be a number (got {text!r})"
        scale = self.query_one("#f-attn_scale", Input).value.strip()
        if scale:
            try:
                data["attn_scale"] = float(scale)
            except ValueError:
                errors["attn_scale"] = f"attention scale must be a number (got {scale!r})"
        data["heuristics"] = [m for m in ("A", "B", "FALLBACK") if self.query_one(f"#f-heur-{m}", Checkbox).value]
        if errors:
            return None, errors
        try:
            config = SdpaConfig.from_dict(data)
        except ConfigError as exc:
            return None, {e.field: e.message for e in exc.errors}
        lens: dict = {}
        for name, size in (("seq_lens_q", config.s_q), ("seq_lens_kv", config.s_kv)):
            try:
                lens[name] = parse_lengths(self.query_one(f"#f-{name}", Input).value, config.b, size)
            except ValueError as exc:
                errors[name] = str(exc)
        if errors:
            return None, errors
        config = with_lengths(config, lens["seq_lens_q"], lens["seq_lens_kv"])
        problems = config.validate(self.app_gpu_memory())
        if problems:
            merged: dict[str, str] = {}
            for e in problems:
                merged[e.field] = f"{merged[e.field]}; {e.message}" if e.field in merged else e.message
            return None, merged
        return config, {}

    def app_gpu_memory(self) -> int | None:
        env = getattr(self.app, "environment", None)
        return env.gpu_memory_bytes if env is not None and env.gpu_available else None

    @property
    def l2_flush(self) -> bool:
        return self.query_one("#f-l2_flush", Checkbox).value

    @property
    def autotune(self) -> bool:
        return self.query_one("#f-autotune", Checkbox).value

    def load(self, config: SdpaConfig) -> None:
        """Show `config` in the form (one ConfigEdited follows, not one per field)."""
        self._loading = True
        try:
            for name in INT_FIELDS:
                self.query_one(f"#f-{name}", Input).value = str(getattr(config, name))
            for name in ("dtype", "layout", "causal", "bias", "implementation"):
                self.query_one(f"#f-{name}", Select).value = getattr(config, name)
            self.query_one("#f-attn_scale", Input).value = "" if config.attn_scale is None else repr(config.attn_scale)
            self.query_one("#f-window", Input).value = "" if config.window is None else str(config.window)
            for name in ("seq_lens_q", "seq_lens_kv"):
                self.query_one(f"#f-{name}", Input).value = format_lengths(getattr(config, name))
            self.query_one("#f-alibi", Checkbox).value = config.alibi
            self.query_one("#f-dropout", Input).value = f"{config.dropout:g}"
            self.query_one("#f-dropout_seed", Input).value = str(config.dropout_seed)
            for m in ("A", "B", "FALLBACK"):
                self.query_one(f"#f-heur-{m}", Checkbox).value = m in config.heuristics
        finally:
            self._loading = False
        self.call_after_refresh(self._edited)

    def show_errors(self, errors: dict[str, str]) -> None:
        shown = set()
        for label in self.query(".field-error").results(Label):
            field = (label.id or "").removeprefix("err-")
            if field == "b-memory":
                continue
            message = errors.get(field, "")
            if message:
                shown.add(field)
            label.update(message)
            label.set_class(bool(message), "-visible")
        for name in INT_FIELDS + ("attn_scale", "window", "seq_lens_q", "seq_lens_kv", "dropout", "dropout_seed"):
            self.query_one(f"#f-{name}", Input).set_class(name in errors, "-invalid")
        rest = [m for f, m in errors.items() if f not in shown]
        other = self.query_one("#err-b-memory", Label)
        other.update("\n".join(rest))
        other.set_class(bool(rest), "-visible")

    # ---- events -------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._edited()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._edited()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self._edited()

    def _edited(self) -> None:
        if self._loading:
            return
        config, errors = self.read()
        self.show_errors(errors)
        self.post_message(ConfigEdited(config, errors))
