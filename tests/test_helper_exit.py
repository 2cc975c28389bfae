"""Helpers die with their parent (issue 29, item 1): a load killed with SIGKILL leaves no process behind.

The processes a run leaves are found by a marker in their environment (the forkserver, the
pool workers and the resource tracker inherit it; /proc/PID/environ shows it), so the count
does not depend on knowing how multiprocessing arranges them. Before the fix the forkserver,
two workers and the resource tracker were still alive minutes after the kill, and a
``subprocess.run(capture_output=True)`` of the killed process waited for them forever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from cli_support import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc")

# the killed process's helpers get this long to notice; the wait ends as soon as none is left. The
# issue's target was "0 alive 5 s later", but a deadline that tight is a speed assertion that a loaded
# 2-core CI machine can miss (each helper's watcher thread polls, then exits); before the fix they
# were still alive minutes later, which 30 s tells apart as well
GRACE_S = 30.0


def _marked(marker: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state != b"Z":
            found.append(int(entry))
    return found


def _left_after_grace(marker: bytes) -> list[int]:
    """The marked processes still alive once GRACE_S has passed (returns as soon as there are none)."""
    deadline = time.monotonic() + GRACE_S
    while (alive := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _described(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append(f"{pid}: {f.read()[:120]!r}")
        except OSError:
            pass
    return out


def _reap(pids: list[int]) -> None:
    for pid in pids:  # a failing run must not leave its orphans to the rest of the suite
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _env(marker: str) -> dict:
    return dict(os.environ, SIMDB_TEST_HELPER_MARK=marker, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))


ADD_MANY = textwrap.dedent("""
    import os, signal, sys
    from simdb import SimhashIndex

    def items():
        for i in range(2_000_000):
            if i == 50_000:  # mid-load: two chunks sent to the pool, COPY streaming
                os.kill(os.getpid(), signal.SIGKILL)
            yield f"k{i}", f"text number {i} about {i % 977} things and {i % 13} more words"

    if __name__ == "__main__":
        print("loading", flush=True)
        SimhashIndex(sys.argv[1], collection=sys.argv[2]).add_many(items(), workers=2)
""")


def test_add_many_killed_leaves_no_helper_and_releases_its_stdout(tmp_path: Path, database_url, collection_name):
    marker = f"helper-{uuid.uuid4().hex}"
    env_marker = f"SIMDB_TEST_HELPER_MARK={marker}".encode()
    script = tmp_path / "load.py"
    script.write_text(ADD_MANY)
    try:
        # capture_output: returns only once every holder of the pipes is gone (before the fix: never)
        try:
            done = subprocess.run([sys.executable, str(script), database_url, collection_name], capture_output=True,
                                  env=_env(marker), timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the load or its helpers still hold its stdout: {_described(_marked(env_marker))}")
        assert done.returncode == -signal.SIGKILL, done.stderr.decode(errors="replace")
        assert done.stdout == b"loading\n"
        assert _described(_left_after_grace(env_marker)) == []
    finally:
        _reap(_marked(env_marker))


MANY = textwrap.dedent("""
    from simdb.core.fingerprint import Fingerprinter

    if __name__ == "__main__":
        texts = [f"text number {i} about {i % 977} things" for i in range(100_000)]
        fp = Fingerprinter()
        fp.many(texts, workers=2)
        print("pool started", flush=True)
        while True:
            fp.many(texts, workers=2)
""")


def test_fingerprinting_killed_from_outside_leaves_no_helper(tmp_path: Path):
    marker = f"helper-{uuid.uuid4().hex}"
    script = tmp_path / "many.py"
    script.write_text(MANY)
    env_marker = f"SIMDB_TEST_HELPER_MARK={marker}".encode()
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=_env(marker))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"pool started\n"
        helpers = [p for p in _marked(env_marker) if p != proc.pid]
        assert len(helpers) >= 3  # forkserver, 2 workers (and the resource tracker): what must go
        proc.kill()
        proc.wait()
        assert _described(_left_after_grace(env_marker)) == []
        assert proc.stdout.read() == b""  # end of file: no helper holds the pipe
    finally:
        proc.kill()
        proc.wait()
        _reap(_marked(env_marker))
