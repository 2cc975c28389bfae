"""Helpers shared by the Django modules (pure Python: no Django models, no SQLAlchemy)."""

from __future__ import annotations

from functools import lru_cache

from simdb.core.fingerprint import Fingerprinter
from simdb.core.fingerprint.simhash_function import query_fingerprint
from simdb.core.probes import MAX_K, check_k, probes

__all__ = ["BLOCK_FIELDS", "MAX_K", "block_probes", "check_k", "default_fingerprinter", "int4_array", "query_fingerprint"]

BLOCK_FIELDS = ("b0", "b1", "b2", "b3")


@lru_cache(maxsize=1)
def default_fingerprinter() -> Fingerprinter:
    """The default Fingerprinter, built once per process (its stopword table and jieba are not free)."""
    return Fingerprinter()


def block_probes(fp: int, k: int) -> tuple[list[int], ...]:
    """Block values to probe per block b0..b3 (empty = not probed) so every fingerprint within ``k`` is found."""
    return probes(fp, check_k(k))


def int4_array(values: list[int]) -> str:
    """``values`` (ints, already checked) as the text of an ``int4[]`` value, ``"{1,2,3}"``: the
    query parameter for ``%s::int4[]``.

    Why text and not the list: Django's psycopg 3 backend binds client-side by default, and psycopg
    renders a list element by element in Python; a verified query's 12 arrays (four block-probe
    arrays, 548 values at ``K = 11``, and its sketches, 256 values, each written four times) took
    3.1 ms a query to render, more than PostgreSQL took to plan the statement
    (``benchmarks/bench_django_verified.py``). One string is quoted in one call, client-side or sent
    as one value server-side (``OPTIONS["server_side_binding"]``), and PostgreSQL parses the same
    array from it."""
    return "{" + ",".join(map(str, values)) + "}"
