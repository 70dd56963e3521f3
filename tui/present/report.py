"""Rich renderings of engine records for the terminal (the CLI's report and `show`).

The report is the summary, then each pass's build phases, plans and output checks, in the
order the passes ran; units and words come from tui.present.format, shared with the dashboard.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from ..engine.environment import describe
from ..model.fastest import declined
from ..model.results import (
    PLAN_SOURCES,
    Environment,
    Fp8Scaling,
    PassResult,
    PlanResult,
    RunResult,
    TimingStats,
)
from .fastest import fastest_lines
from .format import (
    PEER_COLUMNS,
    finding_rows,
    format_bytes,
    gpu_rows,
    l2_words,
    ms,
    multiple,
    no_telemetry_words,
    pass_note,
    pass_title,
    peer_error_label,
    peer_errors,
    peer_speedup,
    peer_standing,
    peers_unrun,
    plan_mark,
    plan_marks,
    regime_note,
    regime_style,
    repeat_words,
    run_note,
    sample_rows,
    sci,
    seconds,
    status_style,
    status_word,
    step_regime,
    step_words,
    timing_text,
    us,
    verdict_words,
)
from .peer_steps import step_table
from .tables import FIGURE, NAME, WORDS, FitTable


def phases_table(p: PassResult, cache_hit: bool = False) -> FitTable:
    """A pass's build phases, each with what it really does in the installed frontend."""
    title = f"{pass_title(p.kind)} build phases" + (" (cache hit: built earlier)" if cache_hit else "")
    table = FitTable(title=title)
    table.add_column("phase", NAME)
    table.add_column("time", FIGURE)
    table.add_column("what it does here", WORDS, drop=0)
    for ph in p.phases:
        table.add_row(
            Text(ph.name),
            ms(ph.seconds),
            Text(ph.error if not ph.ok else ph.note),
            style=None if ph.ok else "red",
        )
    if p.phases:
        table.add_row("total", ms(sum(ph.seconds for ph in p.phases)), "", style="bold")
    return table


# Where a plan comes from (results.PLAN_SOURCES), as a plans table's short column says it and in full
PLAN_SOURCE_WORDS = dict(
    zip(
        PLAN_SOURCES,
        (
            ("backend", "an engine of the cuDNN backend library"),
            ("open-source", "one of the cuDNN frontend's open-source (Python) engines"),
            ("delegated", "left to the backend's heuristics: its own pick among engines it does not list"),
        ),
        strict=True,
    )
)


def plan_source_short(source: str) -> str:
    """A plan's source in a table's column: one word (a source this tool does not know, as given)."""
    return PLAN_SOURCE_WORDS.get(source, (source, source))[0]


def plan_source_words(source: str) -> str:
    """A plan's source in full, for a detail or a legend."""
    return PLAN_SOURCE_WORDS.get(source, (source, source))[1]


def plan_source_legend(plans: tuple[PlanResult, ...]) -> str:
    """What the sources a table shows mean, each once, in the order they first appear."""
    sources = dict.fromkeys(p.source for p in plans)
    return "; ".join(f"{plan_source_short(s)} = {plan_source_words(s)}" for s in sources)


def plans_table(p: PassResult) -> FitTable:
    """Every candidate plan of a pass; with several outputs the error column is the worst of them."""
    what = (
        f"; max abs err: the largest of {', '.join(c.output for c in p.checks)}" if len(p.checks) > 1 else ""
    )
    regime = f"; kernel time {p.timing.regime}" if p.timing is not None and p.timing.regime else ""
    title = f"{pass_title(p.kind)} plans ({plan_marks(p.plans)}{what}{regime})"
    legend = f"from: {plan_source_legend(p.plans)}"
    table = FitTable(title=title, caption=legend, caption_justify="left", key_words="plan")
    # the notes, then the knobs (the plan's name says them), then the source leave first
    for col, kind, drop in (
        ("#", FIGURE, None), ("", NAME, None), ("plan", NAME, None), ("from", NAME, 2), ("engine", FIGURE, None),
        ("knobs", WORDS, 1), ("workspace", FIGURE, None), ("build", FIGURE, None), ("kernel time", FIGURE, None),
        ("TFLOPS", FIGURE, None), ("max abs err", FIGURE, None), ("notes", WORDS, 0),
    ):  # fmt: skip
        table.add_column(col, kind, drop=drop)
    for plan in p.plans:
        mark = plan_mark(plan)
        err = sci(plan.max_abs_error)
        if plan.matches is False:
            err = f"[red]{err} FAIL[/red]"
        # what a result file says is shown as written, never read as markup
        notes = Text(", ".join(plan.behavior_notes)) if plan.built else Text(plan.build_error, style="red")
        table.add_row(
            str(plan.index), mark, Text(plan.name), plan_source_short(plan.source),
            "-" if plan.engine_id is None else str(plan.engine_id),
            Text(" ".join(f"{k}={v}" for k, v in plan.knobs.items())),
            "-" if plan.workspace_bytes is None else format_bytes(plan.workspace_bytes),
            ms(plan.build_seconds), plan_time(plan.timing),
            f"{plan.tflops:.1f}" if plan.tflops else "-", err, notes,
        )  # fmt: skip
    return table


def plan_time(t: TimingStats | None) -> str:
    """A plan's kernel time in its table; a figure that did not hold still is marked."""
    if t is None:
        return "-"
    return us(t.median_us) + (" [yellow]unstable[/yellow]" if t.stable is False else "")


def checks_table(p: PassResult) -> FitTable:
    """Each output of a pass against the reference: cuDNN's error, then each peer's on the same inputs."""
    device = f" on {p.check_device}" if p.check_device else ""
    title = f"{pass_title(p.kind)} outputs against {p.reference or 'the reference'}{device}"
    table = FitTable(title=title, key=1, caption_justify="left")
    for col in ("output", "by", "atol", "rtol", "max abs", "max rel", "mean abs", "nonfin", "verdict"):
        table.add_column(col, NAME if col in ("output", "by") else FIGURE)
    for i, c in enumerate(p.checks):
        crossed = [
            (who, m) for who, m in (("cuDNN vs fp64", c.fp64), ("fp32 ref vs fp64", c.reference_fp64)) if m
        ]
        rows = [("cuDNN", c.cudnn), *c.peers.items(), *crossed]  # the fp64 cross-check, where asked
        for j, (who, m) in enumerate(rows):
            verdict = verdict_words(m)
            if m is not None and not m.passed:
                verdict = f"[red]{verdict}[/red]"
            cells = (sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs), str(m.nonfinite)) if m else ("-",) * 4
            table.add_row(Text(c.output) if j == 0 else "", Text(who), f"{c.atol:.2e}" if j == 0 else "",
                          f"{c.rtol:g}" if j == 0 else "", *cells, verdict,
                          end_section=j == len(rows) - 1 and i < len(p.checks) - 1)  # fmt: skip
    caption = [f"{name}: {what}" for name, what in p.peers.items()] + list(p.notes)
    if caption:
        table.caption = Text("; ".join(caption))
    return table


def peers_table(p: PassResult) -> FitTable | Text:
    """The peers asked for, on the same tensors: kernel time, TFLOPS, cuDNN's speed against each,
    the error of O, compile time; or why a peer did not run (one line when none ran for one reason)."""
    if peers_unrun(p):
        return Text(peers_unrun(p), style="yellow")
    cudnn = "cuDNN did not run it" if declined(p) else "cuDNN: the heuristic's pick"
    table = FitTable(title=f"{pass_title(p.kind)} peers ({cudnn})", key_words="peer")
    for col in PEER_COLUMNS:
        title = peer_error_label(p) if col == "max abs O" else col
        kind = NAME if col == PEER_COLUMNS[0] else WORDS if col == PEER_COLUMNS[-1] else FIGURE
        table.add_column(title, kind, drop=0 if kind == WORDS else None)
    errors = peer_errors(p)
    for peer in p.field_peers:
        m = errors.get(peer.name)
        speed = peer_speedup(p, peer)
        verdict = verdict_words(m) if m is not None else "-"
        what = Text(peer.description if peer.ran else peer.reason, style=None if peer.ran else "yellow")
        if peer.timing_method:
            what.append(f"; timed by {peer.timing_method}", style="dim")
        table.add_row(
            Text(peer.name),
            plan_time(peer.timing),
            f"{peer.tflops:.1f}" if peer.tflops else "-",
            multiple(speed),
            sci(m.max_abs) if m else "-",
            verdict if m is None or m.passed else f"[red]{verdict}[/red]",
            seconds(peer.compile_seconds),
            what,
        )
    return table


def fp8_text(fp8: Fp8Scaling, kind: str) -> str:
    """The scales an FP8 graph read and the amax it wrote, each amax beside the reference's maximum."""
    scales = ", ".join(f"{k} {v:.4g}" for k, v in fp8.scales.items())
    amax = ", ".join(
        f"{k} {v:.4g}" + (f" (reference max {fp8.reference_amax[k]:.4g})" if k in fp8.reference_amax else "")
        for k, v in fp8.amax.items()
    )
    return f"\n{kind} FP8 scales: {scales or '-'}\n{kind} FP8 amax: {amax or '-'}"


def rows_words(rows: list[tuple[str, str]]) -> str:
    return "; ".join(f"{name} {value}" for name, value in rows)


def measurement_text(t: TimingStats, k: str, env: Environment | None) -> Text:
    """How a figure was taken, for a result that says (schema 2.1): its samples, the GPU around it
    (or why nothing was read), and the replay's disagreement with the kernel sum."""
    text = Text()
    if not t.regime:
        return text  # an older file: it recorded none of this
    text.append(f"\n{k} " + rows_words(sample_rows(t)), style="yellow" if t.stable is False else None)
    if t.telemetry is None:
        text.append(f"\n{k} {no_telemetry_words(env)}", style="dim")
    else:
        text.append(f"\n{k} GPU " + rows_words(gpu_rows(t.telemetry)))
    if t.cross_check:
        text.append(f"\n{k} cross-check: {t.cross_check}", style="yellow")
    return text


def outputs_text(p: PassResult) -> Text:
    """Whether cuDNN's outputs are within tolerance, naming them; nothing where none was checked."""
    if p.passed is None:
        return Text()
    return Text(
        f"  {'outputs pass' if p.passed else 'outputs FAIL'} ({', '.join(c.output for c in p.checks)})",
        style="green" if p.passed else "bold red",
    )


def kernel_time_text(p: PassResult, t: TimingStats, env: Environment | None) -> Text:
    """A timed pass's lines: kernel time and how it was taken, time in a graph, host overhead, TFLOPS."""
    k = p.kind
    text = Text(f"\n{k} kernel time {timing_text(t)}")
    text.append(regime_note(t), style=regime_style(t))
    text.append(f" via {t.method}; L2 {l2_words(t)}")
    if t.replay_us is not None:
        text.append(f"\n{k} GPU time per call in a CUDA graph {us(t.replay_us)}")
    text.append_text(measurement_text(t, k, env))
    text.append(f"\n{k} host overhead per execute() {us(p.host_overhead_us)}")
    if p.tflops:
        bandwidth = f", {p.bandwidth_gbs:.0f} GB/s of minimum I/O" if p.bandwidth_gbs else ""
        regime = f" ({t.regime})" if t.regime else ""
        text.append(f"\n{k} {p.tflops:.1f} TFLOPS{bandwidth}{regime}")
    return text


def pass_text(p: PassResult, run_message: str, env: Environment | None = None) -> Text:
    """One pass's lines of the summary: status, FLOPs, kernel time, TFLOPS, autotune, repeatability, FP8."""
    k = p.kind
    text = Text(f"\n{k} ", style="bold")
    text.append(status_word(p.status), style=status_style(p.status))
    text.append_text(outputs_text(p))
    rule = f" ({p.flops_rule})" if p.flops_rule else " (kept scores only)"
    text.append(f"\n{k} FLOPs {p.flops / 1e9:.2f} G{rule}, I/O {format_bytes(p.io_bytes)}")
    if p.timing:
        text.append_text(kernel_time_text(p, p.timing, env))
    if p.autotune_verdict():
        text.append(f"\n{k} autotune: {p.autotune_verdict()}")
    if peer_standing(p):
        text.append(f"\n{k} against peers: {peer_standing(p)} (their kernel time over cuDNN's)")
    for words, style in fastest_lines(p):
        text.append(f"\n{k} {words}", style=style)
    if p.deterministic or p.repeatable is not None:
        text.append(
            f"\n{k}: {repeat_words(p)}", style="red" if p.deterministic and p.repeatable is False else None
        )
    if p.fp8 is not None:
        text.append(fp8_text(p.fp8, k))
    words, style = pass_note(p, run_message)
    if words:
        text.append(f"\n{k}: {words}", style=style)
    return text


def summary_text(result: RunResult) -> Text:
    c = result.config
    text = Text()
    text.append(f"{c.label()}  ", style="bold")
    text.append(status_word(result.status), style=status_style(result.status))
    text.append(f"  on {result.device or '-'}")
    for p in result.passes:
        text.append_text(pass_text(p, result.message, result.environment))
    step = step_words(result)
    if step:
        text.append(f"\n{step}")
        text.append(*step_regime(result.passes))
    recipes = {p.fp8.recipe for p in result.passes if p.fp8 is not None}
    for recipe in recipes:
        text.append(f"\nFP8 recipe: {recipe}", style="dim")
    words, style = run_note(result)  # none for a crash: its words are in the Finding table
    if words:
        text.append(f"\n{words}", style=style)
    return text


def result_renderable(result: RunResult) -> Group:
    """The CLI's report: the summary, then each pass's phases, plans and output checks."""
    parts: list = [summary_text(result)]
    findings = finding_rows(result, long=True)
    if findings:
        table = FitTable(title="Finding", show_header=False)
        table.add_column("what", NAME, style="bold red" if result.crash else "bold yellow")
        table.add_column("value", WORDS)
        for name, words in findings:
            table.add_row(Text(name), Text(words))  # CUDA's words may hold brackets: never markup
        parts.append(table)
    if result.errors:
        parts.append(Text("\n".join(f"  {e['field']}: {e['message']}" for e in result.errors), style="red"))
    for p in result.passes:
        if p.phases:
            parts.append(phases_table(p, cache_hit=result.cache_hit))
        if p.plans:
            parts.append(plans_table(p))
        if p.checks:
            parts.append(checks_table(p))
        if p.field_peers:
            parts.append(peers_table(p))
        elif p.notes and not p.checks:  # with checks, the checks table's caption holds them
            parts.append(Text("; ".join(p.notes), style="yellow"))
    step = step_table(result)  # the training step against the peers: forward + backward each
    if step is not None:
        parts.append(step)
    return Group(*parts)


def environment_table(env: Environment) -> FitTable:
    table = FitTable(title="Environment", show_header=False)
    table.add_column("what", NAME)
    table.add_column("value", WORDS)
    for key, value in describe(env):
        table.add_row(key, Text(value or "-"), style="yellow" if key == "GPU unavailable" else None)
    return table
