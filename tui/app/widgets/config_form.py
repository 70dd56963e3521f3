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
    OUT_DTYPES,
    ConfigError,
    SdpaConfig,
    format_lengths,
    parse_lengths,
    with_lengths,
)
from ...engine.layouts import LAYOUTS
from ..messages import ConfigEdited

INT_FIELDS = ("b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v")
_REQUIRED = object()
# text fields holding numbers: (type, value when blank; None: leave unset, _REQUIRED: an error)
NUMBER_FIELDS = {
    **{name: (int, _REQUIRED) for name in INT_FIELDS},
    "attn_scale": (float, None),
    "window": (int, None),
    "dropout": (float, 0.0),
    "dropout_seed": (int, 0),
}
CAUSAL_LABELS = {"none": "none", "top_left": "top-left", "bottom_right": "bottom-right"}
SELECT_FIELDS = ("dtype", "out_dtype", "layout", "causal", "bias", "implementation")
# on/off fields of the config, each a checkbox with its problem shown below it
SWITCH_FIELDS = {
    "alibi": "ALiBi position biases",
    "backward": "backward: dQ, dK, dV",
    "deterministic": "deterministic backward",
}


class ConfigForm(VerticalScroll):
    """Edits an SdpaConfig; posts ConfigEdited whenever what the form reads changes."""

    def __init__(self, config: SdpaConfig | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._initial = config or SdpaConfig()
        self._posted: tuple | None = None  # what the last ConfigEdited said

    @staticmethod
    def _row(name: str, label: str, widget) -> ComposeResult:
        """One field: its label and widget on a line, and the line for its problem below."""
        with Horizontal(classes="field"):
            yield Label(label, classes="field-label")
            yield widget
        yield Label("", id=f"err-{name}", classes="field-error")

    @staticmethod
    def _select(name: str, options, value) -> Select:
        return Select(options, value=value, allow_blank=False, id=f"f-{name}", compact=True)

    @staticmethod
    def _switch(name: str, value: bool) -> ComposeResult:
        """An on/off field: its checkbox, and the line for its problem below."""
        yield Checkbox(SWITCH_FIELDS[name], value, id=f"f-{name}", compact=True)
        yield Label("", id=f"err-{name}", classes="field-error")

    def compose(self) -> ComposeResult:
        c = self._initial
        for name in INT_FIELDS:
            yield from self._row(
                name, FIELD_LABELS[name], Input(str(getattr(c, name)), id=f"f-{name}", compact=True)
            )
        yield from self._row("dtype", "dtype", self._select("dtype", [(d, d) for d in DTYPES], c.dtype))
        yield from self._row(
            "out_dtype", "out dtype", self._select("out_dtype", [(d, d) for d in OUT_DTYPES], c.out_dtype)
        )
        yield from self._row("layout", "layout", self._select("layout", [(k, k) for k in LAYOUTS], c.layout))
        yield from self._row(
            "causal",
            "causal mask",
            self._select("causal", [(CAUSAL_LABELS[m], m) for m in CAUSAL_MODES], c.causal),
        )
        scale = "" if c.attn_scale is None else repr(c.attn_scale)
        yield from self._row(
            "attn_scale", "scale (blank: 1/√d_qk)", Input(scale, id="f-attn_scale", compact=True)
        )
        window = "" if c.window is None else str(c.window)
        yield from self._row("window", "window (blank: none)", Input(window, id="f-window", compact=True))
        for name in ("seq_lens_q", "seq_lens_kv"):
            widget = Input(
                format_lengths(getattr(c, name)),
                id=f"f-{name}",
                compact=True,
                tooltip="full, random, ratio 0.5, or one length per batch entry: 512,384,...",
            )
            yield from self._row(name, FIELD_LABELS[name], widget)
        yield from self._row("bias", "bias", self._select("bias", [(x, x) for x in BIAS_SHAPES], c.bias))
        yield from self._row(
            "implementation",
            "implementation",
            self._select("implementation", [(x, x) for x in IMPLEMENTATIONS], c.implementation),
        )
        yield from self._switch("alibi", c.alibi)
        yield from self._row(
            "dropout", FIELD_LABELS["dropout"], Input(f"{c.dropout:g}", id="f-dropout", compact=True)
        )
        yield from self._row(
            "dropout_seed",
            FIELD_LABELS["dropout_seed"],
            Input(str(c.dropout_seed), id="f-dropout_seed", compact=True),
        )
        yield from self._switch("backward", c.backward)
        yield from self._switch("deterministic", c.deterministic)
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
        for name, (kind, blank) in NUMBER_FIELDS.items():
            text = self.query_one(f"#f-{name}", Input).value.strip()
            if not text and blank is not _REQUIRED:
                if blank is not None:
                    data[name] = blank
                continue
            try:
                data[name] = kind(text)
            except ValueError:
                what = "a whole number" if kind is int else "a number"
                errors[name] = f"{FIELD_LABELS[name]} must be {what} (got {text!r})"
        for name in SELECT_FIELDS:
            data[name] = self.query_one(f"#f-{name}", Select).value
        for name in SWITCH_FIELDS:
            data[name] = self.query_one(f"#f-{name}", Checkbox).value
        data["heuristics"] = [
            m for m in ("A", "B", "FALLBACK") if self.query_one(f"#f-heur-{m}", Checkbox).value
        ]
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
        """Show `config` in the form. Each field set posts its own change; `_edited` turns them
        into one ConfigEdited, since every one of them reads the same finished form."""
        for name in INT_FIELDS:
            self.query_one(f"#f-{name}", Input).value = str(getattr(config, name))
        for name in SELECT_FIELDS:
            self.query_one(f"#f-{name}", Select).value = getattr(config, name)
        for name in SWITCH_FIELDS:
            self.query_one(f"#f-{name}", Checkbox).value = getattr(config, name)
        self.query_one("#f-attn_scale", Input).value = (
            "" if config.attn_scale is None else repr(config.attn_scale)
        )
        self.query_one("#f-window", Input).value = "" if config.window is None else str(config.window)
        for name in ("seq_lens_q", "seq_lens_kv"):
            self.query_one(f"#f-{name}", Input).value = format_lengths(getattr(config, name))
        self.query_one("#f-dropout", Input).value = f"{config.dropout:g}"
        self.query_one("#f-dropout_seed", Input).value = str(config.dropout_seed)
        for m in ("A", "B", "FALLBACK"):
            self.query_one(f"#f-heur-{m}", Checkbox).value = m in config.heuristics

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
        for name in (*NUMBER_FIELDS, "seq_lens_q", "seq_lens_kv"):
            self.query_one(f"#f-{name}", Input).set_class(name in errors, "-invalid")
        for name in SWITCH_FIELDS:
            self.query_one(f"#f-{name}", Checkbox).set_class(name in errors, "-invalid")
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
        config, errors = self.read()
        state = (config, errors, self.l2_flush, self.autotune)
        if state == self._posted:
            return  # mounting or loading changes every field at once: one message says it all
        self._posted = state
        self.show_errors(errors)
        self.post_message(ConfigEdited(*state))
