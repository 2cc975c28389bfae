"""simdb.sqlalchemy.verified against a real PostgreSQL: a host app's own table answering with the
verified rule (candidates within K bits, then sketch Jaccard >= t), checked against brute force.
Model rules are versioned per row: some rows are made "old" (rule-1 sketches, ``simdb_rule`` NULL,
as rows written before the rule column), and each row is judged under its own rule.

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
from sqlalchemy import Text, create_engine, select, update
from sqlalchemy import text as sql_text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from verified_support import (
    AT_THRESHOLD,
    AT_THRESHOLD_RULE2,
    AUDIT,
    CFP,
    ONE_TYPO,
    PINNED,
    RULE1,
    RULE2,
    VOCAB,
    K,
    corpus,
    expected_order,
    flip,
    judge,
    keys,
    sk,
)

from simdb.core import sketch as S
from simdb.core.bits import hamming
from simdb.core.model_verifier import BAND_COLUMNS, MODEL_RULES, model_verifier
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
    """16-value sketches: texts longer than that are judged by the bottom-k estimate (in SQL too); a
    verifier chosen explicitly."""

    __tablename__ = "verified_small_pages"
    __simdb_text__ = "body"
    __simdb_verifier__ = Verifier(size=16, min_jaccard=0.5, scheme=S.SCHEME)  # a verifier chosen explicitly
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)


class RuleOnePage(VerifiedSimhashMixin, Base):
    """A model staying on model rule 1 by choosing it as its own verifier: writes simdb_rule 0."""

    __tablename__ = "verified_rule_one_pages"
    __simdb_text__ = "body"
    __simdb_verifier__ = model_verifier(1)
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)


V1, V2 = model_verifier(1), model_verifier(2)


def make_old(session, model, row_id, text):
    """Row ``row_id`` as written before the rule column: rule-1 sketch (a default-verifier model;
    a model with its own verifier keeps its sketch), ``simdb_rule`` NULL, no band keys."""
    values = {"simdb_rule": None, **dict.fromkeys(BAND_COLUMNS)}
    if model.sketch_rule() != 0:
        values["simdb_sketch"] = None if text is None else V1.sketch(text)
    session.execute(update(model.__table__).where(model.__table__.c.id == row_id).values(**values))


def row_verifier(model, old):
    """The verifier a row is compared under: the model's own, else its rule's."""
    return model.__simdb_verifier__ if model.sketch_rule() == 0 or not old else V1


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


def load(session, model, texts, fp_rows, rng=None):
    """Store the rows; with ``rng``, about a third of the text rows are made old (:func:`make_old`).
    Returns {id: (fp, sketch, verifier, band keys)} by the definition, never read back from the table
    (band keys on the rule-2 rows of a default-verifier model only)."""
    rows = [model(body=t) for t in texts]
    rows += [model(body=None, fp=fp) for fp in fp_rows]  # stored by fingerprint: nothing to verify with
    session.add_all(rows)
    session.flush()
    truth = {}
    for r, t in zip(rows, texts + [None] * len(fp_rows)):
        old = rng is not None and t is not None and rng.random() < 0.35
        if old:
            make_old(session, model, r.id, t)
        v = row_verifier(model, old)
        fp = r.fp if t is None else CFP.fingerprint(t, empty=None)
        truth[r.id] = (fp, None if t is None else sk(t, v), v, keys(t) if v == V2 and model.sketch_rule() == 2 else None)
    return truth


@pytest.mark.parametrize("model,max_len", [(Page, 30), (SmallPage, 60), (RuleOnePage, 30)])
@SLOW
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, K), t=st.sampled_from([None, 0.5, 0.8, 0.95]))
def test_near_duplicates_equal_brute_force(sa_engine, model, max_len, seed, k, t):
    rng = random.Random(seed)
    texts = corpus(rng, rng.randint(1, 4), max_len) + [a for a, _ in AUDIT]  # + pairs beyond K, near by their keys
    queries = [rng.choice(texts) for _ in range(3)] + [rng.choice(AUDIT)[1]]
    queries.append(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, max_len))))
    q_fps = [CFP.fingerprint(q, empty=None) for q in queries[:2]]
    fp_rows = [flip(rng, fp, rng.randint(0, K + 1)) for fp in q_fps if fp is not None]
    thr = model.__simdb_verifier__.min_jaccard if t is None else t
    with Session(sa_engine) as session:
        truth = load(session, model, texts, fp_rows, rng)
        for q in queries + q_fps:
            q_fp = q if isinstance(q, int) or q is None else CFP.fingerprint(q, empty=None)
            want = []
            for rid, (fp, row_sk, v, row_keys) in truth.items():
                q_sk = sk(q, v) if isinstance(q, str) else None  # the query sketched under the row's rule
                keep, d, j = judge(v, fp, row_sk, q_fp, q_sk, k, thr, row_keys, keys(q) if isinstance(q, str) else None)
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
    texts = corpus(rng, rng.randint(1, 4), 30) + list(rng.choice(AUDIT))  # + a pair beyond K, near by its keys
    fp0 = CFP.fingerprint(texts[0], empty=None)
    fp_rows = [flip(rng, fp0, rng.randint(0, 5)) for _ in range(2)] if fp0 is not None else []
    with Session(sa_engine) as session:
        truth = load(session, Page, texts, fp_rows, rng)
        ids = sorted(truth)
        want = []
        for i, x in enumerate(ids):
            for y in ids[i + 1 :]:
                (fx, sx, vx, kx), (fy, sy, vy, ky) = truth[x], truth[y]
                if vx != vy:  # rows of different rules: nothing comparable, Hamming distance decides
                    sx = sy = None
                keep, d, j = judge(vx, fx, sx, fy, sy, k, 0.8, kx, ky)
                if keep:
                    want.append(((x, y), d, j))
        got = [((a, b), d, j) for a, b, d, j in session.execute(Page.near_pairs(k))]
        assert [g[:2] for g in got] == [w[:2] for w in expected_order(want)]
        assert all(gj == (None if wj is None else pytest.approx(wj)) for (_, _, gj), (_, _, wj) in zip(got, expected_order(want)))
        session.rollback()


# ------------------------------------------------------------------ hooks, errors, plans
def test_the_models_rules_are_pinned_not_simdbs_default():
    """Host tables record a rule number per row, not a scheme, so the rules must not follow
    simdb.core.sketch.SCHEME: each number means one scheme and size for good."""
    assert {n: (r.scheme, r.size) for n, r in MODEL_RULES.items()} == {1: RULE1, 2: RULE2} and MODEL_RULES[1].scheme == PINNED
    assert Page.__simdb_verifier__ == Verifier(k=11, min_jaccard=0.8, size=RULE2[1], scheme=RULE2[0])
    assert V1 == Verifier(k=11, min_jaccard=0.8, size=RULE1[1], scheme=RULE1[0])
    assert (Page.sketch_rule(), SmallPage.sketch_rule(), RuleOnePage.sketch_rule()) == (2, 0, 0)
    assert Page.simdb_fingerprinter() == CFP and Page.fingerprint_text("a b c d") == CFP.fingerprint("a b c d")
    assert SmallPage.sketch_text("a b c d") == S.sketch("a b c d", 16, S.SCHEME) != S.sketch("a b c d", 16, PINNED)


def test_hooks_fill_and_follow_the_text(sa_engine):
    text = " ".join(VOCAB[:20])
    with Session(sa_engine) as session:
        p = Page(body=text)
        session.add(p)
        session.flush()
        assert p.fp == CFP.fingerprint(text) and p.simdb_sketch == sk(text) and p.simdb_rule == 2
        assert [getattr(p, c) for c in BAND_COLUMNS] == keys(text)
        make_old(session, Page, p.id, text)
        session.refresh(p)
        assert p.simdb_rule is None and p.simdb_sketch == sk(text, V1) and p.simdb_band0 is None
        p.body = text + " w29 w28"  # an old row whose text changes is written under the current rule
        session.flush()
        session.refresh(p)
        assert p.simdb_sketch == sk(p.body) and p.fp == CFP.fingerprint(p.body) and p.simdb_rule == 2
        assert [getattr(p, c) for c in BAND_COLUMNS] == keys(p.body)
        p.body = "!!!"
        session.flush()
        assert p.fp is None and p.simdb_sketch is None and p.simdb_band13 is None
        mine = Page(body=text, simdb_sketch=[1, 2, 3])  # set by the application: kept, under the model's rule
        theirs = Page(body=text, simdb_sketch=sk(text, V1), simdb_rule=None)  # both set: both kept
        session.add_all([mine, theirs])
        session.flush()
        session.refresh(theirs)
        assert (mine.simdb_sketch, mine.simdb_rule) == ([1, 2, 3], 2)
        assert (theirs.simdb_sketch, theirs.simdb_rule, theirs.simdb_band0) == (sk(text, V1), None, None)  # rule 1: no keys
        assert [getattr(mine, c) for c in BAND_COLUMNS] == keys(text)
        bands = dict(zip(BAND_COLUMNS, keys(text)))
        assert Page.simdb_values(text) == {"fp": CFP.fingerprint(text), "simdb_sketch": sk(text), "simdb_rule": 2, **bands}
        assert RuleOnePage.simdb_values(text) == {"fp": CFP.fingerprint(text), "simdb_sketch": sk(text, V1), "simdb_rule": 0, **dict.fromkeys(bands)}
        own = RuleOnePage(body=text)
        session.add(own)
        session.flush()
        assert (own.simdb_sketch, own.simdb_rule, own.simdb_band0) == (sk(text, V1), 0, None)
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
    with pytest.raises(InvalidTypeError, match=r"sketch\[2\]"):
        Page.near_duplicates_of(1, {2: "x"})
    with pytest.raises(InvalidArgumentError, match="rule 0"):
        Page.near_duplicates_of(1, {0: [1, 2]})
    with pytest.raises(InvalidArgumentError, match="rule 2"):
        RuleOnePage.near_duplicates_of(1, {2: [1, 2]})
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        Page.recompute_sketches(None, batch_size=0)
    with pytest.raises(InvalidTypeError, match="band_keys"):
        Page.near_duplicates_of(1, None, band_keys=[1, 2, 3])


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
    assert S.sketch_jaccard(sk(a, V1), sk(b, V1), 384) == 0.8 and hamming(CFP.fingerprint(a), CFP.fingerprint(b)) <= K
    a2, b2 = AT_THRESHOLD_RULE2
    assert S.sketch_jaccard(sk(a2), sk(b2)) == 0.8 and hamming(CFP.fingerprint(a2), CFP.fingerprint(b2)) <= K
    with Session(sa_engine) as session:
        session.add_all([Page(id=900001, body=a), Page(id=900002, body=a2)])
        session.flush()
        make_old(session, Page, 900001, a)  # AT_THRESHOLD is a rule-1 pair: its row is an old one
        for query, row in [(b, 900001), (b2, 900002)]:
            assert [(r.id, j) for r, _, j in session.execute(Page.near_duplicates(query))] == [(row, 0.8)]
            assert session.execute(Page.near_duplicates(query, min_jaccard=0.81)).all() == []
        session.rollback()


def test_old_and_new_rows_answer_each_by_its_rule(sa_engine):
    """One query: the old row (rule 1) is compared with the query's rule-1 sketch, the new one with
    its rule-2 sketch; the one-typo copy is near under rule 2 only, so only the new row finds it."""
    original, typo = ONE_TYPO
    j1, j2 = S.sketch_jaccard(sk(original, V1), sk(typo, V1), 384), S.sketch_jaccard(sk(original), sk(typo), 256)
    assert j1 < 0.8 <= j2 and hamming(CFP.fingerprint(original), CFP.fingerprint(typo)) <= K
    with Session(sa_engine) as session:
        session.add_all([Page(id=910001, body=original), Page(id=910002, body=original)])
        session.flush()
        make_old(session, Page, 910001, original)
        got = lambda q, **kw: [(r.id, d, j) for r, d, j in session.execute(Page.near_duplicates(q, **kw))]  # noqa: E731
        assert got(typo) == [(910002, hamming(CFP.fingerprint(original), CFP.fingerprint(typo)), pytest.approx(j2))]
        d = hamming(CFP.fingerprint(original), CFP.fingerprint(typo))
        assert got(typo, min_jaccard=0.6) == [(910002, d, pytest.approx(j2)), (910001, d, pytest.approx(j1))]
        assert got(original) == [(910001, 0, 1.0), (910002, 0, 1.0)]
        # a single sketch (the old form) is the model's current rule: the old row has nothing to compare
        fp, sketches, band_keys = Page.query_signature(typo)
        assert set(sketches) == {1, 2} and sketches[2] == Page.sketch_text(typo) and band_keys == keys(typo)
        one = session.execute(Page.near_duplicates_of(fp, sketches[2], k=3))
        assert [(r.id, j) for r, _, j in one] == [(910002, pytest.approx(j2)), (910001, None)]  # 3 bits: Hamming keeps it
        session.rollback()


def test_a_model_with_its_own_verifier_compares_every_row_under_it(sa_engine):
    original, typo = ONE_TYPO
    with Session(sa_engine) as session:
        session.add_all([RuleOnePage(id=1, body=original), RuleOnePage(id=2, body=original)])
        session.flush()
        make_old(session, RuleOnePage, 2, original)  # simdb_rule NULL: ignored by a model with its own verifier
        assert session.execute(select(RuleOnePage.simdb_rule).order_by(RuleOnePage.id)).scalars().all() == [0, None]
        assert RuleOnePage.query_signature(typo)[1:] == ({0: sk(typo, V1)}, None)
        assert session.execute(RuleOnePage.near_duplicates(typo)).all() == []  # rule 1: the typo copy is not near
        found = [(r.id, j) for r, _, j in session.execute(RuleOnePage.near_duplicates(original))]
        assert found == [(1, 1.0), (2, 1.0)]
        assert RuleOnePage.recompute_sketches(session) == 1  # only the NULL row: its sketch is the same
        assert session.execute(select(RuleOnePage.simdb_sketch, RuleOnePage.simdb_rule)).all() == [(sk(original, V1), 0)] * 2
        session.rollback()


def test_recompute_sketches_moves_old_rows(sa_engine):
    rng = random.Random(11)
    texts = [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 30))) for _ in range(23)] + ["!!!", None]
    with Session(sa_engine) as session:
        rows = [Page(body=t) for t in texts]
        session.add_all(rows)
        session.flush()
        old = [r for i, r in enumerate(rows) if i % 3 != 1]
        for r in old:
            make_old(session, Page, r.id, r.body)
        session.execute(update(Page.__table__).where(Page.__table__.c.id == rows[1].id).values(simdb_rule=0))
        ids = [r.id for r in rows]
        assert Page.recompute_sketches(session, batch_size=4) == len(old) + 1
        assert Page.recompute_sketches(session.connection(), batch_size=4) == 0
        stored = dict(session.execute(select(Page.id, Page.simdb_sketch).where(Page.id.in_(ids))).all())
        assert stored == {r.id: None if t is None else sk(t) for r, t in zip(rows, texts)}
        rules = session.execute(select(Page.simdb_rule).where(Page.id.in_(ids))).scalars().all()
        assert rules == [2] * len(rows)
        band0 = dict(session.execute(select(Page.id, Page.simdb_band0).where(Page.id.in_(ids))).all())
        assert band0 == {r.id: None if t is None else (keys(t) or [None])[0] for r, t in zip(rows, texts)}
        session.rollback()


def test_recompute_sketches_fills_missing_band_keys(sa_engine):
    """Rule-2 rows written before the band columns (or by a Core insert without them) have a sketch
    and no keys: recompute_sketches fills them, and then has nothing left to do."""
    texts = [a for a, _ in AUDIT] + ["!!!", None]
    with Session(sa_engine) as session:
        rows = [Page(body=t) for t in texts]
        session.add_all(rows)
        session.flush()
        ids = [r.id for r in rows]
        session.execute(update(Page.__table__).where(Page.__table__.c.id.in_(ids)).values(**dict.fromkeys(BAND_COLUMNS)))
        _, typo = AUDIT[0]
        assert [r.id for r, _, _ in session.execute(Page.near_duplicates(typo))] == []  # 13 bits apart, no keys
        assert Page.recompute_sketches(session, batch_size=2) == len(AUDIT)  # "!!!" and None have no keys to fill
        assert Page.recompute_sketches(session) == 0
        cols = [getattr(Page, c) for c in BAND_COLUMNS]
        stored = {i: list(k) for i, *k in session.execute(select(Page.id, *cols).where(Page.id.in_(ids)))}
        assert stored == {r.id: keys(t) or [None] * len(BAND_COLUMNS) for r, t in zip(rows, texts)}
        assert [r.id for r, _, _ in session.execute(Page.near_duplicates(typo))] == [ids[0]]
        session.rollback()


@pytest.mark.parametrize("original,typo", AUDIT)
def test_one_typo_copies_beyond_k_are_found_by_their_band_keys(sa_engine, original, typo):
    """The audit's cases: one typo in a 12-14-word comment, well inside the rule but more than K
    bits apart; found by near_duplicates (both ways) and by near_pairs through two shared keys."""
    d = hamming(CFP.fingerprint(original), CFP.fingerprint(typo))
    j = S.sketch_jaccard(sk(original), sk(typo), 256)
    assert d > K and j >= 0.8 and sum(x == y for x, y in zip(keys(original), keys(typo))) >= 2
    with Session(sa_engine) as session:
        session.execute(sql_text("DELETE FROM verified_pages"))
        session.add_all([Page(id=1, body=original), Page(id=2, body=typo), Page(id=3, body="an unrelated comment about shipping")])
        session.flush()
        assert [(r.id, dist, jac) for r, dist, jac in session.execute(Page.near_duplicates(typo))] == [(2, 0, 1.0), (1, d, pytest.approx(j))]
        assert [r.id for r, _, _ in session.execute(Page.near_duplicates(original))] == [1, 2]
        assert [tuple(p) for p in session.execute(Page.near_pairs())] == [(1, 2, d, pytest.approx(j))]
        sig = Page.query_signature(typo)  # without its keys, K alone misses it
        assert [r.id for r, _, _ in session.execute(Page.near_duplicates_of(sig.fp, sig.sketches))] == [2]
        make_old(session, Page, 1, original)  # a rule-1 row has no keys: only K candidates
        assert [r.id for r, _, _ in session.execute(Page.near_duplicates(typo))] == [2]
        session.rollback()


def test_band_candidates_use_the_band_indexes(sa_engine):
    rng = random.Random(6)
    with Session(sa_engine) as session:
        session.add_all([Page(body=" ".join(rng.choice(VOCAB) for _ in range(25))) for _ in range(2000)])
        session.flush()
        session.execute(sql_text("ANALYZE verified_pages"))
        session.execute(sql_text("SET LOCAL enable_seqscan = off"))
        stmt = Page.near_duplicates(AUDIT[0][1])
        compiled = stmt.compile(session.bind, compile_kwargs={"literal_binds": True})
        plan = "\n".join(session.execute(sql_text(f"EXPLAIN {compiled}")).scalars())
        assert "Seq Scan on verified_pages" not in plan, plan
        for i in range(len(BAND_COLUMNS)):
            assert f"ix_verified_pages_simdb_band{i}" in plan, plan
        session.rollback()


def test_near_pairs_across_rules(sa_engine):
    """A pair is verified only when both rows have the same rule; an old and a new copy of one
    text have nothing comparable and fall back to their Hamming distance."""
    original, typo = ONE_TYPO
    d = hamming(CFP.fingerprint(original), CFP.fingerprint(typo))
    with Session(sa_engine) as session:
        session.execute(sql_text("DELETE FROM verified_pages"))
        session.add_all([Page(id=1, body=original), Page(id=2, body=typo), Page(id=3, body=original), Page(id=4, body=typo)])
        session.flush()
        make_old(session, Page, 3, original)
        make_old(session, Page, 4, typo)
        got = [(a, b, dist, j) for a, b, dist, j in session.execute(Page.near_pairs(k=0))]
        j2 = S.sketch_jaccard(sk(original), sk(typo), 256)
        # (1, 2): rule 2, near; (3, 4): rule 1, 0.7, not near; (1, 3), (2, 4): across rules, distance 0
        assert got == [(1, 2, d, pytest.approx(j2)), (1, 3, 0, None), (2, 4, 0, None)]
        assert [(a, b) for a, b, _, _ in session.execute(Page.near_pairs(k=0, min_jaccard=0.6))] == [(1, 2), (3, 4), (1, 3), (2, 4)]
        session.rollback()


@pytest.mark.parametrize(("fp", "error", "message"), [
    ("abc", InvalidTypeError, "fp must be an int"),
    (1.5, InvalidTypeError, "fp must be an int"),
    (-1, InvalidArgumentError, r"fp must be an unsigned 64-bit fingerprint .* got -1"),
    (2**64, InvalidArgumentError, "fp must be an unsigned 64-bit fingerprint"),
])
def test_near_duplicates_of_refuses_a_bad_fp_when_built(fp, error, message):
    """A bad ``fp`` used to pass ``near_duplicates_of`` and fail later: a bare TypeError
    ("unsupported operand type(s) for >>") for a str or float, a StatementError at execution for an
    int out of range. Now a typed error naming ``fp``, before any statement exists."""
    with pytest.raises(error, match=message):
        Page.near_duplicates_of(fp, None)
