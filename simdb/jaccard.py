"""Exact Jaccard answers (issue 8): stage-1 k from the threshold, stage-2 exact check.

Two stages:

1. **Candidates** by SimHash within Hamming distance ``k`` on a *candidate
   fingerprint* (words, term-frequency weights, stopwords KEPT), found exactly by
   the block indexes (k up to 11).
2. **Exact check** of every candidate on the stored shingle sets
   (:mod:`simdb.shingles`): ``icount(a & b)::float8 / icount(a | b)`` with the
   ``intarray`` extension inside PostgreSQL, or :func:`jaccard` in Python. Only
   pairs whose true Jaccard passes are returned, with the value.

Stage 2 makes precision exactly 1; recall is stage 1's candidate recall, so ``k``
is chosen from the threshold by the measured table :data:`THRESHOLD_K`
(``benchmarks/bench_quality.py``, real English and Chinese text).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "jaccard",
    "k_for_threshold",
    "THRESHOLD_K",
    "MIN_THRESHOLD",
    "candidate_fingerprinter",
    "CANDIDATE_OPTIONS",
    "SQL_JACCARD",
]

# threshold -> k for SimHash candidates: the smallest k whose candidate recall was
# >= 0.95 for the pairs at or above the threshold on both the English and the
# Chinese corpus of benchmarks/bench_quality.py (k = 11 where none reaches it:
# at 0.8 that is recall .994 English / .970 Chinese; at 0.7, .978 / .948).
# A threshold between rows uses the row below it. See the README table.
THRESHOLD_K: dict[float, int] = {
    0.95: 7,
    0.9: 9,
    0.8: 11,
    0.7: 11,
}
MIN_THRESHOLD = min(THRESHOLD_K)

# Options of the candidate Fingerprinter: words (jieba for CJK runs), TF weights,
# stopwords kept. Everything else is the default pipeline.
CANDIDATE_OPTIONS: dict = {"stopwords": False, "weighting": "tf"}

SQL_JACCARD = "icount({a} & {b})::float8 / NULLIF(icount({a} | {b}), 0)"


def jaccard(a: Iterable[int] | None, b: Iterable[int] | None) -> float | None:
    """Exact Jaccard similarity of two shingle sets; None when both are empty/None."""
    sa = set(a or ())
    sb = set(b or ())
    union = len(sa | sb)
    if union == 0:
        return None
    return len(sa & sb) / union


def _check_threshold(min_jaccard) -> float:
    if isinstance(min_jaccard, bool) or not isinstance(min_jaccard, (int, float)):
        raise TypeError(f"min_jaccard must be a number, not {type(min_jaccard).__name__}")
    t = float(min_jaccard)
    if not (0.0 < t <= 1.0):
        raise ValueError(f"min_jaccard must be in (0, 1], got {min_jaccard!r}")
    return t


def k_for_threshold(min_jaccard: float) -> int:
    """Stage-1 Hamming radius for a Jaccard threshold, from :data:`THRESHOLD_K`.

    Below :data:`MIN_THRESHOLD` SimHash candidates cannot reach the recall the
    table promises even at k = 11, so that is a ValueError (use MinHash banding,
    :mod:`simdb.minhash`, or a sequential scan with ``simdb_jaccard`` instead).
    """
    t = _check_threshold(min_jaccard)
    if t < MIN_THRESHOLD:
        raise ValueError(
            f"min_jaccard={min_jaccard!r} is below {MIN_THRESHOLD}: SimHash candidates (k <= 11) "
            "miss too many pairs there; use a sequential scan with simdb_jaccard() in SQL"
        )
    return THRESHOLD_K[max(x for x in THRESHOLD_K if x <= t)]


def candidate_fingerprinter():
    """The Fingerprinter whose fingerprints a Jaccard collection stores in ``fp``."""
    from simdb.fingerprint import Fingerprinter

    return Fingerprinter(**CANDIDATE_OPTIONS)


# ===========================================================================
# Store integration: what SimhashIndex(..., jaccard=True) calls.
#
# A Jaccard collection records in its configuration (``config["jaccard"]``) the
# shingle scheme and the MinHash banding, and uses the candidate Fingerprinter
# (stopwords kept) for its ``fp`` column. Each row keeps its shingle set in
# ``simdb_fingerprints.shingles`` and its band keys in ``simdb_minhash_bands``.
# Candidates come from the MinHash bands by default (measured: recall 1.000 at
# J >= 0.8 on both corpora, p50 well under 1 ms at 1M rows); ``k=`` asks for
# SimHash candidates within k instead. Either way the exact check decides.
# ===========================================================================

import json as _json  # noqa: E402
from typing import Any, NamedTuple  # noqa: E402

from sqlalchemy import text as _text  # noqa: E402

from simdb.minhash import MinHasher  # noqa: E402
from simdb.shingles import SCHEME, shingles as _shingles  # noqa: E402

CONFIG_KEY = "jaccard"
BANDS_TABLE = "simdb_minhash_bands"
#: high 12 bits of the advisory-lock keys of Jaccard writers (dedup's block locks use 0x5D8)
LOCK_TAG = 0x5D9


def collection_config(minhasher: MinHasher | None = None) -> dict:
    """What a Jaccard collection records under ``config["jaccard"]``."""
    mh = minhasher or MinHasher()
    return {"scheme": SCHEME, "minhash": mh.to_dict()}


def minhasher_of(config: dict) -> MinHasher:
    """The MinHasher recorded in a collection's ``config["jaccard"]``."""
    scheme = config.get("scheme")
    if scheme != SCHEME:
        raise ValueError(f"collection uses shingle scheme {scheme!r}; this simdb knows {SCHEME!r}")
    return MinHasher.from_dict(config.get("minhash") or {})


def prepare(text: str, mh: MinHasher) -> tuple[list[int] | None, list[int] | None]:
    """(shingles, band keys) of a text; (None, None) when it has no shingles."""
    sh = _shingles(text)
    if not sh:
        return None, None
    return sh, mh.keys_for(sh)


def _arr(values) -> str | None:
    return None if values is None else "{" + ",".join(str(int(v)) for v in values) + "}"


def store_bands(conn, collection_id: int, keys: list[str], bands: list[list[int] | None]) -> None:
    """Write the band keys of rows already in ``simdb_fingerprints`` (by key).

    Rows whose text had no shingles get no band row (an old one is deleted).
    """
    have = [(k, _arr(b)) for k, b in zip(keys, bands) if b]
    none = [k for k, b in zip(keys, bands) if not b]
    if have:
        conn.execute(
            _text(
                f"""
INSERT INTO {BANDS_TABLE} (fingerprint_id, collection_id, bands)
SELECT f.id, f.collection_id, CAST(x.b AS int4[])
FROM unnest(CAST(:keys AS text[]), CAST(:bands AS text[])) AS x(k, b)
JOIN simdb_fingerprints f ON f.collection_id = :c AND f.key = x.k
ON CONFLICT (fingerprint_id) DO UPDATE SET bands = EXCLUDED.bands
"""
            ),
            {"c": collection_id, "keys": [k for k, _ in have], "bands": [b for _, b in have]},
        )
    if none:
        conn.execute(
            _text(
                f"""
DELETE FROM {BANDS_TABLE} b USING simdb_fingerprints f
WHERE f.id = b.fingerprint_id AND f.collection_id = :c AND f.key = ANY(CAST(:keys AS text[]))
"""
            ),
            {"c": collection_id, "keys": none},
        )


_NEAR_BANDS = f"""
SELECT f.key, f.fp, coalesce(bit_count((f.fp # CAST(:q AS bigint))::bit(64))::int, 64) AS distance,
       simdb_jaccard(f.shingles, CAST(:s AS int4[])) AS jaccard, f.meta
FROM {BANDS_TABLE} b JOIN simdb_fingerprints f ON f.id = b.fingerprint_id
WHERE b.collection_id = :c AND b.bands && CAST(:b AS int4[])
  AND simdb_jaccard(f.shingles, CAST(:s AS int4[])) >= :t
ORDER BY jaccard DESC, f.key
"""

_NEAR_SIMHASH = """
SELECT f.key, f.fp, bit_count((f.fp # CAST(:q AS bigint))::bit(64))::int AS distance,
       simdb_jaccard(f.shingles, CAST(:s AS int4[])) AS jaccard, f.meta
FROM simdb_fingerprints f
WHERE f.collection_id = :c
  AND (f.b0 = ANY(CAST(:p0 AS int4[])) OR f.b1 = ANY(CAST(:p1 AS int4[]))
    OR f.b2 = ANY(CAST(:p2 AS int4[])) OR f.b3 = ANY(CAST(:p3 AS int4[])))
  AND bit_count((f.fp # CAST(:q AS bigint))::bit(64)) <= :k
  AND simdb_jaccard(f.shingles, CAST(:s AS int4[])) >= :t
ORDER BY jaccard DESC, f.key
"""


def check_min_jaccard(min_jaccard) -> float:
    """Validate a Jaccard threshold: a number in (0, 1]."""
    return _check_threshold(min_jaccard)


def near_rows(
    conn,
    collection_id: int,
    fp_signed: int | None,
    shingles: list[int] | None,
    bands: list[int] | None,
    min_jaccard: float,
    k: int | None = None,
    limit: int | None = None,
) -> list[tuple]:
    """Rows (key, fp signed, distance, jaccard, meta) with exact Jaccard >= min_jaccard,
    sorted by Jaccard (highest first), then key. ``k=None``: MinHash band candidates;
    an int: SimHash candidates within k (the block probes of :mod:`simdb.probes`)."""
    t = check_min_jaccard(min_jaccard)
    if not shingles:
        return []
    if k is None:
        if not bands:
            return []
        sql = _NEAR_BANDS
        params = {"c": collection_id, "q": fp_signed, "s": _arr(shingles), "b": _arr(bands), "t": t}
    else:
        from simdb import probes as _probes
        from simdb.bits import to_unsigned

        k = _probes.check_k(k)
        if fp_signed is None:
            return []
        p = _probes.probes(to_unsigned(fp_signed), k)
        sql = _NEAR_SIMHASH
        params = {"c": collection_id, "q": fp_signed, "s": _arr(shingles), "k": k, "t": t,
                  "p0": list(p[0]), "p1": list(p[1]), "p2": list(p[2]), "p3": list(p[3])}
    if limit is not None:
        sql += " LIMIT :limit"
        params["limit"] = int(limit)
    return [tuple(r) for r in conn.execute(_text(sql), params)]


def lock_keys(collection_id: int, bands: list[int]) -> list[int]:
    """Sorted advisory-lock keys (signed bigints) for a Jaccard writer's band keys.

    Layout: 12-bit tag | 20 bits of the collection id | 32-bit band key. Two texts
    that are candidates of each other share a band key, hence a lock.
    """
    from simdb.bits import to_signed

    cid = int(collection_id) & 0xFFFFF
    base = (LOCK_TAG << 52) | (cid << 32)
    return sorted({to_signed(base | (int(b) & 0xFFFFFFFF)) for b in bands})


def add_if_unique(
    conn,
    collection_id: int,
    key: str,
    fp: int | None,
    shingles: list[int] | None,
    bands: list[int] | None,
    min_jaccard: float,
    meta: Any = None,
    match=None,
):
    """Insert ``key`` unless a stored text has exact Jaccard >= ``min_jaccard`` with it.

    Same contract as :func:`simdb.dedup.add_if_unique` (runs in the caller's
    READ COMMITTED transaction; commit promptly), with the serialisation on the
    MinHash band keys: a writer locks the band keys of its text (and of the row it
    replaces), in sorted order, then searches, then inserts. Two texts that would
    find each other share a band key, so the second writer waits for the first
    to commit and then sees its row. ``match(row)`` turns a result row into a Match.
    """
    from simdb.bits import to_signed
    from simdb.dedup import _LOCK, _UPSERT, AddResult

    t = check_min_jaccard(min_jaccard)
    old = conn.execute(
        _text(
            f"SELECT b.bands FROM simdb_fingerprints f LEFT JOIN {BANDS_TABLE} b ON b.fingerprint_id = f.id "
            "WHERE f.collection_id = :c AND f.key = :key FOR UPDATE OF f"
        ),
        {"c": collection_id, "key": key},
    ).first()
    locks = set(lock_keys(collection_id, bands or []))
    if old is not None and old[0]:
        locks.update(lock_keys(collection_id, old[0]))
    if locks:
        conn.execute(_LOCK, {"keys": sorted(locks)})
    fp_signed = None if fp is None else to_signed(fp)
    if shingles:
        rows = near_rows(conn, collection_id, fp_signed, shingles, bands, t)
        if rows:
            return AddResult(False, [match(r) for r in rows] if match else rows)
    conn.execute(
        _UPSERT,
        {
            "c": collection_id,
            "key": key,
            "fp": fp_signed,
            "meta": None if meta is None else _json.dumps(meta),
            "shingles": shingles or None,
        },
    )
    store_bands(conn, collection_id, [key], [bands])
    return AddResult(True, [])


class JaccardPair(NamedTuple):
    """A pair with exact Jaccard >= the threshold; ``key_a`` was added before ``key_b``."""

    key_a: str
    key_b: str
    jaccard: float


_PAIRS_IDS = f"""
WITH kv AS MATERIALIZED (
  SELECT b.fingerprint_id AS id, unnest(b.bands) AS bk FROM {BANDS_TABLE} b WHERE b.collection_id = %(c)s
), hot AS (
  SELECT bk FROM kv GROUP BY bk HAVING count(*) > 1
), kv2 AS MATERIALIZED (
  SELECT kv.id, kv.bk FROM kv JOIN hot USING (bk)
), cand AS (
  SELECT DISTINCT x.id AS a, y.id AS b FROM kv2 x JOIN kv2 y ON x.bk = y.bk AND x.id < y.id
)
SELECT cand.a, cand.b, fa.key, fb.key, simdb_jaccard(fa.shingles, fb.shingles) AS j
FROM cand
JOIN simdb_fingerprints fa ON fa.id = cand.a
JOIN simdb_fingerprints fb ON fb.id = cand.b
WHERE simdb_jaccard(fa.shingles, fb.shingles) >= %(t)s
"""


def iter_id_pairs(engine, collection_id: int, min_jaccard: float, *, batch: int = 10_000, work_mem: str | None = "256MB"):
    """Stream (id_a, id_b, key_a, key_b, jaccard), id_a < id_b, each pair once.

    One statement (banded self-join over the colliding band keys only, exact
    check in PostgreSQL), read through a server-side cursor in batches: client
    memory is bounded by ``batch``.
    """
    t = check_min_jaccard(min_jaccard)
    raw = engine.raw_connection()
    try:
        with raw.cursor() as setup:
            if work_mem:
                setup.execute("SELECT set_config('work_mem', %s, false)", (work_mem,))
        cur = raw.cursor(name="simdb_jaccard_pairs")
        cur.itersize = batch
        cur.execute(_PAIRS_IDS, {"c": collection_id, "t": t})
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            yield from rows
        cur.close()
        raw.commit()
    finally:
        raw.close()


def iter_pairs(engine, collection_id: int, min_jaccard: float, *, batch: int = 10_000):
    """Every pair with exact Jaccard >= ``min_jaccard`` once, as :class:`JaccardPair`."""
    for a, b, ka, kb, j in iter_id_pairs(engine, collection_id, min_jaccard, batch=batch):
        yield JaccardPair(ka, kb, float(j))


def iter_clusters(engine, collection_id: int, min_jaccard: float, *, include_singletons: bool = False, batch: int = 10_000):
    """Connected components of the Jaccard pairs, as :class:`simdb.dedup.Cluster`
    (representative = earliest added), ordered by representative. Memory holds
    the ids of the rows that have a pair."""
    import numpy as np

    from simdb.dedup import Cluster, _components

    aa, bb, keys = [], [], {}
    for a, b, ka, kb, _ in iter_id_pairs(engine, collection_id, min_jaccard, batch=batch):
        aa.append(a)
        bb.append(b)
        keys[a] = ka
        keys[b] = kb
    if aa:
        members, roots = _components(np.asarray(aa, dtype=np.int64), np.asarray(bb, dtype=np.int64))
    else:
        members = roots = np.zeros(0, dtype=np.int64)
    clusters = []
    if len(roots):
        starts = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1])))
        ends = np.append(starts[1:], len(roots))
        for s, e in zip(starts.tolist(), ends.tolist()):
            ks = [keys[x] for x in members[s:e].tolist()]
            clusters.append((int(members[s]), Cluster(ks[0], ks)))
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
