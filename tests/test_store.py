"""The schema and the SQL functions, through plain SQL (what an analyst would type)."""

from __future__ import annotations

import random
import re

import psycopg
import psycopg.sql
import pytest
from sqlalchemy import text

from simdb.core.bits import blocks, hamming, to_signed, to_unsigned
from simdb.index import SimhashIndex
from simdb.store import sql
from simdb.store.candidates import near_params


@pytest.fixture
def index(database_url, collection_name):
    ix = SimhashIndex(database_url, collection_name)
    yield ix
    ix.close()


EDGE_FPS = [0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 0x0000_FFFF_0000_FFFF, 0xFFFF_0000_FFFF_0000, 0x8000_0000_0000_0001]


def test_block_columns_are_generated_from_plain_sql(engine, index):
    """Rows inserted by hand get b0..b3 from PostgreSQL, for every sign/edge case."""
    cid = index.collection_id
    with engine.begin() as conn:
        for i, fp in enumerate(EDGE_FPS):
            conn.execute(
                text("INSERT INTO simdb_fingerprints (collection_id, key, fp) VALUES (:c, :k, :fp)"),
                {"c": cid, "k": f"edge{i}", "fp": to_signed(fp)},
            )
        conn.execute(text("INSERT INTO simdb_fingerprints (collection_id, key, fp) VALUES (:c, 'null', NULL)"), {"c": cid})
        rows = conn.execute(
            text("SELECT key, fp, b0, b1, b2, b3, simdb_blocks(fp) FROM simdb_fingerprints WHERE collection_id = :c"),
            {"c": cid},
        ).all()
    by_key = {r[0]: r for r in rows}
    for i, fp in enumerate(EDGE_FPS):
        r = by_key[f"edge{i}"]
        assert to_unsigned(r[1]) == fp
        assert tuple(r[2:6]) == blocks(fp)
        assert list(r[6]) == list(blocks(fp))
    assert by_key["null"][2:] == (None, None, None, None, None)


def test_block_columns_follow_updates_and_refuse_direct_writes(engine, index):
    cid = index.collection_id
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO simdb_fingerprints (collection_id, key, fp) VALUES (:c, 'u', 5)"), {"c": cid})
        conn.execute(text("UPDATE simdb_fingerprints SET fp = -1 WHERE collection_id = :c AND key = 'u'"), {"c": cid})
        r = conn.execute(text("SELECT b0, b1, b2, b3 FROM simdb_fingerprints WHERE collection_id = :c AND key = 'u'"), {"c": cid}).one()
    assert tuple(r) == (65535, 65535, 65535, 65535)
    for stmt in (
        "INSERT INTO simdb_fingerprints (collection_id, key, fp, b0) VALUES (:c, 'v', 5, 7)",
        "UPDATE simdb_fingerprints SET b0 = 7 WHERE collection_id = :c",
    ):
        with pytest.raises(Exception, match="generated"):
            with engine.begin() as conn:
                conn.execute(text(stmt), {"c": cid})


def test_sql_hamming_matches_python(engine):
    rng = random.Random(1)
    pairs = [(a, b) for a in EDGE_FPS for b in EDGE_FPS] + [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(200)]
    with engine.connect() as conn:
        got = conn.execute(
            text("SELECT simdb_hamming(a, b) FROM unnest(CAST(:a AS bigint[]), CAST(:b AS bigint[])) AS t(a, b)"),
            {"a": [to_signed(a) for a, _ in pairs], "b": [to_signed(b) for _, b in pairs]},
        ).scalars().all()
        assert conn.execute(text("SELECT simdb_hamming(NULL, 1)")).scalar() is None
    assert got == [hamming(a, b) for a, b in pairs]


def test_sql_radii_and_ball(engine):
    from simdb.core import bits

    with engine.connect() as conn:
        for k in range(12):
            assert tuple(conn.execute(text("SELECT simdb_radii(:k)"), {"k": k}).scalar()) == bits.even_radii(k)
        for t in (-1, 0, 1, 2):
            got = conn.execute(text("SELECT simdb_ball(4660, :t)"), {"t": t}).scalar()
            assert sorted(got) == sorted(bits.ball(4660, t))


@pytest.mark.parametrize("k", [-1, 12, None])
def test_sql_near_rejects_bad_k(engine, index, k):
    with pytest.raises(Exception) as e:
        with engine.connect() as conn:
            conn.execute(text("SELECT * FROM simdb_near(:c, 1, :k)"), {"c": index.collection, "k": k})
    if k == 12:
        assert "between 0 and 11" in str(e.value)


def test_sql_near_unknown_collection(engine):
    with pytest.raises(Exception, match="no collection named"):
        with engine.connect() as conn:
            conn.execute(text("SELECT * FROM simdb_near('no such collection', 1)"))


def _plant(index, n=3000, seed=7):
    rng = random.Random(seed)
    base = [rng.getrandbits(64) for _ in range(n)]
    items = [{"key": f"r{i}", "fp": fp} for i, fp in enumerate(base)]
    for j in range(200):  # near-duplicates at distances 0..5
        fp = base[j]
        for b in rng.sample(range(64), j % 6):
            fp ^= 1 << b
        items.append({"key": f"d{j}", "fp": fp})
    index.add_many(items)
    return {it["key"]: it["fp"] for it in items}


@pytest.mark.parametrize("k", [0, 3, 5, 11])
def test_sql_near_equals_brute_force(engine, index, k):
    rows = _plant(index)
    rng = random.Random(k)
    with engine.connect() as conn:
        for q in [rows[f"r{i}"] for i in rng.sample(range(200), 25)] + [rng.getrandbits(64) for _ in range(5)]:
            got = conn.execute(
                text("SELECT key, fp, distance FROM simdb_near(:c, :q, :k)"),
                {"c": index.collection, "q": to_signed(q), "k": k},
            ).all()
            want = sorted((hamming(q, fp), key) for key, fp in rows.items() if hamming(q, fp) <= k)
            assert [(d, key) for key, _, d in got] == want
            assert all(to_unsigned(fp) == rows[key] for key, fp, _ in got)


def test_sql_near_default_k_and_null(engine, index):
    rows = _plant(index, n=500)
    with engine.connect() as conn:
        got = conn.execute(text("SELECT key FROM simdb_near(:c, :q)"), {"c": index.collection, "q": to_signed(rows["r0"])}).scalars().all()
        assert "r0" in got and all(hamming(rows[k], rows["r0"]) <= 3 for k in got)
        assert conn.execute(text("SELECT count(*) FROM simdb_near(:c, NULL)"), {"c": index.collection}).scalar() == 0


def _seq_and_idx_scans(conn):
    return conn.execute(
        "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables WHERE relname = %s",
        (sql.FINGERPRINTS,),
    ).fetchone() or (0, 0)


@pytest.mark.parametrize("k", [0, 3, 7, 11])
def test_sql_near_uses_block_indexes_not_a_scan(database_url, index, k):
    rows = _plant(index, n=3000)
    dsn = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        conn.execute("ANALYZE simdb_fingerprints")
        conn.commit()
        with conn.transaction():
            before = _seq_and_idx_scans(conn)
            for i in range(10):  # > 5 calls: the plan cache switches to the generic plan
                conn.execute("SELECT * FROM simdb_near(%s, %s, %s)", (index.collection, to_signed(rows[f"r{i}"]), k)).fetchall()
            after = _seq_and_idx_scans(conn)
        assert after[0] == before[0], "simdb_near scanned simdb_fingerprints sequentially"
        assert after[1] > before[1]


@pytest.mark.parametrize("k", [0, 3, 7, 11])
def test_near_and_near_many_use_block_indexes(database_url, index, k):
    rows = _plant(index, n=3000)
    conn = index.connection()
    conn.execute("ANALYZE simdb_fingerprints")
    with conn.transaction():
        before = _seq_and_idx_scans(conn)
        for i in range(10):
            index.near(rows[f"r{i}"], k=k)
        index.near_many([rows[f"r{i}"] for i in range(50)], k=k)
        after = _seq_and_idx_scans(conn)
    assert after[0] == before[0], "near/near_many scanned simdb_fingerprints sequentially"
    assert after[1] > before[1]
    # and the plan near() runs says so, too: near() executes NEAR_SQL as a prepared statement
    # under plan_cache_mode = force_generic_plan (SimhashIndex._new_connection), so that is the
    # plan to explain. (An EXPLAIN with the values inlined is a custom plan: on a table this small
    # PostgreSQL 15 rightly prefers a hash join over a 3,000-row sequential scan at k=11 there.)
    assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
    params = near_params(index.collection_id, rows["r0"], k)
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql.NEAR_SQL)))
    prepared = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql.NEAR_SQL)
    conn.execute(f"PREPARE simdb_plan_check AS {prepared}")
    try:
        args = psycopg.sql.SQL(", ").join(psycopg.sql.Literal(params[n]) for n in names)
        plan = "\n".join(r[0] for r in conn.execute(
            psycopg.sql.SQL("EXPLAIN EXECUTE simdb_plan_check({})").format(args)).fetchall())
    finally:
        conn.execute("DEALLOCATE simdb_plan_check")
    assert "Seq Scan" not in plan and "Index Only Scan" in plan


def test_analyst_queries(engine, index):
    """The plain-SQL answers of docs/sql.md: near-duplicates of row X, and all pairs in a collection."""
    rows = _plant(index, n=1000)
    with engine.connect() as conn:
        got = conn.execute(
            text(
                "SELECT n.key, n.distance FROM simdb_fingerprints x "
                "JOIN simdb_collections c ON c.id = x.collection_id "
                "CROSS JOIN LATERAL simdb_near(c.name, x.fp, 3) n "
                "WHERE c.name = :c AND x.key = :key AND n.key <> x.key"
            ),
            {"c": index.collection, "key": "r3"},
        ).all()
        want = sorted((k, hamming(rows["r3"], fp)) for k, fp in rows.items() if k != "r3" and hamming(rows["r3"], fp) <= 3)
        assert sorted(got) == want
        pairs = conn.execute(text(PAIRS_SQL), {"c": index.collection}).all()
    keys = sorted(rows)
    want_pairs = {
        (a, b)
        for i, a in enumerate(keys)
        for b in keys[i + 1 :]
        if hamming(rows[a], rows[b]) <= 3
    }
    assert {(a, b) for a, b, _ in pairs} == want_pairs
    assert all(d == hamming(rows[a], rows[b]) for a, b, d in pairs)


# Kept in sync with docs/sql.md (section "The functions").
PAIRS_SQL = """
SELECT DISTINCT a.key AS key_a, b.key AS key_b, simdb_hamming(a.fp, b.fp) AS distance
FROM simdb_fingerprints a
JOIN simdb_collections c ON c.id = a.collection_id AND c.name = :c
JOIN simdb_fingerprints b ON b.collection_id = a.collection_id AND a.key < b.key
 AND (a.b0 = b.b0 OR a.b1 = b.b1 OR a.b2 = b.b2 OR a.b3 = b.b3)
WHERE simdb_hamming(a.fp, b.fp) <= 3
ORDER BY 1, 2
"""


def test_keys_are_unique_per_collection(engine, index):
    with pytest.raises(Exception, match="uq_simdb_fingerprints_collection_key"):
        with engine.begin() as conn:
            for _ in range(2):
                conn.execute(text("INSERT INTO simdb_fingerprints (collection_id, key, fp) VALUES (:c, 'dup', 1)"), {"c": index.collection_id})


def test_deleting_a_collection_cascades(engine, database_url, collection_name):
    ix = SimhashIndex(database_url, collection_name)
    ix.add("a", fp=1)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM simdb_collections WHERE id = :c"), {"c": ix.collection_id})
        n = conn.execute(text("SELECT count(*) FROM simdb_fingerprints WHERE collection_id = :c"), {"c": ix.collection_id}).scalar()
    assert n == 0
    ix.close()


def test_a_big_staged_load_is_vacuumed(fresh_database_url, monkeypatch):
    """A load of VACUUM_MIN_ROWS rows or more into a populated collection (the staged path) is
    followed by VACUUM, so that its pages become all-visible and the candidate search stays an
    index-only scan; a smaller one is not (autovacuum's business), nor one with vacuum=False."""
    from simdb.store import bulk

    monkeypatch.setattr(bulk, "VACUUM_MIN_ROWS", 50)
    with SimhashIndex(fresh_database_url, "vac", verify=False) as ix:
        ix.add("first", fp=1)  # populated: the staged path, not the rebuild
        ix.add_many({"key": f"a{i}", "fp": i * 7919} for i in range(20))
        assert "vacuum" not in ix.last_load["seconds"] and not ix.last_load["rebuilt"]
        ix.add_many({"key": f"b{i}", "fp": i * 104729} for i in range(60))
        assert "vacuum" in ix.last_load["seconds"] and not ix.last_load["rebuilt"]
        with ix.engine.connect() as c:  # VACUUM's own record (whether it could mark the pages all-visible
            # depends on the snapshots other sessions hold, so that is not asserted here)
            assert c.execute(text(
                "SELECT vacuum_count + autovacuum_count > 0 FROM pg_stat_user_tables WHERE relname = 'simdb_fingerprints'"
            )).scalar()
        ix.add_many(({"key": f"c{i}", "fp": i * 3} for i in range(60)), vacuum=False)
        assert "vacuum" not in ix.last_load["seconds"]
