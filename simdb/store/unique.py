"""Insert unless a near-duplicate exists (``add_if_unique``), atomic under concurrency.

Two fingerprints within Hamming distance k share a probed block value (the
(generalized) pigeonhole principle of :mod:`simdb.core.bits`). A writer takes
transaction-scoped advisory locks on ``(collection, block, value)`` for its
own four exact block values *and* every value it probes, in sorted order,
then searches, then inserts, then commits (which releases the locks). Two
writers whose fingerprints are within k of each other (for either writer's
k) always share one lock, so the second one waits until the first has
committed and then sees its row. Writers far apart share no lock and run in
parallel: there is no global lock.

Before those, a writer takes the lock of its key (:func:`key_lock`), in a statement of its own.
Why: a writer may replace its key's row (the row stored under its key is its own earlier version,
never a near-duplicate of it), and the row lock it then needs must not be held by another writer
of the key that waits for one of its block locks; a writer of a key that already has a row takes
that row's lock before its block locks, to lock the block values of the row it replaces. Writers
of one key serialise on the key's lock first, so that cycle cannot form (it was a deadlock when
several writers re-added one key at once). Writers of different keys never wait for each other's
key lock (but for a collision of the 32-bit hash of their keys: a wait, never a deadlock).

A banded collection keeps the contract with band keys: a writer also takes advisory locks on
its band keys (and on the band keys of the row it replaces), sorted with the block locks of its Hamming
part, before it searches; two writers that would be candidates of each other share a band key, hence a
lock, and the second sees the first's row. Its search is the banded candidate stage
(:data:`simdb.store.candidates.BAND_NEAR_SQL`), verified as every query is
(:func:`simdb.results.verified_matches`). Both are here, one module for ``add_if_unique``'s store side.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import psycopg
from psycopg.pq import TransactionStatus

from simdb.core.bits import block_query, to_signed
from simdb.errors import InvalidArgumentError
from simdb.results import AddResult, match, verified_matches
from simdb.store import collection_guard as _guard
from simdb.store import sql as _sql
from simdb.store.candidates import BAND_NEAR_SQL, array_text_params, band_near_params, near_params
from simdb.store.connect import RETRY_SQLSTATES, driver_connection, in_transaction
from simdb.store.rows import upsert_sql

__all__ = [
    "BAND_LOCK_TAG",
    "KEY_LOCK_TAG",
    "LOCKED_UPSERT_SQL",
    "LOCK_SQL",
    "LOCK_TAG",
    "add_if_unique",
    "add_if_unique_statements",
    "band_lock_keys",
    "key_lock",
    "key_lock_statement",
    "lock_keys",
    "run_add_if_unique",
    "run_add_if_unique_banded",
]

FINGERPRINTS = _sql.FINGERPRINTS

#: high 12 bits of every simdb advisory-lock key (so they stay apart from an app's own keys)
LOCK_TAG = 0x5D8
#: high 12 bits of a band lock key (LOCK_TAG + 1: apart from the block locks)
BAND_LOCK_TAG = 0x5D9
#: high 12 bits of a key's lock (apart from the block locks, LOCK_TAG, and the band locks, BAND_LOCK_TAG)
KEY_LOCK_TAG = 0x5DA

_KEY_LOCK = "SELECT pg_advisory_xact_lock(%(lock)s::int8)"
_KEY_LOCK_GUARDED = f"SELECT pg_advisory_xact_lock(%(lock)s::int8), {_guard.GUARD}"


def key_lock(collection_id: int, key: str) -> int:
    """The advisory-lock key (a positive bigint) that writers of ``key`` take first (see the module
    docstring): 12-bit tag | 20 bits of the collection id | the CRC-32 of the key's UTF-8."""
    return (KEY_LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFF) << 32) | zlib.crc32(
        key.encode("utf-8", "surrogatepass"))


def key_lock_statement(collection_id: int, key: str, version: str | None = None) -> tuple[str, dict]:
    """The first statement of an ``add_if_unique`` transaction: the key's lock; with ``version``, also the
    check that the collection's configuration is still the one the row was computed by
    (:mod:`simdb.store.collection_guard`; run it inside :func:`~simdb.store.collection_guard.refused`)."""
    if version is None:
        return _KEY_LOCK, {"lock": key_lock(collection_id, key)}
    return _KEY_LOCK_GUARDED, {"lock": key_lock(collection_id, key), "c": collection_id, "v": version}


def lock_keys(collection_id: int, fp: int, k: int) -> list[int]:
    """Sorted advisory-lock keys (signed bigints) a writer of unsigned ``fp`` takes for radius ``k``.

    One key per (collection, block, value) for the four exact block values of
    ``fp`` and every value probed for ``k``. Key layout (unsigned, 64 bits):
    12-bit tag | 32-bit collection id | 2-bit block | 2 zero bits | 16-bit value.
    """
    base = _lock_base(collection_id)
    query = block_query(fp, k)
    keys = set()
    for i, values in enumerate(query.probes):
        keys.add(base | (i << 18) | query.blocks[i])
        for v in values:
            keys.add(base | (i << 18) | v)
    return sorted(keys)  # positive below 2**63 (the 12-bit tag's top bit is clear): signed bigints as they are


def band_lock_keys(collection_id: int, keys: np.ndarray) -> list[int]:
    """Advisory-lock keys of a writer's band keys: 12-bit tag | 20 bits of the collection id |
    the 32-bit band key (two collections 2^20 ids apart share locks: more waiting, never less)."""
    base = _band_lock_base(collection_id)
    return [base | (int(k) & 0xFFFFFFFF) for k in keys.tolist()]


#: the sorted advisory-lock statement (the legacy Jaccard collections' add_if_unique used it): the locks are
#: taken in the order of the (sorted) array, a volatile function in the select list being evaluated after
#: the ORDER BY's sort
LOCK_SQL = (
    "SELECT count(*) FROM (SELECT pg_advisory_xact_lock(l.k) FROM unnest(CAST(%(keys)s AS int8[])) "
    "WITH ORDINALITY AS l(k, n) ORDER BY l.n) s"
)
#: the upsert of a writer holding the locks below (its key's lock carried the configuration's check: no
#: guard here, unlike :data:`simdb.store.rows.GUARDED_UPSERT_SQL`)
LOCKED_UPSERT_SQL = upsert_sql("true")


def _lock_base(collection_id: int) -> int:
    return (LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFFFFF) << 20)


def _band_lock_base(collection_id: int) -> int:
    return (BAND_LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFF) << 32)


# One statement: lock the row of the key (FOR UPDATE, if it exists) and take the advisory locks of the
# writer's own keys (%(keys)s: block locks, and band locks in a banded collection) plus the four block
# values and the band keys of the row it would replace, sorted (the volatile lock function is evaluated
# above the sort). All keys are positive bigints.
_LOCK_WITH_OLD = f"""
WITH o AS (SELECT b0, b1, b2, b3, bands FROM {FINGERPRINTS} WHERE collection_id = %(c)s AND key = %(key)s FOR UPDATE)
SELECT count(*) FROM (
  SELECT pg_advisory_xact_lock(l.k) FROM (
    SELECT unnest(CAST(%(keys)s AS int8[])) AS k
    UNION
    SELECT CAST(%(base)s AS int8) + (i.i::int8 << 18) + (ARRAY[o.b0, o.b1, o.b2, o.b3])[i.i + 1]
    FROM o CROSS JOIN generate_series(0, 3) AS i(i)
    UNION
    SELECT CAST(%(bbase)s AS int8) + (b.v::int8 & 4294967295) FROM o CROSS JOIN unnest(o.bands) AS b(v)
  ) l WHERE l.k IS NOT NULL ORDER BY l.k
) s"""

#: the store's near query and a conditional upsert in one statement (one snapshot). The row of the key
#: itself is no match: it is the row the upsert replaces (see :func:`add_if_unique`).
_NEAR_OR_INSERT = f"""
WITH m AS MATERIALIZED ({_sql.NEAR_SQL.strip()}
), ins AS (
  {upsert_sql("NOT EXISTS (SELECT 1 FROM m WHERE m.key <> %(key)s)")}
  RETURNING 1
)
SELECT m.key, m.fp, m.distance, m.meta FROM m WHERE m.key <> %(key)s ORDER BY m.distance, m.key
"""


def _lock_statements(collection_id: int, key: str, own: list[int], version: str | None) -> list[tuple[str, dict]]:
    """The first two statements of an ``add_if_unique`` transaction: the key's lock (with ``version``, the
    configuration's check), then the advisory locks of ``own`` and of the row it would replace."""
    return [key_lock_statement(collection_id, key, version), (_LOCK_WITH_OLD, {
        "keys": own, "base": _lock_base(collection_id), "bbase": _band_lock_base(collection_id), "c": collection_id,
        "key": key,
    })]


def _lock(conn: psycopg.Connection, collection_id: int, key: str, own: list[int], version: str | None) -> None:
    """Run :func:`_lock_statements` (writers of one key one at a time; the configuration still current)."""
    with _guard.refused(collection_id):
        for statement in _lock_statements(collection_id, key, own, version):
            conn.execute(*statement)


def _row(collection_id: int, key: str, fp: int | None, meta_json: str | None, shingles: Any, bands: Any = None,
         text_z: bytes | None = None) -> dict:
    """The parameters of the upsert (``fp`` unsigned or None)."""
    return {"c": collection_id, "key": key, "fp": None if fp is None else to_signed(fp), "meta": meta_json,
            "sh": shingles, "bk": bands, "tz": text_z}


def add_if_unique(
    conn: Any,
    collection_id: int,
    key: str,
    fp: int | None,
    k: int = 3,
    meta_json: str | None = None,
    shingles: list[int] | None = None,
    *,
    verify: tuple | None = None,
    text_z: bytes | None = None,
    version: str | None = None,
) -> AddResult:
    """Insert ``key`` with unsigned fingerprint ``fp`` unless a row within ``k`` exists.

    ``verify=(verifier, min_jaccard, hamming_k)`` (verified collections): ``k`` is the
    candidate radius and a candidate counts only if the verification stage keeps it
    (:meth:`simdb.core.sketch.Verifier.judge` against ``shingles``, the text's sketch). The
    locks are the same (on the candidate radius), so the contract is the same.

    Runs inside the caller's transaction on ``conn`` (a psycopg connection, or a SQLAlchemy
    ``Connection`` from ``engine.begin()``: its psycopg connection; READ COMMITTED), which must
    be committed (or rolled back) promptly: the advisory locks are held until
    then. A psycopg connection in autocommit outside a transaction block is refused: each
    statement would commit, and the locks would be gone before the search. ``fp=None`` (a text without features) never matches and is always
    inserted. The row already stored under ``key`` is never a match: it is the text's own earlier
    version, which the insert replaces, as :meth:`SimhashIndex.add` does (re-adding a file after an
    edit updates its row; ``simdb check`` never counts a file as its own duplicate either). Only
    another key's near-duplicate keeps the text out, and then nothing changes, the old row included.
    The locks cover the old row too (its block values), so a writer near the old text waits for the
    replacement as for an insert. ``text_z``: the kept text of a collection that
    keeps texts (:mod:`simdb.core.kept_texts`), stored with the row when it is inserted. ``version``:
    the collection configuration's version ``fp`` was computed by (``SimhashIndex`` passes its own):
    :class:`~simdb.errors.CollectionChangedError`, nothing written, once it is not current.

    Checked values: ``key`` a valid key, ``fp`` unsigned or None, ``k`` 0..11, ``meta_json`` the
    row's meta already as JSON text. The API checks and dumps them once (:mod:`simdb.index.duplicates`,
    ``SimhashIndex.add_if_unique``, ``simdb.aio``).
    """

    conn = driver_connection(conn)
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        raise InvalidArgumentError(
            "conn is in autocommit mode outside a transaction: run add_if_unique inside "
            "'with conn.transaction():', or call run_add_if_unique (a transaction of its own)"
        )
    return _add_if_unique(conn, collection_id, key, fp, k, meta_json, shingles, verify, text_z, version)


def _add_if_unique(
    conn: psycopg.Connection, collection_id: int, key: str, fp: int | None, k: int, meta_json: str | None,
    shingles: list[int] | None, verify: tuple | None, text_z: bytes | None, version: str | None,
) -> AddResult:
    """:func:`add_if_unique` on a psycopg connection known to be in a transaction."""
    # 1. the key's lock, then the row being replaced (if any) and the advisory locks, in sorted order
    _lock(conn, collection_id, key, [] if fp is None else lock_keys(collection_id, fp, k), version)
    row = _row(collection_id, key, fp, meta_json, shingles, text_z=text_z)
    if fp is None:  # featureless: never a near-duplicate of anything
        conn.execute(LOCKED_UPSERT_SQL, row)
        return AddResult(True, [])
    # 2. a new statement (a new snapshot, taken after the locks): search, and insert if nothing is near
    params = {**row, **array_text_params(near_params(collection_id, fp, k))}
    if verify is not None:
        verifier, t, hk = verify
        found = verified_matches(conn.execute(_sql.NEAR_VERIFY_SQL, params).fetchall(), shingles, verifier, t, hk,
                                 exclude=key)
        if found:
            return AddResult(False, found)
        conn.execute(LOCKED_UPSERT_SQL, row)
        return AddResult(True, [])
    rows = conn.execute(_NEAR_OR_INSERT, params).fetchall()
    return AddResult(not rows, [match(r[0], r[1], r[2], r[3]) for r in rows])


def add_if_unique_statements(
    collection_id: int, key: str, fp: int | None, k: int = 3, meta_json: str | None = None,
    shingles: list[int] | None = None, text_z: bytes | None = None, version: str | None = None,
) -> list[tuple[str, dict]]:
    """The statements of :func:`add_if_unique`, in order, as (psycopg SQL, parameters): the key's
    lock, the sorted advisory locks, then the search-and-insert (the upsert, for ``fp=None``).

    For front ends on another driver (``simdb.aio`` runs them on an async psycopg connection):
    run them in ONE transaction, in order, and retry the transaction on
    :data:`simdb.store.connect.RETRY_SQLSTATES`. The last statement's rows (key, signed fp, distance, meta) are the
    near-duplicates that stopped the insert; no rows: inserted. ``fp`` unsigned (None:
    featureless, always inserted); ``meta_json`` already JSON text; values checked by the API,
    as for :func:`add_if_unique`. ``version``: the collection configuration's version the row was
    computed by; the first statement then refuses (SQLSTATE ``SDB01``) once it is not current
    (:mod:`simdb.store.collection_guard`).
    """
    locks = _lock_statements(collection_id, key, [] if fp is None else lock_keys(collection_id, fp, k), version)
    row = _row(collection_id, key, fp, meta_json, shingles, text_z=text_z)
    if fp is None:
        return [*locks, (LOCKED_UPSERT_SQL, row)]
    return [*locks, (_NEAR_OR_INSERT, {**row, **array_text_params(near_params(collection_id, fp, k))})]


def _retried(engine: Any, add: Any, retries: int, *args: Any, **kwargs: Any) -> AddResult:
    """``add(conn, *args, **kwargs)`` in a transaction of its own on ``engine`` (an Engine or a psycopg
    connection), the whole transaction again on a deadlock or serialization failure (:data:`RETRY_SQLSTATES`),
    at most ``retries`` more times."""
    for attempt in range(retries + 1):
        try:
            with in_transaction(engine) as conn:
                return add(conn, *args, **kwargs)
        except psycopg.Error as exc:
            if exc.sqlstate not in RETRY_SQLSTATES or attempt == retries:
                raise
    raise AssertionError("unreachable")


def run_add_if_unique(
    engine: Any, collection_id: int, key: str, fp: int | None, k: int = 3, meta_json: str | None = None,
    shingles: list[int] | None = None, *, retries: int = 5, verify: tuple | None = None,
    text_z: bytes | None = None, version: str | None = None,
) -> AddResult:
    """:func:`add_if_unique` in a transaction of its own (committed before returning).

    ``engine``: a SQLAlchemy ``Engine`` (a connection of its pool) or a psycopg connection (a
    transaction block on it: ``SimhashIndex`` passes its thread's connection). The locks are taken in one sorted statement, so writers cannot deadlock on
    them; a deadlock or serialization failure reported by PostgreSQL anyway (e.g.
    with other writers of the same key) is retried a few times.
    """
    return _retried(engine, _add_if_unique, retries, collection_id, key, fp, k, meta_json, shingles, verify, text_z,
                    version)


def _add_if_unique_banded(
    conn: psycopg.Connection, collection_id: int, key: str, fp: int | None, meta_json: str | None,
    shingles: list[int] | None, keys: np.ndarray | None, verify: tuple[Any, float, int], text_z: bytes | None = None,
    *, shared: int, version: str | None,
) -> AddResult:
    """``add_if_unique`` of a text in a banded collection, inside the caller's transaction on ``conn`` (a
    psycopg connection; ``fp`` unsigned or None: featureless, always inserted; ``keys``: the text's band keys;
    ``verify`` = (verifier, min_jaccard, hamming_k)). Locks, then (a new snapshot) candidates and
    verification, then the upsert only if nothing passed: :func:`add_if_unique`'s contract, on this
    collection's candidate stage (``text_z``: the kept text, stored with the row; ``shared``: the keys a
    candidate shares). The locks stay on every band key: two writers sharing one key take one lock, a
    superset of the pairs that could be candidates of each other."""
    verifier, t, hk = verify
    own = [] if fp is None else lock_keys(collection_id, fp, hk)
    if keys is not None:
        own += band_lock_keys(collection_id, keys)
    _lock(conn, collection_id, key, own, version)
    bands = None if keys is None else "{" + ",".join(map(str, keys.tolist())) + "}"
    if fp is not None:
        params = band_near_params(collection_id, fp, bands or "{}", hk, shared)
        found = verified_matches(conn.execute(BAND_NEAR_SQL, params).fetchall(), shingles, verifier, t, hk,
                                 exclude=key)  # the key's own row is replaced, not a match (add_if_unique)
        if found:
            return AddResult(False, found)
    conn.execute(LOCKED_UPSERT_SQL, _row(collection_id, key, fp, meta_json, shingles, bands, text_z))
    return AddResult(True, [])


def run_add_if_unique_banded(engine: Any, *args: Any, retries: int = 5, shared: int,
                             version: str | None = None) -> AddResult:
    """:func:`_add_if_unique_banded` in a transaction of its own (``engine``: an Engine or a psycopg
    connection, as :func:`run_add_if_unique`), retried as it is."""
    return _retried(engine, _add_if_unique_banded, retries, *args, shared=shared, version=version)
