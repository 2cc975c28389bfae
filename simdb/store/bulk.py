"""The one COPY pipeline of ``SimhashIndex.add_many`` for SimHash collections: staged COPY and
merge for small loads, drop-indexes / COPY (FREEZE) / rebuild for big ones into a table no one
else uses, and the locks that make that safe.

It takes values (a connection, the collection id, the fingerprinter, the verifier and whether the
collection is banded) and returns the load's statistics (:class:`LoadStats`); it knows nothing of the
facade, which keeps them as ``last_load`` and refreshes its own bucket statistics when
:func:`stale_statistics` says so. The SQL of the load lives here only.

The locks of a load: never a deadlock, never a long wait for others. The fast path (drop the block
indexes and constraints, COPY straight into the table, rebuild) needs ``ACCESS EXCLUSIVE`` on the one
table every collection shares. Taken *after* the load had read the table (``ACCESS SHARE``), two loads
into different collections each held the weak lock and waited for the strong one (a deadlock); held for
the whole load, it stalls every reader and writer of every other collection. The rules:

1. Writers of one collection serialise on a transaction advisory lock
   ``(ADD_LOCK, collection_id)`` (same-collection loads wait for each other,
   then both succeed; other collections are not involved).
2. The exclusive lock is asked for *first*, before the load touches the table,
   so the load holds nothing on the table while it waits (no lock-upgrade cycle),
   and with ``NOWAIT`` unless the caller forced the fast path: if anyone else
   uses the table at that moment, the load takes the plain path (staged COPY +
   INSERT, row locks only) instead of waiting.
3. Even when granted, the lock is kept only if the table has no rows at all
   (the first import into a fresh database): otherwise it is released at once
   (rolling back the savepoint that took it) and the plain path is used, so an
   established collection's readers and writers are never stalled by someone
   else's bulk load. Rows of the load's own collection release it too: the fast
   path is only taken into an empty collection, and a load that may replace rows
   must lock the collection's row before the table's rows (rule 5), which a holder
   of the table lock cannot do without deadlocking with ``simdb convert`` (that
   locks the collection's row, then reads the table). ``rebuild_indexes=True``
   still forces the fast path.
4. Should PostgreSQL still report a deadlock or a serialisation failure (e.g. a
   caller's own locks), a load whose items can be read again (a list or tuple)
   is retried, at most :data:`simdb.store.connect.LOAD_RETRIES` times (:func:`simdb.store.connect.attempts`); a one-shot iterator is not (its
   items are gone), and the error is raised. So is a load refused because the
   collection's rule changed meanwhile (:func:`check_rule`), once the caller has
   followed the new rule.
5. The rule check (the collection's row, ``FOR KEY SHARE``) comes before the load deletes
   any row it replaces, right after the load's first read of the table, and again just
   before the commit (:func:`check_rule` says why both).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, TypedDict

import psycopg.errors
from psycopg.copy import QueuedLibpqWriter

from simdb.errors import InvalidArgumentError
from simdb.store import collection_guard as _guard
from simdb.store import sql as _sql
from simdb.store.encode import COLUMNS, COPY_OPTIONS, HEADER, POOL_TASK_ROWS, STAGE_COLUMNS, TRAILER, iter_chunks
from simdb.util import parallel as _parallel

__all__ = [
    "ADD_LOCK", "AHEAD_TASKS", "ANALYZE_MIN_ROWS", "BULK_MIN_ROWS", "DELETE_BY_KEYS_MAX", "MERGE_GROUP_ROWS",
    "PARALLEL_BUILD_MIN_WORKERS", "VACUUM_MIN_ROWS", "BulkLoad", "LoadStats", "check_rule", "drop_for_bulk",
    "lock_collection", "lock_for_load", "parallel_builds", "rebuild_ddl", "stale_statistics",
]

FINGERPRINTS = _sql.FINGERPRINTS

#: add_many: a load into an empty collection switches to "drop indexes, COPY, rebuild" once this
#: many rows are staged, if the table holds at most as many rows as are staged
BULK_MIN_ROWS = 200_000

#: add_many: a load of this many rows is followed by VACUUM (ANALYZE) unless ``vacuum=False``.
#: Why: the candidate search is an index-only scan, which reads the heap for every index entry
#: on a page the visibility map does not yet mark all-visible; autovacuum marks inserted pages
#: only once 20 % of the table is new. Measured on 1M rows just loaded through the staged path:
#: a K = 11 verified near() took 11 ms before VACUUM and 2.3 ms after it (VACUUM: 0.8 s).
VACUUM_MIN_ROWS = 100_000

#: add_many: a load of this many rows (not vacuumed) is followed by ANALYZE: the band btrees are expression
#: indexes, with no statistics before one (a banded near() then took 346 ms instead of 0.8 ms at 20,000 rows)
ANALYZE_MIN_ROWS = 5_000

#: add_many with workers into a collection it cannot bulk-load: the stage is merged into the table
#: every this many rows (four pool tasks: what the pool encodes ahead meanwhile)
MERGE_GROUP_ROWS = 20_000

#: add_many with workers: tasks in flight, at least (the pool encodes a group while the server merges one)
AHEAD_TASKS = 2 * -(-MERGE_GROUP_ROWS // POOL_TASK_ROWS)

_STAGE = "simdb_stage_v4"  # its layout's version: a session's temp stage of an older layout is never reused
_STAGE_DDL = f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} ({STAGE_COLUMNS})"
#: the stage into the table (parameter: the collection id)
_MOVE_STAGE = f"INSERT INTO {FINGERPRINTS} (collection_id, {COLUMNS}) SELECT %s::int4, {COLUMNS} FROM {_STAGE}"
#: a key given twice in one statement's rows
_DUPLICATE_KEY = (psycopg.errors.UniqueViolation, psycopg.errors.CardinalityViolation)


def drop_for_bulk(bands: bool = True, sketchless: bool = True) -> list[str]:
    """What a bulk load drops before its COPY: the unique key, the foreign key, the block indexes,
    and the band and sketchless indexes only where its rows enter them (``bands``: the rows carry band
    keys; ``sketchless``: rows without a sketch, i.e. a plain collection's).

    Why not always all: the band indexes are partial (``bands IS NOT NULL``) and the sketchless one
    too (``SKETCHLESS_WHERE``); a row outside an index's predicate costs it one predicate test at
    insertion, but building a partial index again scans the whole table. A plain load of 1M fingerprints
    rebuilt 14 band indexes that stay empty (0.48-0.71 of the COPY + index floor; 0.83-0.97 without
    them: docs/performance.md), and a banded load rebuilt a sketchless index none of its text rows enter. An index left in place
    is maintained by PostgreSQL, so a row that does enter it (an item given by fp in a verified
    collection) is still indexed: the choice is speed only, never the answer."""
    return [
        *(f"DROP INDEX {name}" for name in _sql.BLOCK_INDEXES),
        *((f"DROP INDEX {name}" for name in _sql.BANDS_INDEXES) if bands else ()),
        *((f"DROP INDEX IF EXISTS {_sql.SKETCHLESS_INDEX}",) if sketchless else ()),
        f"ALTER TABLE {FINGERPRINTS} DROP CONSTRAINT {_sql.UNIQUE_KEY}",
        f"ALTER TABLE {FINGERPRINTS} DROP CONSTRAINT {_sql.COLLECTION_FK}",
    ]


_ADD_UNIQUE = f"ALTER TABLE {FINGERPRINTS} ADD CONSTRAINT {_sql.UNIQUE_KEY} UNIQUE (collection_id, key)"


def rebuild_ddl(bands: bool = True, sketchless: bool = True) -> list[str]:
    """What a bulk load builds again after its COPY: the block indexes, the band and sketchless
    indexes it dropped (:func:`drop_for_bulk`, same arguments), the foreign key."""
    return [
        *(f"CREATE INDEX {name} ON {FINGERPRINTS} ({', '.join(cols)})" for name, cols in _sql.BLOCK_INDEXES.items()),
        *((f"CREATE INDEX {name} ON {FINGERPRINTS} ({', '.join(cols)}) WHERE bands IS NOT NULL"
           for name, cols in _sql.BANDS_INDEXES.items()) if bands else ()),
        *((f"CREATE INDEX {_sql.SKETCHLESS_INDEX} ON {FINGERPRINTS} (collection_id) WHERE {_sql.SKETCHLESS_WHERE}",)
          if sketchless else ()),
        f"ALTER TABLE {FINGERPRINTS} ADD CONSTRAINT {_sql.COLLECTION_FK} FOREIGN KEY (collection_id) "
        f"REFERENCES {_sql.COLLECTIONS} (id) ON DELETE CASCADE",
    ]


#: parallel index builds: maintenance_work_mem per participant (PostgreSQL plans no worker whose
#: share is under 32 MB) and the most the load raises it to
BUILD_MEM_PER_PARTICIPANT_MB = 64
BUILD_MEM_MAX_MB = 1024
#: parallel index builds: at most this many workers besides the leader
MAX_BUILD_WORKERS = 7
#: parallel index builds: asked for by loads with at least this many encoding workers
PARALLEL_BUILD_MIN_WORKERS = 4


def parallel_builds(conn, workers: int) -> None:
    """Let the index builds of this transaction use up to ``workers - 1`` parallel workers
    (``SET LOCAL``: undone at its end), with the memory PostgreSQL asks for them; never fewer
    workers or less memory than the server's settings give. The server's ``max_parallel_workers``
    and ``max_worker_processes`` still bound them; the table's size decides how many are planned
    (none for a small load).

    Why in the load's own transaction: a fresh load builds its indexes after the COPY, where no
    other session can see the rows, so PostgreSQL's parallel maintenance workers are the only way
    to spread a build. Why not below :data:`PARALLEL_BUILD_MIN_WORKERS`: the server's default
    (2 workers, as ``maintenance_work_mem`` allows) already covers a small machine, and on 2
    shared cores the builds measured no faster with other settings (docs/performance.md)."""
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


#: advisory-lock namespace (first int4 key) for writers of one collection in add_many ("simd")
ADD_LOCK = 0x73696D64


class _Release(Exception):
    """Raised inside the savepoint to roll it back, which releases the table lock taken in it."""


def lock_for_load(conn, collection_id: int, rebuild: bool | None) -> bool:
    """The first statements of a load's transaction (rules 1 to 3): serialise the writers of the collection,
    then take ``ACCESS EXCLUSIVE`` on the table for the drop-and-rebuild fast path if that blocks nobody,
    unless ``rebuild`` is False. ``rebuild=True`` forces it: wait for the lock (safe: nothing held on the
    table meanwhile, as this is the transaction's first use of it) and keep it whatever the table holds.
    Returns whether the table lock is held (until the transaction ends)."""
    lock_collection(conn, collection_id)
    if rebuild is False:
        return False
    force = rebuild is True
    try:
        with conn.transaction():  # a savepoint: rolling it back releases the lock
            conn.execute(f"LOCK TABLE {FINGERPRINTS} IN ACCESS EXCLUSIVE MODE" + ("" if force else " NOWAIT"))
            if not force and conn.execute(f"SELECT EXISTS (SELECT 1 FROM {FINGERPRINTS})").fetchone()[0]:
                raise _Release
    except (_Release, psycopg.errors.LockNotAvailable):
        return False
    return True


def lock_collection(conn, collection_id: int) -> None:
    """Serialise writers of one collection (transaction-scoped: released at commit or rollback)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", (ADD_LOCK, collection_id))


def check_rule(conn, collection_id: int, version: str | None) -> None:
    """Refuse (:class:`~simdb.errors.CollectionChangedError`) a load computed under a rule the collection
    no longer has, and keep its rule until the load commits (:mod:`simdb.store.collection_guard`).

    Not first in the load's transaction (rules 2 and 5): the check locks the collection's row, and a
    loader holding it while waiting for another's ``ACCESS EXCLUSIVE`` on the table deadlocks with
    that one, whose drop of the foreign key needs ``simdb_collections`` (seen in
    tests/test_bulk_concurrency.py). A staged load therefore checks right after its first read of
    the table (it then holds ``ACCESS SHARE``: no one holds or takes the table's exclusive lock until
    it ends), before it deletes the rows it replaces: ``simdb convert`` locks the collection's row and
    then rewrites its rows, and a loader holding some of those rows while waiting for the collection's
    row was a deadlock (tests/test_convert_races.py); a collection dropped meanwhile is then said so,
    not met as a foreign-key violation. A load holding the table's exclusive lock (into an empty
    table) checks right after taking it: no other loader waits for the table while holding a
    collection's row then. Every load checks again just before its commit. Anywhere before the commit
    is as exact: the rows are stored only if the rule they were computed by is still the
    collection's when they are."""
    if version is not None:
        _guard.check(conn, collection_id, version)


class LoadStats(TypedDict):
    """What one load did (``SimhashIndex.last_load``): rows, whether it rebuilt the indexes, whether
    the rows were written frozen (COPY FREEZE), seconds per phase."""

    rows: int
    rebuilt: bool
    frozen: bool
    seconds: dict[str, float]


def stale_statistics(stats: LoadStats) -> bool:
    """Has this load changed the table enough that cached bucket statistics (the adaptive radii's
    pg_stats) should be read again?"""
    return stats["rebuilt"] or stats["rows"] >= BULK_MIN_ROWS


class BulkLoad:
    """One add_many call: ``run`` loads the items in one transaction (all or nothing) on ``conn``
    into collection ``collection_id``, fingerprinting (and, with ``verifier``, sketching; with
    ``band_scheme``, band-keying; with ``keep_texts``, compressing) each text; ``max_text_bytes``
    bounds a text; ``known``: text -> features already computed (the facade's memo of its last
    ``near_many``, so that ``simdb dedup`` does not compute its survivors' features twice)."""

    def __init__(
        self, conn: Any, collection_id: int, fingerprinter: Any, chunk_rows: int, rebuild: bool | None,
        workers: int | None = None, *, verifier: Any = None, band_scheme: str | None = None,
        keep_texts: bool = False, known: Any = None, max_text_bytes: int | None = None,
        version: str | None = None,
    ):
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise InvalidArgumentError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
        self.workers = workers if workers is not None else _parallel.default_workers()
        self.conn, self.fingerprinter = conn, fingerprinter
        self.verifier = verifier
        self.band_scheme = band_scheme
        self.keep_texts = keep_texts
        self.known = known
        self.max_text_bytes = max_text_bytes
        self.chunk_rows = chunk_rows
        self.rebuild = rebuild
        self.cid, self.version = collection_id, version  # of the rule the rows follow (collection_guard)
        self.timings: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def _mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.timings[phase] = self.timings.get(phase, 0.0) + now - self._t0
        self._t0 = now

    def run(self, items: Iterable[Any], vacuum: bool | None) -> LoadStats:
        conn = self.conn
        ahead = max(2 * self.workers, AHEAD_TASKS)
        chunks = iter_chunks(items, self.fingerprinter, self.chunk_rows, self.workers, self.max_text_bytes,
                             self.verifier, ahead, band_scheme=self.band_scheme, keep_texts=self.keep_texts,
                             known=self.known if self.verifier is not None else None)
        total = 0
        rebuilt = frozen = False
        with conn.transaction():
            # the collection's writers serialise; the table lock only when it blocks nobody
            # (rules 1 to 3: asked first, NOWAIT, kept only if no other collection has rows)
            self.exclusive = lock_for_load(conn, self.cid, self.rebuild)
            if self.exclusive:  # first load into an empty table: no staging, COPY FREEZE, build indexes after
                check_rule(conn, self.cid, self.version)  # (rule 5)
                if self._table_is_empty(conn):
                    frozen = self._truncate_for_freeze(conn)
                    self._drop(conn)
                    self._mark("prepare")
                    total = self._copy_direct(conn, chunks, freeze=frozen)
                    self._rebuild(conn)
                    conn.execute(f"ANALYZE {FINGERPRINTS}")
                    self._mark("analyze")
                    rebuilt = True
            if not rebuilt:
                total, rebuilt = self._staged(conn, chunks)
                conn.execute(f"TRUNCATE {_STAGE}")
            check_rule(conn, self.cid, self.version)
        self.committed_rows = total  # before the post-commit work: an interrupt there keeps the load
        self._mark("commit")
        if vacuum or (vacuum is None and not frozen and (rebuilt or total >= VACUUM_MIN_ROWS)):
            conn.execute(f"VACUUM (ANALYZE) {FINGERPRINTS}")
            self._mark("vacuum")
        elif not rebuilt and total >= ANALYZE_MIN_ROWS:
            conn.execute(f"ANALYZE {FINGERPRINTS}")
            self._mark("analyze")
        return {"rows": total, "rebuilt": rebuilt, "frozen": frozen, "seconds": dict(self.timings)}

    committed_rows: int | None = None  # set once the load's transaction has committed
    exclusive = False  # whether this load holds the table's ACCESS EXCLUSIVE lock (lock_for_load)

    def _staged(self, conn, chunks: Iterator[tuple[int, bytes]]) -> tuple[int, bool]:
        """COPY into a temp staging table and merge; or switch to drop/COPY/rebuild for big loads.

        With worker processes (and no possible switch to the bulk path), the stage is merged
        every :data:`MERGE_GROUP_ROWS` rows: the server inserts one group (index maintenance,
        ~20 us a row in a populated table) while the pool encodes the next, instead of all the
        inserts after all the encoding."""
        empty = conn.execute(
            f"SELECT NOT EXISTS (SELECT 1 FROM {FINGERPRINTS} WHERE collection_id = %s::int4)", (self.cid,)
        ).fetchone()[0]
        table_rows = self._table_rows(conn) if empty and self.rebuild is None else 0.0
        if not self.exclusive:  # before deleting a row it replaces: the collection's row first (rule 5)
            check_rule(conn, self.cid, self.version)  # (an exclusive load checked already)
        conn.execute(_STAGE_DDL)
        conn.execute(f"TRUNCATE {_STAGE}")
        self._mark("prepare")
        # groups only where no switch to the bulk path can come (it would find rows already merged)
        may_go_bulk = self.exclusive and self.rebuild is not False and (self.rebuild is True or empty)
        group_rows = MERGE_GROUP_ROWS if self.workers > 1 and not may_go_bulk else None
        staged = 0
        replace = not empty  # keys of this collection may be in the table already
        while True:
            n, bulk, done = self._stage_group(conn, chunks, empty, table_rows, staged, group_rows)
            staged += n
            if bulk or done:
                break
            self._merge(conn, replace, n)
            conn.execute(f"TRUNCATE {_STAGE}")
            replace = True  # later groups may repeat this group's keys: the last item wins
        if not bulk:
            self._merge(conn, replace, n)
            return staged, False
        self._drop(conn)  # self.exclusive: the table lock is already held (see _go_bulk)
        self._dedupe_stage(conn)
        conn.execute(_MOVE_STAGE, (self.cid,))
        self._mark("move_stage")
        staged += self._copy_direct(conn, chunks, freeze=False)
        self._rebuild(conn)
        return staged, True

    def _stage_group(
        self, conn, chunks: Iterator[tuple[int, bytes]], empty: bool, table_rows: float, staged: int,
        group_rows: int | None,
    ) -> tuple[int, bool, bool]:
        """COPY chunks into the stage until ``group_rows`` rows (None: all of them):
        (rows staged, switch to the bulk path?, were the chunks exhausted?)."""
        n = 0
        bulk = False
        done = True
        with conn.cursor() as cur:
            copy = f"COPY {_STAGE} ({COLUMNS}) FROM STDIN ({COPY_OPTIONS})"
            with cur.copy(copy, writer=_copy_writer(cur)) as cp:
                cp.write(HEADER)
                for rows, data in chunks:
                    cp.write(data)
                    n += rows
                    if self._go_bulk(empty, table_rows, staged + n):
                        bulk = True
                        break
                    if group_rows is not None and n >= group_rows:
                        done = False
                        break
                cp.write(TRAILER)
        self._mark("copy_stage")
        return n, bulk, done and not bulk

    @staticmethod
    def _table_is_empty(conn) -> bool:
        return conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {FINGERPRINTS})").fetchone()[0]

    def _truncate_for_freeze(self, conn) -> bool:
        """TRUNCATE the (empty) table so that COPY FREEZE may write frozen, all-visible rows. Tables referencing
        it by foreign key are truncated with it only if they are empty too (listed in the same TRUNCATE);
        otherwise no FREEZE."""
        refs = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT conrelid::regclass::text FROM pg_constraint "
                "WHERE contype = 'f' AND confrelid = to_regclass(%s) AND conrelid <> confrelid",
                (FINGERPRINTS,),
            ).fetchall()
        ]
        for ref in refs:  # catalog-provided, already quoted names
            if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {ref})").fetchone()[0]:
                return False
        try:
            with conn.transaction():
                conn.execute(f"TRUNCATE {', '.join([FINGERPRINTS, *refs])}")
        except Exception:  # e.g. no TRUNCATE privilege on a referencing table: no FREEZE then
            return False
        return True

    def _kinds(self) -> dict[str, bool]:
        """The partial indexes this load's rows enter, and so drops and rebuilds (:func:`drop_for_bulk`)."""
        return {"bands": self.band_scheme is not None, "sketchless": self.verifier is None}

    def _drop(self, conn) -> None:
        for ddl in drop_for_bulk(**self._kinds()):
            conn.execute(ddl)
        # collection_id from a temporary default (DDL takes no parameters; an int from our catalog row)
        conn.execute(f"ALTER TABLE {FINGERPRINTS} ALTER COLUMN collection_id SET DEFAULT {int(self.cid)}")

    def _copy_direct(self, conn, chunks: Iterator[tuple[int, bytes]], freeze: bool) -> int:
        total = 0
        opts = f"{COPY_OPTIONS}, FREEZE" if freeze else COPY_OPTIONS
        with conn.cursor() as cur:
            with cur.copy(f"COPY {FINGERPRINTS} ({COLUMNS}) FROM STDIN ({opts})", writer=_copy_writer(cur)) as cp:
                cp.write(HEADER)
                for n, data in chunks:
                    cp.write(data)
                    total += n
                cp.write(TRAILER)
        conn.execute(f"ALTER TABLE {FINGERPRINTS} ALTER COLUMN collection_id DROP DEFAULT")
        self._mark("copy_direct")
        return total

    def _rebuild(self, conn) -> None:
        """The dropped constraints and indexes back, built by parallel maintenance workers when the
        load has several (:func:`parallel_builds`)."""
        parallel_builds(conn, self.workers)
        self._add_unique(conn)
        for ddl in rebuild_ddl(**self._kinds()):
            conn.execute(ddl)
            self._mark("rebuild_" + ddl.split()[2])

    def _add_unique(self, conn) -> None:
        try:
            with conn.transaction():
                conn.execute(_ADD_UNIQUE)
        except _DUPLICATE_KEY:
            # the same key more than once in this load: the last one (highest id) wins
            conn.execute(
                f"DELETE FROM {FINGERPRINTS} a USING {FINGERPRINTS} b WHERE a.collection_id = %s::int4 "
                "AND b.collection_id = a.collection_id AND a.key = b.key AND a.id < b.id",
                (self.cid,),
            )
            conn.execute(_ADD_UNIQUE)
        self._mark("rebuild_unique")

    def _table_rows(self, conn) -> float:
        """Rows in the whole table: the planner's estimate, or a count capped at 1M when it has none."""
        est = conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (FINGERPRINTS,)).fetchone()
        counted = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {FINGERPRINTS} LIMIT 1000000) t").fetchone()[0]
        return max(float(est[0]) if est and est[0] is not None else 0.0, float(counted))

    def _go_bulk(self, empty: bool, table_rows: float, staged: int) -> bool:
        """Switch to drop-COPY-rebuild? (no queries here: the COPY is in progress)"""
        if not self.exclusive or self.rebuild is False or staged < BULK_MIN_ROWS:
            return False
        if self.rebuild is True:
            return True
        return empty and table_rows <= staged

    def _merge(self, conn, replace: bool, staged: int) -> None:
        """Stage -> table (``staged`` rows): replace existing keys (if ``replace``: some may be
        there), last item wins within the call."""
        if replace:
            conn.execute(_delete_replaced_sql(staged), (self.cid,))
            self._mark("delete_replaced")
        try:
            with conn.transaction():  # savepoint
                conn.execute(_MOVE_STAGE, (self.cid,))
        except _DUPLICATE_KEY:
            self._dedupe_stage(conn)
            conn.execute(_MOVE_STAGE, (self.cid,))
        self._mark("insert")

    def _dedupe_stage(self, conn) -> None:
        # COPY appends in order, so the physical order (ctid) is the order of the items
        conn.execute(f"DELETE FROM {_STAGE} a USING {_STAGE} b WHERE a.key = b.key AND a.ctid < b.ctid")


#: the staged keys are looked up one by one in the unique index up to this many; past it, joined
DELETE_BY_KEYS_MAX = 100_000


def _delete_replaced_sql(staged: int) -> str:
    """The statement that deletes the collection's rows whose keys are staged (parameter: the
    collection id).

    Why two forms: as a join, PostgreSQL hashes the whole collection (a sequential scan: 0.27 s
    at 1M rows, 3.6 s at 10M, for any number of staged keys); with the staged keys as one
    array it probes the unique index (collection_id, key) once a key (~85 ms for 30,000 keys
    at 1M rows, whatever the collection's size). The array is built in the server's memory,
    so past :data:`DELETE_BY_KEYS_MAX` keys the join is used."""
    if staged <= DELETE_BY_KEYS_MAX:
        return (
            f"DELETE FROM {FINGERPRINTS} f WHERE f.collection_id = %s::int4 "
            f"AND f.key = ANY (ARRAY(SELECT key FROM {_STAGE}))"
        )
    return f"DELETE FROM {FINGERPRINTS} f USING {_STAGE} s WHERE f.collection_id = %s::int4 AND f.key = s.key"


def _copy_writer(cur):
    """A writer sending from a background thread: the next chunk is encoded while PostgreSQL parses
    the previous one (the default blocks until each is sent); errors surface at the block's end."""
    return QueuedLibpqWriter(cur)
