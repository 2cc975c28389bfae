"""simdb.sqlalchemy.aio: the mixin's near-duplicate query through an AsyncSession (psycopg async)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from simdb import Fingerprinter
from simdb.core.bits import hamming
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy import SimhashMixin
from simdb.sqlalchemy.aio import near_duplicates, query_fingerprint


class Base(DeclarativeBase):
    pass


class Article(SimhashMixin, Base):
    __tablename__ = "aio_articles"
    __simdb_text__ = "body"
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str] = mapped_column(Text)


BODIES = [
    "The quick brown fox jumps over the lazy dog near the river bank today",
    "The quick brown fox jumps over the lazy dog near the river bank today!",
    "An entirely different story about databases, indexes and query plans",
    "...",
]


def test_near_duplicates_through_an_async_session(create_database):
    url = create_database("simdb_sa_aio_")

    async def main():
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with AsyncSession(engine, expire_on_commit=False) as session:
                session.add_all([Article(body=b) for b in BODIES])  # fp filled from body on insert
                await session.commit()
                got = await near_duplicates(session, Article, BODIES[0].upper(), k=3)
                limited = await near_duplicates(session, Article, BODIES[0], k=3, limit=1)
                none = await near_duplicates(session, Article, "!!!")  # no features: no fingerprint
                by_fp = await near_duplicates(session, Article, await query_fingerprint(Article, BODIES[2]), k=0)
            return got, limited, none, by_fp
        finally:
            await engine.dispose()

    got, limited, none, by_fp = asyncio.run(main())
    fper = Fingerprinter()
    q = fper.fingerprint(BODIES[0])
    want = sorted(
        (hamming(q, fper.fingerprint(b)), i + 1) for i, b in enumerate(BODIES)
        if fper.fingerprint(b, empty=None) is not None and hamming(q, fper.fingerprint(b)) <= 3
    )
    assert [(d, row.id) for row, d in got] == want and len(want) == 2
    assert [(d, row.id) for row, d in limited] == want[:1]
    assert none == []
    assert [row.body for row, _ in by_fp] == [BODIES[2]]


def test_a_bad_limit_is_refused_before_the_session_runs_anything(create_database):
    """limit=-1 was sent to PostgreSQL ("LIMIT must not be negative"), which aborted the session's
    transaction, the caller's pending writes with it; limit=0 silently answered nothing. Now they
    are typed errors naming ``limit`` (as AsyncSimhashIndex.near's) and the session goes on."""
    url = create_database("simdb_sa_aio_limit_")

    async def main():
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with AsyncSession(engine, expire_on_commit=False) as session:
                session.add(Article(id=1, body=BODIES[0]))
                await session.flush()  # pending in the session's transaction
                with pytest.raises(InvalidArgumentError, match="limit must be None or an int >= 1, got -1"):
                    await near_duplicates(session, Article, BODIES[0], limit=-1)
                with pytest.raises(InvalidArgumentError, match="limit must be None or an int >= 1, got 0"):
                    await near_duplicates(session, Article, BODIES[0], limit=0)
                with pytest.raises(InvalidTypeError, match="limit must be None or an int >= 1, got str"):
                    await near_duplicates(session, Article, BODIES[0], limit="3")
                await session.commit()  # the flushed row is still there to commit
            async with AsyncSession(engine) as session:
                found = await near_duplicates(session, Article, BODIES[0], limit=1)
            return [(row.id, d) for row, d in found]
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == [(1, 0)]
