"""simdb.sqlalchemy.verified against a real PostgreSQL: a host app's own table answering with the
verified rule (candidates within K bits, then sketch Jaccard >= t), checked against brute force.

The brute force never reads what the hooks stored: it recomputes each row's fingerprint with the
candidate Fingerprinter and its sketch with ``simdb.core.sketch.sketch``, and judges each row with
the definition (``simdb.core.sketch.sketch_jaccard``), so a wrong hook, a wrong SQL expression or a
wrong candidate clause all show.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Text, create_engine, select
from sqlalchemy import text as sql_text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from verified_support import AT_THRESHOLD, CFP, PINNED, VOCAB, K, corpus, expected_order, flip, judge, sk

from simdb.core import sketch as S
from simdb.core.bits import hamming
from simdb.core.model_verifier import MODEL_SCHEME
from simdb.core.sketch import Verifier
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy.verified import VerifiedSimhashMixin, sketch_jaccard

SLOW = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


class Base(DeclarativeBase):
    pass


class Page(VerifiedSimhashMixin, Base):
    __tablename__ = "verified_pages"
    __simdb_text__ = "body"
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)


class SmallPage(VerifiedSimhashMixin, Base):
    """16-value sketches: texts longer than that are judged by the bottom-k estimate (in SQL too);
    and the older shingle scheme, chosen explicitly."""

    __tablename__ = "verified_small_pages"
    __simdb_text__ = "body"
    __simdb_verifier__ = Verifier(size=16, min_jaccard=0.5, scheme=S.SCHEME_V2)  # a scheme chosen explicitly
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)


@pytest.fixture(scope="module")
def sa_engine(create_database):
    eng = create_engine(create_database("simdb_mv_"))
    Base.metadata.create_all(eng)
    yield eng
    eng.dispose()


# ------------------------------------------------------------------ the SQL expression
@SLOW
@given(st.sets(st.integers(-50, 50), max_size=40), st.sets(st.integers(-50, 50), max_size=40), st.integers(1, 45))
def test_inline_sql_sketch_jaccard_equals_python(sa_engine, a, b, k):
    sa, sb = S.sketch_of_set(a, k), S.sketch_of_set(b, k)
    with sa_engine.connect() as c:
        got = c.execute(select(sketch_jaccard(sa, sb, k))).scalar()
    want = S.sketch_jaccard(sa, sb, k)
    assert got == (None if want is None else pytest.approx(want, abs=1e-12))


def load(session, model, texts, fp_rows):
    rows = [model(body=t) for t in texts]
    rows += [model(body=None, fp=fp) for fp in fp_rows]  # stored by fingerprint: nothing to verify with
    session.add_all(rows)
    session.flush()
    truth = {}
    for r, t in zip(rows, texts + [None] * len(fp_rows)):
        fp = r.fp if t is None else CFP.fingerprint(t, empty=None)
        truth[r.id] = (fp, None if t is None else sk(t, model.__simdb_verifier__))
    return truth


@pytest.mark.parametrize("model,max_len", [(Page, 30), (SmallPage, 60)])
@SLOW
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, K), t=st.sampled_from([None, 0.5, 0.8, 0.95]))
def test_near_duplicates_equal_brute_force(sa_engine, model, max_len, seed, k, t):
    rng = random.Random(seed)
    texts = corpus(rng, rng.randint(1, 4), max_len)
    queries = [rng.choice(texts) for _ in range(3)]
    queries.append(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, max_len))))
    q_fps = [CFP.fingerprint(q, empty=None) for q in queries[:2]]
    fp_rows = [flip(rng, fp, rng.randint(0, K + 1)) for fp in q_fps if fp is not None]
    thr = model.__simdb_verifier__.min_jaccard if t is None else t
    with Session(sa_engine) as session:
        truth = load(session, model, texts, fp_rows)
        for q in queries + q_fps:
            q_fp = q if isinstance(q, int) or q is None else CFP.fingerprint(q, empty=None)
            q_sk = sk(q, model.__simdb_verifier__) if isinstance(q, str) else None
            want = []
            for rid, (fp, row_sk) in truth.items():
                keep, d, j = judge(model.__simdb_verifier__, fp, row_sk, q_fp, q_sk, k, thr)
                if keep:
                    want.append((rid, d, j))
            if q is None:
                continue
            got = [(r.id, d, j) for r, d, j in session.execute(model.near_duplicates(q, k, min_jaccard=t))]
            assert [g[0] for g in got] == [w[0] for w in expected_order(want)]
            assert [g[1] for g in got] == [w[1] for w in expected_order(want)]
            for (_, _, gj), (_, _, wj) in zip(got, expected_order(want)):
                assert gj == (None if wj is None else pytest.approx(wj, abs=1e-12))
        session.rollback()


@SLOW
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, K))
def test_near_pairs_equal_brute_force(sa_engine, seed, k):
    rng = random.Random(seed)
    texts = corpus(rng, rng.randint(1, 4), 30)
    fp0 = CFP.fingerprint(texts[0], empty=None)
    fp_rows = [flip(rng, fp0, rng.randint(0, 5)) for _ in range(2)] if fp0 is not None else []
    with Session(sa_engine) as session:
        truth = load(session, Page, texts, fp_rows)
        ids = sorted(truth)
        want = []
        for i, x in enumerate(ids):
            for y in ids[i + 1 :]:
                keep, d, j = judge(Page.__simdb_verifier__, *truth[x], *truth[y], k, 0.8)
                if keep:
                    want.append(((x, y), d, j))
        got = [((a, b), d, j) for a, b, d, j in session.execute(Page.near_pairs(k))]
        assert [g[:2] for g in got] == [w[:2] for w in expected_order(want)]
        assert all(gj == (None if wj is None else pytest.approx(wj)) for (_, _, gj), (_, _, wj) in zip(got, expected_order(want)))
        session.rollback()


# ------------------------------------------------------------------ hooks, errors, plans
def test_the_models_scheme_is_pinned_not_simdbs_default():
    """Host tables do not record their scheme, so the models must not follow simdb.core.sketch.SCHEME."""
    assert MODEL_SCHEME == PINNED and Page.__simdb_verifier__ == Verifier(k=11, min_jaccard=0.8, size=384, scheme=PINNED)
    assert Page.simdb_fingerprinter() == CFP and Page.fingerprint_text("a b c d") == CFP.fingerprint("a b c d")
    assert SmallPage.sketch_text("a b c d") == S.sketch("a b c d", 16, S.SCHEME_V2) != S.sketch("a b c d", 16, PINNED)


def test_hooks_fill_and_follow_the_text(sa_engine):
    text = " ".join(VOCAB[:20])
    with Session(sa_engine) as session:
        p = Page(body=text)
        session.add(p)
        session.flush()
        assert p.fp == CFP.fingerprint(text) and p.simdb_sketch == sk(text)
        p.body = text + " w29 w28"
        session.flush()
        session.refresh(p)
        assert p.simdb_sketch == sk(p.body) and p.fp == CFP.fingerprint(p.body)
        p.body = "!!!"
        session.flush()
        assert p.fp is None and p.simdb_sketch is None
        mine = Page(body=text, simdb_sketch=[1, 2, 3])  # set by the application: kept
        session.add(mine)
        session.flush()
        assert mine.simdb_sketch == [1, 2, 3]
        session.rollback()


def test_bad_configuration_and_arguments_are_typed_errors():
    with pytest.raises(CollectionConfigError, match="candidate Fingerprinter"):

        class Mine(VerifiedSimhashMixin, Base):
            __tablename__ = "never_created"
            __simdb_fingerprinter__ = object()
            id: Mapped[int] = mapped_column(primary_key=True)

    with pytest.raises(InvalidTypeError, match="__simdb_verifier__"):

        class Other(VerifiedSimhashMixin, Base):
            __tablename__ = "never_created_either"
            __simdb_verifier__ = {"min_jaccard": 0.9}
            id: Mapped[int] = mapped_column(primary_key=True)

    with pytest.raises(InvalidArgumentError, match="scheme"):

        class Third(VerifiedSimhashMixin, Base):
            __tablename__ = "never_created_either"
            __simdb_verifier__ = Verifier(scheme="tok9-md5-v0")
            id: Mapped[int] = mapped_column(primary_key=True)

    with pytest.raises(InvalidArgumentError, match="too large"):
        Page.near_duplicates("some text", k=12)
    with pytest.raises(InvalidArgumentError, match="min_jaccard"):
        Page.near_duplicates("some text", min_jaccard=1.5)
    with pytest.raises(InvalidTypeError, match="sketch"):
        Page.near_duplicates_of(1, ["x"])


def test_text_query_uses_the_block_indexes(sa_engine):
    rng = random.Random(5)
    with Session(sa_engine) as session:
        session.add_all([Page(body=" ".join(rng.choice(VOCAB) for _ in range(25))) for _ in range(3000)])
        session.flush()
        session.execute(sql_text("ANALYZE verified_pages"))
        stmt = Page.near_duplicates(" ".join(VOCAB[:25]))
        compiled = stmt.compile(session.bind, compile_kwargs={"literal_binds": True})
        plan = "\n".join(session.execute(sql_text(f"EXPLAIN {compiled}")).scalars())
        assert "Seq Scan on verified_pages" not in plan, plan
        for i in range(4):
            assert f"ix_verified_pages_b{i}" in plan, plan
        session.rollback()


def test_async_helper_runs_both_stages(create_database):
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    from simdb.sqlalchemy.aio import near_duplicates

    url = create_database("simdb_mv_aio_")
    rng = random.Random(3)
    words = [rng.choice(VOCAB) for _ in range(40)]
    text = " ".join(words)
    words[20] = "w99"
    edited = " ".join(words)
    other = " ".join(rng.choice(VOCAB) for _ in range(40))

    async def main():
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with AsyncSession(engine, expire_on_commit=False) as session:
                session.add_all([Page(id=1, body=text), Page(id=2, body=other)])
                await session.commit()
                return await near_duplicates(session, Page, edited)
        finally:
            await engine.dispose()

    got = asyncio.run(main())
    q = (CFP.fingerprint(edited), sk(edited))
    keep, d, j = judge(Page.__simdb_verifier__, CFP.fingerprint(text), sk(text), *q, 3, 0.8)
    assert keep and not judge(Page.__simdb_verifier__, CFP.fingerprint(other), sk(other), *q, 3, 0.8)[0]  # the case is the one meant
    assert [(r.id, dist, jac) for r, dist, jac in got] == [(1, d, pytest.approx(j))]


def test_the_corpora_reach_every_branch():
    """The property tests above are only as good as their corpora: within K bits, edited copies
    both pass and fail the Jaccard threshold (so the verification stage decides something)."""
    seen = set()
    for seed in range(30):
        rng = random.Random(seed)
        texts = corpus(rng, rng.randint(1, 4), 30)
        for q in texts:
            qf, qs = CFP.fingerprint(q, empty=None), sk(q)
            for t in texts:
                keep, d, j = judge(Page.__simdb_verifier__, CFP.fingerprint(t, empty=None), sk(t), qf, qs, 3, 0.8)
                if d is not None and d <= K and j is not None and t != q:
                    seen.add("kept" if keep else "rejected")
    assert seen == {"kept", "rejected"}


def test_a_pair_exactly_at_the_threshold_is_kept(sa_engine):
    a, b = AT_THRESHOLD
    assert S.sketch_jaccard(sk(a), sk(b)) == 0.8 and hamming(CFP.fingerprint(a), CFP.fingerprint(b)) <= K
    with Session(sa_engine) as session:
        session.add(Page(id=900001, body=a))
        session.flush()
        assert [(r.id, j) for r, _, j in session.execute(Page.near_duplicates(b))] == [(900001, 0.8)]
        assert session.execute(Page.near_duplicates(b, min_jaccard=0.81)).all() == []
        session.rollback()
