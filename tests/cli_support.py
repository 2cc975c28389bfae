"""What the CLI tests share: how to run the ``simdb`` command, and the sample texts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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
