"""Batch near-duplicate detection on Apache Spark (optional extra ``simdb-postgres[spark]``).

The same answers as the single-node path, computed on a Spark cluster without collecting the data
on the driver; each module says how:

- :mod:`~simdb.spark.columns`: :func:`fingerprint` (``fp``, the signed 64-bit value PostgreSQL
  stores, from the same :class:`~simdb.Fingerprinter`) and :func:`shingles`;
- :mod:`~simdb.spark.hamming`: :func:`pairs`, every pair within Hamming distance ``k``, exactly,
  each once (and the layouts and cost model it chooses between);
- :mod:`~simdb.spark.rule`: :func:`rule_pairs`, every pair by the default rule of a new collection
  (``SimhashIndex.pairs()``'s answer for the same texts);
- :mod:`~simdb.spark.clusters`: :func:`clusters` (connected components) and :func:`keep_one`
  (one record per group, by the rule of :func:`simdb.dedup_records`: ``simdb dedup``'s answers);
- :mod:`~simdb.spark.postgres`: :func:`write_fingerprints`, :func:`write_pairs`,
  :func:`write_clusters` (one transaction per partition, re-runnable without duplicates) and
  :func:`read_collection`;
- :mod:`~simdb.spark.session`: :func:`session`, whose Python workers run the interpreter simdb is
  installed in (``PYSPARK_PYTHON``); PySpark is imported lazily.
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
