"""The fresh-load settings that ``bench_ingest`` and ``bench_search`` compare in one run.

- :func:`as_before`: PostgreSQL's default maintenance settings for the index builds (simdb before
  issue 29, item 4; :func:`simdb.store.bulk.parallel_builds` off): the same-run baseline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from simdb.store import bulk


@contextmanager
def as_before() -> Iterator[None]:
    old = bulk.parallel_builds
    bulk.parallel_builds = lambda conn, workers: None
    try:
        yield
    finally:
        bulk.parallel_builds = old
