"""Several COPY streams and parallel index builds for a fresh bulk load (``add_many`` with many workers).

Why: with one COPY stream, one server backend parses every row (the binary fields, the jsonb,
the ``int4[]`` sketches) and inserts it; with a dozen encoding processes that one backend is the
ceiling of the load (``add_many(14)`` measured at 0.47 of ``Fingerprinter.many(14)`` on 16 cores).

How, all or nothing on a stock server (no two-phase commit): the loading transaction holds
the table (:mod:`simdb.store.bulk`), so no other session may write into it. Each extra
stream is a session of its own that creates an UNLOGGED table of the load's rows and COPYs
(FREEZE: created in the same transaction) into it, in its own transaction; the chunks go round
robin to the streams. When every stream has committed, the loading transaction moves the rows
into the table with one ``INSERT ... SELECT`` (no parsing left: tuples are copied) and the stage
tables are dropped after it ends, committed or not. Nothing of the load is visible before
that commit, and nothing of it is kept after a rollback. The streams never touch
``simdb_fingerprints`` nor wait for a lock the loader holds, so the locking rules of
:mod:`simdb.store.bulk` are unchanged. A stage table left behind by a killed
process (its transaction had committed) carries the loader's backend pid in its name and is
dropped by the next multi-stream load once that backend is gone.

Exact answers: the last item of a key wins, as in one stream. Stream ``s`` receives chunks
``s, s + S, ...`` in order, so a row's position in its stage (its ``ctid`` order: one COPY into
a new table appends) and the chunk sizes give its position in the input; that is needed only
when the input repeats a key (the unique constraint fails), then the earlier rows are deleted
from the stages and the move is done again.

Off by default (:data:`WORKERS_PER_STREAM`): the move is serial and comes after the last chunk,
so by the costs measured so far it does not beat one stream; what would make it win is moving
each group of stage tables while the streams fill the next (the move beside the encoding).

Index builds: a fresh load builds its indexes after COPY inside its transaction, where no other
session can see the rows; they use PostgreSQL's parallel maintenance workers instead
(:func:`parallel_builds`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import psycopg.errors
from psycopg.copy import QueuedLibpqWriter

from simdb.store import sql as _sql
from simdb.store.encode import COPY_OPTIONS, HEADER, STAGE_COLUMNS, TRAILER

__all__ = ["MAX_STREAMS", "PARALLEL_BUILD_MIN_WORKERS", "WORKERS_PER_STREAM", "StageStreams", "drop_orphans", "parallel_builds", "stream_count"]

FINGERPRINTS = _sql.FINGERPRINTS

#: add_many: one COPY stream per this many encoding workers; 0 (the default): one stream whatever
#: the workers. Why off: the move into the table is serial and runs after the encoding, not beside
#: it. Measured on 2 cores (50,000 rows each, one run): parsing the COPY into a stage costs 1.3 us
#: a plain row and 11.5-17.7 us a verified one, the move into the table 5.5 and 11.2 us; so the
#: streams save the parse but add the move after the last chunk, which by these figures does not
#: beat one stream at the issue's 16-core rates (add_many(14) 116,581 plain / 61,726 verified
#: texts/s). Set it (e.g. 4) to measure on a big machine (``bench_ingest.py --streams S`` does).
WORKERS_PER_STREAM = 0
#: add_many: at most this many COPY streams (sessions) for one load
MAX_STREAMS = 8
#: parallel index builds: maintenance_work_mem per participant (PostgreSQL plans no worker whose
#: share is under 32 MB) and the most the load raises it to
BUILD_MEM_PER_PARTICIPANT_MB = 64
BUILD_MEM_MAX_MB = 1024
#: parallel index builds: at most this many workers besides the leader
MAX_BUILD_WORKERS = 7
#: parallel index builds: asked for by loads with at least this many encoding workers
PARALLEL_BUILD_MIN_WORKERS = 4

_PREFIX = "simdb_load_"
_NAME = re.compile(rf"^{_PREFIX}(\d+)_(\d+)$")


def stream_count(workers: int) -> int:
    """COPY streams for a load encoded by ``workers`` processes (1: the loader's own session only)."""
    if WORKERS_PER_STREAM <= 0:
        return 1
    return max(1, min(MAX_STREAMS, workers // WORKERS_PER_STREAM))


def parallel_builds(conn, workers: int) -> None:
    """Let the index builds of this transaction use up to ``workers - 1`` parallel workers
    (``SET LOCAL``: undone at its end), with the memory PostgreSQL asks for them; never fewer
    workers or less memory than the server's settings give. The server's ``max_parallel_workers``
    and ``max_worker_processes`` still bound them; the table's size decides how many are planned
    (none for a small load).

    Why not below :data:`PARALLEL_BUILD_MIN_WORKERS`: the server's default (2 workers, as
    ``maintenance_work_mem`` allows) already covers a small machine, and on 2 shared cores the
    builds measured no faster with other settings (docs/performance.md)."""
    if workers < PARALLEL_BUILD_MIN_WORKERS:
        return
    current = int(conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0])
    extra = max(current, min(MAX_BUILD_WORKERS, workers - 1))
    mem_kb = int(conn.execute("SELECT setting FROM pg_settings WHERE name = 'maintenance_work_mem'").fetchone()[0])
    want_kb = min(BUILD_MEM_MAX_MB, BUILD_MEM_PER_PARTICIPANT_MB * (extra + 1)) * 1024
    if extra > current:
        conn.execute(f"SET LOCAL max_parallel_maintenance_workers = {int(extra)}")
    if want_kb > mem_kb:
        conn.execute(f"SET LOCAL maintenance_work_mem = '{int(want_kb)}kB'")


def drop_orphans(conn) -> int:
    """Drop the stage tables of loads whose loader backend is gone (a killed process); returns how many.

    ``conn`` in autocommit. A table whose loader is alive is left alone, and one still locked is
    skipped (``lock_timeout``) rather than waited for."""
    rows = conn.execute(
        "SELECT c.oid::regclass::text, c.relname FROM pg_class c WHERE c.relkind = 'r' AND c.relname LIKE %s "
        "AND c.relnamespace = to_regnamespace(current_schema())",
        (_PREFIX.replace("_", r"\_") + "%",),
    ).fetchall()
    live = {r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity").fetchall()}
    dropped = 0
    for qualified, name in rows:
        m = _NAME.match(name)
        if m is None or int(m.group(1)) in live:
            continue
        try:
            with conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '1s'")
                conn.execute(f"DROP TABLE IF EXISTS {qualified}")  # catalog-provided, quoted name
            dropped += 1
        except psycopg.Error:
            pass
    return dropped


class StageStreams:
    """The extra COPY streams of one load: ``count`` sessions, each COPYing into its own stage table.

    ``connect()`` opens a new autocommit connection to the loader's database; ``owner`` is the
    loader's connection (in its transaction). Use :meth:`copy` once, then :meth:`move` inside
    the loader's transaction, and :meth:`close` after that transaction ended."""

    def __init__(self, connect: Callable[[], Any], owner, count: int, columns: str):
        self.connect = connect
        self.columns = columns
        self.count = count
        pid = owner.info.backend_pid
        self.tables = [f"{_PREFIX}{pid}_{s}" for s in range(count)]
        self.conns: list[Any] = []
        #: (stream, first row in the stream, end row in the stream, first row in the input) per chunk
        self.chunks: list[tuple[int, int, int, int]] = []

    def copy(self, chunks: Iterator[tuple[int, bytes]]) -> int:
        """COPY the chunks round robin into the stage tables and commit them; returns the rows.

        On any error every stream's transaction is rolled back (its table with it) and the
        error is raised."""
        self.conns = [self.connect() for _ in range(self.count)]
        drop_orphans(self.conns[0])
        done = [0] * self.count
        total = 0
        with ExitStack() as stack:
            copies = []
            for conn, table in zip(self.conns, self.tables):
                stack.enter_context(conn.transaction())
                conn.execute(f"CREATE UNLOGGED TABLE {table} ({STAGE_COLUMNS})")
                cur = stack.enter_context(conn.cursor())
                cp = stack.enter_context(cur.copy(
                    f"COPY {table} ({self.columns}) FROM STDIN ({COPY_OPTIONS}, FREEZE)", writer=QueuedLibpqWriter(cur)
                ))
                cp.write(HEADER)
                copies.append(cp)
            for k, (rows, data) in enumerate(chunks):
                s = k % self.count
                copies[s].write(data)
                self.chunks.append((s, done[s], done[s] + rows, total))
                done[s] += rows
                total += rows
            for cp in copies:
                cp.write(TRAILER)
        return total

    def move(self, conn, collection_id: int, add_unique: str) -> None:
        """The staged rows into the table (``conn``: the loader, in its transaction), and
        ``add_unique`` (the key constraint) added; a key given more than once keeps its last item."""
        stages = " UNION ALL ".join(f"SELECT {self.columns} FROM {t}" for t in self.tables)
        insert = f"INSERT INTO {FINGERPRINTS} (collection_id, {self.columns}) SELECT %s::int4, * FROM ({stages}) s"
        try:
            with conn.transaction():  # savepoint: undone on repeated keys
                conn.execute(insert, (collection_id,))
                conn.execute(add_unique)
            return
        except (psycopg.errors.UniqueViolation, psycopg.errors.CardinalityViolation):
            pass
        self._keep_last(conn)
        conn.execute(insert, (collection_id,))
        conn.execute(add_unique)

    def _keep_last(self, conn) -> None:
        """Delete from the stages every row whose key comes again later in the input."""
        conn.execute("CREATE TEMP TABLE simdb_load_chunks (s int, lo bigint, hi bigint, base bigint) ON COMMIT DROP")
        with conn.cursor() as cur:
            with cur.copy("COPY simdb_load_chunks FROM STDIN") as cp:
                for row in self.chunks:
                    cp.write_row(row)
        numbered = " UNION ALL ".join(
            f"SELECT {s} AS s, key, ctid AS tid, row_number() OVER (ORDER BY ctid) - 1 AS rn FROM {t}"
            for s, t in enumerate(self.tables)
        )
        conn.execute(
            "CREATE TEMP TABLE simdb_load_losers ON COMMIT DROP AS "
            "SELECT s, tid FROM (SELECT r.s, r.tid, c.base + r.rn - c.lo AS pos, "
            f"max(c.base + r.rn - c.lo) OVER (PARTITION BY r.key) AS last FROM ({numbered}) r "
            "JOIN simdb_load_chunks c ON c.s = r.s AND r.rn >= c.lo AND r.rn < c.hi) o WHERE pos < last"
        )
        for s, table in enumerate(self.tables):
            conn.execute(
                f"DELETE FROM {table} WHERE ctid = ANY (ARRAY(SELECT tid FROM simdb_load_losers WHERE s = %s))", (s,)
            )
        conn.execute("DROP TABLE simdb_load_losers, simdb_load_chunks")

    def close(self) -> None:
        """Drop the stage tables and close the streams' sessions (after the loader's transaction)."""
        conns, self.conns = self.conns, []
        try:
            if conns and not conns[0].closed:
                conns[0].execute(f"DROP TABLE IF EXISTS {', '.join(self.tables)}")
        finally:
            for conn in conns:
                try:
                    conn.close()
                except Exception:
                    pass
