"""simdb.sqlalchemy.aio: the mixin's near-duplicate query through an AsyncSession (psycopg async)."""

from __future__ import annotations

import asyncio

from sqlalchemy import Text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from simdb import Fingerprinter
from simdb.core.bits import hamming
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
