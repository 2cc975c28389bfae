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

This module gathers the public names; the code lives in its rooms: the pure part in
:mod:`simdb.jaccard_core`, the store's in :mod:`simdb.store.jaccard_search`,
:mod:`simdb.store.jaccard_write` and :mod:`simdb.store.jaccard_pairs`. That store half is what
``SimhashIndex(..., jaccard=True)``
delegates to: add / update / add_many keep shingles and band keys in step with
the row, ``near`` / ``add_if_unique`` / ``pairs`` / ``clusters`` take
``min_jaccard``. Numbers: docs/jaccard.md.
"""
from __future__ import annotations

from simdb.jaccard_core import (
    CANDIDATE_OPTIONS,
    CONFIG_KEY,
    LOCK_TAG,
    MIN_THRESHOLD,
    SQL_JACCARD,
    THRESHOLD_K,
    candidate_fingerprinter,
    check_min_jaccard,
    collection_config,
    jaccard,
    k_for_threshold,
    lock_keys,
    minhasher_for,
    minhasher_of,
    prepare,
)
from simdb.results import JaccardPair
from simdb.store.jaccard_pairs import iter_clusters, iter_id_pairs, iter_pairs
from simdb.store.jaccard_search import BANDS_TABLE, add_if_unique, index_add_if_unique, near, near_rows, store_bands
from simdb.store.jaccard_write import BULK_BANDS_ROWS, add, add_many, update

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

#: the other names SimhashIndex and the tools use (re-exported, see the module docstring)
_DELEGATES = (
    BANDS_TABLE, BULK_BANDS_ROWS, CONFIG_KEY, LOCK_TAG, add, check_min_jaccard, index_add_if_unique, iter_id_pairs,
    lock_keys, minhasher_for, near, store_bands, update,
)
