"""Helpers shared by the Django modules (pure Python: no Django models, no SQLAlchemy)."""

from __future__ import annotations

from typing import Any

from simdb.bits import MASK64
from simdb.probes import MAX_K, check_k, probes

__all__ = ["BLOCK_FIELDS", "MAX_K", "block_probes", "check_k", "default_fingerprinter", "query_fingerprint"]

BLOCK_FIELDS = ("b0", "b1", "b2", "b3")


def default_fingerprinter():
    from simdb.fingerprint import Fingerprinter

    return Fingerprinter()


def query_fingerprint(query: Any, fingerprinter: Any = None) -> int | None:
    """An int is an unsigned fingerprint; a str is fingerprinted (None if it has no features)."""
    if isinstance(query, bool):
        raise TypeError("query must be a text or an int fingerprint, got bool")
    if isinstance(query, int):
        if not 0 <= query <= MASK64:
            raise ValueError(f"fingerprint must be in [0, 2**64), got {query}")
        return query
    if isinstance(query, str):
        return (fingerprinter or default_fingerprinter()).fingerprint(query, empty=None)
    raise TypeError(f"query must be a text or an int fingerprint, got {type(query).__name__}")


def block_probes(fp: int, k: int) -> tuple[list[int], ...]:
    """Block values to probe per block b0..b3 (empty = not probed) so every fingerprint within ``k`` is found."""
    return probes(fp, check_k(k))
