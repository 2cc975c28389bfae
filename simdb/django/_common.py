"""Helpers shared by the Django modules (pure Python: no Django models, no SQLAlchemy)."""

from __future__ import annotations

from functools import lru_cache

from simdb.core.fingerprint import Fingerprinter
from simdb.core.fingerprint.simhash_function import query_fingerprint
from simdb.core.probes import MAX_K, check_k, probes

__all__ = ["BLOCK_FIELDS", "MAX_K", "block_probes", "check_k", "default_fingerprinter", "query_fingerprint"]

BLOCK_FIELDS = ("b0", "b1", "b2", "b3")


@lru_cache(maxsize=1)
def default_fingerprinter() -> Fingerprinter:
    """The default Fingerprinter, built once per process (its stopword table and jieba are not free)."""
    return Fingerprinter()


def block_probes(fp: int, k: int) -> tuple[list[int], ...]:
    """Block values to probe per block b0..b3 (empty = not probed) so every fingerprint within ``k`` is found."""
    return probes(fp, check_k(k))
