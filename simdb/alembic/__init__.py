"""Alembic integration: simdb's schema inside a host application's migrations
(:mod:`simdb.alembic.ops`, :mod:`simdb.alembic.host`, :mod:`simdb.alembic.verified`)."""
