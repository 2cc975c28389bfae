"""simdb's PostgreSQL store: tables (``models``), SQL text and functions (``sql``),
and the Alembic migrations runner (``migrate``)."""

from __future__ import annotations

__all__ = ["CollectionConfigError"]

# simdb 0.1.0 exported it here (``from simdb.store import CollectionConfigError``); its home is simdb.errors
from simdb.errors import CollectionConfigError
