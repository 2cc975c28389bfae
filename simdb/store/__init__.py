"""simdb's PostgreSQL store: tables (``models``), SQL text and functions (``sql``),
and the Alembic migrations runner (``migrate``)."""

from __future__ import annotations

__all__ = ["CollectionConfigError"]


from simdb.errors import CollectionConfigError
