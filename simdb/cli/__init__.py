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
:mod:`~simdb.cli.dedup` (``simdb dedup``), :mod:`~simdb.cli.main` (parse, run, exit status)
and :mod:`~simdb.cli.thin` (the console script ``simdb = "simdb.cli.thin:main"``: the warm
process of :mod:`~simdb.cli.warm` answers when there is one).

The names below are loaded on first use, like ``simdb``'s own: ``python -m simdb.cli``
imports this package, and the thin client must not pay for the parser and the entry
point before it knows whether a warm process answers.
"""

from __future__ import annotations

import importlib

# public name -> module that defines it
_EXPORTS = {
    "main": "simdb.cli.thin",  # also the console script of installs made before simdb.cli.thin (``simdb.cli:main``)
    "build_parser": "simdb.cli.parser",
    "Progress": "simdb.cli.output",
    **{name: "simdb.cli.status" for name in (
        "CliError", "EXIT_OK", "EXIT_FOUND", "EXIT_USAGE", "EXIT_DATABASE", "EXIT_INTERNAL", "EXIT_INTERRUPTED",
        "EXIT_TERMINATED")},
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'simdb.cli' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
