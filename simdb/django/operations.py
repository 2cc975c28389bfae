"""Migration operation installing simdb's SQL functions in a Django project's database.

For example:

    from django.db import migrations
    from simdb.django.operations import InstallSimdbFunctions

    class Migration(migrations.Migration):
        dependencies = [("posts", "0001_initial")]
        operations = [InstallSimdbFunctions()]

The DDL is simdb's own (``simdb.store.sql.FUNCTIONS_DDL``, the same text simdb's
Alembic migrations run), so analysts get the same ``simdb_hamming(a, b)`` and
``simdb_blocks(fp)`` (plus ``simdb_radii``/``simdb_ball``, the probe helpers) in
the Django database. ``simdb_near`` is left out by default: it searches simdb's
own ``simdb_fingerprints`` table, which a Django project does not have unless
it also runs ``simdb.migrate``.
"""

from __future__ import annotations

import re

from django.db.migrations.operations.base import Operation

from simdb.store import sql  # plain strings: the SQL functions' DDL

__all__ = ["DEFAULT_FUNCTIONS", "InstallSimdbFunctions"]

DEFAULT_FUNCTIONS = ("simdb_hamming", "simdb_blocks", "simdb_radii", "simdb_ball")

_NAME = re.compile(r"FUNCTION\s+(?:IF\s+EXISTS\s+)?(simdb_\w+)\s*\(", re.IGNORECASE)


def _ddl(functions: tuple[str, ...], statements: list[str]) -> list[str]:
    """The statements of ``statements`` (simdb's create or drop DDL) for ``functions``, in simdb's
    order: dependencies created first, dropped last."""
    picked = [s for s in statements if (m := _NAME.search(s)) and m.group(1) in functions]
    missing = set(functions) - _names(picked)
    if missing:
        raise ValueError(f"simdb has no SQL function(s) {sorted(missing)}; available: {sorted(_names(statements))}")
    return picked


def _names(statements) -> set[str]:
    return {m.group(1) for s in statements if (m := _NAME.search(s))}


class InstallSimdbFunctions(Operation):
    """Create (``CREATE OR REPLACE``) simdb's SQL functions; reversing drops them."""

    reversible = True
    reduces_to_sql = True
    atomic = True

    def __init__(self, functions: tuple[str, ...] | list[str] = DEFAULT_FUNCTIONS):
        self.functions = tuple(functions)

    def deconstruct(self):
        kwargs = {} if self.functions == DEFAULT_FUNCTIONS else {"functions": list(self.functions)}
        return ("simdb.django.operations.InstallSimdbFunctions", [], kwargs)

    def state_forwards(self, app_label, state):
        pass  # no model state

    def _run(self, schema_editor, statements):
        if schema_editor.connection.vendor != "postgresql":
            raise RuntimeError("simdb's SQL functions need PostgreSQL 14+")
        for stmt in statements:
            schema_editor.execute(stmt, params=None)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._run(schema_editor, _ddl(self.functions, sql.FUNCTIONS_DDL))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._run(schema_editor, _ddl(self.functions, sql.DROP_FUNCTIONS_DDL))

    def describe(self):
        return f"Install simdb SQL functions {', '.join(self.functions)}"

    @property
    def migration_name_fragment(self):
        return "install_simdb_functions"
