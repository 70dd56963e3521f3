"""The dashboard's and the CLI's own process never import torch: torch loads in the engine
process (forked from a server that imported it once), and what comes back over the pipe is plain
data. Importing torch costs seconds of CPU; the UI paying it again would double its start-up."""

import dataclasses
import pickle
import subprocess
import sys

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


def _python(code: str, stdin: bytes = b"") -> str:
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return done.stdout.decode().strip().splitlines()[-1]


def test_the_environment_carries_plain_strings():
    """torch.__version__ is a TorchVersion: kept as it is, its unpickling imports torch."""
    env = collect()
    for f in dataclasses.fields(Environment):
        value = getattr(env, f.name)
        assert value is None or type(value) in (str, int, bool), (f.name, type(value))
    assert type(env.torch_version) is str


def test_an_environment_from_the_engine_leaves_torch_out_of_the_ui():
    received = pickle.dumps(dataclasses.asdict(collect()))  # as the engine sends it
    assert _python(UNPICKLE, received) == "light"


def test_run_leaves_torch_in_the_engine_process():
    """End to end: the environment, the result and every event the engine sends are plain data."""
    assert _python(RUN) == "light"


def test_env_asks_the_engine_process_and_leaves_torch_there():
    """`env` prints what the engine process sees, the JSON it always printed, and its own process
    never imports torch (seconds of a launch, where the engine server holds it imported)."""
    import json

    said = json.loads(_python(ENV))
    assert said["heavy"] == []
    assert said["env"] == dataclasses.asdict(collect())


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
        "plotext", "sqlite3", *(f"tui.app.widgets.{m}" for m in ("peers", "phases", "accuracy", "latency",
        "mask", "environment", "graph_json", "sweep", "explain", "history", "search")))
print(" ".join(m for m in late if m in sys.modules) or "light")
"""


def test_the_dashboards_start_imports_only_what_its_first_screen_needs():
    """The engine's GPU code, help's Markdown parser, the charts, the run history's database and
    the modules of the panes not yet shown are imported when first needed."""
    assert _python(START) == "light"
