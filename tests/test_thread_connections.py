"""The facade's per-thread connections survive a command interrupted on them (Ctrl-C mid-query)."""

from __future__ import annotations

from psycopg.pq import TransactionStatus
from sqlalchemy import create_engine

from simdb.store.connect import ThreadConnections


def test_a_connection_left_mid_command_is_replaced(database_url):
    """A KeyboardInterrupt while psycopg waits for a result leaves a command in progress on the
    connection; the next statement of that thread (an interrupted dedup's undo) must not fail with
    "another command is already in progress", so the thread gets a fresh connection."""
    engine = create_engine(database_url)
    conns = ThreadConnections(engine)
    try:
        first = conns.get()
        first.pgconn.send_query(b"SELECT pg_sleep(30)")  # what an interrupted execute leaves behind
        assert first.info.transaction_status == TransactionStatus.ACTIVE
        second = conns.get()
        assert second is not first and first.closed
        assert second.execute("SELECT 41 + 1").fetchone() == (42,)
        assert conns.get() is second and conns.connections == [second]
    finally:
        conns.close()
        engine.dispose()
