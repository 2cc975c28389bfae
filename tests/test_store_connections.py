"""The store's one connection layer (simdb.store.connect): every statement is psycopg SQL on a psycopg
connection; SQLAlchemy connections and engines are accepted where users hold them (issue 28)."""

from __future__ import annotations

import psycopg
import pytest

from simdb import SimhashIndex
from simdb.errors import InvalidArgumentError
from simdb.index import duplicates
from simdb.store import connect
from simdb.store.unique import key_lock

A = 0x0123_4567_89AB_CDEF


@pytest.fixture
def index(engine, collection_name):
    with SimhashIndex(engine, collection=collection_name, verify=False) as ix:
        yield ix


def _psycopg(database_url: str) -> psycopg.Connection:
    return psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://"))


def test_add_if_unique_on_a_psycopg_transaction_and_a_sqlalchemy_one(index, engine, database_url):
    with _psycopg(database_url) as conn:
        with conn.transaction():
            assert duplicates.add_if_unique(conn, index.collection_id, "a", A, 3, {"n": 1}).inserted
    with engine.begin() as sa_conn:
        res = duplicates.add_if_unique(sa_conn, index.collection_id, "b", A ^ 1, 3)
    assert not res.inserted and [(m.key, m.distance, m.meta) for m in res.matches] == [("a", 1, {"n": 1})]
    assert index.get("a").meta == {"n": 1} and index.get("b") is None


def test_add_if_unique_refuses_autocommit_outside_a_transaction(index, database_url):
    """Each statement would commit by itself, so the advisory locks would not cover the search."""
    with _psycopg(database_url) as conn:
        conn.autocommit = True
        with pytest.raises(InvalidArgumentError, match="autocommit"):
            duplicates.add_if_unique(conn, index.collection_id, "a", A, 3)
    assert index.get("a") is None


def test_run_add_if_unique_takes_an_engine_or_a_psycopg_connection(index, engine, database_url):
    assert duplicates.run_add_if_unique(engine, index.collection_id, "a", A, 3).inserted
    with _psycopg(database_url) as conn:
        conn.autocommit = True
        res = duplicates.run_add_if_unique(conn, index.collection_id, "b", A ^ 3, 3)
        assert not res.inserted and [m.key for m in res.matches] == ["a"]
        assert duplicates.run_add_if_unique(conn, index.collection_id, "c", ~A & (2**64 - 1), 3).inserted
    assert index.get("c") is not None  # committed: seen by the index's own connection


def test_statements_for_other_front_ends_are_psycopg_sql(index):
    """add_if_unique_statements hands out the same %(name)s SQL the store runs (no converter between styles)."""
    statements = duplicates.add_if_unique_statements(index.collection_id, "a", A, 3)
    assert "pg_advisory_xact_lock" in statements[0][0] and statements[0][1] == {"lock": key_lock(index.collection_id, "a")}
    assert "pg_advisory_xact_lock" in statements[1][0] and "%(keys)s" in statements[1][0]
    for sql, params in statements[1:]:
        assert ":key" not in sql and "%(key)s" in sql and "key" in params


def test_an_engine_is_no_connection(engine):
    with pytest.raises(InvalidArgumentError, match="conn must be a psycopg or SQLAlchemy Connection, got str"):
        connect.driver_connection("postgresql://")
    with pytest.raises(InvalidArgumentError, match="got Engine .*SimhashIndex.connection"):
        connect.driver_connection(engine)


def test_retried_retries_deadlocks_only():
    calls: list[int] = []

    def deadlocked_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return "done"

    assert connect.retried(deadlocked_twice, 5) == "done" and len(calls) == 3
    calls.clear()
    with pytest.raises(psycopg.errors.DeadlockDetected):
        connect.retried(deadlocked_twice, 1)

    def broken() -> None:
        calls.append(1)
        raise psycopg.errors.UniqueViolation("duplicate key")

    calls.clear()
    with pytest.raises(psycopg.errors.UniqueViolation):
        connect.retried(broken, 5)
    assert len(calls) == 1
