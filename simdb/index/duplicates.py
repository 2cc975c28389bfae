"""Near-duplicate workflows on a connection or an Engine and a collection id: insert unless a
near-duplicate is stored, all pairs, clusters (simdb 0.1's ``simdb.dedup``).

The functions :func:`add_if_unique`, :func:`run_add_if_unique`, :func:`add_if_unique_statements`,
:func:`iter_pairs`, :func:`iter_clusters` and :func:`iter_id_pairs` work on a connection (psycopg, or
SQLAlchemy's from ``engine.begin()``) or an Engine; ``SimhashIndex``'s methods of the same names
(``add_if_unique``, ``pairs``, ``clusters``) reach the same store code through the collection's rule.
Each checks its arguments (``k``, the key, the fingerprint) once, here, so that the store takes checked
values. Like the facade this module holds no SQL; the code, constants and result types live in their rooms
(docs/architecture.md):

- :mod:`simdb.store.unique`: ``add_if_unique`` (advisory locks on the probed block
  values, then search, then insert, in one transaction; retried on deadlock);
- :mod:`simdb.store.pairs`: ``iter_pairs`` / ``iter_clusters`` (the rows out of
  PostgreSQL in one snapshot, Hamming or verified);
- :mod:`simdb.core.block_pairs`: the pure numpy comparison of block groups and union-find;
- :mod:`simdb.results`: :class:`AddResult`, :class:`Pair`, :class:`VerifiedPair`, :class:`Cluster`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simdb.core import validate as _validate
from simdb.core.bits import to_unsigned
from simdb.core.block_pairs import check_pairs_k
from simdb.results import AddResult, Cluster, Pair
from simdb.store import pairs as _pairs
from simdb.store import unique as _store_unique

__all__ = [
    "add_if_unique",
    "add_if_unique_statements",
    "iter_clusters",
    "iter_id_pairs",
    "iter_pairs",
    "run_add_if_unique",
]


def _checked(key: Any, fp: Any, k: Any) -> tuple[str, int | None, int]:
    """(key, unsigned fp or None, k) checked by the one checker of each (:mod:`simdb.core.validate`,
    :func:`simdb.core.validate.check_k`)."""
    k = _validate.check_k(k, default=None)
    key = _validate.check_new_key(key)
    return key, None if fp is None else to_unsigned(_validate.check_fp(fp)), k


def add_if_unique(
    conn: Any, collection_id: int, key: str, fp: int | None, k: int = 3, meta: Any = None,
    shingles: list[int] | None = None, *, verify: tuple | None = None, text_z: bytes | None = None,
) -> AddResult:
    """Insert ``key`` with unsigned fingerprint ``fp`` unless a row within ``k`` exists, inside the
    caller's transaction on ``conn``: :func:`simdb.store.unique.add_if_unique`, arguments checked."""
    key, fp, k = _checked(key, fp, k)
    return _store_unique.add_if_unique(conn, collection_id, key, fp, k, _validate.dump_meta(meta), shingles,
                                      verify=verify, text_z=text_z)


def run_add_if_unique(
    engine: Any, collection_id: int, key: str, fp: int | None, k: int = 3, meta: Any = None,
    shingles: list[int] | None = None, *, retries: int = 5, verify: tuple | None = None,
    text_z: bytes | None = None,
) -> AddResult:
    """:func:`add_if_unique` in a transaction of its own on ``engine`` (an Engine or a psycopg
    connection), retried on deadlock: :func:`simdb.store.unique.run_add_if_unique`, arguments checked."""
    key, fp, k = _checked(key, fp, k)
    return _store_unique.run_add_if_unique(engine, collection_id, key, fp, k, _validate.dump_meta(meta), shingles,
                                          retries=retries, verify=verify, text_z=text_z)


def add_if_unique_statements(
    collection_id: int, key: str, fp: int | None, k: int = 3, meta_json: str | None = None,
    shingles: list[int] | None = None, text_z: bytes | None = None,
) -> list[tuple[str, dict]]:
    """The statements of :func:`add_if_unique` for front ends on another driver, arguments checked:
    :func:`simdb.store.unique.add_if_unique_statements`."""
    key, fp, k = _checked(key, fp, k)
    return _store_unique.add_if_unique_statements(collection_id, key, fp, k, meta_json, shingles, text_z)


def iter_pairs(engine: Any, collection_id: int, k: int = 3, **options: Any) -> Iterator[Pair]:
    """Every pair within ``k`` (0..11, checked here, when called): :func:`simdb.store.pairs.iter_pairs`."""
    return _pairs.iter_pairs(engine, collection_id, check_pairs_k(k), **options)


def iter_clusters(engine: Any, collection_id: int, k: int = 3, **options: Any) -> Iterator[Cluster]:
    """The clusters of the pairs within ``k`` (checked here): :func:`simdb.store.pairs.iter_clusters`."""
    return _pairs.iter_clusters(engine, collection_id, check_pairs_k(k), **options)


def iter_id_pairs(engine: Any, collection_id: int, k: int = 3, **options: Any) -> Iterator[tuple]:
    """Pairs of row ids within ``k`` (checked here) as numpy batches: :func:`simdb.store.pairs.iter_id_pairs`."""
    return _pairs.iter_id_pairs(engine, collection_id, check_pairs_k(k), **options)


#: names this module re-exported before each name had one home, and where each lives now
_MOVED = {
    "VerifiedPair": "simdb.results",
    **dict.fromkeys(("LOCK_SQL", "LOCK_TAG", "lock_keys"), "simdb.store.unique"),
    "UPSERT_SQL": "simdb.store.unique (as LOCKED_UPSERT_SQL)",
    **dict.fromkeys(("CHUNK_ROWS", "VERIFY_BATCH"), "simdb.store.pairs"),
    **dict.fromkeys(("CANDIDATE_LIMIT", "check_pairs_k", "components", "pairs_in_chunk"), "simdb.core.block_pairs"),
    "RETRY_SQLSTATES": "simdb.store.connect",
}


def __getattr__(name: str) -> Any:
    """Why: an old ``from simdb.dedup import LOCK_SQL`` gets an error naming the new home."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # ImportError, not AttributeError: ``from ... import`` would turn an AttributeError into a bare
    # "cannot import name" and lose the new home
    raise ImportError(f"{__name__}.{name} moved: import it from {home} (CHANGELOG, 'one home per name')")
