"""All pairs and clusters of a legacy Jaccard collection: candidates from shared MinHash band
keys, the exact Jaccard check inside PostgreSQL, union-find for the clusters."""

from __future__ import annotations

import numpy as np
from sqlalchemy import text as _text

from simdb.block_pairs import components
from simdb.jaccard_core import check_min_jaccard
from simdb.minhash import MinHasher
from simdb.results import Cluster, JaccardPair
from simdb.store.jaccard_search import BANDS_TABLE

__all__ = ["iter_clusters", "iter_id_pairs", "iter_pairs"]

# All pairs, in steps inside one transaction so that each is planned with real row
# counts (a single CTE chain over all 20M band keys at 1M rows was estimated at
# 7e10 candidate pairs and ran for minutes): (1) band by band, the rows whose key
# in that band is shared (a 1M-group hash aggregate per band fits in work_mem),
# (2) the distinct candidate id pairs, (3) the exact check of the candidates
# through the primary key, read by a server-side cursor.
_PAIRS_KV = "CREATE TEMP TABLE simdb_jp_kv (id bigint, band int, bk int4) ON COMMIT DROP"


_PAIRS_BAND = f"""
INSERT INTO simdb_jp_kv
SELECT b.fingerprint_id, %(j)s, b.bands[%(j)s] FROM {BANDS_TABLE} b
WHERE b.collection_id = %(c)s AND b.bands[%(j)s] IN (
  SELECT x.bands[%(j)s] FROM {BANDS_TABLE} x WHERE x.collection_id = %(c)s GROUP BY 1 HAVING count(*) > 1)
"""


_PAIRS_CAND = [
    "ANALYZE simdb_jp_kv",
    """
CREATE TEMP TABLE simdb_jp_cand ON COMMIT DROP AS
SELECT DISTINCT x.id AS a, y.id AS b FROM simdb_jp_kv x JOIN simdb_jp_kv y
  ON x.band = y.band AND x.bk = y.bk AND x.id < y.id
""",
    "ANALYZE simdb_jp_cand",
]


_PAIRS_IDS = """
SELECT c.a, c.b, fa.key, fb.key, simdb_jaccard(fa.shingles, fb.shingles) AS j
FROM simdb_jp_cand c
JOIN simdb_fingerprints fa ON fa.id = c.a
JOIN simdb_fingerprints fb ON fb.id = c.b
WHERE least(cardinality(fa.shingles), cardinality(fb.shingles))
        >= %(t)s * greatest(cardinality(fa.shingles), cardinality(fb.shingles)) - 1e-9  -- J <= |small|/|large|: exact, O(1)
  AND simdb_jaccard(fa.shingles, fb.shingles) >= %(t)s
"""


def iter_id_pairs(engine, collection_id: int, min_jaccard: float, *, batch: int = 10_000, work_mem: str | None = "256MB"):
    """Stream (id_a, id_b, key_a, key_b, jaccard), id_a < id_b, each pair once.

    Banded self-join over the band keys shared by more than one row, exact check
    in PostgreSQL, read through a server-side cursor in batches: client memory
    is bounded by ``batch``. One transaction (one snapshot).
    """
    t = check_min_jaccard(min_jaccard)
    raw = engine.raw_connection()
    try:
        with raw.cursor() as setup:
            setup.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            setup.execute("SELECT name, config ? 'jaccard' FROM simdb_collections WHERE id = %s", (collection_id,))
            row = setup.fetchone()
            if row is not None and not row[1]:
                raise ValueError(
                    f"min_jaccard needs a Jaccard collection: collection {row[0]!r} keeps no shingle sets "
                    "(create it with SimhashIndex(..., jaccard=True))"
                )
            if work_mem:
                setup.execute("SELECT set_config('work_mem', %s, true)", (work_mem,))
            setup.execute("SELECT set_config('max_parallel_workers_per_gather', '0', true)")
            setup.execute(
                "SELECT (config->'jaccard'->'minhash'->>'bands')::int FROM simdb_collections WHERE id = %s",
                (collection_id,),
            )
            nb = setup.fetchone()
            setup.execute(_PAIRS_KV)
            for j in range(1, (nb[0] if nb and nb[0] else MinHasher().bands) + 1):
                setup.execute(_PAIRS_BAND, {"c": collection_id, "j": j})
            for step in _PAIRS_CAND:
                setup.execute(step)
        cur = raw.cursor(name="simdb_jaccard_pairs")
        cur.itersize = batch
        cur.execute(_PAIRS_IDS, {"t": t})
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            yield from rows
        cur.close()
        raw.commit()
    finally:
        try:
            raw.rollback()
        except Exception:
            pass
        raw.close()


def iter_pairs(engine, collection_id: int, min_jaccard: float, *, batch: int = 10_000):
    """Every pair with exact Jaccard >= ``min_jaccard`` once, as :class:`JaccardPair`."""
    for _a, _b, ka, kb, j in iter_id_pairs(engine, collection_id, min_jaccard, batch=batch):
        yield JaccardPair(ka, kb, float(j))


def _pair_clusters(engine, collection_id: int, min_jaccard: float, batch: int) -> tuple[np.ndarray, list]:
    """(ids of the rows that have a pair, [(representative id, Cluster)] ordered by representative)."""
    aa, bb, keys = [], [], {}
    for a, b, ka, kb, _ in iter_id_pairs(engine, collection_id, min_jaccard, batch=batch):
        aa.append(a)
        bb.append(b)
        keys[a] = ka
        keys[b] = kb
    if aa:
        members, roots = components(np.asarray(aa, dtype=np.int64), np.asarray(bb, dtype=np.int64))
    else:
        members = roots = np.zeros(0, dtype=np.int64)
    clusters = []
    if len(roots):
        starts = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1])))
        ends = np.append(starts[1:], len(roots))
        for s, e in zip(starts.tolist(), ends.tolist()):
            ks = [keys[x] for x in members[s:e].tolist()]
            clusters.append((int(members[s]), Cluster(ks[0], ks)))
    return members, clusters


def iter_clusters(engine, collection_id: int, min_jaccard: float, *, include_singletons: bool = False, batch: int = 10_000):
    """Connected components of the Jaccard pairs, as :class:`simdb.dedup.Cluster`
    (representative = earliest added), ordered by representative. Memory holds
    the ids of the rows that have a pair."""
    members, clusters = _pair_clusters(engine, collection_id, min_jaccard, batch)
    if not include_singletons:
        for _, c in clusters:
            yield c
        return
    in_cluster = set(members.tolist())
    ci, last = 0, None
    with engine.connect() as conn:
        while True:
            rows = conn.execute(
                _text(
                    "SELECT id, key FROM simdb_fingerprints WHERE collection_id = :c AND id > :last "
                    "ORDER BY id LIMIT :n"
                ),
                {"c": collection_id, "last": -(1 << 63) if last is None else last, "n": batch},
            ).all()
            if not rows:
                break
            for rid, key in rows:
                while ci < len(clusters) and clusters[ci][0] < rid:
                    yield clusters[ci][1]
                    ci += 1
                if rid not in in_cluster:
                    yield Cluster(key, [key])
            last = rows[-1][0]
    while ci < len(clusters):
        yield clusters[ci][1]
        ci += 1
