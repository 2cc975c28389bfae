"""Banded verified collections (issue 26): band keys stored by every write path, and the band
candidate stage + verification against brute force, through PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from simdb.core import sketch as S
from simdb.core.bits import hamming
from simdb.core.sketch import bands as B
from simdb.errors import CollectionConfigError, InvalidArgumentError
from simdb.index import SimhashIndex
from simdb.store import sql as _sql

SLOW = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
VOCAB = [f"w{i}" for i in range(40)] + list("中文字词语句")

# a rule pair (Jaccard 0.818) 13 bits apart: beyond the K = 11 Hamming candidates
FAR_A = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 orange40"
FAR_B = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 zz492"


@pytest.fixture(scope="module")
def bix(database_url):
    ix = SimhashIndex(database_url, "banded-" + uuid.uuid4().hex[:8])
    yield ix
    ix.close()


def _stored_bands(ix: SimhashIndex) -> dict[str, list[int] | None]:
    with ix.engine.connect() as c:
        rows = c.execute(text("SELECT key, bands FROM simdb_fingerprints WHERE collection_id = :c"),
                         {"c": ix.collection_id}).all()
    return dict(rows)


def _want_keys(t: str) -> list[int] | None:
    k = B.text_band_keys([t])[0]
    return None if k is None else k.tolist()


def test_new_verified_collections_are_banded_and_every_write_path_stores_keys(bix, database_url):
    assert bix.bands and bix.config["bands"] == B.BAND_SCHEME
    bix.clear()
    long = " ".join(f"x{i}" for i in range(S.SKETCH_SIZE + 50))  # a sketch cut at its size: keys of the full set
    bix.add("add", FAR_A)
    bix.add("long", long)
    bix.add_many([("many", "one two three four five six"), ("many-long", long + " tail")])
    bix.add_many([(f"bulk{i}", f"bulk text number {i} with some words") for i in range(300)], workers=2)
    assert bix.add_if_unique("unique", "a completely different sentence about cats").inserted
    bix.add("fp-only", fp=12345)
    bix.add("empty", "")
    bix.update("add", "now another text entirely for this key")
    got = _stored_bands(bix)
    assert got["add"] == _want_keys("now another text entirely for this key")
    assert got["long"] == _want_keys(long) and got["many-long"] == _want_keys(long + " tail")
    assert got["many"] == _want_keys("one two three four five six")
    assert got["bulk7"] == _want_keys("bulk text number 7 with some words")
    assert got["unique"] == _want_keys("a completely different sentence about cats")
    assert got["fp-only"] is None and got["empty"] is None
    bix.add("long", fp=99)  # replaced by a fingerprint: its keys go
    assert _stored_bands(bix)["long"] is None


def test_rule_pair_beyond_the_hamming_radius_is_found(bix):
    """J = 0.818 at 13 bits: the K = 11 candidates missed it; a shared band key finds it."""
    fp = bix.fingerprinter
    assert hamming(fp.fingerprint(FAR_A), fp.fingerprint(FAR_B)) > S.DEFAULT_K
    assert S.jaccard(S.token_shingles(FAR_A), S.token_shingles(FAR_B)) >= 0.8
    bix.clear()
    bix.add("a", FAR_A)
    assert [m.key for m in bix.near(FAR_B)] == ["a"]
    assert [[m.key for m in ms] for ms in bix.near_many([FAR_B, "unrelated words here"])] == [["a"], []]
    res = bix.add_if_unique("b", FAR_B)
    assert not res.inserted and [m.key for m in res.matches] == ["a"]
    bix.add("b", FAR_B)
    assert [(p.key_a, p.key_b) for p in bix.pairs()] == [("a", "b")]
    assert [c.keys for c in bix.clusters()] == [["a", "b"]]


def test_a_verified_collection_without_band_keys_is_refused(database_url):
    """A verified collection without band keys (no "bands" in its config: only development builds after
    0.1.0 wrote one) is refused, naming the way out: re-create it (simdb convert opens it first)."""
    name = "unbanded-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as ix:
        with ix.engine.begin() as c:
            c.execute(text("UPDATE simdb_collections SET config = config - 'bands' WHERE id = :c"),
                      {"c": ix.collection_id})
    with pytest.raises(CollectionConfigError, match=rf"{name}.*without band keys.*Re-create.*simdb drop -c {name}"):
        SimhashIndex(database_url, name)


def test_fingerprint_rows_answer_by_hamming(bix):
    bix.clear()
    fp = bix.fingerprinter.fingerprint(FAR_A)
    bix.add("near-fp", fp=fp ^ 0b111)
    bix.add("far-fp", fp=fp ^ 0b1111)
    assert [(m.key, m.distance, m.jaccard) for m in bix.near(FAR_A)] == [("near-fp", 3, None)]
    assert [(m.key, m.distance) for m in bix.near(FAR_A, k=4)] == [("near-fp", 3), ("far-fp", 4)]
    bix.add("text", FAR_A)  # pairs: fingerprint rows by distance <= 3 (with each other, and with the text)
    assert {(p.key_a, p.key_b) for p in bix.pairs()} == {("near-fp", "far-fp"), ("near-fp", "text")}


def test_unknown_band_scheme_is_refused(database_url):
    name = "future-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as ix:
        with ix.engine.begin() as c:
            c.execute(text("UPDATE simdb_collections SET config = jsonb_set(config, '{bands}', '\"minhash-v9\"') "
                           "WHERE id = :c"), {"c": ix.collection_id})
    with pytest.raises(ValueError, match="minhash-v9"):
        SimhashIndex(database_url, name)


def _corpus(rng: random.Random) -> list[str]:
    """Random short texts, with planted near-duplicates (one word replaced, dropped or inserted)."""
    texts = []
    for _ in range(rng.randint(3, 14)):
        w = [rng.choice(VOCAB) for _ in range(rng.randint(1, 40))]
        texts.append(" ".join(w))
        for _ in range(rng.randint(0, 3)):
            c = list(w)
            op = rng.random()
            if op < 0.4 and c:
                c[rng.randrange(len(c))] = rng.choice(VOCAB)
            elif op < 0.7 and len(c) > 1:
                del c[rng.randrange(len(c))]
            else:
                c.insert(rng.randrange(len(c) + 1), rng.choice(VOCAB))
            texts.append(" ".join(c))
    texts.append("")
    return texts


#: the band keys a candidate shares in a new collection (two: scheme oph-b14r5-m2-v3)
SHARED = B.min_shared(B.BAND_SCHEME)


def _shares_key(a: str, b: str, shared: int = SHARED) -> bool:
    """Do ``a`` and ``b`` share the keys of at least ``shared`` bands (a new collection's candidate rule)?"""
    ka, kb = B.text_band_keys([a, b])
    return ka is not None and kb is not None and int((ka == kb).sum()) >= shared


@SLOW
@given(st.randoms(use_true_random=False), st.sampled_from([0.5, 0.8, 0.9]))
def test_near_pairs_and_add_if_unique_equal_brute_force(bix, rng, t):
    """Every answer satisfies the rule (exact Jaccard >= t; the sets are below the sketch size),
    and the answers are exactly the rule pairs that share two band keys: the only misses are the
    S-curve's (measured in test_recall_follows_the_s_curve). Below the keys' reach (t = 0.5) ``near``
    is the brute force itself, and ``add_if_unique`` and ``pairs`` refuse the threshold."""
    bix.clear()
    texts = _corpus(rng)
    stored = {f"k{i}": x for i, x in enumerate(texts)}
    if rng.random() < 0.5:
        bix.add_many(stored.items())
    else:
        for k, x in stored.items():
            bix.add(k, x)
    sets = {k: set(S.token_shingles(x)) for k, x in stored.items()}

    def rule(a: set, b: set) -> float | None:
        return len(a & b) / len(a | b) if a and b else None

    scans = bix.rule.scans(t)  # below the keys' reach (0.79) a text is compared with every row, exactly

    def candidate(a: str, b: str) -> bool:
        return scans or _shares_key(a, b)

    queries = [texts[0], texts[1], " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 30)))]
    many = bix.near_many(queries, min_jaccard=t)
    for q, got_many in zip(queries, many):
        qs = set(S.token_shingles(q))
        want = sorted(
            ((k, rule(qs, s)) for k, s in sets.items() if rule(qs, s) is not None and rule(qs, s) >= t
             and candidate(q, stored[k])),
            key=lambda r: (-r[1], r[0]),
        )
        matches = bix.near(q, min_jaccard=t)
        assert matches == sorted(matches, key=lambda m: (-m.jaccard, m.distance, m.key))
        got = [(m.key, m.jaccard) for m in matches]
        assert {k for k, _ in got} == {k for k, _ in want}
        assert all(j == pytest.approx(rule(qs, sets[k])) and j >= t for k, j in got)
        assert {m.key for m in got_many} == {k for k, _ in got}
        if scans:  # whole-collection and per-insert operations refuse a threshold below the reach
            with pytest.raises(InvalidArgumentError, match="is below 0.79"):
                bix.add_if_unique("probe", q, min_jaccard=t)
            continue
        res = bix.add_if_unique("probe", q, min_jaccard=t)
        assert res.inserted == (not want)
        bix.remove("probe")
    if scans:
        with pytest.raises(InvalidArgumentError, match="is below 0.79"):
            bix.pairs(min_jaccard=t)
        return
    order = list(stored)
    want_pairs = {
        (a, b) for i, a in enumerate(order) for b in order[i + 1:]
        if (j := rule(sets[a], sets[b])) is not None and j >= t and _shares_key(stored[a], stored[b])
    }
    got_pairs = {(p.key_a, p.key_b) for p in bix.pairs(min_jaccard=t)}
    assert got_pairs == want_pairs
    assert {k for c in bix.clusters(min_jaccard=t) for k in c.keys} == {k for p in want_pairs for k in p}


def test_recall_follows_the_s_curve():
    """Over 2,000 planted near-duplicate pairs of short texts (fixed seed), the share that shares
    two band keys is at least the S-curve's prediction at each pair's Jaccard, less 3 sd."""
    rng = random.Random(26)
    words = [f"v{i}" for i in range(5000)]
    found = expected = var = 0.0
    n = 0
    for _ in range(2000):
        w = [rng.choice(words) for _ in range(rng.randint(15, 60))]
        c = list(w)
        c[rng.randrange(len(c))] = rng.choice(words)
        a, b = " ".join(w), " ".join(c)
        j = S.jaccard(S.token_shingles(a), S.token_shingles(b))
        if j is None or j < 0.75:
            continue
        p = B.s_curve(j, shared=SHARED)
        n += 1
        expected += p
        var += p * (1 - p)
        found += _shares_key(a, b)
    assert n > 1000
    assert found >= expected - 3 * var**0.5 - 1


def test_async_index_delegates_banded_collections(database_url, bix):
    from simdb.aio import AsyncSimhashIndex

    bix.clear()

    async def go():
        async with AsyncSimhashIndex(database_url, bix.collection) as ax:
            await ax.add("a", FAR_A)
            res = await ax.add_if_unique("b", FAR_B)
            return [m.key for m in await ax.near(FAR_B)], res.inserted

    assert asyncio.run(go()) == (["a"], False)
    assert _stored_bands(bix)["a"] == _want_keys(FAR_A)


def test_bulk_rebuild_path_keeps_the_bands_index(fresh_database_url):
    """add_many's drop-COPY-rebuild path (an empty table) recreates the band indexes."""
    from simdb.store.migrate import migrate

    migrate(fresh_database_url)
    with SimhashIndex(fresh_database_url, "bulk") as ix:
        ix.add_many([("a", FAR_A), ("x", "other words entirely here")], rebuild_indexes=True)
        assert ix.last_load["rebuilt"]
        with ix.engine.connect() as c:
            for name in _sql.BANDS_INDEXES:
                assert c.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None
        assert _stored_bands(ix)["a"] == _want_keys(FAR_A)
        assert [m.key for m in ix.near(FAR_B)] == ["a"]


def test_concurrent_add_if_unique_admits_one_of_a_family(bix):
    """Writers of near-duplicates far apart in Hamming distance (13 bits) but sharing band keys:
    the band locks serialise them, exactly one of each family gets in."""
    from concurrent.futures import ThreadPoolExecutor

    bix.clear()
    family = [FAR_A, FAR_B, FAR_A + " x", FAR_B + " y", FAR_A.replace("music0", "music1")]
    verifier = S.Verifier()

    def near(a: str, b: str) -> bool:  # near-duplicates by the rule as the index verifies it, sharing a key
        return (S.sketch_jaccard(verifier.sketch(a), verifier.sketch(b), verifier.size) or 0) >= 0.8 and _shares_key(a, b)

    texts: list[str] = []
    for t in family:  # a family in which every two texts are near-duplicates: exactly one may get in
        if all(near(t, u) for u in texts):
            texts.append(t)
    texts *= 2

    def go(i: int) -> bool:
        return bix.add_if_unique(f"w{i}", texts[i]).inserted

    with ThreadPoolExecutor(8) as pool:
        inserted = list(pool.map(go, range(len(texts))))
    assert len(texts) >= 6 and sum(inserted) == 1


def test_queries_probe_the_band_indexes(bix):
    """The band candidates come from the per-band btrees, not a scan of the collection."""
    from simdb.store import candidates as C

    bix.clear()
    bix.add_many([(f"r{i}", f"row number {i} of a collection with words {i % 97} and {i % 89}") for i in range(3000)])
    with bix.engine.connect() as c:
        c.exec_driver_sql("ANALYZE simdb_fingerprints")
    keys = B.band_keys_text(B.text_band_keys([FAR_A])[0])
    params = C.band_near_params(bix.collection_id, bix.fingerprinter.fingerprint(FAR_A), keys, 3, bix.rule.shared)
    plan = "\n".join(r[0] for r in bix.connection().execute("EXPLAIN " + C.BAND_NEAR_SQL, params).fetchall())
    assert "ix_simdb_fingerprints_band1" in plan and "ix_simdb_fingerprints_band14" in plan
    assert "Seq Scan on simdb_fingerprints" not in plan


def test_a_load_leaves_statistics_of_the_band_expressions(fresh_database_url, monkeypatch):
    """A load of ANALYZE_MIN_ROWS rows or more runs ANALYZE: the band btrees are expression indexes,
    which have no statistics before one, and without them the planner sent all 14 probes of a banded
    near() through one band's index (a scan of it per probe)."""
    from simdb.store import bulk as bulk_mod

    monkeypatch.setattr(bulk_mod, "ANALYZE_MIN_ROWS", 40)
    rng = random.Random(5)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    with SimhashIndex(fresh_database_url, "stats-" + uuid.uuid4().hex[:6]) as ix:
        ix.add_many(((f"t{i}", " ".join(rng.choice(words) for _ in range(30))) for i in range(60)),
                    rebuild_indexes=False, vacuum=False)
        assert ix.last_load["seconds"].get("analyze") is not None
        with ix.engine.connect() as c:
            analysed = c.execute(text("SELECT count(*) FROM pg_stats WHERE tablename = :t"),
                                 {"t": next(iter(_sql.BANDS_INDEXES))}).scalar()
    assert analysed == 1


def test_candidates_are_fetched_by_key_in_a_one_collection_database(fresh_database_url):
    """The only collection of its database (its collection_id matches every row): the planner
    estimates each band probe at a default share of the rows and used to hash-join the candidates
    with a sequential scan of the whole table (23 ms a query at 100,000 rows); each candidate is
    fetched by its primary key instead."""
    from simdb.store import candidates as C

    with SimhashIndex(fresh_database_url, "only-" + uuid.uuid4().hex[:6]) as ix:
        ix.add_many([(f"r{i}", f"row number {i} of a collection with words {i % 97} and {i % 89}") for i in range(3000)])
        ix.connection().execute("ANALYZE simdb_fingerprints")
        keys = B.band_keys_text(B.text_band_keys([FAR_A])[0])
        params = C.band_near_params(ix.collection_id, ix.fingerprinter.fingerprint(FAR_A), keys, 3, ix.rule.shared)
        plan = "\n".join(r[0] for r in ix.connection().execute("EXPLAIN " + C.BAND_NEAR_SQL, params).fetchall())
    assert "Seq Scan on simdb_fingerprints" not in plan, plan
