"""F1: the app's keys first, what a machine without a GPU can show, what each pane means, how to
read kernel time, and last the keys of what has focus. On a machine without a usable GPU, what it
can show comes first, with the reason."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

INTRO = """\
# cuDNN SDPA Explorer

Esc, F1 or q closes this help.

Edit the configuration on the left. A moment after an edit that validates, the engine
process rebuilds the cuDNN graph, runs it on the GPU and checks it; the panes show what it
measured. A field that does not validate is marked at the field, and the panes keep the
last good results under a STALE badge.

## Keys
"""

HELP = """\
## Without a GPU
The engine still asks cuDNN: the frontend's `validate()` runs without a GPU and gives its
real messages, and Phases, Graph and Mask show what it built. Problems small enough (at most
4 GFLOP a pass; a larger batch is checked on the first entries that fit) are also computed by
torch on the CPU, and Accuracy shows that reference
beside torch's own SDPA. Kernel times, plans, peers and Latency need the GPU: they stay
empty (the Peers pane says the peers ticked were not run), and Environment says why there is
no GPU.

"""

PANES = """\
## Panes
- **Phases**: the frontend's build calls, each timed. `validate` is a Python check,
  `build_operation_graph` does nothing for SDPA, `create_execution_plans` lowers and asks the
  heuristic, `build_plans` compiles. A cache hit means the graph was built earlier.
- **Plans**: every candidate plan of each pass (the forward; the backward of a training step),
  a table a pass with its own autotune verdict. `H` the heuristic's pick, `*` the fastest
  measured. *from* says where a plan comes from: `backend` (an engine of the cuDNN library),
  `open-source` (one of the frontend's Python engines), `delegated` (heuristic mode OPENSOURCE
  left the pick to the backend). Select a row for its knobs, workspace, notes and timing detail.
- **Peers**: other attention implementations, ticked in the form's *peers* section (or
  `--peers` on the CLI), each run on the same tensors, timed like a cuDNN plan and
  checked against the same fp32 reference: torch's SDPA forced to **FLASH** (FlashAttention-2),
  **EFFICIENT** (the memory-efficient kernel), **CUDNN** (cuDNN's own kernel through torch: its
  time shows torch's part) and **MATH** (unfused); **Flex** (FlexAttention, compiled: the
  compile time is apart from the kernel time); **FA3** and **FlashInfer** where installed. The
  first row is cuDNN's heuristic pick (`H`; `*` the fastest plan, its own row when it is
  another); *cuDNN speed* is a row's kernel time over the pick's (above 1: cuDNN is faster).
  The chart draws each kernel time; one over 10x the pick's is named under it instead. A peer
  that cannot run the configuration says why; peers are timed on the GPU only, for the forward.
- **Accuracy**: every output of every pass (O; dQ, dK, dV of a backward) against fp32 math
  on the same logical tensors (explicit mask, GQA expanded; autograd for the gradients, same
  dO): cuDNN's max abs / max rel / mean abs error, then each peer's (torch's SDPA forced to a
  backend that is not cuDNN, FLASH, else EFFICIENT, else MATH, named in its row) on the same
  inputs, each output with its atol. With FP8: the recipe, the scales each
  graph read, and the amax it wrote beside the reference's.
- **Latency**: kernel time of each pass in each run since the app started, and per plan now
  (a later pass's plans labelled by its short name, `bwd`); every sample of every plan as a
  strip (% off its median, `!` an unstable plan), and the GPU around each figure: clocks,
  power against the limit, temperature, throttle reasons, the share of time capped.
- **Regime**: every kernel time says how it was taken. *burst*: a short run on a rested GPU
  (published tables); *sustained*: after 2 s of load (a training step at the power limit).
- **Mask**: which scores the configuration keeps (causal band, sliding window, real lengths),
  per batch entry, downsampled to the pane. With a paged KV cache, the page table under it: a
  row a sequence (the selected batch entry's highlighted), each cell the pool page of a block of
  page-size tokens (`·` past the sequence's real length), and the pages held against a dense
  cache; with packed tokens (THD), the bytes saved against padding.
- **Environment**: GPU, driver, CUDA, torch, cuDNN (as the frontend loaded it and as torch
  reports it), frontend; or why there is no GPU.
- **Graph**: each pass's graph as cuDNN describes it (JSON), one below the other.
- **Sweep**: the form's configuration, with its timing and peers, at every point of one or two
  varies typed as `sweep --vary` takes them (`s=1024..32768x2`, `d=64,128`; a second vary runs
  every combination); Start or Enter in a vary runs the points one at a time. A row a point
  (the varied values, status, kernel time, TFLOPS, share of the GPU's peak, each peer's time with
  cuDNN's speed against it), the same figures as the CLI's rows; a chart of TFLOPS along the
  first vary (TB/s when every point has one query), a line for cuDNN's pick (`H`), its fastest
  plan (`*`) where that is another, each peer that ran and the GPU's dense peak. While it runs,
  edits to the form wait (the form runs when it ends), the other panes keep the form's result,
  and Esc stops it after the point under way (Esc again: that point too).
- **Explain**: why cuDNN refuses the form's configuration, asked while the pane is shown (after
  the form's run; the engine process asks, so nothing waits on cuDNN here): a grid of every
  implementation under every heuristic mode (`✓ n plans`, `✓ validate()` where there is no GPU
  to ask further, or `✗` who refused and the refusal's number: `rules` this tool's, `validate`
  the frontend's, `backend` cuDNN's, `open-source` the frontend's Python engines); each refusal in
  full; the versions and architectures refusals name against what is installed; and the nearest
  configurations that work, with their run commands. Enter on one puts its edit into the form
  (the rest of the form stays as it is) and the form runs. A run cuDNN refuses points here.
"""

HISTORY = """\
- **History**: every run kept (the dashboard's and the CLI's), newest first; type to filter by
  label, preset, status, GPU or version. Enter reopens a run into the panes (nothing runs until
  you edit or press Ctrl+R); space marks a run, and `c` compares the two marked: each plan's
  kernel time with the change in %, errors, and the versions that differ.
- **Search**: a knob search of the form's configuration, as `search` makes it: within the budget
  (`60s`, `2m`), every candidate plan beyond the heuristic's list is built, checked against the
  fp32 reference and timed (a GPU is needed). Start or Enter in the budget; the line names each
  candidate and the best so far; Esc or Cancel stops it at the next candidate, keeping what it
  found, and the form's edits wait for its end. Then the heuristic's pick against the best found
  and the fastest peer (the gain in %), the counts, the engines searched and those cuDNN's knob
  query refused, a chart of time along the best engine's main knob (`x` failed the check: never
  the winner; `H` the heuristic's; `◆` the best) and the fastest candidates. `p` or Pin best puts
  the best found into the form's *pinned plan*, which runs it; Ctrl+S keeps it in a preset. The
  Plans pane lists the finds that passed after the heuristic's plans, marked `S`.
- **Hunt**: a hunt for wrong answers, as `hunt` makes it: within the budget (`6m`), random
  configurations with hazards (a seed draws the same ones; a focus such as `paged,backward` turns
  features on in every draw) are run with every output checked against fp32 and fp64; each failure
  is shrunk to the smallest configuration that fails the same way and shown once as it comes
  (whose bug, the failure, its signature, how often it was seen). Esc stops it, keeping them; its
  bundles are written when it ends. Enter on a finding loads its minimal configuration into the form.
"""

TRAINING = """\
## Training step and FP8
- **out dtype**: O's dtype; `auto` is the inputs'. Only FP8 inputs may choose another
  (fp16/bf16 O from FP8 inputs is Blackwell-only; Hopper refuses it).
- **backward**: the forward also writes the softmax stats, then a second graph gives dQ, dK,
  dV. The headline shows the backward's kernel time, TFLOPS (2.5x the forward's FLOPs), the
  step (forward + backward) and the gradients' verdict.
- **deterministic backward**: asks cuDNN for a deterministic algorithm (backward only); two
  executions are compared bit for bit.

## Kernel time and host overhead
**Kernel time** is GPU time only: N executions captured in a CUDA graph, replayed, and the
kernels' durations read from CUPTI. **Host overhead** is the CPU time of one `execute()`
call (16-28 µs): an eager framework pays it per layer, and for small problems it exceeds
the kernel. That is why an event pair around one `execute()` is never used. With **flush
L2**, a buffer twice the L2 size is written before every execution (cold cache).

TFLOPS count only the scores the mask keeps: 2·b·h_q·kept·(d_qk + d_v).
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, focused_bindings: list[tuple[str, str]], no_gpu: str = "") -> None:
        super().__init__()
        self.focused_bindings = focused_bindings
        self.no_gpu = no_gpu  # why this machine has no usable GPU ("" where it has one)

    def compose(self) -> ComposeResult:
        from ..navigation import pane_key
        from ..panes import TABS

        keys = [
            "| key | does |",
            "| --- | --- |",
            f"| Alt+1 … Alt+{min(9, len(TABS))} | show a pane: {', '.join(tab.title for tab in TABS[:9])} |",
            *(
                f"| {pane_key(i)} | show the {title} pane |"
                for i, title in enumerate(tab.title for tab in TABS)
                if i >= 9
            ),
            "| F6 | from the form to the pane on show, and back to the field you left |",
            "| Esc | stop the running work at its next step; a sweep after its point under way (again: "
            "that point too); a knob search at its next candidate; a hunt after its run under way |",
            "| Enter (in a Sweep vary) | start the sweep: the form's configuration at every point |",
            "| Enter (in the Search budget) | start a knob search of the form's configuration |",
            "| p (in the Search pane) | pin the best found into the form's pinned plan |",
            "| Enter (in a Hunt input / on a finding) | start a hunt / load the finding's minimal configuration |",
            "| Ctrl+R | run the current configuration again (during a sweep: once it ends) |",
            "| Ctrl+O | presets: filter as you type, Enter loads and runs |",
            "| Ctrl+S | save the form as your preset |",
            "| Ctrl+E | export: reproduction script, JSON or CSV |",
            "| Ctrl+P | command palette: run, panes, presets, dtypes, layouts, toggle causal or backward, "
            "tick or untick every peer, export, quit |",
            "| F1 | this help |",
            "| Ctrl+Q | quit |",
            "| Tab / Shift+Tab | move between fields and panes |",
        ]
        focused = ["", "## Keys of the focused field", "", "| key | does |", "| --- | --- |"]
        focused += [f"| {k} | {d} |" for k, d in self.focused_bindings]
        intro, keys_text = INTRO.split("## Keys")[0], "## Keys\n" + "\n".join(keys) + "\n\n"
        if self.no_gpu:  # what this machine can show first, and why
            intro += f"This machine has no usable GPU ({self.no_gpu}).\n\n"
            text = intro + HELP + keys_text + PANES + HISTORY + TRAINING
        else:
            text = intro + keys_text + HELP + PANES + HISTORY + TRAINING
        if self.focused_bindings:
            text += "\n".join(focused)
        with VerticalScroll(id="help-body"):
            yield Markdown(text)
