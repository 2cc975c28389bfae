"""Batch near-duplicate detection on Apache Spark (optional extra ``simdb-postgres[spark]``).

The same answers as the single-node path, computed on a Spark cluster:

- :func:`fingerprint` adds ``fp`` (the signed 64-bit value PostgreSQL stores)
  with a vectorised pandas/Arrow UDF calling the same :class:`~simdb.Fingerprinter`;
  :func:`shingles` adds the pinned shingle set of :mod:`simdb.core.sketch.shingles`.
- :func:`pairs` finds every pair within Hamming distance ``k`` exactly, each
  pair once, without collecting anything on the driver: every fingerprint is
  exploded into one row per *table* (pigeonhole: ``k + 1`` blocks, or Manku's
  ``C(k + 2, 2)`` tables keyed on two of ``k + 2`` blocks), the rows are
  repartitioned by key, each partition is sorted by key in numpy, and a scan of
  each run of equal keys compares the members. A pair is kept only at the *first*
  table on which its keys agree, so no ``DISTINCT`` (a second shuffle) is needed.
- :func:`clusters` labels connected components (large-star / small-star,
  Kiveris et al., SoCC 2014) with the smallest id, without collecting the graph.
- :func:`rule_pairs` finds every pair by the default rule of a new collection (band-key candidates,
  sketch Jaccard >= 0.8): ``SimhashIndex.pairs()``'s answer for the same texts.
- :func:`keep_one` keeps one record per group of near-duplicates by the rule of
  :func:`simdb.dedup_records` (greedy in priority order, decided per component on
  one executor), with the removal log: the same answers as ``simdb dedup``.
- :func:`write_fingerprints`, :func:`write_pairs`, :func:`write_clusters` write
  to a simdb collection in bulk: per partition one transaction (``COPY`` into a
  temporary staging table, then ``INSERT ... ON CONFLICT``), so a partition is
  written whole or not at all and re-running a job (or a retried task) adds no
  duplicates. :func:`read_collection` reads a collection back as a DataFrame.

Modules: :mod:`~simdb.spark.session` (session, lazy PySpark import),
:mod:`~simdb.spark.columns`, :mod:`~simdb.spark.hamming` (layouts, scan, pairs),
:mod:`~simdb.spark.rule`, :mod:`~simdb.spark.clusters`,
:mod:`~simdb.spark.postgres` (the store's staged writes and reads).

PySpark is imported lazily; the Python workers must run the interpreter simdb
is installed in. :func:`session` sets ``PYSPARK_PYTHON`` to it before the
session starts (workers otherwise run whatever ``python3`` is on the PATH).
"""

from simdb.spark.clusters import KEEP, clusters, keep_one
from simdb.spark.columns import fingerprint, fingerprinter_for, shingles
from simdb.spark.hamming import CANDIDATE_COST_S, ROW_COST_S, choose_scheme, layout, pairs
from simdb.spark.postgres import read_collection, write_clusters, write_fingerprints, write_pairs
from simdb.spark.rule import rule_pairs
from simdb.spark.session import session
from simdb.store.rows import CLUSTERS_TABLE, PAIRS_TABLE

__all__ = [
    "CANDIDATE_COST_S",
    "CLUSTERS_TABLE",
    "KEEP",
    "PAIRS_TABLE",
    "ROW_COST_S",
    "choose_scheme",
    "clusters",
    "fingerprint",
    "fingerprinter_for",
    "keep_one",
    "layout",
    "pairs",
    "read_collection",
    "rule_pairs",
    "session",
    "shingles",
    "write_clusters",
    "write_fingerprints",
    "write_pairs",
]
