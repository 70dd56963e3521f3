"""The dashboard's and the CLI's own process never import torch: torch loads in the engine
process (forked from a server that imported it once), and what comes back over the pipe is plain
data. Importing torch costs seconds of CPU; the UI paying it again would double its start-up."""

import dataclasses
import json
import pickle
import subprocess
import sys

import pytest

from tui.engine.environment import collect
from tui.model.results import Environment

# what the dashboard and the CLI import, then what an engine's "ready" brings, unpickled as the
# client does; the parent's stdin carries the pickle
UNPICKLE = """
import pickle, sys
import tui.app, tui.cli.main, tui.process.client, tui.process.session
from tui.model.results import Environment
env = Environment(**pickle.loads(sys.stdin.buffer.read()))
assert type(env.torch_version) is str, type(env.torch_version)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "cudnn"))
print(" ".join(heavy[:5]) or "light")
"""

# the CLI's `run` as a user types it, through the real engine process, then what the parent holds
RUN = """
import sys
from click.testing import CliRunner
from tui.cli.main import main
r = CliRunner().invoke(main, ["run", "--no-check", "--b", "1", "--h", "2", "--s", "64", "--d", "64", "--json"])
assert r.exit_code == 0, r.output
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "cudnn"))
print(" ".join(heavy[:5]) or "light")
"""


# `env` as a user types it: what the engine process sees, told by it, and what this process imported
ENV = """
import json, sys
from click.testing import CliRunner
from tui.cli.main import main
r = CliRunner().invoke(main, ["env", "--json"])
assert r.exit_code == 0, r.output
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "cudnn"))
print(json.dumps({"env": json.loads(r.output), "heavy": heavy[:5]}))
"""


def _python(code: str, stdin: bytes = b"", timeout: float = 120) -> str:
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return done.stdout.decode().strip().splitlines()[-1]


# the snippets in turn in one fresh interpreter, each with its own stdin and globals: its words are
# its last line of output, or how it failed
IN_TURN = """
import contextlib, io, json, sys, traceback, types
said = {}
for name, code, stdin in json.loads(sys.stdin.read()):
    out = io.StringIO()
    sys.stdin = types.SimpleNamespace(buffer=io.BytesIO(bytes.fromhex(stdin)))
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, name, "exec"), {"__name__": "__main__"})
        said[name] = (out.getvalue().strip().splitlines() or [""])[-1]
    except BaseException:
        said[name] = "failed: " + traceback.format_exc()[-3000:]
print(json.dumps(said))
"""


@pytest.fixture(scope="module")
def said() -> dict[str, str]:
    """What each snippet says, all run in one fresh interpreter (its start, the package's imports
    and a fork server importing torch for the engine cost seconds each, once): the checks of what
    is not imported yet come first (the dashboard's start, the command group), the commands that
    import more after them."""
    received = pickle.dumps(dataclasses.asdict(collect()))  # as the engine sends it
    steps = [("start", START, b""), ("group", GROUP, b""), ("unpickle", UNPICKLE, received),
             ("run", RUN, b""), ("env", ENV, b"")]  # fmt: skip
    return json.loads(_python(IN_TURN, json.dumps([(n, c, i.hex()) for n, c, i in steps]).encode(), 300))


def test_the_environment_carries_plain_strings():
    """torch.__version__ is a TorchVersion: kept as it is, its unpickling imports torch."""
    env = collect()
    for f in dataclasses.fields(Environment):
        value = getattr(env, f.name)
        assert value is None or type(value) in (str, int, bool), (f.name, type(value))
    assert type(env.torch_version) is str


def test_an_environment_from_the_engine_leaves_torch_out_of_the_ui(said):
    assert said["unpickle"] == "light"


def test_run_leaves_torch_in_the_engine_process(said):
    """End to end: the environment, the result and every event the engine sends are plain data."""
    assert said["run"] == "light"


def test_env_asks_the_engine_process_and_leaves_torch_there(said):
    """`env` prints what the engine process sees, the JSON it always printed, and its own process
    never imports torch (seconds of a launch, where the engine server holds it imported)."""
    env = json.loads(said["env"])
    assert env["heavy"] == []
    assert env["env"] == dataclasses.asdict(collect())


def test_the_dashboard_starts_the_fork_server_first(monkeypatch):
    """Torch loads in the fork server while Textual and the app import in this process."""
    from click.testing import CliRunner

    import tui.app
    from tui.cli.main import main
    from tui.process import launcher

    calls = []

    class App:
        def run(self):
            calls.append("run")

    monkeypatch.setattr(launcher, "warm", lambda: calls.append("warm"))
    monkeypatch.setattr(tui.app, "make_app", lambda config, opened=None: calls.append("make_app") or App())
    r = CliRunner().invoke(main, [])
    assert r.exit_code == 0, r.output
    assert calls == ["warm", "make_app", "run"]


# what the dashboard's start needs not: the engine's measurement code (it only sends options), and
# the help screen's Markdown parser (imported when F1 is first pressed)
START = """
import asyncio, sys
from tui.app import make_app
from tui.model.config import SdpaConfig
async def main():
    app = make_app(SdpaConfig(), start_engine=False)
    async with app.run_test(size=(120, 40)):
        pass  # the first screen is painted
asyncio.run(main())
late = ("tui.engine.runner", "tui.engine.measure", "tui.engine.graph", "tui.engine.cpu", "markdown_it",
        "plotext", "sqlite3", "tui.jobs.sweep", "tui.present.report", *(f"tui.app.widgets.{m}" for m in (
        "peers", "phases", "accuracy", "latency", "mask", "environment", "graph_json", "sweep", "explain",
        "history", "search", "hunt")))
print(" ".join(m for m in late if m in sys.modules) or "light")
"""


def test_the_dashboards_start_imports_only_what_its_first_screen_needs(said):
    """The engine's GPU code, help's Markdown parser, the charts, the run history's database, the
    sweep's grid, the report's renderings and the modules of the panes not yet shown are imported
    when first needed."""
    assert said["start"] == "light"


# the command group alone, as the dashboard (no command) starts: a command's module is imported
# when the command is named
GROUP = """
import sys
from click.testing import CliRunner
from tui.cli.main import main
before = sorted(m for m in sys.modules if m.startswith("tui.cli.") and m != "tui.cli.main")
r = CliRunner().invoke(main, ["env", "--help"])
assert r.exit_code == 0 and "tui.cli.env" in sys.modules and "tui.cli.run" not in sys.modules, r.output
print(" ".join(before) or "light")
"""


def test_the_command_group_imports_a_command_when_it_is_named(said):
    assert said["group"] == "light"
