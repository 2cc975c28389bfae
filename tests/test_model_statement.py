"""The verified model query is one statement per shape, bound to each query's values
(:func:`simdb.sqlalchemy.verified.near_statement`): its text does not change with the query, its block probes
travel as four arrays, and it stays a ``Select`` an application can narrow."""

from __future__ import annotations

import pytest
from sqlalchemy import Text, create_engine
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from simdb.sqlalchemy.verified import VerifiedSimhashMixin, near_statement


class Base(DeclarativeBase):
    pass


class Note(VerifiedSimhashMixin, Base):
    __tablename__ = "statement_notes"
    __simdb_text__ = "body"
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)


ORIGINAL = "I really enjoyed reading this article about database indexing and will try these ideas soon"
COPY = ORIGINAL.replace("article", "artcile")
OTHER = "Shipping took three weeks and the box arrived damaged, but support replaced it quickly"


def _compiled(stmt):
    return stmt.compile(dialect=postgresql.psycopg.dialect())


def test_two_queries_of_one_shape_share_one_statement_text():
    a, b = _compiled(Note.near_duplicates(ORIGINAL)), _compiled(Note.near_duplicates(OTHER))
    assert str(a) == str(b)
    assert a.params != b.params
    probes = [a.params[f"simdb_probes{i}"] for i in range(4)]
    assert sum(len(p) for p in probes) == 548  # K = 11: every probe, in four array parameters
    assert len(a.params) < 40, sorted(a.params)
    # a fingerprint query has no sketch and no keys: another shape, built apart and cached too
    assert str(_compiled(Note.near_duplicates(123))) != str(a)
    assert near_statement(Note, (1, 2), True) is near_statement(Note, (1, 2), True)


@pytest.fixture
def session(create_database):
    eng = create_engine(create_database("simdb_ms_"))
    Base.metadata.create_all(eng)
    with Session(eng) as s:
        s.add_all([Note(id=1, body=ORIGINAL), Note(id=2, body=COPY), Note(id=3, body=OTHER)])
        s.flush()
        yield s
    eng.dispose()


def test_bound_statements_answer_each_query_and_can_be_narrowed(session):
    found = [(n.id, d) for n, d, _ in session.execute(Note.near_duplicates(COPY))]
    assert [i for i, _ in found] == [2, 1] and found[0][1] == 0
    assert [n.id for n, _, _ in session.execute(Note.near_duplicates(OTHER))] == [3]
    narrowed = Note.near_duplicates(COPY).where(Note.id != 2).limit(5)
    assert [n.id for n, _, _ in session.execute(narrowed)] == [1]
    # the same statement again on the same connection (psycopg prepares it after 5 runs): same answers
    for _ in range(7):
        assert [n.id for n, _, _ in session.execute(Note.near_duplicates(ORIGINAL))] == [1, 2]
