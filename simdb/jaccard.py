"""Exact Jaccard answers (issue 8): candidates, then an exact check inside PostgreSQL.

Two stages:

1. **Candidates**, from either generator:

   * **MinHash LSH bands** (default; :mod:`simdb.minhash`): texts sharing a band
     key, looked up in ``simdb_minhash_bands`` through a GIN index. Measured on
     real English and Chinese text: candidate recall 1.000 at J >= 0.8 and about
     one candidate per query at 1M rows (p50 under 1 ms);
   * **SimHash within k** on the collection's *candidate fingerprint* (words,
     term-frequency weights, stopwords KEPT), found exactly by the block indexes
     (k up to 11); ``k`` for a threshold from the measured table
     :data:`THRESHOLD_K`. Recall .994 / .970 at J >= 0.8 with k = 11, and slow on
     real text at 1M rows (fingerprints crowd into a few block buckets).

2. **Exact check** of every candidate on the stored shingle sets
   (:mod:`simdb.shingles`): ``icount(a & b)::float8 / icount(a | b)`` with the
   ``intarray`` extension inside PostgreSQL, or :func:`jaccard` in Python. Only
   pairs whose true Jaccard passes are returned, with the value: precision is
   exactly 1 and recall is the candidate recall.

The second half of the module is what ``SimhashIndex(..., jaccard=True)``
delegates to: add / update / add_many keep shingles and band keys in step with
the row, ``near`` / ``add_if_unique`` / ``pairs`` / ``clusters`` take
``min_jaccard``. Numbers: docs/jaccard.md.
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
    "JaccardPair",
    "collection_config",
    "minhasher_of",
    "prepare",
    "near_rows",
    "add_if_unique",
    "iter_pairs",
    "iter_clusters",
    "add_many",
]

# threshold -> k for SimHash candidates: the smallest k whose candidate recall was
# >= 0.95 for the pairs at or above the threshold on both the English and the
# Chinese corpus of benchmarks/bench_quality.py (k = 11 where none reaches it:
# at 0.8 that is recall .994 English / .970 Chinese; at 0.7, .978 / .948).
# A threshold between rows uses the row below it. See the table in docs/jaccard.md.
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
        raise InvalidTypeError(f"min_jaccard must be a number, not {type(min_jaccard).__name__}")
    t = float(min_jaccard)
    if not (0.0 < t <= 1.0):
        raise InvalidArgumentError(f"min_jaccard must be in (0, 1], got {min_jaccard!r}")
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
import re  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from sqlalchemy import text as _text  # noqa: E402
from sqlalchemy.exc import DBAPIError  # noqa: E402

from simdb import probes as _probes  # noqa: E402
from simdb import validate as _validate  # noqa: E402
from simdb.bits import BITS, to_signed, to_unsigned  # noqa: E402
from simdb.dedup import LOCK_SQL, RETRY_SQLSTATES, UPSERT_SQL, components  # noqa: E402
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError, SimdbError  # noqa: E402
from simdb.fingerprint import Fingerprinter  # noqa: E402
from simdb.minhash import MinHasher  # noqa: E402
from simdb.results import AddResult, Cluster, JaccardPair, Match  # noqa: E402
from simdb.shingles import SCHEME  # noqa: E402
from simdb.shingles import shingles as _shingles
from simdb.store import sql as _sql  # noqa: E402
from simdb.store.bulk_locks import ADD_LOCK  # noqa: E402
from simdb.store.encode import ITEM_FIELDS, describe_item  # noqa: E402
from simdb.store.search import near_params  # noqa: E402

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
        conn.execute(LOCK_SQL, {"keys": sorted(locks)})
    fp_signed = None if fp is None else to_signed(fp)
    if shingles:
        rows = near_rows(conn, collection_id, fp_signed, shingles, bands, t)
        if rows:
            return AddResult(False, [match(r) for r in rows] if match else rows)
    conn.execute(
        UPSERT_SQL,
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


#: re-exported: its home is simdb.results
_JACCARD_PAIR = JaccardPair


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
    for a, b, ka, kb, j in iter_id_pairs(engine, collection_id, min_jaccard, batch=batch):
        yield JaccardPair(ka, kb, float(j))


def iter_clusters(engine, collection_id: int, min_jaccard: float, *, include_singletons: bool = False, batch: int = 10_000):
    """Connected components of the Jaccard pairs, as :class:`simdb.dedup.Cluster`
    (representative = earliest added), ordered by representative. Memory holds
    the ids of the rows that have a pair."""
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


# ---------------------------------------------------------------- bulk load
_JSTAGE = "simdb_jaccard_stage"
#: add_many of at least this many items goes through the GIN pending list (see add_many)
BULK_BANDS_ROWS = 50_000
_JSTAGE_DDL = (
    f'CREATE TEMP TABLE IF NOT EXISTS {_JSTAGE} (key text COLLATE "C" NOT NULL, fp bigint, meta jsonb, '
    "shingles int4[], bands int4[])"
)


def _items(items, fingerprinter, mh: MinHasher, chunk_rows: int, max_text_bytes: int | None = None):
    """Validate items and yield chunks of rows (key, fp signed, meta json, shingles, bands)."""
    chunk: list[list] = []
    texts: list[str] = []

    def flush():
        need = [r for r in chunk if r[5] is not None]
        if need:
            fps = fingerprinter.many([r[5] for r in need], empty=None)
            sets = [_shingles(r[5]) for r in need]
            sigs = mh.signatures(sets)
            for r, fp, sh, sig in zip(need, fps, sets, sigs):
                if r[1] is None and fp is not None:
                    r[1] = fp - (1 << 64) if fp >> 63 else fp
                r[3] = sh or None
                r[4] = mh.band_keys(sig) or None
        out = [tuple(r[:5]) for r in chunk]
        chunk.clear()
        texts.clear()
        return out

    for i, item in enumerate(items):
        try:
            meta = text = fp = None
            if isinstance(item, Mapping):
                extra = set(item) - ITEM_FIELDS
                if extra:
                    raise ValueError(f"unknown field(s) {sorted(map(str, extra))}; use key, text, fp, meta")
                if "key" not in item:
                    raise ValueError("missing 'key'")
                key, text, fp, meta = item["key"], item.get("text"), item.get("fp"), item.get("meta")
            elif isinstance(item, (tuple, list)):
                if len(item) != 2:
                    raise ValueError(f"expected a (key, text) pair, got a sequence of length {len(item)}")
                key, text = item
            else:
                raise TypeError(f"expected a (key, text) pair or a mapping, got {type(item).__name__}")
            key = _validate.check_key(key)
            meta_json = _validate.dump_meta(meta)
            if text is not None:
                _validate.check_text(text, "text", max_text_bytes)
            if fp is None and text is None:
                raise ValueError("give text or fp")
            signed = _validate.check_fp(fp) if fp is not None else None
        except (TypeError, ValueError) as exc:
            typed = type(exc) if isinstance(exc, SimdbError) else (
                InvalidTypeError if isinstance(exc, TypeError) else InvalidArgumentError)
            raise typed(f"add_many: {describe_item(i, item)}: {exc}") from None
        # [key, fp, meta, shingles, bands, text]; a text also gives the shingles when fp is given
        chunk.append([key, signed, meta_json, None, None, text])
        if len(chunk) >= chunk_rows:
            yield flush()
    if chunk:
        yield flush()


def add_many(index, items, *, chunk_rows: int = 20_000) -> int:
    """``SimhashIndex.add_many`` for a Jaccard collection: fingerprints, shingle sets and
    band keys in one transaction (all or nothing), streamed through COPY in chunks of
    ``chunk_rows`` items. Existing keys are replaced; within a call the last item wins."""
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
    mh = index.minhasher
    cid = index.collection_id
    conn = index.connection()
    total = 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", (ADD_LOCK, cid))
        conn.execute(_JSTAGE_DDL)
        conn.execute(f"TRUNCATE {_JSTAGE}")
        with conn.cursor() as cur:
            with cur.copy(f"COPY {_JSTAGE} (key, fp, meta, shingles, bands) FROM STDIN") as cp:
                for rows in _items(items, index.fingerprinter, mh, chunk_rows, index.max_text_bytes):
                    for r in rows:
                        cp.write_row(r)
                    total += len(rows)
        conn.execute(f"DELETE FROM {_JSTAGE} a USING {_JSTAGE} b WHERE a.key = b.key AND a.ctid < b.ctid")
        conn.execute(
            f"DELETE FROM simdb_fingerprints f USING {_JSTAGE} s WHERE f.collection_id = %s::int4 AND f.key = s.key",
            (cid,),
        )
        conn.execute(
            "INSERT INTO simdb_fingerprints (collection_id, key, fp, meta, shingles) "
            f"SELECT %s::int4, key, fp, meta, shingles FROM {_JSTAGE}",
            (cid,),
        )
        # A big load fills the GIN index through its pending list and merges it once
        # (about 2x faster than entry-by-entry inserts), at the price of an ACCESS
        # EXCLUSIVE lock on the index until commit: readers wait, as for the
        # drop-and-rebuild path of plain collections.
        bulk = total >= BULK_BANDS_ROWS
        if bulk:
            conn.execute(f"ALTER INDEX {BANDS_TABLE}_gin SET (fastupdate = on)")
            conn.execute("SET LOCAL gin_pending_list_limit = '256MB'")
        conn.execute(
            f"INSERT INTO {BANDS_TABLE} (fingerprint_id, collection_id, bands) "
            f"SELECT f.id, f.collection_id, s.bands FROM {_JSTAGE} s "
            "JOIN simdb_fingerprints f ON f.collection_id = %s::int4 AND f.key = s.key WHERE s.bands IS NOT NULL",
            (cid,),
        )
        if bulk:
            conn.execute(f"SELECT gin_clean_pending_list('{BANDS_TABLE}_gin'::regclass)")
            conn.execute(f"ALTER INDEX {BANDS_TABLE}_gin SET (fastupdate = off)")
        conn.execute(f"TRUNCATE {_JSTAGE}")
    return total


# ------------------------------------------------ SimhashIndex delegates
def minhasher_for(name: str, stored_config: dict, want: bool | None) -> MinHasher | None:
    """The MinHasher of a collection (None: not a Jaccard collection), checking ``jaccard=``.

    ``want=None`` takes whatever the collection records; ``True`` requires a Jaccard
    collection; ``False`` requires a plain one.
    """
    cfg = stored_config.get(CONFIG_KEY) if isinstance(stored_config, dict) else None
    if want and cfg is None:
        raise CollectionConfigError(
            f"collection {name!r} was created without jaccard=True, so it keeps no shingle sets; "
            "create a new collection with jaccard=True (and re-add its texts) for Jaccard answers"
        )
    if want is False and cfg is not None:
        raise CollectionConfigError(
            f"collection {name!r} is a Jaccard collection (created with jaccard=True); open it with jaccard=None"
        )
    return None if cfg is None else minhasher_of(cfg)


def _require(index) -> MinHasher:
    mh = getattr(index, "minhasher", None)
    if mh is None:
        raise ValueError(
            f"min_jaccard needs a Jaccard collection: collection {index.collection!r} keeps no shingle sets "
            "(create it with SimhashIndex(..., jaccard=True))"
        )
    return mh


def _signed(u: int | None) -> int | None:
    return None if u is None else (u - (1 << 64) if u >> 63 else u)


def _text_parts(index, text, fp):
    """(signed fp, shingles, bands) for add/update/add_if_unique of a Jaccard collection."""
    mh = _require(index)
    if text is None and fp is None:
        raise InvalidArgumentError("give text or fp")
    if text is not None:
        _validate.check_text(text, "text", getattr(index, "max_text_bytes", None))
    if fp is not None:
        signed = _validate.check_fp(fp)
    else:
        signed = _signed(index.fingerprinter.fingerprint(text, empty=None))
    sh, bands = prepare(text, mh) if text is not None else (None, None)
    return signed, sh, bands


def add(index, key: str, text, fp, meta) -> int | None:
    """``SimhashIndex.add`` for a Jaccard collection: row, shingle set and band keys together."""
    key = _validate.check_key(key)
    signed, sh, bands = _text_parts(index, text, fp)
    meta_json = _validate.dump_meta(meta)
    with index.transaction() as conn:
        conn.execute(
            "INSERT INTO simdb_fingerprints (collection_id, key, fp, meta, shingles) "
            "VALUES (%(c)s::int4, %(key)s, %(fp)s::int8, %(meta)s::jsonb, %(sh)s::int4[]) "
            "ON CONFLICT (collection_id, key) DO UPDATE "
            "SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, created_at = now()",
            {"c": index.collection_id, "key": key, "fp": signed, "meta": meta_json, "sh": sh},
        )
        _store_bands_psycopg(conn, index.collection_id, key, bands)
    return None if signed is None else signed & ((1 << 64) - 1)


def update(index, key: str, text, fp, meta, unset) -> int | None:
    """``SimhashIndex.update`` for a Jaccard collection (KeyError if ``key`` is absent)."""
    key = _validate.check_key(key)
    signed, sh, bands = _text_parts(index, text, fp)
    params = {"c": index.collection_id, "key": key, "fp": signed, "sh": sh}
    sets = "fp = %(fp)s::int8, shingles = %(sh)s::int4[], created_at = now()"
    if meta is not unset:
        params["meta"] = _validate.dump_meta(meta)
        sets += ", meta = %(meta)s::jsonb"
    with index.transaction() as conn:
        cur = conn.execute(
            f"UPDATE simdb_fingerprints SET {sets} WHERE collection_id = %(c)s::int4 AND key = %(key)s", params
        )
        if cur.rowcount == 0:
            raise KeyError(key)
        _store_bands_psycopg(conn, index.collection_id, key, bands)
    return None if signed is None else signed & ((1 << 64) - 1)


def _store_bands_psycopg(conn, collection_id: int, key: str, bands) -> None:
    if bands:
        conn.execute(
            f"INSERT INTO {BANDS_TABLE} (fingerprint_id, collection_id, bands) "
            "SELECT id, collection_id, %(b)s::int4[] FROM simdb_fingerprints WHERE collection_id = %(c)s::int4 AND key = %(k)s "
            "ON CONFLICT (fingerprint_id) DO UPDATE SET bands = EXCLUDED.bands",
            {"b": bands, "c": collection_id, "k": key},
        )
    else:
        conn.execute(
            f"DELETE FROM {BANDS_TABLE} b USING simdb_fingerprints f WHERE f.id = b.fingerprint_id "
            "AND f.collection_id = %(c)s::int4 AND f.key = %(k)s",
            {"c": collection_id, "k": key},
        )


def _to_match(row):
    key, fp, d, j, meta = row
    fp_u = None if fp is None else fp & ((1 << 64) - 1)
    return Match(key, fp_u, int(d), 1.0 - int(d) / BITS, float(j), meta)


def near(index, query, min_jaccard, k=None, limit=None) -> list:
    """``SimhashIndex.near(text, min_jaccard=...)``: Matches with exact Jaccard >= min_jaccard,
    highest Jaccard first (then key). Candidates from the MinHash bands, or SimHash within
    ``k`` if given. The query must be a text (shingles need words, not a fingerprint)."""
    mh = _require(index)
    t = check_min_jaccard(min_jaccard)
    limit = _validate.check_limit(limit)
    if isinstance(query, str):
        _validate.check_text(query, "query", getattr(index, "max_text_bytes", None))
    else:
        raise InvalidTypeError(
            f"near(..., min_jaccard=...) needs the query text (str), got {type(query).__name__}: "
            "Jaccard similarity is computed on the text's shingles"
        )
    if k is not None:
        k = _probes.check_k(k)
    sh, bands = prepare(query, mh)
    if not sh:
        return []
    fp_u = index.fingerprinter.fingerprint(query, empty=None)
    conn = index.connection()
    if k is None:
        if not bands:
            return []
        sql = _NEAR_BANDS_PG
        params = {"c": index.collection_id, "q": _signed(fp_u), "s": _arr(sh), "b": _arr(bands), "t": t}
        if limit is not None:
            sql += " LIMIT %(limit)s"
            params["limit"] = limit
    else:
        if fp_u is None:
            return []
        params = near_params(index.collection_id, fp_u, k, index._radii(fp_u, k), limit)
        params.update(s=_arr(sh), t=t)
        sql = _near_simhash_sql()
    return [_to_match(r) for r in conn.execute(sql, params).fetchall()]


def _pyformat(sql: str) -> str:
    return re.sub(r"(?<!:):([a-z0-9_]+)", r"%(\1)s", sql)


_NEAR_BANDS_PG = _pyformat(_NEAR_BANDS)
_NEAR_SIMHASH_SQL: list[str] = []


def _near_simhash_sql() -> str:
    """SimHash candidates within k exactly as ``SimhashIndex.near`` finds them (index-only
    block probes, :data:`simdb.store.sql.NEAR_SQL`), then the exact check on their shingles."""
    if not _NEAR_SIMHASH_SQL:
        blocks = "\n    UNION ALL ".join(_sql.block_candidates(b) for b in range(4))
        _NEAR_SIMHASH_SQL.append(
            f"""
WITH m AS (
  SELECT DISTINCT fp FROM (
    {blocks}
  ) u
)
SELECT f.key, f.fp, bit_count((f.fp # %(q)s::int8)::bit(64))::int AS distance,
       simdb_jaccard(f.shingles, %(s)s::int4[]) AS jaccard, f.meta
FROM m JOIN simdb_fingerprints f
  ON f.collection_id = %(c)s::int4 AND f.b0 = ((m.fp >> 48) & 65535)::int AND f.fp = m.fp
WHERE simdb_jaccard(f.shingles, %(s)s::int4[]) >= %(t)s
ORDER BY jaccard DESC, f.key
LIMIT %(limit)s::int8
"""
        )
    return _NEAR_SIMHASH_SQL[0]


def index_add_if_unique(index, key: str, text, fp, meta, min_jaccard, *, retries: int = 5):
    """``SimhashIndex.add_if_unique(..., min_jaccard=...)``: its own transaction, retried on
    deadlock / serialization failure like :func:`simdb.dedup.run_add_if_unique`."""
    key = _validate.check_key(key)
    t = check_min_jaccard(min_jaccard)
    signed, sh, bands = _text_parts(index, text, fp)
    _validate.dump_meta(meta)
    if index._closed:
        raise RuntimeError("SimhashIndex is closed")
    u = None if signed is None else signed & ((1 << 64) - 1)
    for attempt in range(retries + 1):
        try:
            with index.engine.begin() as conn:
                return add_if_unique(conn, index.collection_id, key, u, sh, bands, t, meta, match=_to_match)
        except DBAPIError as exc:
            state = getattr(getattr(exc, "orig", None), "sqlstate", None)
            if state not in RETRY_SQLSTATES or attempt == retries:
                raise
    raise AssertionError("unreachable")
