"""A process pool started once per process and reused: ordered, bounded maps of chunks over cores.

Why: fingerprinting (and whatever else a collection computes per text) is CPU-bound
Python; threads do not help, processes do, but only when their start-up is paid
once and each task carries enough work to hide the transfer. So:

- one pool per worker count, started on first use and kept until exit
  (:func:`shutdown`); a broken pool (a worker died) is dropped and the error raised,
  the next call starts a new one;
- ``forkserver`` start method where available (else ``spawn``): workers never
  inherit the caller's threads, sockets or database connections. Scripts that use
  it must guard their entry point with ``if __name__ == "__main__":``;
- :func:`imap` keeps at most ``ahead`` chunks in flight and yields results in
  order, so a stream of 10M texts keeps memory flat; a single chunk (a tiny input)
  is done in this process without touching the pool;
- helpers never import from the working directory (:func:`_safe_path_helpers`): a ``struct.py``
  another user left in a shared folder must not run as whoever runs ``simdb add`` there;
- helpers die with their caller (:mod:`simdb.util.helper_exit`): a worker exits as soon as the
  process that made its pool is gone, even killed with SIGKILL, and never holds its stdout;
  the forkserver (which preloads that module) too, and the resource tracker then follows.

The functions and chunks sent must be picklable (module-level functions,
``functools.partial`` of them, plain data).
"""

from __future__ import annotations

import ast
import atexit
import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import lru_cache
from multiprocessing import forkserver
from multiprocessing import util as mp_util
from types import FrameType
from typing import Any, TypeVar

from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.util import helper_exit

__all__ = [
    "MAX_DEFAULT_WORKERS", "check_workers", "default_workers", "imap", "main_is_guarded", "on_worker_start", "pool",
    "shutdown",
]

T = TypeVar("T")
R = TypeVar("R")

#: the default worker count is the usable cores, at most this many
MAX_DEFAULT_WORKERS = 8

_POOLS: dict[int, ProcessPoolExecutor] = {}
_LOCK = threading.Lock()
_END: Any = object()
_WORKER_SETUP: list[Callable[[], None]] = []


def on_worker_start(setup: Callable[[], None]) -> None:
    """Run ``setup()`` once in every worker started from now on, before its first task.

    Why: a cost paid once per process, not per task (the Chinese segmenter's dictionary:
    :mod:`simdb.core.segment` registers its loading here). The pool is plumbing below the
    algorithm, so the algorithm's modules say what a worker loads, not the pool. ``setup`` must be
    a module-level function (it is pickled by name); registering it twice runs it once."""
    with _LOCK:
        if setup not in _WORKER_SETUP:
            _WORKER_SETUP.append(setup)


def default_workers() -> int:
    """The cores this process may use (its CPU affinity), capped at ``MAX_DEFAULT_WORKERS``;
    1 when the main script is unguarded (see :func:`main_is_guarded`)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    if n > 1 and not main_is_guarded():
        return 1
    return max(1, min(n, MAX_DEFAULT_WORKERS))


@lru_cache(maxsize=4)
def _guard_ranges(path: str) -> tuple[tuple[int, int], ...] | None:
    """Line ranges of the ``if __name__ == "__main__":`` blocks of a script (None: unreadable)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    out = []
    for node in tree.body:
        t = node.test if isinstance(node, ast.If) else None
        if (
            isinstance(t, ast.Compare)
            and isinstance(t.left, ast.Name)
            and t.left.id == "__name__"
            and len(t.comparators) == 1
            and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value == "__main__"
        ):
            out.append((node.lineno, node.end_lineno or node.lineno))
    return tuple(out)


def main_is_guarded() -> bool:
    """May workers import this program's main module without re-running its work?

    ``spawn``/``forkserver`` workers import the main script (as ``__mp_main__``);
    a script whose top level is not guarded by ``if __name__ == "__main__":``
    would run again in every worker (its database writes included). So a default
    worker count is only > 1 when there is no main script (REPL, ``-c``,
    notebooks) or this thread's call comes from inside the script's guard block
    (another thread: when the script has a guard block at all).
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return True
    ranges = _guard_ranges(path)
    if not ranges:
        return False
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            return any(a <= frame.f_lineno <= b for a, b in ranges)
        frame = frame.f_back
    return True


def check_workers(workers: Any, name: str = "workers") -> int | None:
    """``workers`` validated: None (the caller's default) or an int >= 1."""
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise InvalidTypeError(f"{name} must be an int or None, got {type(workers).__name__}")
    if workers < 1:
        raise InvalidArgumentError(f"{name} must be >= 1, got {workers}")
    return workers


def _safe_path_helpers() -> None:
    """Make every Python helper multiprocessing starts from now on run with ``-P`` (3.11+).

    Why: the forkserver, the resource tracker and ``spawn`` workers are started as
    ``python <flags> -c "from multiprocessing... import main; ..."``, and ``-c`` puts the working
    directory first on ``sys.path`` before that import runs: whatever ``struct.py``,
    ``select.py``... lies there runs in the helper, as the caller's user (spawned workers only
    get the caller's ``sys.path`` afterwards). The flags come from
    ``multiprocessing.util._args_from_interpreter_flags`` (the caller's ``-E``/``-s``/``-O``...
    are kept); ``-P`` drops only that unsafe first entry, and does it whatever the environment
    says (unlike ``PYTHONSAFEPATH``, which ``-E`` would ignore). Installed for the whole process,
    not around our own start only: multiprocessing restarts a dead forkserver or resource tracker
    by itself, later, and a user's own pool's helpers are safer for it too (their workers still
    get the caller's ``sys.path``, the caller's script folder included).
    """
    flags = mp_util._args_from_interpreter_flags  # type: ignore[attr-defined]  # imported there from subprocess
    if getattr(flags, "_simdb_safe_path", False):
        return

    def args_from_interpreter_flags() -> list[str]:
        args = flags()
        return args if "-P" in args or "-I" in args else [*args, "-P"]

    args_from_interpreter_flags._simdb_safe_path = True  # type: ignore[attr-defined]
    mp_util._args_from_interpreter_flags = args_from_interpreter_flags  # type: ignore[attr-defined]


def _context():
    _safe_path_helpers()
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # the forkserver is shared by the whole process: keep what it preloads already (by default
    # the main module), add the module that makes it exit with this process
    preload = list(getattr(forkserver._forkserver, "_preload_modules", None) or ["__main__"])
    if helper_exit.FORKSERVER_PRELOAD not in preload:
        ctx.set_forkserver_preload([*preload, helper_exit.FORKSERVER_PRELOAD])
    return ctx


def _start_worker(caller_pid: int, setups: tuple[Callable[[], None], ...]) -> None:
    """Worker initializer: exit with the caller (:mod:`simdb.util.helper_exit`); then what
    :func:`on_worker_start` registered (once per worker, not per task)."""
    helper_exit.worker_started(caller_pid)
    for setup in setups:
        setup()


def pool(workers: int) -> ProcessPoolExecutor:
    """The shared pool of ``workers`` processes (started on first use)."""
    with _LOCK:
        ex = _POOLS.get(workers)
        if ex is None:
            ctx = _context()
            ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start_worker,
                                     initargs=(os.getpid(), tuple(_WORKER_SETUP)))
            _POOLS[workers] = ex
        return ex


def _drop(workers: int, ex: ProcessPoolExecutor) -> None:
    with _LOCK:
        if _POOLS.get(workers) is ex:
            del _POOLS[workers]
    ex.shutdown(wait=False, cancel_futures=True)


def shutdown() -> None:
    """Shut down every pool this process started (also done at exit)."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for ex in pools:
        ex.shutdown(wait=True, cancel_futures=True)


atexit.register(shutdown)


def imap(fn: Callable[[T], R], chunks: Iterable[T], workers: int, ahead: int | None = None) -> Iterator[R]:
    """``fn(chunk)`` for every chunk, in order, on ``workers`` processes.

    At most ``ahead`` (default ``2 * workers``) chunks are submitted and not yet
    yielded, so memory stays bounded however long ``chunks`` is. With
    ``workers == 1``, or when ``chunks`` holds a single chunk, everything runs in
    this process. An exception raised by ``fn`` in a worker is raised here, with
    its type and message, when its chunk's turn comes; chunks not yet started
    are cancelled.
    """
    it = iter(chunks)
    first = next(it, _END)
    if first is _END:
        return
    second = next(it, _END) if workers > 1 else _END
    if second is _END:
        yield fn(first)
        for c in it:  # workers == 1
            yield fn(c)
        return
    ahead = max(1, ahead if ahead is not None else 2 * workers)
    ex = pool(workers)
    pending: deque = deque()
    try:
        pending.append(ex.submit(fn, first))
        pending.append(ex.submit(fn, second))
        for c in it:
            while len(pending) >= ahead:
                yield pending.popleft().result()
            pending.append(ex.submit(fn, c))
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        _drop(workers, ex)
        raise
    finally:
        for f in pending:
            f.cancel()
