"""simdb.sqlalchemy against a real PostgreSQL: the Fingerprint type, the mixin's
generated block columns and indexes, and the near-duplicate Select helper."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import ForeignKey, String, create_engine, func, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from simdb.core.bits import MASK64, blocks, hamming, to_signed
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy import Fingerprint, SimhashMixin, block_probes, block_sql, hamming_distance


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))


class Doc(SimhashMixin, Base):
    __tablename__ = "docs"
    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int | None] = mapped_column(ForeignKey("authors.id"))
    title: Mapped[str | None] = mapped_column(String(100))
    author: Mapped[Author | None] = relationship()


class WordsFingerprinter:
    """A stand-in Fingerprinter: sets bit (hash(word) % 64) for each word; no words -> empty."""

    def fingerprint(self, text, empty=0):
        import zlib

        words = text.split()
        if not words:
            return empty
        fp = 0
        for w in words:
            fp |= 1 << (zlib.crc32(w.encode()) % 64)
        return fp


class Note(SimhashMixin, Base):
    __tablename__ = "notes"
    __simdb_text__ = "body"
    __simdb_fingerprinter__ = WordsFingerprinter()
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None]




@pytest.fixture(scope="module")
def sa_engine(create_database):
    eng = create_engine(create_database("simdb_sa_"))
    Base.metadata.create_all(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def session(sa_engine):
    with Session(sa_engine) as s:
        yield s
        s.rollback()


EDGE = [0, 1, 2**63 - 1, 2**63, 2**63 + 1, MASK64, 0x0123_4567_89AB_CDEF, 0xFFFF_0000_FFFF_0000]


def test_block_sql_matches_store_expression():
    assert block_sql("fp", 0) == "((fp >> 48) & 65535)::int"
    assert block_sql("fp", 3) == "(fp & 65535)::int"


def test_ddl_has_generated_blocks_and_indexes(sa_engine):
    with sa_engine.connect() as conn:
        cols = conn.execute(
            text(
                "SELECT column_name, data_type, is_generated, generation_expression "
                "FROM information_schema.columns WHERE table_name = 'docs' ORDER BY ordinal_position"
            )
        ).all()
        indexes = conn.execute(text("SELECT indexdef FROM pg_indexes WHERE tablename = 'docs'")).scalars().all()
    by_name = {c[0]: c for c in cols}
    assert by_name["fp"][1] == "bigint" and by_name["fp"][2] == "NEVER"
    for i in range(4):
        c = by_name[f"b{i}"]
        assert c[1] == "integer" and c[2] == "ALWAYS"
        assert ">>" in c[3] or i == 3
    for i in range(4):
        assert any(f"(b{i})" in d for d in indexes), indexes


def test_round_trip_unsigned_and_signed_storage(session):
    docs = [Doc(fp=v) for v in EDGE] + [Doc(fp=None)]
    session.add_all(docs)
    session.flush()
    ids = [d.id for d in docs]
    session.expire_all()
    got = {d.id: d for d in session.scalars(select(Doc).where(Doc.id.in_(ids)))}
    for d, v in zip(docs, EDGE + [None]):
        row = got[d.id]
        assert row.fp == v
        if v is None:
            assert (row.b0, row.b1, row.b2, row.b3) == (None, None, None, None)
        else:
            assert (row.b0, row.b1, row.b2, row.b3) == blocks(v)
    raw = dict(session.execute(text("SELECT id, fp FROM docs WHERE id = ANY(:ids)"), {"ids": ids}).all())
    for d, v in zip(docs, EDGE):
        assert raw[d.id] == to_signed(v)
    # equality with an unsigned literal goes through the type (bound as signed)
    assert session.scalar(select(func.count()).where(Doc.fp == MASK64, Doc.id.in_(ids))) == 1


def test_bind_rejects_out_of_range(session):
    session.add(Doc(fp=-1))
    with pytest.raises(Exception, match="unsigned 64-bit"):
        session.flush()
    session.rollback()


def test_hamming_and_within_expressions(session):
    rng = random.Random(1)
    values = EDGE + [rng.getrandbits(64) for _ in range(30)]
    docs = [Doc(fp=v) for v in values]
    session.add_all(docs)
    session.flush()
    q = 0xDEAD_BEEF_0BAD_F00D
    rows = session.execute(
        select(Doc.fp, Doc.fp.hamming(q), Doc.fp.within(q, 30), hamming_distance(q, Doc.fp)).where(
            Doc.id.in_([d.id for d in docs])
        )
    ).all()
    assert len(rows) == len(values)
    for fp, d, within, d2 in rows:
        assert d == d2 == hamming(fp, q)
        assert within == (hamming(fp, q) <= 30)
    # column vs column
    a, b = docs[0], docs[5]
    d = session.scalar(select(Doc.fp.hamming(select(Doc.fp).where(Doc.id == b.id).scalar_subquery())).where(Doc.id == a.id))
    assert d == hamming(a.fp, b.fp)


def _planted(rng, base, dist):
    fp = base
    for bit in rng.sample(range(64), dist):
        fp ^= 1 << bit
    return fp


@pytest.mark.parametrize("k", [0, 1, 2, 3, 5, 7, 9, 11])
def test_near_duplicates_equal_brute_force(session, k):
    rng = random.Random(k)
    query = rng.getrandbits(64)
    values = [rng.getrandbits(64) for _ in range(300)]
    values += [_planted(rng, query, d) for d in range(0, min(k + 3, 64)) for _ in range(3)]
    # same blocks as the query but far away / equal blocks in one position only
    values += [(query & 0xFFFF_0000_0000_0000) | (~query & 0x0000_FFFF_FFFF_FFFF)]
    values += EDGE
    docs = [Doc(fp=v, title="t") for v in values]
    session.add_all(docs)
    session.flush()
    ids = {d.id for d in docs}
    stmt = Doc.near_duplicates(query, k).where(Doc.id.in_(ids))
    got = [(doc.id, dist) for doc, dist in session.execute(stmt)]
    expected = sorted(((d.id, hamming(d.fp, query)) for d in docs if hamming(d.fp, query) <= k), key=lambda t: (t[1], t[0]))
    assert got == expected
    assert any(dist == k for _, dist in got)


def test_block_probes_pigeonhole():
    rng = random.Random(5)
    for k in range(12):
        q = rng.getrandbits(64)
        probes = block_probes(q, k)
        assert len(probes) == 4
        for _ in range(200):
            fp = _planted(rng, q, k)
            assert any(b in probes[i] for i, b in enumerate(blocks(fp)))
    with pytest.raises(ValueError, match="too large"):
        block_probes(1, 12)
    with pytest.raises(TypeError):
        Doc.near_duplicates(1, 2.5)


def test_near_duplicates_composes_with_joins_filters_pagination(session):
    alice, bob = Author(name="alice"), Author(name="bob")
    q = 0x1111_2222_3333_4444
    docs = [Doc(fp=q ^ (1 << i), author=alice if i % 2 else bob, title=f"d{i}") for i in range(10)]
    docs.append(Doc(fp=q ^ 0b111, author=alice, title="three"))
    session.add_all(docs)
    session.flush()
    ids = [d.id for d in docs]
    stmt = (
        Doc.near_duplicates(q, 3)
        .join(Doc.author)
        .where(Author.name == "alice", Doc.id.in_(ids))
        .add_columns(Author.name)
    )
    rows = session.execute(stmt).all()
    assert [r[0].title for r in rows] == [f"d{i}" for i in range(1, 10, 2)] + ["three"]
    assert [r.distance for r in rows] == [1] * 5 + [3]
    page2 = session.execute(stmt.limit(2).offset(2)).all()
    assert [r[0].title for r in page2] == ["d5", "d7"]
    # count through a subquery
    n = session.scalar(select(func.count()).select_from(stmt.subquery()))
    assert n == 6
    # near_clause alone, in the app's own select
    titles = session.scalars(select(Doc.title).where(Doc.near_clause(q, 0), Doc.id.in_(ids))).all()
    assert titles == []
    titles = session.scalars(select(Doc.title).where(Doc.near_clause(q ^ 1, 0), Doc.id.in_(ids))).all()
    assert titles == ["d0"]


def test_plan_uses_block_indexes(sa_engine):
    rng = random.Random(7)
    with Session(sa_engine) as s:
        s.execute(
            Doc.__table__.insert(),
            [{"fp": rng.getrandbits(64)} for _ in range(20000)],
        )
        s.commit()
    with sa_engine.connect() as conn:
        conn.execute(text("ANALYZE docs"))
        for k in (3, 7):
            stmt = Doc.near_duplicates(rng.getrandbits(64), k)
            compiled = stmt.compile(sa_engine, compile_kwargs={"literal_binds": True})
            plan = "\n".join(conn.execute(text(f"EXPLAIN {compiled}")).scalars())
            assert "Seq Scan" not in plan, plan
            for i in range(4):
                assert f"ix_docs_b{i}" in plan, plan


def test_text_queries_and_auto_fingerprint(session):
    fpr = Note.__simdb_fingerprinter__
    n1 = Note(body="the quick brown fox jumps")
    n2 = Note(body="")
    n3 = Note(body="entirely different words here now", fp=12345)  # explicit fp wins
    session.add_all([n1, n2, n3])
    session.flush()
    assert n1.fp == fpr.fingerprint("the quick brown fox jumps")
    assert n2.fp is None  # no features -> NULL -> never matched
    assert n3.fp == 12345
    n1.body = "the quick brown fox jumps high"
    session.flush()
    assert n1.fp == fpr.fingerprint("the quick brown fox jumps high")
    rows = session.execute(Note.near_duplicates("the quick brown fox jumps high", 0)).all()
    assert [(r[0].id, r.distance) for r in rows] == [(n1.id, 0)]
    # a featureless query matches nothing, including featureless rows
    assert session.execute(Note.near_duplicates("   ", 3)).all() == []
    with pytest.raises(ValueError, match="no features"):
        Note.hamming_to("")
    assert session.scalar(select(Note.hamming_to(n1.fp ^ 0b11)).where(Note.id == n1.id)) == 2


def test_type_is_cacheable_and_renders_literals(sa_engine):
    stmt = select(Doc.id).where(Doc.fp == MASK64)
    sql = str(stmt.compile(sa_engine, compile_kwargs={"literal_binds": True}))
    assert "= -1" in sql
    assert Fingerprint().python_type is int


@pytest.mark.parametrize("k", [0, 2, 3, 6])
def test_near_pairs_equal_brute_force(sa_engine, k):
    from sqlalchemy.orm import declarative_base

    PBase = declarative_base()

    class PairDoc(SimhashMixin, PBase):
        __tablename__ = f"pair_docs_{k}"
        id: Mapped[int] = mapped_column(primary_key=True)

    PBase.metadata.create_all(sa_engine)
    rng = random.Random(50 + k)
    values = [rng.getrandbits(64) for _ in range(150)]
    values += [_planted(rng, values[i], d) for i in range(20) for d in (0, 1, k, k + 1)]
    with Session(sa_engine) as s:
        s.add_all([PairDoc(id=i + 1, fp=v) for i, v in enumerate(values)])
        s.commit()
        got = [tuple(r) for r in s.execute(PairDoc.near_pairs(k))]
    expected = sorted(
        ((i + 1, j + 1, hamming(values[i], values[j])) for i in range(len(values)) for j in range(i + 1, len(values))
         if hamming(values[i], values[j]) <= k),
        key=lambda t: (t[2], t[0], t[1]),
    )
    assert got == expected
    PBase.metadata.drop_all(sa_engine)


def test_bad_arguments_of_the_expressions_are_typed_errors():
    """``within``'s k, a None fingerprint and a featureless ``hamming_to`` query raised bare
    TypeError / ValueError; they are simdb's typed errors (still TypeError / ValueError)."""
    with pytest.raises(InvalidArgumentError, match=r"k must be in 0\.\.64, got 65"):
        Doc.fp.within(1, 65)
    with pytest.raises(InvalidTypeError, match="k must be an int"):
        Doc.fp.within(1, "3")
    with pytest.raises(InvalidTypeError, match="fingerprint must be an int"):
        Doc.fp.hamming(None)
    with pytest.raises(InvalidArgumentError, match="query: the text has no features"):
        Doc.hamming_to("...")
