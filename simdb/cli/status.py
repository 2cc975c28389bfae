"""Exit statuses and the CLI's own exceptions.

A module of its own (importing nothing of simdb) because every other module of the package raises or
returns these: the parser, the input readers, the commands, the thin client and the entry point
that turns them into one line on stderr and a status.
"""

from __future__ import annotations

__all__ = [
    "PROG", "DEFAULT_K", "MAX_K",
    "EXIT_OK", "EXIT_FOUND", "EXIT_USAGE", "EXIT_DATABASE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
    "CliError", "Reported", "Terminated", "first_line",
]

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

PROG = "simdb"
DEFAULT_K = 3
MAX_K = 11  # what every search method accepts (simdb.core.bits.MAX_K)


class CliError(Exception):
    """A user-facing error: one line on stderr and an exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


class Reported(KeyboardInterrupt):
    """Ctrl-C already explained by the command (main prints nothing more: "interrupted" once)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so transactions roll back and the embedded server is released."""


def first_line(exc: BaseException) -> str:
    """What the one line on stderr says of ``exc``: the first line of its message (of a wrapped driver
    error, SQLAlchemy's ``exc.orig``: the driver's own), else the name of its type."""
    orig = getattr(exc, "orig", None)
    lines = str(orig if orig is not None else exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
