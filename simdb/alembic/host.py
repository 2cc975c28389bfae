"""simdb inside a host application's Alembic setup, safe by construction.

Two things a host app needs, re-exported by :mod:`simdb.alembic.ops`:

- **Autogenerate must never touch simdb's objects.** simdb's tables live in the
  host's database (its own server or the embedded default), and a host
  ``env.py`` whose ``target_metadata`` does not describe them would otherwise get
  ``drop_table simdb_...`` proposals from ``alembic revision --autogenerate`` and a
  failing ``alembic check``. :func:`include_object` / :func:`include_name` leave
  out every ``simdb_*`` table (including ``simdb_alembic_version``) and everything
  on them, whether or not the host also lists ``simdb.store.models.metadata``.
  :func:`combine` adds them to a filter the host already has.
- **simdb's migrations in a linear host history.** :func:`upgrade_simdb` /
  :func:`downgrade_simdb` run simdb's own migrations from one ordinary host
  revision, inside its transaction. simdb keeps recording its revision in
  ``simdb_alembic_version``, so the host's ``alembic_version`` holds one head, a
  database already migrated by ``simdb`` itself (``simdb url``, ``SimhashIndex``)
  is recognised instead of created twice, and simdb's CLI and ``SimhashIndex``
  work on the result unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simdb.store.migrate import migrate_connection

__all__ = ["combine", "downgrade_simdb", "include_name", "include_object", "is_simdb_table", "upgrade_simdb"]

PREFIX = "simdb_"


def is_simdb_table(name: str | None) -> bool:
    """Whether a table belongs to simdb: every simdb table (and its version table) is ``simdb_*``."""
    return name is not None and name.startswith(PREFIX)


def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic ``include_name`` hook: skip simdb's tables before they are even reflected."""
    if type_ == "table":
        return not is_simdb_table(name)
    if type_ in ("column", "index", "unique_constraint", "foreign_key_constraint"):
        return not is_simdb_table(parent_names.get("table_name"))
    return True


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic ``include_object`` hook: nothing of simdb's is added, altered or dropped.

    Covers simdb's tables whichever side they come from (reflected from the
    database, or present in the host's ``target_metadata``) and the indexes,
    constraints and columns on them.
    """
    if type_ == "table":
        return not is_simdb_table(name)
    table = getattr(obj, "table", None)
    return not is_simdb_table(getattr(table, "name", None))


def combine(*hooks: Callable[..., bool]) -> Callable[..., bool]:
    """One hook that includes an object only if every hook does (e.g. yours and :func:`include_object`)."""
    return lambda *args: all(hook(*args) for hook in hooks)


def upgrade_simdb(revision: str = "head") -> None:
    """Inside a host migration's ``upgrade()``: bring simdb's tables and SQL functions to ``revision``.

    Runs on the migration's own connection and transaction. Does nothing if the
    database is already there (e.g. the embedded database ``simdb url`` migrated).
    Online only: simdb's migrations read the database (``--sql`` is refused).
    """
    from alembic import op

    migrate_connection(_bind(op, "upgrade_simdb"), revision, direction="upgrade")


def downgrade_simdb(revision: str = "base") -> None:
    """Inside a host migration's ``downgrade()``: take simdb back to ``revision`` (``base`` drops its tables)."""
    from alembic import op

    migrate_connection(_bind(op, "downgrade_simdb"), revision, direction="downgrade")


def _bind(op, what: str):
    if op.get_context().as_sql:
        raise RuntimeError(f"{what}() runs simdb's migrations on the database and cannot run in --sql (offline) mode")
    return op.get_bind()
