"""What the CLI tests share: how to run the ``simdb`` command, and the sample texts."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

from simdb.cli.main import main

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample"
LION = SAMPLE / "originals" / "04-the-lion-and-the-mouse.txt"
LION_TYPO = SAMPLE / "variants" / "lion-and-mouse.typo.txt"
WOLF = SAMPLE / "originals" / "01-the-wolf-and-the-lamb.txt"


def simdb_argv() -> list[str]:
    """The installed console script, or ``python -m simdb.cli`` where there is none."""
    script = Path(sys.executable).parent / "simdb"
    return [str(script)] if script.exists() else [sys.executable, "-m", "simdb.cli"]


def base_env(**extra) -> dict:
    """The environment without any SIMDB_* variable of the caller's, plus ``extra``.

    The embedded server stops as soon as its last client exits (``SIMDB_EMBEDDED_IDLE=0``) unless
    ``extra`` says otherwise: a test's server must not outlive it by the default minute."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_")}
    env["SIMDB_EMBEDDED_IDLE"] = "0"
    env.update(extra)
    return env


def popen_interruptible(argv: list, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(argv, ...)`` whose process takes Ctrl-C (SIGINT) as at a terminal.

    Why: a suite started in the background by a non-interactive shell (a CI runner's ``cmd &``)
    runs with SIGINT ignored, children inherit that through exec, and Python then installs no
    KeyboardInterrupt handler: the tests that interrupt the CLI would test the launcher. A
    signal the parent *handles* is reset to its default in the child, so the handler is set
    around the spawn only (main thread; thread-safe, unlike ``preexec_fn``)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


def run_in_process(argv: list, *, env: dict | None = None, input: str | bytes | None = None, cwd=None,
                   text: bool = True) -> subprocess.CompletedProcess:
    """``simdb ARGV`` run by :func:`simdb.cli.main.main` in this process, answered as ``subprocess.run`` would.

    Why: a ``simdb`` subprocess spends about a second importing SQLAlchemy, psycopg and numpy
    before it does anything, and most CLI tests check what a command answers (its output, exit
    status and one-line errors, all made by ``main``), not how a process starts or dies; those
    that do (signals, the console script, the embedded server's lifetime) keep ``simdb_argv()``.
    The environment is ``env`` (default :func:`base_env`) for the call's duration, standard input
    is ``input`` (empty, never a terminal), and SIGTERM's handler and the working directory are
    restored afterwards. Only for commands given ``--database-url``: an embedded server started
    here would belong to the test process."""
    argv = [str(a) for a in argv]
    data = input.encode("utf-8") if isinstance(input, str) else (input or b"")
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    saved_env, saved_stdin, saved_cwd = dict(os.environ), sys.stdin, os.getcwd()
    saved_term = signal.getsignal(signal.SIGTERM)
    os.environ.clear()
    os.environ.update(env if env is not None else base_env())
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: usage errors and --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            stdout.flush()
            stderr.flush()
    finally:
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        signal.signal(signal.SIGTERM, saved_term)
        os.environ.clear()
        os.environ.update(saved_env)
    if text:
        return subprocess.CompletedProcess(argv, code, _as_text(out.getvalue()), _as_text(err.getvalue()))
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def _as_text(data: bytes) -> str:
    """What ``subprocess.run(text=True)`` makes of a stream: decoded, universal newlines."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
