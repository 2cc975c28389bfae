"""Pid files under an ``flock`` (simdb.util.pid_files): what a reader gets back is safe to signal.

The bug this guards: "held, pid not written yet" used to be ``-1``, and a test that passed it to
``os.kill`` signalled every process the CI runner could reach. A reader now gets a positive pid,
None (nobody holds the lock), or :data:`UNREADABLE`, which is not an int at all.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from simdb.embedded import life
from simdb.util.pid_files import UNREADABLE, locked_pid, open_pid_file

#: holds the lock on the file argv[1] (inherited descriptor semantics are not needed: its own open)
HOLDER = (
    "import fcntl, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


def held_by_another(path: Path, content: bytes):
    path.write_bytes(content)
    os.chmod(path, 0o600)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("content", [b"", b"0", b"-1", b"12x", b"   "])
def test_a_held_lock_without_a_positive_pid_reads_as_unreadable_never_an_int(tmp_path, content):
    path = tmp_path / "lock"
    proc = held_by_another(path, content)
    try:
        got = locked_pid(open_pid_file(str(path)))
        assert got is UNREADABLE and not isinstance(got, int)
        with pytest.raises(TypeError):
            os.kill(got, 0)  # type: ignore[arg-type]  # the point: it can never reach a process
    finally:
        proc.kill()
        proc.wait()


def test_a_held_lock_names_its_pid_and_a_free_one_names_nobody(tmp_path):
    path = tmp_path / "lock"
    proc = held_by_another(path, b"4242")
    try:
        assert locked_pid(open_pid_file(str(path))) == 4242
    finally:
        proc.kill()
        proc.wait()
    fd = open_pid_file(str(path))
    assert locked_pid(fd) is None
    fd = open_pid_file(str(path))  # the check released the lock it took
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_the_reaper_is_named_by_its_pid_as_soon_as_it_is_spawned(tmp_path, monkeypatch):
    """ensure_reaper writes the child's pid itself: no window in which the lock is held but the
    file is empty, however long the reaper's own imports take."""
    spawned = []
    real_popen = subprocess.Popen

    def slow_reaper(argv, **kwargs):  # a reaper that never writes its pid: only the spawner can
        proc = real_popen([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)
        spawned.append(proc)
        return proc

    monkeypatch.setattr(life.subprocess, "Popen", slow_reaper)
    home = tmp_path / "home"
    (home / "pgdata").mkdir(parents=True)
    (home / life.REAPER_LOCK).write_text("999999")  # a stale pid from an earlier reaper
    try:
        life.ensure_reaper(home / "pgdata")
        assert spawned
        assert life.reaper_pid(home) == spawned[0].pid
    finally:
        for proc in spawned:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert life.reaper_pid(home) is None
