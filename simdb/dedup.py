"""Deduplication workflows on the store: insert-unless-near-duplicate, all pairs, clusters.

The functions here take an Engine (or a Connection) and a collection id;
``SimhashIndex.add_if_unique/pairs/clusters`` are thin delegates.

Insert unless a near-duplicate exists (:func:`add_if_unique`)
--------------------------------------------------------------
Two fingerprints within Hamming distance k share a probed block value (the
(generalized) pigeonhole principle of :mod:`simdb.probes`). A writer takes
transaction-scoped advisory locks on ``(collection, block, value)`` for its
own four exact block values *and* every value it probes, in sorted order,
then searches, then inserts, then commits (which releases the locks). Two
writers whose fingerprints are within k of each other (for either writer's
k) always share one lock, so the second one waits until the first has
committed and then sees its row. Writers far apart share no lock and run in
parallel: there is no global lock.

All pairs (:func:`iter_pairs`)
-------------------------------
Per block i, PostgreSQL groups the collection's rows by the 16-bit value b_i
(one parallel hash aggregate; each group arrives as one ``bytea`` of
(id, fp) pairs, so the client handles ~65k messages per block instead of one
per row). The client collects complete groups into chunks of about
``chunk_rows`` rows and compares them vectorised in numpy: two fingerprints
within 3 that share block i differ in at most 3 of the other 48 bits, so
they also share one of four 12-bit sub-blocks of those bits. Per sub-block
the chunk is sorted once on the 28-bit key (b_i, sub-block) packed with the
row position into one uint64, and only equal-key runs are compared. A pair
is reported at the first block (and first sub-block) it shares, so no
DISTINCT is needed and every pair comes out exactly once. The four block
scans run in one REPEATABLE READ snapshot; keys are looked up in batches on
a second connection that imports the same snapshot.

For k = 4..11 the four blocks still answer exactly with radii (the
generalized pigeonhole of :mod:`simdb.probes`): :mod:`simdb.radius_pairs`
joins each block group with the groups within its radius, on all the
collection's (id, fp) rows read by one binary COPY.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, text

from simdb import probes as _probes
from simdb import radius_pairs as _radius_pairs
from simdb import validate as _validate
from simdb.bits import MASK64, to_signed, to_unsigned
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.results import AddResult, Cluster, Match, Pair, VerifiedPair, match
from simdb.sketch import sketch_jaccard_many, sketch_matrix
from simdb.store import sql as _sql
from simdb.store.search import near_params, verified_matches

__all__ = [
    "AddResult",
    "Cluster",
    "Pair",
    "VerifiedPair",
    "add_if_unique",
    "add_if_unique_statements",
    "RETRY_SQLSTATES",
    "run_add_if_unique",
    "check_pairs_k",
    "iter_clusters",
    "iter_id_pairs",
    "iter_pairs",
    "lock_keys",
    "pairs_in_chunk",
]

FINGERPRINTS = _sql.FINGERPRINTS

# ---------------------------------------------------------------------------
# add_if_unique
# ---------------------------------------------------------------------------

#: high 12 bits of every simdb advisory-lock key (so they stay apart from an app's own keys)
LOCK_TAG = 0x5D8


def lock_keys(collection_id: int, fp: int, k: int) -> list[int]:
    """Sorted advisory-lock keys (signed bigints) a writer of unsigned ``fp`` takes for radius ``k``.

    One key per (collection, block, value) for the four exact block values of
    ``fp`` and every value probed for ``k``. Key layout (unsigned, 64 bits):
    12-bit tag | 32-bit collection id | 2-bit block | 2 zero bits | 16-bit value.
    """
    k = _probes.check_k(k)
    base = _lock_base(collection_id)
    own = ((fp >> 48) & 0xFFFF, (fp >> 32) & 0xFFFF, (fp >> 16) & 0xFFFF, fp & 0xFFFF)
    keys = set()
    for i, values in enumerate(_probes.probes(fp, k)):
        keys.add(base | (i << 18) | own[i])
        for v in values:
            keys.add(base | (i << 18) | v)
    return sorted(to_signed(key) for key in keys)


# The locks are taken in the order of the (sorted) array: a volatile function in the
# select list is evaluated after the ORDER BY's sort.
_LOCK = text(
    "SELECT count(*) FROM (SELECT pg_advisory_xact_lock(l.k) FROM unnest(CAST(:keys AS int8[])) "
    "WITH ORDINALITY AS l(k, n) ORDER BY l.n) s"
)
_UPSERT = text(
    f"""
INSERT INTO {FINGERPRINTS} (collection_id, key, fp, meta, shingles)
VALUES (:c, :key, :fp, CAST(:meta AS jsonb), CAST(:shingles AS int4[]))
ON CONFLICT (collection_id, key) DO UPDATE
  SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, created_at = now()
"""
)


def _lock_base(collection_id: int) -> int:
    return (LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFFFFF) << 20)


# One statement: lock the row of the key (FOR UPDATE, if it exists) and take the advisory
# locks for our own keys plus the row's four block values, sorted (the volatile lock
# function is evaluated above the sort). All keys are positive bigints (tag 0x5D8).
_LOCK_WITH_OLD = text(
    f"""
SELECT count(*) FROM (
  SELECT pg_advisory_xact_lock(l.k) FROM (
    SELECT unnest(CAST(:keys AS int8[])) AS k
    UNION
    SELECT CAST(:base AS int8) + (i.i::int8 << 18) + (ARRAY[o.b0, o.b1, o.b2, o.b3])[i.i + 1]
    FROM (SELECT b0, b1, b2, b3 FROM {FINGERPRINTS} WHERE collection_id = :c AND key = :key FOR UPDATE) o
    CROSS JOIN generate_series(0, 3) AS i(i)
  ) l WHERE l.k IS NOT NULL ORDER BY l.k
) s"""
)

_NEAR_OR_INSERT: list[str] = []


def _near_or_insert_sql() -> str:
    """The store's near query and a conditional upsert in one statement (one snapshot)."""
    if not _NEAR_OR_INSERT:
        near = _sql.NEAR_SQL.strip().rstrip(";")
        _NEAR_OR_INSERT.append(
            f"""
WITH m AS MATERIALIZED ({near}
), ins AS (
  INSERT INTO {FINGERPRINTS} (collection_id, key, fp, meta, shingles)
  SELECT %(c)s, %(key)s, %(q)s, %(meta)s::jsonb, %(shingles)s::int4[]
  WHERE NOT EXISTS (SELECT 1 FROM m)
  ON CONFLICT (collection_id, key) DO UPDATE
    SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, created_at = now()
  RETURNING 1
)
SELECT m.key, m.fp, m.distance, m.meta FROM m ORDER BY m.distance, m.key
"""
        )
    return _NEAR_OR_INSERT[0]


def _match(key: str, fp_signed: int, distance: int, meta: Any) -> Match:
    return match(key, to_unsigned(fp_signed), distance, meta)


def _check_text(value: object, where: str) -> None:
    """PostgreSQL text holds valid UTF-8 without NUL: say so instead of failing deep in the driver."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{where} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgumentError(f"{where} {value[:80]!r} contains a NUL character, which PostgreSQL text cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{where} {value[:80]!r} is not valid Unicode text (lone surrogate {value[exc.start]!r} at "
            f"position {exc.start}; e.g. bytes decoded with errors='surrogateescape'): PostgreSQL text "
            "cannot store it; decode the bytes properly or use errors='replace'"
        ) from None


def add_if_unique(
    conn: Connection,
    collection_id: int,
    key: str,
    fp: int | None,
    k: int = 3,
    meta: Any = None,
    shingles: list[int] | None = None,
    *,
    verify: tuple | None = None,
) -> AddResult:
    """Insert ``key`` with unsigned fingerprint ``fp`` unless a row within ``k`` exists.

    ``verify=(verifier, min_jaccard, hamming_k)`` (verified collections): ``k`` is the
    candidate radius and a candidate counts only if the verification stage keeps it
    (:meth:`simdb.sketch.Verifier.judge` against ``shingles``, the text's sketch). The
    locks are the same (on the candidate radius), so the contract is the same.

    Runs inside the caller's transaction on ``conn`` (READ COMMITTED), which must
    be committed (or rolled back) promptly: the advisory locks are held until
    then. ``fp=None`` (a text without features) never matches and is always
    inserted. An existing row with the same key is not a match by itself: if it
    is near, it is reported as a match (and nothing changes); if it is far, it is
    replaced, as :meth:`SimhashIndex.add` does.
    """

    k = _probes.check_k(k)
    _check_text(key, "key")
    if fp is not None:
        if isinstance(fp, bool) or not isinstance(fp, numbers.Integral) or not 0 <= int(fp) <= MASK64:
            raise InvalidArgumentError(f"fp must be an unsigned 64-bit fingerprint, got {fp!r}")
        fp = int(fp)
    meta_json = _validate.dump_meta(meta)
    # 1. lock the row being replaced (if any) and take the advisory locks: our own block values
    #    and probes, plus the block values of the row we would replace, in sorted order
    conn.execute(
        _LOCK_WITH_OLD,
        {
            "keys": [] if fp is None else lock_keys(collection_id, fp, k),
            "base": _lock_base(collection_id),
            "c": collection_id,
            "key": key,
        },
    )
    if fp is None:  # featureless: never a near-duplicate of anything
        conn.execute(_UPSERT, {"c": collection_id, "key": key, "fp": None, "meta": meta_json, "shingles": shingles})
        return AddResult(True, [])
    # 2. a new statement (a new snapshot, taken after the locks): search, and insert if nothing is near
    params = near_params(collection_id, fp, k)
    params.update(key=key, meta=meta_json, shingles=shingles)
    if verify is not None:
        verifier, t, hk = verify
        found = verified_matches(conn.exec_driver_sql(_sql.NEAR_VERIFY_SQL, params).all(), shingles, verifier, t, hk)
        if found:
            return AddResult(False, found)
        conn.execute(_UPSERT, {"c": collection_id, "key": key, "fp": to_signed(fp), "meta": meta_json,
                               "shingles": shingles})
        return AddResult(True, [])
    rows = conn.exec_driver_sql(_near_or_insert_sql(), params).all()
    if rows:
        return AddResult(False, [_match(r[0], r[1], r[2], r[3]) for r in rows])
    return AddResult(True, [])


#: SQLSTATEs worth retrying the whole transaction for (deadlock, serialization failure)
_RETRY_STATES = {"40P01", "40001"}
#: the same, public, for front ends that run :func:`add_if_unique_statements` themselves
RETRY_SQLSTATES = frozenset(_RETRY_STATES)


def _psycopg_text(statement) -> str:
    """A SQLAlchemy ``text()`` of this module as psycopg's ``%(name)s`` SQL (compiled, not copied)."""
    from sqlalchemy.dialects.postgresql import psycopg as _dialect

    return str(statement.compile(dialect=_dialect.dialect()))


def add_if_unique_statements(
    collection_id: int, key: str, fp: int | None, k: int = 3, meta_json: str | None = None,
    shingles: list[int] | None = None,
) -> list[tuple[str, dict]]:
    """The statements of :func:`add_if_unique`, in order, as (psycopg SQL, parameters).

    For front ends on another driver (``simdb.aio`` runs them on an async psycopg connection):
    run them in ONE transaction, in order, and retry the transaction on
    :data:`RETRY_SQLSTATES`. The last statement's rows (key, signed fp, distance, meta) are the
    near-duplicates that stopped the insert; no rows: inserted. ``fp`` unsigned (None:
    featureless, always inserted); ``meta_json`` already JSON text.
    """
    k = _probes.check_k(k)
    _check_text(key, "key")
    if fp is not None:
        if isinstance(fp, bool) or not isinstance(fp, numbers.Integral) or not 0 <= int(fp) <= MASK64:
            raise ValueError(f"fp must be an unsigned 64-bit fingerprint, got {fp!r}")
        fp = int(fp)
    lock = (
        _psycopg_text(_LOCK_WITH_OLD),
        {"keys": [] if fp is None else lock_keys(collection_id, fp, k), "base": _lock_base(collection_id),
         "c": collection_id, "key": key},
    )
    if fp is None:
        return [lock, (_psycopg_text(_UPSERT),
                       {"c": collection_id, "key": key, "fp": None, "meta": meta_json, "shingles": shingles})]
    params = near_params(collection_id, fp, k)
    params.update(key=key, meta=meta_json, shingles=shingles)
    return [lock, (_near_or_insert_sql(), params)]


def run_add_if_unique(
    engine: Engine, collection_id: int, key: str, fp: int | None, k: int = 3, meta: Any = None,
    shingles: list[int] | None = None, *, retries: int = 5, verify: tuple | None = None,
) -> AddResult:
    """:func:`add_if_unique` in a transaction of its own (committed before returning).

    The locks are taken in one sorted statement, so writers cannot deadlock on
    them; a deadlock or serialization failure reported by PostgreSQL anyway (e.g.
    with other writers of the same key) is retried a few times.
    """
    from sqlalchemy.exc import DBAPIError

    for attempt in range(retries + 1):
        try:
            with engine.begin() as conn:
                return add_if_unique(conn, collection_id, key, fp, k, meta, shingles, verify=verify)
        except DBAPIError as exc:
            state = getattr(getattr(exc, "orig", None), "sqlstate", None)
            if state not in _RETRY_STATES or attempt == retries:
                raise
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------
# all pairs: vectorised comparison of block groups
# ---------------------------------------------------------------------------

_SHIFTS = (48, 32, 16, 0)  # block i holds bits [_SHIFTS[i], _SHIFTS[i] + 16)
_BLOCK_MASK = tuple(0xFFFF << s for s in _SHIFTS)


def _sub_masks(i: int) -> tuple[int, int, int, int]:
    """Four 12-bit masks splitting the 48 bits outside block i (most significant first)."""
    bits = [b for b in range(63, -1, -1) if not _SHIFTS[i] <= b < _SHIFTS[i] + 16]
    return tuple(sum(1 << b for b in bits[12 * j: 12 * j + 12]) for j in range(4))  # type: ignore[return-value]


_SUB_MASK = tuple(_sub_masks(i) for i in range(4))


def _bit_runs(mask: int) -> list[tuple[int, int]]:
    """(low bit, length) of each run of set bits of ``mask``, most significant first."""
    runs = []
    b = 63
    while b >= 0:
        if mask >> b & 1:
            e = b
            while e >= 0 and mask >> e & 1:
                e -= 1
            runs.append((e + 1, b - e))
            b = e
        else:
            b -= 1
    return runs


_KEY_RUNS = {(i, j): _bit_runs(_BLOCK_MASK[i] | _SUB_MASK[i][j]) for i in range(4) for j in range(4)}
_KEY_BITS = 28
_POS_BITS = 64 - _KEY_BITS
_POS_MASK = np.uint64((1 << _POS_BITS) - 1)

#: most candidate pairs materialised at once (bounds memory for huge equal-key runs)
CANDIDATE_LIMIT = 1 << 20


def _sorted_keys(fps: np.ndarray, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``fps`` sorted by the 28-bit key (b_i, sub-block j), and the sorted keys.

    The key bits are gathered to the top of a uint64 and the row position put
    in the low 36 bits, so one ``np.sort`` (much faster than argsort) does it.
    """
    comp = np.zeros(len(fps), dtype=np.uint64)
    for low, length in _KEY_RUNS[(i, j)]:
        comp <<= np.uint64(length)
        comp |= (fps >> np.uint64(low)) & np.uint64((1 << length) - 1)
    comp <<= np.uint64(_POS_BITS)
    comp |= np.arange(len(fps), dtype=np.uint64)
    comp.sort()
    return (comp & _POS_MASK).astype(np.int64), comp >> np.uint64(_POS_BITS)


def _run_candidates(ks: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs of positions within equal runs of the sorted array ``ks``, at most ~CANDIDATE_LIMIT at a time."""
    n = len(ks)
    if n < 2:
        return
    starts = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1])))
    lens = np.diff(np.append(starts, n))
    multi = lens >= 2
    if multi.any():
        yield from _radius_pairs.expand_runs(starts[multi], lens[multi], CANDIDATE_LIMIT)


def pairs_in_chunk(
    ids: np.ndarray, fps: np.ndarray, i: int, k: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Pairs within ``k`` (0..3) whose first shared block is ``i``, among rows holding whole b_i groups.

    ``ids`` int64, ``fps`` uint64 (unsigned fingerprints). Yields (id_a, id_b,
    distance) arrays with id_a < id_b. Every qualifying pair of the chunk comes
    out exactly once (at the first 12-bit sub-block of the other 48 bits it shares).
    """
    earlier = [np.uint64(_BLOCK_MASK[e]) for e in range(i)]
    subs = [np.uint64(m) for m in _SUB_MASK[i]]
    for j in range(4):
        order, ks = _sorted_keys(fps, i, j)
        for a, b in _run_candidates(ks):
            ia = order[a]
            ib = order[b]
            x = fps[ia] ^ fps[ib]
            d = np.bitwise_count(x)
            keep = d <= k
            for e in earlier:
                keep &= (x & e) != 0
            for jj in range(j):
                keep &= (x & subs[jj]) != 0
            if keep.any():
                ida = ids[ia[keep]]
                idb = ids[ib[keep]]
                yield np.minimum(ida, idb), np.maximum(ida, idb), d[keep].astype(np.int64)


def check_pairs_k(k: object) -> int:
    """Validate k for pairs/clusters: 0..11, like every block search (:func:`simdb.probes.check_k`)."""
    return _probes.check_k(k)


# ---------------------------------------------------------------------------
# all pairs: streaming from PostgreSQL
# ---------------------------------------------------------------------------

_GROUPS_SQL = [
    f"SELECT string_agg(int8send(id) || int8send(fp), ''::bytea) FROM {FINGERPRINTS} "
    f"WHERE collection_id = %s AND fp IS NOT NULL GROUP BY {b}"
    for b in _sql.BLOCK_COLUMNS
]

#: rows compared per numpy chunk (whole groups; a group larger than this is one chunk of its own)
CHUNK_ROWS = 1 << 19


def _decode(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(b"".join(parts), dtype=">i8").reshape(-1, 2)
    ids = raw[:, 0].astype(np.int64)
    fps = raw[:, 1].astype(np.int64).view(np.uint64)
    return ids, fps


def _block_chunks(cur, collection_id: int, i: int, chunk_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    parts: list[bytes] = []
    size = 0
    limit = chunk_rows * 16
    for (blob,) in cur.stream(_GROUPS_SQL[i], (collection_id,), binary=True):
        if len(blob) <= 16:
            continue  # a group of one row pairs with nothing in this block
        parts.append(blob)
        size += len(blob)
        if size >= limit:
            yield _decode(parts)
            parts, size = [], 0
    if parts:
        yield _decode(parts)


class _Snapshot:
    """Two connections on one REPEATABLE READ snapshot: ``scan`` streams, ``lookup`` fetches keys."""

    def __init__(self, engine: Engine, work_mem: str | None):
        self._sa = []
        try:
            scan = engine.connect().execution_options(isolation_level="REPEATABLE READ")
            self._sa.append(scan)
            snap = scan.exec_driver_sql("SELECT pg_export_snapshot()").scalar()
            if work_mem:
                scan.exec_driver_sql("SELECT set_config('work_mem', %s, true)", (work_mem,))
            # an ordered index scan would fetch the heap row by row in block order (random I/O);
            # a (parallel) scan + hash aggregate, or a bitmap scan for a small collection, reads it in order
            scan.exec_driver_sql("SELECT set_config('enable_indexscan', 'off', true)")
            # SET TRANSACTION SNAPSHOT takes no bind parameters; the id comes from the server
            # and is checked to be of the documented shape before it is quoted as a literal
            if not isinstance(snap, str) or not snap or not all(ch in "0123456789ABCDEF-" for ch in snap):
                raise RuntimeError(f"unexpected snapshot id {snap!r}")
            lookup = engine.connect().execution_options(isolation_level="REPEATABLE READ")
            self._sa.append(lookup)
            lookup.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snap}'")  # first statement of its transaction
        except BaseException:
            self.close()
            raise
        self.scan = scan.connection.driver_connection
        self.lookup_conn = lookup

    def sketches(self, ids: np.ndarray) -> dict[int, list[int] | None]:
        rows = self.lookup_conn.exec_driver_sql(
            f"SELECT id, shingles FROM {FINGERPRINTS} WHERE id = ANY(%s)", (ids.tolist(),)
        ).all()
        return dict(rows)

    def keys(self, ids: np.ndarray) -> dict[int, str]:
        rows = self.lookup_conn.exec_driver_sql(
            f"SELECT id, key FROM {FINGERPRINTS} WHERE id = ANY(%s)", (ids.tolist(),)
        ).all()
        return dict(rows)

    def close(self) -> None:
        for c in reversed(self._sa):
            try:
                c.rollback()
            except Exception:
                pass
            c.close()
        self._sa = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_ROWS_COPY = (
    f"COPY (SELECT id, fp FROM {FINGERPRINTS} WHERE collection_id = %s AND fp IS NOT NULL) "
    "TO STDOUT (FORMAT binary)"
)
_COPY_ROW = np.dtype([("n", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"), ("fp", ">i8")])


def _all_rows(cur, collection_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (id, unsigned fp) of the collection, by binary COPY (26 bytes a row on the wire)."""
    buf = bytearray()
    with cur.copy(_ROWS_COPY, (collection_id,)) as copy:
        for data in copy:
            buf += data
    # header: 11-byte signature, int32 flags, int32 extension length (+ extension); trailer: int16 -1
    ext = int.from_bytes(buf[15:19], "big")
    rows = np.frombuffer(memoryview(buf)[19 + ext: len(buf) - 2], dtype=_COPY_ROW)
    return rows["id"].astype(np.int64), rows["fp"].astype(np.int64).view(np.uint64)


def _id_pairs(snap: _Snapshot, collection_id: int, k: int, chunk_rows: int):
    """Pairs of ids. k <= 3: block group by block group, memory bounded by ``chunk_rows``.
    (Overlapping the scan with the comparison in a thread was measured: no gain on 2
    cores, the aggregate already keeps both busy.) k = 4..11: the generalized
    pigeonhole joins groups within a radius of each other, so all the collection's
    (id, fp) rows are held in memory (16 bytes a row; :mod:`simdb.radius_pairs`)."""
    with snap.scan.cursor() as cur:
        if k > 3:
            ids, fps = _all_rows(cur, collection_id)
            yield from _radius_pairs.pairs_within(ids, fps, k)
            return
        for i in range(4):
            for ids, fps in _block_chunks(cur, collection_id, i, chunk_rows):
                yield from pairs_in_chunk(ids, fps, i, k)


#: verification of pairs: candidate pairs gathered before their sketches are fetched (one query)
VERIFY_BATCH = 50_000


def _verified_id_pairs(snap: _Snapshot, collection_id: int, k: int, chunk_rows: int, verify: tuple):
    """The verification stage over the Hamming pairs within the candidate radius ``k``:
    batches (id_a, id_b, distance, jaccard) of the pairs :meth:`simdb.sketch.Verifier.judge`
    keeps (jaccard NaN where a row has no sketch and the distance decided). Candidate pairs
    are gathered into batches of about :data:`VERIFY_BATCH` so that the sketches of a batch
    come in one query."""
    verifier, t, hk = verify
    pend: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    n = 0

    def check():
        a = np.concatenate([p[0] for p in pend])
        b = np.concatenate([p[1] for p in pend])
        d = np.concatenate([p[2] for p in pend])
        ids = np.unique(np.concatenate([a, b]))
        sk = snap.sketches(ids)
        mat, lens = sketch_matrix([sk.get(i) for i in ids.tolist()], verifier.size)
        ia, ib = np.searchsorted(ids, a), np.searchsorted(ids, b)
        j = np.concatenate(
            [sketch_jaccard_many(mat[ia[s:s + 4096]], mat[ib[s:s + 4096]], verifier.size)
             for s in range(0, len(a), 4096)] or [np.zeros(0)]
        )
        # both sketches: the Jaccard decides; otherwise (nothing to verify with) the distance
        keep = np.where((lens[ia] > 0) & (lens[ib] > 0), j >= t, d <= hk)
        j = np.where((lens[ia] > 0) & (lens[ib] > 0), j, np.nan)
        return a[keep], b[keep], d[keep], j[keep]

    for a, b, d in _id_pairs(snap, collection_id, k, chunk_rows):
        if len(a):
            pend.append((a, b, d))
            n += len(a)
        if n >= VERIFY_BATCH:
            yield check()
            pend, n = [], 0
    if pend:
        yield check()


def iter_id_pairs(
    engine: Engine, collection_id: int, k: int = 3, *, chunk_rows: int = CHUNK_ROWS, work_mem: str | None = "64MB"
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """All pairs within k as numpy batches (id_a, id_b, distance), id_a < id_b, each pair once."""
    k = check_pairs_k(k)
    with _Snapshot(engine, work_mem) as snap:
        yield from _id_pairs(snap, collection_id, k, chunk_rows)


def iter_pairs(
    engine: Engine,
    collection_id: int,
    k: int = 3,
    *,
    batch: int = 10_000,
    chunk_rows: int = CHUNK_ROWS,
    work_mem: str | None = "64MB",
    verify: tuple | None = None,
) -> Iterator[Pair]:
    """Stream every pair within ``k`` of the collection once, as :class:`Pair`.

    ``verify=(verifier, min_jaccard, hamming_k)``: the pairs within ``k`` that the
    verification stage keeps, as :class:`VerifiedPair`.

    Pairs come out grouped by the first block they share, not sorted. Client
    memory is bounded by ``chunk_rows`` (and the largest single block group)
    plus ``batch`` pairs waiting for their keys.
    """
    k = check_pairs_k(k)
    with _Snapshot(engine, work_mem) as snap:
        pend: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        n = 0

        def flush():
            a = np.concatenate([p[0] for p in pend])
            b = np.concatenate([p[1] for p in pend])
            d = np.concatenate([p[2] for p in pend])
            keys = snap.keys(np.unique(np.concatenate([a, b])))
            if verify is not None:
                j = np.concatenate([p[3] for p in pend]).tolist()
                return [
                    VerifiedPair(keys[x], keys[y], z, None if w != w else w)
                    for x, y, z, w in zip(a.tolist(), b.tolist(), d.tolist(), j)
                ]
            return [Pair(keys[x], keys[y], z) for x, y, z in zip(a.tolist(), b.tolist(), d.tolist())]

        source = (
            _id_pairs(snap, collection_id, k, chunk_rows)
            if verify is None
            else _verified_id_pairs(snap, collection_id, k, chunk_rows, verify)
        )
        for a, b, d, *rest in source:
            pend.append((a, b, d, *rest))
            n += len(a)
            if n >= batch:
                yield from flush()
                pend, n = [], 0
        if pend:
            yield from flush()


# ---------------------------------------------------------------------------
# clusters
# ---------------------------------------------------------------------------


def _components(id_a: np.ndarray, id_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union-find over the edges; returns (node ids sorted by (root id, id), root id per node)."""
    nodes, inv = np.unique(np.concatenate([id_a, id_b]), return_inverse=True)
    m = len(id_a)
    ea = inv[:m].tolist()
    eb = inv[m:].tolist()
    parent = list(range(len(nodes)))
    for x, y in zip(ea, eb):
        # find with path halving
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x != y:
            # the smaller index (= smaller id, nodes are sorted) becomes the root
            if x < y:
                parent[y] = x
            else:
                parent[x] = y
    for x in range(len(parent)):
        parent[x] = parent[parent[x]]  # roots precede their members, so one pass flattens
    root = np.asarray(parent, dtype=np.int64)
    order = np.lexsort((np.arange(len(nodes)), root))
    return nodes[order], nodes[root[order]]


def iter_clusters(
    engine: Engine,
    collection_id: int,
    k: int = 3,
    *,
    include_singletons: bool = False,
    batch: int = 10_000,
    chunk_rows: int = CHUNK_ROWS,
    work_mem: str | None = "64MB",
    verify: tuple | None = None,
) -> Iterator[Cluster]:
    """Connected components of the pairs within ``k``, ordered by representative (earliest added).

    Singletons (rows with no near-duplicate, including featureless rows) are
    left out unless ``include_singletons``. Memory holds the ids of the rows
    that have a near-duplicate (not the whole collection); keys are fetched in
    batches of about ``batch`` rows as clusters are yielded.
    """
    k = check_pairs_k(k)
    with _Snapshot(engine, work_mem) as snap:
        aa, bb = [], []
        source = (
            _id_pairs(snap, collection_id, k, chunk_rows)
            if verify is None
            else _verified_id_pairs(snap, collection_id, k, chunk_rows, verify)
        )
        for a, b, *_ in source:
            aa.append(a)
            bb.append(b)
        if aa:
            members, roots = _components(np.concatenate(aa), np.concatenate(bb))
        else:
            members = roots = np.zeros(0, dtype=np.int64)
        # cluster boundaries
        starts = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1]))) if len(roots) else np.zeros(0, np.int64)
        ends = np.append(starts[1:], len(roots))
        if not include_singletons:
            ci = 0
            while ci < len(starts):
                cj = ci
                total = 0
                while cj < len(starts) and (cj == ci or total < batch):
                    total += ends[cj] - starts[cj]
                    cj += 1
                ids = members[starts[ci]:ends[cj - 1]]
                keys = snap.keys(ids)
                for c in range(ci, cj):
                    ks = [keys[x] for x in members[starts[c]:ends[c]].tolist()]
                    yield Cluster(ks[0], ks)
                ci = cj
            return
        yield from _with_singletons(snap, collection_id, members, roots, starts, ends, batch)


def _with_singletons(snap, collection_id, members, roots, starts, ends, batch):
    """Merge the clusters (by representative id) with every other row of the collection as a singleton.

    The collection's (id, key) rows come through a server-side cursor in id order, ``batch`` at
    a time; the keys of the clusters whose representative falls in a page are fetched at once.
    """
    rep_ids = roots[starts] if len(starts) else np.zeros(0, np.int64)
    in_cluster = set(members.tolist())
    ci = 0
    raw = snap.lookup_conn.connection.driver_connection
    with raw.cursor(name="simdb_singletons") as cur:
        cur.execute(
            f"SELECT id, key FROM {FINGERPRINTS} WHERE collection_id = %s ORDER BY id", (collection_id,)
        )
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            cj = int(np.searchsorted(rep_ids, rows[-1][0], side="right"))
            keys = snap.keys(members[starts[ci]:ends[cj - 1]]) if cj > ci else {}
            for rid, key in rows:
                while ci < cj and rep_ids[ci] <= rid:
                    ks = [keys[x] for x in members[starts[ci]:ends[ci]].tolist()]
                    yield Cluster(ks[0], ks)
                    ci += 1
                if rid not in in_cluster:
                    yield Cluster(key, [key])
    # clusters after the last row cannot exist (every representative is a row), but stay safe
    while ci < len(rep_ids):
        ids = members[starts[ci]:ends[ci]]
        keys = snap.keys(ids)
        ks = [keys[x] for x in ids.tolist()]
        yield Cluster(ks[0], ks)
        ci += 1


#: the pieces other add_if_unique variants reuse (the legacy Jaccard collections'):
#: the sorted advisory-lock statement, the upsert, union-find over pair edges
LOCK_SQL = _LOCK
UPSERT_SQL = _UPSERT
components = _components
