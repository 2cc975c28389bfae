"""``add_if_unique`` in a banded collection (issue 26): its locks and its atomic check-then-insert.

The contract is :mod:`simdb.store.unique`'s: a writer takes transaction-scoped advisory locks on its
band keys (and on the band keys of the row it replaces) besides the block locks of the Hamming part,
sorted, before it searches; two writers that would be candidates of each other share a band key,
hence a lock, and the second sees the first's row. The search itself is the banded candidate stage
(:data:`simdb.store.candidates.BAND_NEAR_SQL`), verified as every query is
(:func:`simdb.results.verified_matches`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdb.core.bits import to_signed
from simdb.results import AddResult, verified_matches
from simdb.store import collection_guard as _guard
from simdb.store import sql as _sql
from simdb.store.candidates import BAND_NEAR_SQL, band_near_params
from simdb.store.connect import driver_connection, in_transaction, retried
from simdb.store.unique import LOCK_TAG, key_lock_statement, lock_keys

__all__ = ["BAND_LOCK_TAG", "add_if_unique_banded", "band_lock_keys", "run_add_if_unique_banded"]

F = _sql.FINGERPRINTS
#: high 12 bits of a band lock key (simdb.store.unique.LOCK_TAG + 1: apart from the block locks)
BAND_LOCK_TAG = 0x5D9


def band_lock_keys(collection_id: int, keys: np.ndarray) -> list[int]:
    """Advisory-lock keys of a writer's band keys: 12-bit tag | 20 bits of the collection id |
    the 32-bit band key (two collections 2^20 ids apart share locks: more waiting, never less)."""
    base = (BAND_LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFF) << 32)
    return [base | (int(k) & 0xFFFFFFFF) for k in keys.tolist()]


# The advisory locks of a banded writer, in one sorted statement: its own (block locks of the
# Hamming part, band locks), plus the block values and band keys of the row it would replace.
_LOCK_BANDED = f"""
SELECT count(*) FROM (
  SELECT pg_advisory_xact_lock(l.k) FROM (
    SELECT unnest(CAST(%(keys)s AS int8[])) AS k
    UNION
    SELECT CAST(%(base)s AS int8) + (i.i::int8 << 18) + (ARRAY[o.b0, o.b1, o.b2, o.b3])[i.i + 1]
    FROM (SELECT b0, b1, b2, b3 FROM {F} WHERE collection_id = %(c)s AND key = %(key)s FOR UPDATE) o
    CROSS JOIN generate_series(0, 3) AS i(i)
    UNION
    SELECT CAST(%(bbase)s AS int8) + (b.v::int8 & 4294967295)
    FROM {F} o CROSS JOIN unnest(o.bands) AS b(v) WHERE o.collection_id = %(c)s AND o.key = %(key)s
  ) l WHERE l.k IS NOT NULL ORDER BY l.k
) s"""

_UPSERT_BANDED = f"""
INSERT INTO {F} (collection_id, key, fp, meta, shingles, bands, text_z)
VALUES (%(c)s, %(key)s, %(fp)s, CAST(%(meta)s AS jsonb), CAST(%(shingles)s AS int4[]), CAST(%(bands)s AS int4[]),
        CAST(%(tz)s AS bytea))
ON CONFLICT (collection_id, key) DO UPDATE
  SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, bands = EXCLUDED.bands,
      text_z = EXCLUDED.text_z, created_at = now()
"""


def add_if_unique_banded(
    conn: Any, collection_id: int, key: str, fp: int | None, meta_json: str | None,
    shingles: list[int] | None, keys: np.ndarray | None, verify: tuple[Any, float, int],
    text_z: bytes | None = None, *, shared: int, version: str | None = None,
) -> AddResult:
    """``add_if_unique`` of a text in a banded collection, inside the caller's transaction
    (``fp`` unsigned or None: featureless, always inserted; ``keys``: the text's band keys;
    ``verify`` = (verifier, min_jaccard, hamming_k)). Locks, then (a new snapshot) candidates and
    verification, then the upsert only if nothing passed: :func:`simdb.store.unique.add_if_unique`'s
    contract, on this collection's candidate stage (``text_z``: the kept text, stored with the row;
    ``shared``: the keys a candidate shares; ``conn``: a psycopg connection, or a SQLAlchemy one's, in a
    transaction). The locks stay on every band key: two writers sharing one key take one lock, a
    superset of the pairs that could be candidates of each other."""
    conn = driver_connection(conn)
    verifier, t, hk = verify
    own = [] if fp is None else lock_keys(collection_id, fp, hk)
    if keys is not None:
        own += band_lock_keys(collection_id, keys)
    with _guard.refused(collection_id):  # first: writers of one key one at a time; the configuration still current
        conn.execute(*key_lock_statement(collection_id, key, version))
    conn.execute(_LOCK_BANDED, {
        "keys": sorted(own), "base": (LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFFFFF) << 20),
        "bbase": (BAND_LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFF) << 32), "c": collection_id, "key": key,
    })
    bands = None if keys is None else "{" + ",".join(map(str, keys.tolist())) + "}"
    row = {"c": collection_id, "key": key, "fp": None if fp is None else to_signed(fp), "meta": meta_json,
           "shingles": shingles, "bands": bands, "tz": text_z}
    if fp is not None:
        params = band_near_params(collection_id, fp, bands or "{}", hk, shared)
        found = verified_matches(conn.execute(BAND_NEAR_SQL, params).fetchall(), shingles, verifier, t, hk,
                                 exclude=key)  # the key's own row is replaced, not a match (simdb.store.unique)
        if found:
            return AddResult(False, found)
    conn.execute(_UPSERT_BANDED, row)
    return AddResult(True, [])


def run_add_if_unique_banded(engine: Any, *args: Any, retries: int = 5, shared: int,
                             version: str | None = None) -> AddResult:
    """:func:`add_if_unique_banded` in a transaction of its own (``engine``: an Engine or a psycopg
    connection, as :func:`simdb.store.unique.run_add_if_unique`), retried on deadlock or
    serialization failure (:data:`simdb.store.connect.RETRY_SQLSTATES`) as the Hamming one is."""

    def run() -> AddResult:
        with in_transaction(engine) as conn:
            return add_if_unique_banded(conn, *args, shared=shared, version=version)

    return retried(run, retries)
