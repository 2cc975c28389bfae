"""simdb's PostgreSQL store: tables (``models``), SQL text and functions (``sql``),
and the Alembic migrations runner (``migrate``)."""

from __future__ import annotations

__all__ = ["CollectionConfigError"]


class CollectionConfigError(ValueError):
    """A collection was opened with a configuration other than the one it was created with."""
