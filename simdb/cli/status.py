"""Exit statuses, the CLI's own exceptions and the value types shared by several parsers.

A module of its own (no simdb imports but the light :mod:`simdb.cli.dispatch`) because every
other module of the package raises or returns these: the parser, the input readers, the commands
and the entry point that turns them into one line on stderr and a status.
"""

from __future__ import annotations

import argparse

from simdb.cli.dispatch import lazy

__all__ = [
    "PROG", "DEFAULT_K", "MAX_K", "MAX_COUNT", "positive_int", "jaccard_value",
    "EXIT_OK", "EXIT_FOUND", "EXIT_USAGE", "EXIT_DATABASE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
    "CliError", "Reported", "Terminated",
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
MAX_K = 11  # what every search method accepts (simdb.core.probes.MAX_K)
#: the largest count an option takes (--batch-size, --limit, --workers, --max-text-bytes): far above any
#: useful value, and below what Python's islice() and PostgreSQL's integers accept, so a huge number is
#: refused here with the option's name rather than deep inside with their messages (issue 31)
MAX_COUNT = 2**31 - 1
#: the API's check of a Jaccard threshold (simdb.core.sketch imports numpy: imported when an option uses it)
check_min_jaccard = lazy("simdb.core.sketch", "check_min_jaccard")


def positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 to :data:`MAX_COUNT` (argparse names the option)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    if n > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT:,}, got {n}")
    return n


def jaccard_value(text: str) -> float:
    """An argparse type for ``--min-jaccard`` (``query``, ``dups``, ``check``, ``add``, ``report``, ``dedup``).

    Why the API's own check (:func:`simdb.core.sketch.check_min_jaccard`): the option accepts exactly
    the thresholds the library does, (0, 1], so a refused value is refused here, with the option's
    name (argparse adds ``argument --min-jaccard:``), and never later in the library's words."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0 and <= 1, got {text!r}") from None
    try:
        return check_min_jaccard(x)
    except ValueError:  # the library's InvalidArgumentError
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 1, got {text}") from None


class CliError(Exception):
    """A user-facing error: one line on stderr and an exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


class Reported(KeyboardInterrupt):
    """Ctrl-C already explained by the command (main prints nothing more: "interrupted" once)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so transactions roll back and the embedded server is released."""
