"""The legacy Jaccard collections' rows in the store: band keys kept in step with the row,
the near query (MinHash band candidates, or SimHash within k) with the exact check inside
PostgreSQL, and ``add_if_unique`` serialised on the band keys.

A Jaccard collection records in its configuration (``config["jaccard"]``) the
shingle scheme and the MinHash banding, and uses the candidate Fingerprinter
(stopwords kept) for its ``fp`` column. Each row keeps its shingle set in
``simdb_fingerprints.shingles`` and its band keys in ``simdb_minhash_bands``.
Candidates come from the MinHash bands by default (measured: recall 1.000 at
J >= 0.8 on both corpora, p50 well under 1 ms at 1M rows); ``k=`` asks for
SimHash candidates within k instead. Either way the exact check decides.
"""

from __future__ import annotations

import json as _json
import re
from typing import Any

from sqlalchemy import text as _text
from sqlalchemy.exc import DBAPIError

from simdb import probes as _probes
from simdb import validate as _validate
from simdb.bits import BITS, to_signed, to_unsigned
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.jaccard_core import check_min_jaccard, lock_keys, prepare
from simdb.minhash import MinHasher
from simdb.results import AddResult, Match
from simdb.store import sql as _sql
from simdb.store.dedup import LOCK_SQL, RETRY_SQLSTATES, UPSERT_SQL
from simdb.store.search import near_params

__all__ = ["BANDS_TABLE", "add_if_unique", "index_add_if_unique", "near", "near_rows", "store_bands", "text_parts"]

BANDS_TABLE = "simdb_minhash_bands"


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
        params: dict[str, Any] = {"c": collection_id, "q": fp_signed, "s": _arr(shingles), "b": _arr(bands), "t": t}
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

#: for the Jaccard collections' writers (simdb.store.jaccard_write): the row's parts, the
#: collection's MinHasher (or a clear error)
text_parts = _text_parts
require_minhasher = _require
