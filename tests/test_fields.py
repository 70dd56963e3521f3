"""Every configuration field is declared once; the CLI, the form, presets and the README follow."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Checkbox, Input, Select

from tests.pilot_waits import wait_for
from tui.app.widgets.config_form import ConfigForm
from tui.cli.main import main
from tui.model.config import ConfigError, SdpaConfig
from tui.model.fields import (
    FIELD,
    FIELDS,
    GROUPS,
    OPEN_SECTIONS,
    SECTIONS,
    SHORTHANDS,
    Choice,
    Field,
    InputRecipe,
    Lengths,
    Modes,
    Modifier,
    Number,
    Plan,
    Switch,
    Whole,
    config_from_dict,
    from_entries,
)
from tui.model.option_table import option_table, with_option_table
from tui.model.options import options_from
from tui.model.validation import validate
from tui.store.presets import to_toml

ROOT = Path(__file__).resolve().parent.parent
IDS = [f.name for f in FIELDS]


# every field away from its default, and still a sensible configuration
RICH = SdpaConfig(
    b=2,
    h_q=8,
    h_kv=4,
    s_q=512,
    s_kv=2048,
    d_qk=128,
    d_v=96,
    dtype="fp8_e4m3",
    layout="SBHD",
    causal="bottom_right",
    attn_scale=0.125,
    heuristics=("B", "A"),
    plan="1 KERNEL_CFG=27",
    window=64,
    seq_lens_q=(3, 512),
    seq_lens_kv=(5, 2048),
    alibi=True,
    bias="1xh",
    implementation="unified",
    dropout=0.25,
    dropout_seed=9,
    out_dtype="bf16",
    backward=True,
    deterministic=True,
    page_size=16,
    page_order="ordered",
    sink=True,
    softmax_out="stats",
    inputs="seed:3,scale:100,pad:nan",
)
# the one field RICH leaves at its default: cuDNN takes a score modifier beside none of its masks
MODIFIED = SdpaConfig(causal="none", variant="softcap-causal:30,128", backward=True)


def sample(field: Field):
    """A value of the field other than its default, of its own type."""
    if isinstance(field, Switch):
        return not field.default
    if isinstance(field, Choice):
        return next(c for c in reversed(field.choices) if c != field.default)
    if isinstance(field, Modes):
        return tuple(reversed(field.choices))
    if isinstance(field, Lengths):
        return tuple(range(1, SdpaConfig().b + 1))
    if isinstance(field, Number):
        return 0.5
    if isinstance(field, Plan):
        return "1 KERNEL_CFG=27 SPLIT_KV=2"
    if isinstance(field, Modifier):
        return "softcap:30"
    if isinstance(field, InputRecipe):
        return "seed:3,pad:nan"
    return field.meta.get("min", 0) + 1 if field.default is None else field.default + 1


def test_the_declaration_is_complete():
    assert [f.name for f in dataclasses.fields(SdpaConfig)] == IDS
    for f in FIELDS:
        assert f.label and f.help and f.group in GROUPS, f.name
        assert isinstance(
            f, Switch | Choice | Modes | Lengths | Number | Whole | Plan | Modifier | InputRecipe
        )
    assert all(len(names) >= 2 and all(n in FIELD for n in names) for names in SHORTHANDS.values())


@pytest.mark.parametrize("field", FIELDS, ids=IDS)
def test_every_field_has_a_cli_option(field):
    run = main.get_command(None, "run")  # imported when first named
    options = {opt: p.name for p in run.params for opt in (*p.opts, *p.secondary_opts)}
    assert options[field.option] == field.name
    if isinstance(field, Switch):
        assert options[f"--no-{field.option[2:]}"] == field.name


@pytest.mark.parametrize("field", FIELDS, ids=IDS)
def test_every_field_round_trips_through_a_preset(field):
    config = SdpaConfig().replace(**{field.name: sample(field)})
    data = tomllib.loads(to_toml(config))["config"]
    assert data[field.name] is not None
    assert config_from_dict(data) == config
    assert config_from_dict(data).to_dict()[field.name] == data[field.name]


@pytest.mark.parametrize("field", FIELDS, ids=IDS)
def test_text_round_trips(field):
    """What the form shows reads back as the same value, for the default and another value."""
    config = SdpaConfig()
    for value in (field.default, sample(field)):
        assert field.parse(field.format(value), config) == value
    if isinstance(field, Number):
        assert field.parse(field.format(0.08838834764831845)) == 0.08838834764831845


@pytest.mark.parametrize("field", FIELDS, ids=IDS)
def test_a_fields_own_messages_name_it(field):
    wrong = 3 if isinstance(field, Choice | Modes) else "x"
    assert field.label in field.problem(wrong)
    with pytest.raises(ConfigError) as exc:
        config_from_dict({field.name: object()})
    assert field.label in str(exc.value) and exc.value.errors[0].field == field.name
    assert field.problem(field.default) is None and field.problem(sample(field)) is None


def test_limits_are_said_in_words():
    assert FIELD["window"].problem(0) == "sliding window must be at least 1 (got 0)"
    assert FIELD["s_q"].problem(1 << 30) == f"query length (s_q) must be at most {1 << 22} (got {1 << 30})"
    assert FIELD["attn_scale"].problem(0.0) == "attention scale must be a positive number (got 0.0)"
    assert FIELD["attn_scale"].problem(float("inf")) == "attention scale must be a finite number (got inf)"
    assert FIELD["dropout"].problem(1.0) == "dropout probability must be below 1 (got 1.0)"
    assert FIELD["dropout_seed"].problem(-1) == "dropout seed must be at least 0 (got -1)"
    assert FIELD["heuristics"].problem(("A", "A")) == "heuristic modes must not repeat"


def test_entries_blank_means_the_default_except_for_the_shape():
    assert from_entries({"attn_scale": "", "window": " ", "dropout": "", "dropout_seed": ""}) == SdpaConfig()
    with pytest.raises(ConfigError) as exc:
        from_entries({"b": "", "s_q": "1.5", "window": "w"})
    assert {e.field: e.message for e in exc.value.errors} == {
        "b": "batch (b) must be a whole number (got '')",
        "s_q": "query length (s_q) must be a whole number (got '1.5')",
        "window": "sliding window must be a whole number (got 'w')",
    }


def test_entries_read_lengths_against_the_shape_entered_with_them():
    config = from_entries({"b": "2", "s_kv": "100", "seq_lens_kv": "ratio 0.5", "heuristics": "b"})
    assert config.seq_lens_kv == (50, 50) and config.seq_lens_q == (1024, 1024)  # one side: the other full
    assert config.heuristics == ("B",)
    with pytest.raises(ConfigError, match="query lengths: a ratio must be in"):
        from_entries({"seq_lens_q": "ratio 2"})


@pytest.mark.parametrize("lengths", ["random", "ratio 0.5", "1,2"])
@pytest.mark.parametrize("b", [(1 << 16) + 1, 10**9])
def test_lengths_typed_with_a_batch_beyond_its_bound_say_the_batch(b, lengths):
    """Issue 12, item 4: the batch is checked before a length is made for each of its entries."""
    with pytest.raises(ConfigError) as exc:
        from_entries({"b": b, "seq_lens_q": lengths})
    assert [(e.field, e.message) for e in exc.value.errors] == [
        ("b", f"batch (b) must be at most {1 << 16} (got {b})")
    ]
    with pytest.raises(ConfigError) as exc:
        from_entries({"s_kv": "0", "seq_lens_kv": lengths})
    assert [e.field for e in exc.value.errors] == ["s_kv"]


def test_every_whole_number_has_a_documented_upper_bound():
    """Issue 12, item 5: --window 2**63 and --dropout-seed 2**70 were accepted, and 2**100
    overflowed inside the engine."""
    for f in FIELDS:
        if type(f) is Whole:
            assert "max" in f.meta and "≤" in f.accepts(), f.name
    assert FIELD["window"].problem(2**100) == f"sliding window must be at most {1 << 22} (got {2**100})"
    assert FIELD["window"].problem(2**63) and FIELD["dropout_seed"].problem(2**70)
    assert FIELD["dropout_seed"].problem(2**63 - 1) is None


@pytest.mark.parametrize("scale", ["-1", "0", "nan", "inf"])
def test_a_bad_scale_is_said_at_the_option_the_cli_spells(scale):
    """Issue 12, item 14: the message names --scale, the option that exists."""
    from click.testing import CliRunner

    result = CliRunner().invoke(main, ["run", "--scale", scale])
    assert result.exit_code == 2 and "--scale: attention scale must be" in result.output
    assert "--attn-scale" not in result.output


def test_choices_take_the_spellings_people_type():
    dtype, causal, bias = FIELD["dtype"], FIELD["causal"], FIELD["bias"]
    assert (dtype.parse("FP8"), dtype.parse(" BF16 "), causal.parse("Bottom-Right"), bias.parse("b*h")) == (
        "fp8_e4m3",
        "bf16",
        "bottom_right",
        "bxh",
    )
    assert dtype.parse("fp64") == "fp64" and dtype.problem("fp64").startswith("dtype must be one of")


def test_label_tags_come_from_the_declaration():
    """Each field declaring a tag changes the label when set; the others leave it alone."""
    needs = {f.meta["tag_needs"]: True for f in FIELDS if "tag_needs" in f.meta}  # deterministic: backward
    shape = {"b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v", "dtype", "layout"}
    for f in FIELDS:
        base = SdpaConfig() if f.name in needs else SdpaConfig(**needs)
        changed = base.replace(**{f.name: sample(f)}).label() != base.label()
        assert changed == (f.name in shape or "tag" in f.meta), f.name
    assert RICH.label() == (
        "b2 h8/4 s512x2048 d128/96 fp8_e4m3 SBHD causal-br plan[1 KERNEL_CFG=27] win64 varlen alibi bias1xh unified paged16 ordered "
        "sink +stats drop0.25 out-bf16 +bwd-det inputs[seed:3,scale:100,pad:nan]"
    )
    assert SdpaConfig(dtype="fp8_e4m3", out_dtype="fp8_e4m3", deterministic=True).label().endswith("causal")


def test_the_option_table_is_the_declaration():
    readme = (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8")
    assert with_option_table(readme) == readme, (
        "regenerate it: uv run python -m tui.model.option_table docs/CLI.md"
    )
    for f in FIELDS:
        assert f"| `{f.name}` |" in option_table()


def test_the_cli_and_the_form_have_no_code_of_their_own_fields():
    for path in ("tui/cli/main.py", "tui/app/widgets/config_form.py"):
        source = (ROOT / path).read_text(encoding="utf-8")
        for name in ("dropout_seed", "out_dtype", "implementation", "deterministic", "seq_lens_kv"):
            assert name not in source, (path, name)


class FormApp(App):
    """The form alone (without the app's stylesheet: visibility is read from classes)."""

    def compose(self):
        yield ConfigForm(SdpaConfig())


@pytest.mark.asyncio
async def test_every_field_has_a_form_widget_that_loads_and_reads_back():
    assert validate(RICH) == [] and validate(MODIFIED) == []
    assert all(getattr(RICH, f.name) != f.default for f in FIELDS if f.name != "variant")

    app = FormApp()
    async with app.run_test(size=(60, 80)) as pilot:
        form = app.query_one(ConfigForm)
        await wait_for(pilot, lambda: form.made)  # the folded sections, made after the first frame
        for f in FIELDS:
            if isinstance(f, Modes):
                assert all(form.query_one(f"#{f.form_id}-{choice}") for choice in f.choices)
            else:
                assert form.query_one(f"#{f.form_id}")
        assert form.read() == (SdpaConfig(), {})
        form.load(RICH)
        await pilot.pause()
        assert form.read() == (RICH.replace(heuristics=("A", "B")), {})  # the checks read in their order
        form.load(MODIFIED)
        await pilot.pause()
        assert form.read() == (MODIFIED, {})


class LoadedEarly(FormApp):
    """The form, given a configuration and run options before its folded sections are made."""

    OPTIONS = options_from({"peers": ("flex", "fa4"), "regime": "sustained", "autotune": False})

    def on_mount(self) -> None:
        form = self.query_one(ConfigForm)
        self.folded_unmade = not form.made  # made once the first frame is on screen
        form.load(RICH)
        form.load_options(self.OPTIONS)
        self.read_early = (form.read(), form.options)


@pytest.mark.asyncio
async def test_what_is_loaded_before_the_folded_sections_are_made_is_read_and_then_shown():
    """The folded sections' widgets are made after the first frame: until then the form holds their
    values, reads them and takes loads into them, and the widgets, once made, show the same."""
    app = LoadedEarly()
    async with app.run_test(size=(60, 80)) as pilot:
        form = app.query_one(ConfigForm)
        await wait_for(pilot, lambda: form.made)
        assert app.folded_unmade, "the folded sections were made before the first frame"
        expected = ((RICH.replace(heuristics=("A", "B")), {}), app.OPTIONS)
        assert app.read_early == expected, "read while folded and unmade"
        assert (form.read(), form.options) == expected, "read from the widgets made since"
        assert form.query_one("#f-dtype", Select).value == RICH.dtype
        assert form.query_one("#f-page_size", Input).value == str(RICH.page_size)
        assert [form.query_one(f"#f-peer-{k}", Checkbox).value for k in ("flash", "flex", "fa4")] == [
            False,
            True,
            True,
        ]


@pytest.mark.asyncio
async def test_each_fields_problem_shows_right_below_it_and_goes_when_fixed():
    app = FormApp()
    async with app.run_test(size=(60, 80)) as pilot:
        form = app.query_one(ConfigForm)
        form.show_errors({f.name: f"problem of {f.name}" for f in FIELDS})
        await pilot.pause()
        for f in FIELDS:
            line = form.query_one(f"#err-{f.name}")
            assert str(line.render()) == f"problem of {f.name}" and line.has_class("-visible")
            children = list(line.parent.children)  # the field's section
            above = children[children.index(line) - 1]
            assert above.id in (f.form_id, f"row-{f.name}")  # right below the field's widgets
        form.show_errors({"b": "must be a whole number"})
        await pilot.pause()
        assert form.query_one("#err-b").has_class("-visible")
        assert not form.query_one("#err-h_q").has_class("-visible")  # the app's stylesheet hides it
        form.show_errors({"b-memory": "needs 3 GB"})  # a problem of no one field: below the form
        await pilot.pause()
        assert not form.query_one("#err-b").has_class("-visible")
        assert str(form.query_one("#err-b-memory").render()) == "needs 3 GB"


@pytest.mark.asyncio
async def test_the_forms_sections_fold_and_a_field_reached_opens_its_own():
    """Shape and masks open at first, the rest folded; a field focused (by its name, as F6 back to the
    form or a key does, or by any other path) or showing a problem opens its section."""
    from textual.widgets import Collapsible

    app = FormApp()
    async with app.run_test(size=(60, 40)) as pilot:
        form = app.query_one(ConfigForm)
        sections = {s.id.removeprefix("section-"): s for s in form.query(Collapsible)}
        assert list(sections) == list(SECTIONS)
        assert [name for name, s in sections.items() if not s.collapsed] == list(OPEN_SECTIONS)
        assert all(FIELD[f.name].group in sections for f in FIELDS)
        form.focus_field("page_size")
        await pilot.pause()
        assert app.focused is form.query_one("#f-page_size") and not sections["inference"].collapsed
        form.focus_field("heuristics")  # a row of ticks: its first
        await pilot.pause()
        assert app.focused is form.query_one("#f-heur-A") and not sections["timing"].collapsed
        form.query_one("#f-peer-flash").focus()  # any path to a field
        await pilot.pause()
        assert not sections["peers"].collapsed
        form.show_errors({"dropout_seed": "dropout seed must be at least 0 (got -1)"})
        await pilot.pause()
        assert not sections["precision"].collapsed and form.query_one("#err-dropout_seed").region.height
