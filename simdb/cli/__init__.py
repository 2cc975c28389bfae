"""The ``simdb`` command: near-duplicate text detection from the shell.

Every command works on one collection (``--collection``, default ``default``)
of one database: ``--database-url``, else ``SIMDB_DATABASE_URL``, else the
embedded PostgreSQL server in ``$SIMDB_HOME`` / the user data directory,
started on demand and migrated automatically on first use.

Exit status: 0 success; 1 ``check`` found a near-duplicate; 2 bad usage or
input (bad path, unreadable file, invalid k, invalid URL, ...); 3 database
error (unreachable, not migrated, ...); 4 unexpected internal error;
130 interrupted (Ctrl-C), 143 terminated (SIGTERM). Errors print one line on
stderr; ``--debug`` adds the traceback.

The package, one concept per module: :mod:`~simdb.cli.status` (exit statuses,
errors), :mod:`~simdb.cli.parser` (options), :mod:`~simdb.cli.inputs` (files and
records), :mod:`~simdb.cli.output` (printing), :mod:`~simdb.cli.session` (database
plumbing), :mod:`~simdb.cli.results` (answers as dicts), the ``commands_*`` modules,
:mod:`~simdb.cli.dedup` (``simdb dedup``) and :mod:`~simdb.cli.main` (the entry point,
``simdb = "simdb.cli:main"``).
"""

from __future__ import annotations

from simdb.cli.main import main
from simdb.cli.output import Progress
from simdb.cli.parser import build_parser
from simdb.cli.status import (
    EXIT_DATABASE,
    EXIT_FOUND,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    CliError,
)

__all__ = [
    "main", "build_parser", "CliError", "Progress",
    "EXIT_OK", "EXIT_FOUND", "EXIT_USAGE", "EXIT_DATABASE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
]
