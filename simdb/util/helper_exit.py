"""Helper processes (pool workers, the forkserver) end when the process that started them is gone.

Why: a process killed with SIGKILL in the middle of ``add_many(workers=N)`` (a watchdog, the
OOM killer) would otherwise leave its forkserver, pool workers and resource tracker running for
good, holding its stdout. Each waits on the others: a worker blocks on its task
queue forever and holds the write end of the forkserver's "alive" pipe (and of the resource
tracker's), so neither of those ever sees end-of-file. Ending the workers breaks the chain:

- a pool worker (:func:`worker_started`, the pool's initializer) watches the process that
  made the pool and exits as soon as it is gone; under the forkserver it also asks the kernel
  for SIGKILL when the forkserver dies (``PR_SET_PDEATHSIG``: no thread or GIL needed). It gets
  ``/dev/null`` as stdin, stdout and stderr (its results and errors travel back by pipe), so
  it never holds the caller's streams;
- the forkserver imports this module as a preload (:data:`FORKSERVER_PRELOAD`) and then watches
  its parent the same way: when it exits, the kernel kills its workers;
- the resource tracker exits by itself once the last of them has closed its pipe.

The watch is a daemon thread polling a pidfd (Linux >= 5.3: readable once the process has
exited, even before it is reaped; no confusion with a reused PID), else ``kill(pid, 0)``
every quarter second. ``PR_SET_PDEATHSIG`` is not used towards the caller itself: it fires
when the *thread* that started the child exits, and the caller's pools may be started from a
short-lived thread (a web server's request thread).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading

__all__ = ["FORKSERVER_PRELOAD", "watch_process", "worker_started"]

#: the module the forkserver imports at its start (``set_forkserver_preload``)
FORKSERVER_PRELOAD = __name__

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.25


def _die() -> None:
    os._exit(1)  # not SystemExit: nothing of a dead caller's work is worth finishing


def _watch(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = -1
    if fd < 0:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                _die()
            except OSError:
                pass  # EPERM: alive, someone else's (cannot happen for our own parent)
            threading.Event().wait(_POLL_S)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll():
        pass
    _die()


def watch_process(pid: int) -> None:
    """End this process (``os._exit(1)``) once process ``pid`` has exited; returns at once."""
    if pid == os.getpid():
        return
    threading.Thread(target=_watch, args=(pid,), name=f"simdb-watch-{pid}", daemon=True).start()


def _parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent's starting thread exits."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _release_std_streams() -> None:
    """``/dev/null`` as fds 0, 1 and 2: a helper never keeps the caller's pipes open."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    if null > 2:
        os.close(null)


def worker_started(caller_pid: int) -> None:
    """In a new pool worker: exit with the process ``caller_pid`` that made the pool (see module doc)."""
    parent = os.getppid()
    if parent != caller_pid and _parent_death_signal(signal.SIGKILL) and os.getppid() != parent:
        _die()  # the forkserver died before the signal was armed
    _release_std_streams()
    watch_process(caller_pid)


def _imported_by_forkserver() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


if _imported_by_forkserver():  # the forkserver's preload (see module doc); a plain import does nothing
    watch_process(os.getppid())
