"""Fuzzing the engine server's environment variables, in this process: whatever
SDPA_EXPLORER_SERVER_IDLE and SDPA_EXPLORER_RUNTIME_DIR hold (relative paths, links, odd text,
huge numbers), reading them raises nothing but ServerUnavailable, and nothing is made outside the
folder they name.

CI runs a small derandomized budget (about 2 s). The long run, 10,000 examples a test:
  SDPA_FUZZ=long uv run pytest -n 0 tests/test_fuzz_server.py
"""

from __future__ import annotations

import math
import os
import tempfile

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from test_fuzz import FUZZ, HUGE

from tui.process import server_client

# what an environment can hold: no NUL, no lone surrogate but the ones a byte decodes to
ENV_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
NUMBERS = st.floats().map(repr) | st.integers().map(str) | HUGE.map(str) | st.floats(-1e7, 1e7).map(str)
TYPED_IDLE = st.sampled_from(
    ["inf", "-inf", "nan", "NaN", "1e309", "-1e309", "-0", "0", "1_000", "0x10", "١٢", " 5 ", "5s", "",
     "9" * 5000, "1e-400", "604800", "604800.5", "-1", "\udcff", "10 minutes", "+7", "1e6"]
)  # fmt: skip
IDLE = TYPED_IDLE | NUMBERS | ENV_TEXT
# a runtime folder's path, relative to a folder four down in a temporary one (so four '..' stay in
# it): links to a folder, dangling ones, a file, a folder others may write, odd and long names
PARTS = st.sampled_from(["link", "dangling", "file", "shared", "..", ".", "", "~", "rt", "x" * 300]) | (
    ENV_TEXT.filter(lambda t: "/" not in t)
)
# never empty (the real default folder) nor absolute (outside): the test makes some absolute in it
RUNTIME = st.lists(PARTS, min_size=1, max_size=4).map("/".join).filter(lambda p: p and p[0] != "/")


@pytest.fixture
def quiet(monkeypatch, capsys):
    """What the tests read: stderr, and no hash of the package's files (ms an example)."""
    monkeypatch.setattr(server_client, "server_key", lambda: "0123456789abcdef")  # the files' hash
    return capsys


@FUZZ
@given(IDLE)
def test_an_idle_value_reads_as_seconds_a_server_can_wait(quiet, monkeypatch, text):
    monkeypatch.setattr(server_client, "_warned", set())  # a launch of its own
    monkeypatch.setenv(server_client.ENV_IDLE, text)
    idle = server_client.idle_seconds()
    assert math.isfinite(idle) and 0 <= idle <= server_client.MAX_IDLE_S
    assert server_client.unavailable() in ("", f"turned off ({server_client.ENV_IDLE}=0)")
    said = quiet.readouterr().err.splitlines()  # of two reads, one line at most
    event("warned" if said else "read")
    assert len(said) <= 1 and all(server_client.ENV_IDLE in line and len(line) < 200 for line in said)
    assert not said or idle == server_client.DEFAULT_IDLE_S


@FUZZ
@given(RUNTIME, st.booleans())
def test_a_runtime_folder_reads_as_one_of_ours_or_is_refused(quiet, monkeypatch, name, absolute):
    with tempfile.TemporaryDirectory(prefix="sdpa-fz-") as top:
        here = os.path.join(top, "a", "b", "c", "d")
        os.makedirs(here)
        os.symlink(top, os.path.join(here, "link"))
        os.symlink(os.path.join(top, "nowhere"), os.path.join(here, "dangling"))
        open(os.path.join(here, "file"), "w").close()
        os.mkdir(os.path.join(here, "shared"), 0o777)
        os.chmod(os.path.join(here, "shared"), 0o777)
        monkeypatch.chdir(here)
        monkeypatch.setenv(server_client.ENV_FOLDER, os.path.join(here, name) if absolute else name)
        where = server_client.folder()
        assert where.is_absolute()
        try:
            path, lock = server_client.paths()
        except server_client.ServerUnavailable as exc:
            event("refused")
            assert str(exc)
        else:
            event("used")
            assert os.path.isabs(path) and os.path.dirname(path) == os.path.dirname(lock)
            assert len(os.fsencode(path)) <= server_client.SOCKET_PATH_MAX
            assert not os.stat(os.path.dirname(path)).st_mode & 0o022
        answers, refused = server_client.ask_all("status", wait_s=1.0)
        assert answers == [] and all(isinstance(line, str) for line in refused)
        monkeypatch.chdir(top)
        assert os.path.realpath(where).startswith(os.path.realpath(top)) or not os.path.lexists(where)
