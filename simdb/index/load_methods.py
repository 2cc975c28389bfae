"""``SimhashIndex.add_many``: a bulk load through COPY, all or nothing.

A mixin of :class:`simdb.index.SimhashIndex`, kept apart so that the facade stays a page long; it
holds no SQL: the load is the store's (:class:`simdb.store.bulk.BulkLoad`, values in, its
statistics out), and the facade keeps those statistics (``last_load``) and refreshes its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from simdb.core import validate as _validate
from simdb.errors import CollectionChangedError
from simdb.index.text_methods import TextsMixin
from simdb.store import bulk as _bulk
from simdb.store import connect as _connect
from simdb.store.encode import CHUNK_ROWS
from simdb.util import parallel as _parallel

__all__ = ["LoadMixin"]


class LoadMixin(TextsMixin):
    """add_many, for :class:`simdb.index.SimhashIndex`."""

    engine: Any  # the collection's SQLAlchemy Engine (set by SimhashIndex.__init__)
    rule: Any  # its rule (simdb.index.rules)
    last_load: Any  # the statistics of the last add_many
    #: rows the last add_many committed (its transaction), even when it was interrupted after the commit
    last_load_committed: int = 0

    # ------------------------------------------------------------ bulk load
    def add_many(
        self,
        items: Iterable[Any],
        *,
        chunk_rows: int = CHUNK_ROWS,
        rebuild_indexes: bool | None = None,
        vacuum: bool | None = None,
        workers: int | None = None,
    ) -> int:
        """Load many items through COPY, all or nothing; returns the number of items.

        Items are ``(key, text)`` pairs or mappings with ``key``, ``text`` and/or ``fp``
        (unsigned; wins over text) and ``meta``. Streaming: memory stays bounded by
        ``chunk_rows``. Keys already in the collection are replaced, and so is an
        earlier item with the same key in the same call (the last one wins). A bad
        item aborts the whole call with an error naming it (nothing is stored).

        Loading into a table where no other collection has rows (e.g. the first
        import into a new database), and if no one else uses the table at that
        moment, simdb drops the block indexes, the key constraint and the foreign
        key, COPYs straight into the table and rebuilds them, inside the same
        transaction (:mod:`simdb.store.bulk`: never a deadlock, never a stall
        of other collections). ``rebuild_indexes=True/False`` forces or forbids that.
        ``vacuum`` (default: after a rebuild, and after any load of at least
        ``simdb.store.bulk.VACUUM_MIN_ROWS`` rows) runs VACUUM ANALYZE after the commit
        so that searches use index-only scans at once.

        ``workers``: processes that validate and fingerprint chunks while COPY streams
        earlier ones (:mod:`simdb.util.parallel`; default: the usable cores, at most 8, or 1
        when the main script is not guarded by ``if __name__ == "__main__":``). An
        input of one chunk is done in this process. Items must then be picklable.
        """
        _validate.check_items(items)
        workers = _parallel.check_workers(workers)

        self.last_load_committed = 0
        loads: list[_bulk.BulkLoad] = []  # one per try (simdb.store.connect.attempts)
        try:
            with _connect.key_size_errors("add_many: a key"):
                for attempt in _connect.attempts(items):  # a new try after a transient error (a list: read again)
                    with attempt:
                        bulk = _bulk.BulkLoad(
                            self._connections.get(), self.collection_id, self.fingerprinter, chunk_rows,
                            rebuild_indexes, workers, verifier=self.rule.verifier, band_scheme=self.rule.band_scheme,
                            keep_texts=self.store_texts, known=getattr(self, "_feature_memo", None),
                            max_text_bytes=self.max_text_bytes, version=self.config_version,
                            connect=lambda: _connect.new_connection(self.engine),
                        )
                        loads.append(bulk)
                        try:
                            stats = bulk.run(items, vacuum)
                        except CollectionChangedError:
                            # refused before any row was written: follow the new rule; the items are loaded
                            # again under it if they can be read again, else the error says to run it again
                            self._follow_config()
                            raise
                        break  # loaded: no other try
        finally:
            # an interrupt after the commit (VACUUM, statistics) leaves the load stored: say so
            self.last_load_committed = (loads[-1].committed_rows or 0) if loads else 0
        self.last_load = dict(stats)
        if _bulk.stale_statistics(stats):
            self.refresh_stats()
        return stats["rows"]
