"""Deduplication workflows on the store: insert-unless-near-duplicate, all pairs, clusters.

The functions take an Engine (or a Connection) and a collection id;
``SimhashIndex.add_if_unique/pairs/clusters`` are thin delegates. This module keeps the
public names in one place; the code lives in its rooms (docs/architecture.md):

- :mod:`simdb.store.dedup`: :func:`add_if_unique` (advisory locks on the probed block
  values, then search, then insert, in one transaction; retried on deadlock);
- :mod:`simdb.store.pairs`: :func:`iter_pairs` / :func:`iter_clusters` (the rows out of
  PostgreSQL in one snapshot, Hamming or verified);
- :mod:`simdb.core.block_pairs`: the pure numpy comparison of block groups and union-find;
- :mod:`simdb.results`: :class:`AddResult`, :class:`Pair`, :class:`VerifiedPair`, :class:`Cluster`.
"""

from __future__ import annotations

from simdb.core.block_pairs import CANDIDATE_LIMIT, check_pairs_k, components, pairs_in_chunk
from simdb.results import AddResult, Cluster, Pair, VerifiedPair
from simdb.store.dedup import (
    LOCK_SQL,
    LOCK_TAG,
    RETRY_SQLSTATES,
    UPSERT_SQL,
    add_if_unique,
    add_if_unique_statements,
    lock_keys,
    run_add_if_unique,
)
from simdb.store.pairs import CHUNK_ROWS, VERIFY_BATCH, iter_clusters, iter_id_pairs, iter_pairs

__all__ = [
    "AddResult",
    "CANDIDATE_LIMIT",
    "CHUNK_ROWS",
    "Cluster",
    "LOCK_SQL",
    "LOCK_TAG",
    "Pair",
    "RETRY_SQLSTATES",
    "UPSERT_SQL",
    "VERIFY_BATCH",
    "VerifiedPair",
    "add_if_unique",
    "add_if_unique_statements",
    "check_pairs_k",
    "components",
    "iter_clusters",
    "iter_id_pairs",
    "iter_pairs",
    "lock_keys",
    "pairs_in_chunk",
    "run_add_if_unique",
]
