"""The fresh-load settings that ``bench_ingest`` and ``bench_search`` compare in one run.

- :func:`as_before`: one COPY stream and PostgreSQL's default maintenance settings for the
  index builds (simdb before issue 29, item 4): the same-run baseline;
- :func:`streams`: ``n`` COPY streams whatever the worker count (:mod:`simdb.store.parallel_copy`
  chooses them from the workers: one per ``WORKERS_PER_STREAM``), to measure them on a small machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from simdb.store import parallel_copy


@contextmanager
def _patched(**values) -> Iterator[None]:
    old = {name: getattr(parallel_copy, name) for name in values}
    for name, value in values.items():
        setattr(parallel_copy, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(parallel_copy, name, value)


def as_before() -> AbstractContextManager[None]:
    return _patched(stream_count=lambda workers: 1, parallel_builds=lambda conn, workers: None)


def streams(n: int) -> AbstractContextManager[None]:
    return _patched(stream_count=lambda workers: n)
