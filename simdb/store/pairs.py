"""All pairs and clusters of a collection, Hamming and verified: the rows come out of
PostgreSQL here, the comparisons are pure numpy (:mod:`simdb.core.block_pairs` for k <= 3,
:mod:`simdb.core.radius_pairs` for k = 4..11, :mod:`simdb.core.sketch` for the verification stage).

Per block i, PostgreSQL groups the collection's rows by the 16-bit value b_i
(one parallel hash aggregate; each group arrives as one ``bytea`` of
(id, fp) pairs, so the client handles ~65k messages per block instead of one
per row). The client collects complete groups into chunks of about
``chunk_rows`` rows and compares them vectorised. The four block scans run in one
REPEATABLE READ snapshot; keys are looked up in batches on a second connection that
imports the same snapshot. For k = 4..11 all the collection's (id, fp) rows are read by
one binary COPY and joined group against group within each block's radius.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sqlalchemy import Engine

from simdb.core import radius_pairs as _radius_pairs
from simdb.core.block_pairs import components, pairs_in_chunk
from simdb.core.sketch.compare import SketchRows, sketch_jaccard_pairs
from simdb.results import Cluster, Pair, VerifiedPair
from simdb.store import sql as _sql
from simdb.store.connect import driver_connection
from simdb.store.encode import decode_sketches

__all__ = [
    "BAND_GROUPS_SQL", "CHUNK_ROWS", "VERIFY_BATCH", "Snapshot", "all_rows", "band_id_pairs", "first_of_pairs_shared",
    "group_pairs", "iter_clusters", "iter_id_pairs", "iter_pairs",
]

FINGERPRINTS = _sql.FINGERPRINTS

#: the collection's (id, fp) rows as one ``bytea`` per group of ``{}`` (16 bytes a row); parameter: the collection id
_ROWS_BY = (
    f"SELECT string_agg(int8send(id) || int8send(fp), ''::bytea) FROM {FINGERPRINTS} "
    "WHERE collection_id = %s AND fp IS NOT NULL GROUP BY {}"
)
_GROUPS_SQL = [_ROWS_BY.format(b) for b in _sql.BLOCK_COLUMNS]

#: rows compared per numpy chunk (whole groups; a group larger than this is one chunk of its own)
CHUNK_ROWS = 1 << 19


def _decode(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(b"".join(parts), dtype=">i8").reshape(-1, 2)
    ids = raw[:, 0].astype(np.int64)
    fps = raw[:, 1].astype(np.int64).view(np.uint64)
    return ids, fps


def _block_chunks(cur, collection_id: int, i: int, chunk_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    parts: list[bytes] = []
    size = 0
    limit = chunk_rows * 16
    for (blob,) in cur.stream(_GROUPS_SQL[i], (collection_id,), binary=True):
        if len(blob) <= 16:
            continue  # a group of one row pairs with nothing in this block
        parts.append(blob)
        size += len(blob)
        if size >= limit:
            yield _decode(parts)
            parts, size = [], 0
    if parts:
        yield _decode(parts)


class Snapshot:
    """Two psycopg connections on one REPEATABLE READ snapshot: ``scan`` streams, ``lookup`` fetches keys.

    Both come from ``engine``'s pool through SQLAlchemy, which sets the isolation level and resets it
    when they go back; every statement runs on the psycopg connections themselves (the store's
    one style, :mod:`simdb.store.connect`)."""

    def __init__(self, engine: Engine, work_mem: str | None):
        self._held: list[Any] = []  # the SQLAlchemy connections lent by the pool
        self._streams: list[Iterator[Any]] = []
        try:
            self.scan: Any = self._repeatable_read(engine)
            snap = self.scan.execute("SELECT pg_export_snapshot()").fetchone()[0]
            if work_mem:
                self.scan.execute("SELECT set_config('work_mem', %s, true)", (work_mem,))
            # an ordered index scan would fetch the heap row by row in block order (random I/O);
            # a (parallel) scan + hash aggregate, or a bitmap scan for a small collection, reads it in order
            self.scan.execute("SELECT set_config('enable_indexscan', 'off', true)")
            # SET TRANSACTION SNAPSHOT takes no bind parameters; the id comes from the server
            # and is checked to be of the documented shape before it is quoted as a literal
            if not isinstance(snap, str) or not snap or not all(ch in "0123456789ABCDEF-" for ch in snap):
                raise RuntimeError(f"unexpected snapshot id {snap!r}")
            self.lookup: Any = self._repeatable_read(engine)
            self.lookup.execute(f"SET TRANSACTION SNAPSHOT '{snap}'")  # first statement of its transaction
        except BaseException:
            self.close()
            raise

    def _repeatable_read(self, engine: Engine) -> Any:
        """A psycopg connection of ``engine``'s pool whose next transaction is REPEATABLE READ."""
        held = engine.connect().execution_options(isolation_level="REPEATABLE READ")
        self._held.append(held)
        return driver_connection(held)

    def sketch_rows(self, ids: np.ndarray, size: int) -> SketchRows:
        """The sketches of the rows ``ids`` (sorted, unique), in that order (empty for a row without one).

        Why binary: the sketches come as ``array_send`` bytes (header, then a length word and
        a big-endian int4 per value) decoded by numpy, not as Python lists of ints, which cost
        more than the comparison itself (measured: 0.3 s of a 2 s ``pairs()`` at 20k rows).
        All rows of a batch are decoded together (:func:`decode_sketches`) and the ids go as one
        array text: a batch holds up to a million rows, where per-row Python would dominate."""
        cur = self.lookup.cursor()
        cur.execute(
            f"SELECT id, array_send(shingles) FROM {FINGERPRINTS} WHERE id = ANY(%s::int8[]) AND shingles IS NOT NULL",
            ("{" + ",".join(map(str, ids.tolist())) + "}",), binary=True,
        )
        rows = cur.fetchall()
        return decode_sketches(ids, [r[0] for r in rows], [r[1] for r in rows], size)

    def keys(self, ids: np.ndarray) -> dict[int, str]:
        rows = self.lookup.execute(f"SELECT id, key FROM {FINGERPRINTS} WHERE id = ANY(%s)", (ids.tolist(),)).fetchall()
        return dict(rows)

    def own(self, stream: Iterator[Any]) -> Iterator[Any]:
        """Register a generator reading from this snapshot's connections, so that :meth:`close`
        closes it first: a suspended ``cursor.stream()`` holds its connection's lock, and a
        rollback behind it would wait forever (an abandoned ``pairs()`` iterator hung so)."""
        self._streams.append(stream)
        return stream

    def close(self) -> None:
        for stream in self._streams:
            stream.close()  # type: ignore[attr-defined]
        self._streams = []
        for held in reversed(self._held):
            try:
                driver_connection(held).rollback()
            except Exception:
                pass
            held.close()
        self._held = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_ROWS_SQL = _ROWS_BY.format("b0 >> 10")


def all_rows(cur, collection_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (id, unsigned fp) of the collection, in no particular order.

    Why aggregated: 64 ``bytea`` values of 16 bytes a row (grouped by the top 6 bits, so none
    nears PostgreSQL's 1 GB limit below ~4 billion rows) instead of one COPY message per row:
    measured 0.06 s vs 0.21-0.38 s for 300k rows, most of it the client's per-message cost."""
    parts = [blob for (blob,) in cur.stream(_ROWS_SQL, (collection_id,), binary=True)]
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    return _decode(parts)


def _id_pairs(snap: Snapshot, collection_id: int, k: int, chunk_rows: int):
    """Pairs of ids. k <= 3: block group by block group, memory bounded by ``chunk_rows``.
    (Overlapping the scan with the comparison in a thread was measured: no gain on 2
    cores, the aggregate already keeps both busy.) k = 4..11: the generalized
    pigeonhole joins groups within a radius of each other, so all the collection's
    (id, fp) rows are held in memory (16 bytes a row; :mod:`simdb.core.radius_pairs`)."""
    with snap.scan.cursor() as cur:
        if k > 3:
            ids, fps = all_rows(cur, collection_id)
            yield from _radius_pairs.pairs_within(ids, fps, k)
            return
        for i in range(4):
            for ids, fps in _block_chunks(cur, collection_id, i, chunk_rows):
                yield from pairs_in_chunk(ids, fps, i, k)


#: verification of pairs: candidate pairs gathered before their sketches are fetched (one query);
#: large, because a batch's pairs involve rows all over the collection and each batch fetches
#: the sketches of its rows (measured at 100k rows: 50k pairs a batch spent most of pairs() refetching)
VERIFY_BATCH = 500_000


def _verified_id_pairs(snap: Snapshot, collection_id: int, k: int, chunk_rows: int, verify: tuple):
    """The verification stage over the Hamming pairs within the candidate radius ``k``:
    batches (id_a, id_b, distance, jaccard) of the pairs :meth:`simdb.core.sketch.Verifier.judge`
    keeps (jaccard NaN where a row has no sketch and the distance decided). Candidate pairs
    are gathered into batches of about :data:`VERIFY_BATCH` so that the sketches of a batch
    come in one query."""
    verifier, t, hk, *banded = verify  # a 4th item > 0: a banded collection, its keys shared (band_id_pairs, below)

    def check(a, b, d):
        ids = np.unique(np.concatenate([a, b]))
        sketches = snap.sketch_rows(ids, verifier.size)
        ia, ib = np.searchsorted(ids, a), np.searchsorted(ids, b)
        j = sketch_jaccard_pairs(sketches, ia, ib, t, verifier.size)
        # both sketches: the Jaccard decides; otherwise (nothing to verify with) the distance
        both = (sketches.lens[ia] > 0) & (sketches.lens[ib] > 0)
        keep = np.where(both, j >= t, d <= hk)
        j = np.where(both, j, np.nan)
        return a[keep], b[keep], d[keep], j[keep]

    if banded and banded[0]:  # candidates: shared band keys, and Hamming pairs of rows without keys
        with snap.scan.cursor() as cur:
            hamming = _id_pairs(snap, collection_id, hk, chunk_rows)
            for batch in _batches(band_id_pairs(cur, collection_id, hamming, VERIFY_BATCH, int(banded[0])), VERIFY_BATCH):
                yield check(*batch)
        return
    for batch in _batches(_id_pairs(snap, collection_id, k, chunk_rows), VERIFY_BATCH):
        yield check(*batch)


def _batches(source: Iterator[tuple], size: int) -> Iterator[tuple]:
    """The batches of ``source`` (tuples of arrays of one length: id_a, id_b, distance, ...) gathered
    into batches of about ``size`` pairs, each column concatenated."""
    pend: list[tuple] = []
    n = 0
    for part in source:
        if len(part[0]):
            pend.append(part)
            n += len(part[0])
        if n >= size:
            yield tuple(np.concatenate(column) for column in zip(*pend))
            pend, n = [], 0
    if pend:
        yield tuple(np.concatenate(column) for column in zip(*pend))


def _own_pairs(snap: Snapshot, collection_id: int, k: int, chunk_rows: int, verify: tuple | None):
    """The pairs (verified, with ``verify``) of the snapshot's collection, closed with it."""
    if verify is None:
        return snap.own(_id_pairs(snap, collection_id, k, chunk_rows))
    return snap.own(_verified_id_pairs(snap, collection_id, k, chunk_rows, verify))


def iter_id_pairs(
    engine: Engine, collection_id: int, k: int = 3, *, chunk_rows: int = CHUNK_ROWS, work_mem: str | None = "64MB"
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """All pairs within k as numpy batches (id_a, id_b, distance), id_a < id_b, each pair once.
    ``k`` checked by the API (0..11: :func:`simdb.core.block_pairs.check_pairs_k`), as in every
    function here (:mod:`simdb.index.duplicates`, ``SimhashIndex.pairs``)."""
    with Snapshot(engine, work_mem) as snap:
        yield from _id_pairs(snap, collection_id, k, chunk_rows)


def iter_pairs(
    engine: Engine,
    collection_id: int,
    k: int = 3,
    *,
    batch: int = 10_000,
    chunk_rows: int = CHUNK_ROWS,
    work_mem: str | None = "64MB",
    verify: tuple | None = None,
) -> Iterator[Pair]:
    """Stream every pair within ``k`` of the collection once, as :class:`Pair`.

    ``verify=(verifier, min_jaccard, hamming_k)``: the pairs within ``k`` that the
    verification stage keeps, as :class:`VerifiedPair`.

    Pairs come out grouped by the first block they share, not sorted. Client
    memory is bounded by ``chunk_rows`` (and the largest single block group)
    plus ``batch`` pairs waiting for their keys.
    """
    with Snapshot(engine, work_mem) as snap:

        def answers(a, b, d, *j):
            keys = snap.keys(np.unique(np.concatenate([a, b])))
            if verify is not None:
                return [VerifiedPair(keys[x], keys[y], z, None if w != w else w)
                        for x, y, z, w in zip(a.tolist(), b.tolist(), d.tolist(), j[0].tolist())]
            return [Pair(keys[x], keys[y], z) for x, y, z in zip(a.tolist(), b.tolist(), d.tolist())]

        for pairs in _batches(_own_pairs(snap, collection_id, k, chunk_rows, verify), batch):
            yield from answers(*pairs)


# ---------------------------------------------------------------------------
# clusters
# ---------------------------------------------------------------------------


def iter_clusters(
    engine: Engine,
    collection_id: int,
    k: int = 3,
    *,
    include_singletons: bool = False,
    batch: int = 10_000,
    chunk_rows: int = CHUNK_ROWS,
    work_mem: str | None = "64MB",
    verify: tuple | None = None,
) -> Iterator[Cluster]:
    """Connected components of the pairs within ``k``, ordered by representative (earliest added).

    Singletons (rows with no near-duplicate, including featureless rows) are
    left out unless ``include_singletons``. Memory holds the ids of the rows
    that have a near-duplicate (not the whole collection); keys are fetched in
    batches of about ``batch`` rows as clusters are yielded.
    """
    with Snapshot(engine, work_mem) as snap:
        aa, bb = [], []
        source = _own_pairs(snap, collection_id, k, chunk_rows, verify)
        for a, b, *_ in source:
            aa.append(a)
            bb.append(b)
        if aa:
            members, roots = components(np.concatenate(aa), np.concatenate(bb))
        else:
            members = roots = np.zeros(0, dtype=np.int64)
        # cluster boundaries
        starts = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1]))) if len(roots) else np.zeros(0, np.int64)
        ends = np.append(starts[1:], len(roots))
        if not include_singletons:
            ci = 0
            while ci < len(starts):
                cj = ci
                total = 0
                while cj < len(starts) and (cj == ci or total < batch):
                    total += ends[cj] - starts[cj]
                    cj += 1
                ids = members[starts[ci]:ends[cj - 1]]
                keys = snap.keys(ids)
                for c in range(ci, cj):
                    ks = [keys[x] for x in members[starts[c]:ends[c]].tolist()]
                    yield Cluster(ks[0], ks)
                ci = cj
            return
        yield from _with_singletons(snap, collection_id, members, roots, starts, ends, batch)


def _with_singletons(snap, collection_id, members, roots, starts, ends, batch):
    """Merge the clusters (by representative id) with every other row of the collection as a singleton.

    The collection's (id, key) rows come through a server-side cursor in id order, ``batch`` at
    a time; the keys of the clusters whose representative falls in a page are fetched at once.
    """
    rep_ids = roots[starts] if len(starts) else np.zeros(0, np.int64)
    in_cluster = set(members.tolist())
    ci = 0
    with snap.lookup.cursor(name="simdb_singletons") as cur:
        cur.execute(
            f"SELECT id, key FROM {FINGERPRINTS} WHERE collection_id = %s ORDER BY id", (collection_id,)
        )
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            cj = int(np.searchsorted(rep_ids, rows[-1][0], side="right"))
            keys = snap.keys(members[starts[ci]:ends[cj - 1]]) if cj > ci else {}
            for rid, key in rows:
                while ci < cj and rep_ids[ci] <= rid:
                    ks = [keys[x] for x in members[starts[ci]:ends[ci]].tolist()]
                    yield Cluster(ks[0], ks)
                    ci += 1
                if rid not in in_cluster:
                    yield Cluster(key, [key])
    # no cluster comes after the last row: every representative is a row of the same snapshot


# ---------------------------------------------------------------------------
# banded collections: candidate pairs are rows that share band keys
# ---------------------------------------------------------------------------
# ``pairs()``, ``clusters()`` and ``simdb dedup`` of a banded collection use the same candidate stage as
# ``near(text)`` (:mod:`simdb.store.candidates`), then the verification stage above:
#
# * shared band keys: PostgreSQL unnests the collection's band keys and groups the rows by key (only keys
#   held by two rows or more come out); the groups arrive aggregated per 1/64th of the key space as two
#   ``bytea`` (the group sizes, then the groups' (id, fp) rows), so the client handles 64 messages, not one
#   per group, and makes the pairs of each group with numpy. A pair sharing several keys is reported once,
#   and only when it shares as many keys as the collection's band scheme asks (two in scheme v3).
# * rows without a sketch (added by fingerprint; hence without band keys): the pairs within ``hamming_k``
#   by the block groups, kept when one of the two rows has no sketch.
#
# The cost is one scan of the collection's keys and a sort by key, whatever the number of rows per key; it
# does not probe anything per row, so a dedup's records/s does not fall as the collection grows.

#: per 1/64th of the key space: (the sizes of the groups of rows sharing a key, as int4, and the
#: groups' rows as (id, fp) int8 pairs, in the same order). Parameter: the collection id.
BAND_GROUPS_SQL = f"""
SELECT string_agg(int4send(g.n), ''::bytea ORDER BY g.k), string_agg(g.rows, ''::bytea ORDER BY g.k)
FROM (
  SELECT r.k, count(*)::int AS n, string_agg(int8send(r.id) || int8send(r.fp), ''::bytea) AS rows
  FROM (SELECT f.id, f.fp, b.k FROM {FINGERPRINTS} f CROSS JOIN unnest(f.bands) AS b(k)
        WHERE f.collection_id = %s AND f.bands IS NOT NULL AND f.fp IS NOT NULL) r
  GROUP BY r.k HAVING count(*) > 1
) g
GROUP BY g.k & 63
"""

#: the collection's rows without a sketch, hence without band keys (they pair by Hamming distance)
_BANDLESS_SQL = f"SELECT id FROM {FINGERPRINTS} WHERE collection_id = %s AND fp IS NOT NULL AND shingles IS NULL"


def group_pairs(sizes: np.ndarray, ids: np.ndarray, fps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (id_a < id_b, distance) inside each group (``sizes[g]`` consecutive rows of
    ``ids``/``fps``); pairs may repeat (several shared keys) and are not deduplicated here."""
    starts = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    aa, bb = [], []
    for n in np.unique(sizes).tolist():  # all groups of one size at once (most are pairs of rows)
        i, j = np.triu_indices(n, 1)
        first = starts[sizes == n][:, None]
        aa.append((first + i[None, :]).ravel())
        bb.append((first + j[None, :]).ravel())
    ia, ib = np.concatenate(aa), np.concatenate(bb)
    a, b = ids[ia], ids[ib]
    swap = a > b
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    return a, b, np.bitwise_count(fps[ia] ^ fps[ib]).astype(np.int64)


def _band_candidates(cur, collection_id: int, shared: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of rows sharing at least ``shared`` band keys, once: (id_a, id_b, distance), id_a < id_b."""
    parts_a, parts_b, parts_d = [], [], []
    for size_blob, row_blob in cur.stream(BAND_GROUPS_SQL, (collection_id,), binary=True):
        if not size_blob:
            continue
        sizes = np.frombuffer(size_blob, dtype=">i4").astype(np.int64)
        raw = np.frombuffer(row_blob, dtype=">i8").reshape(-1, 2)
        a, b, d = group_pairs(sizes, raw[:, 0].astype(np.int64), raw[:, 1].astype(np.int64).view(np.uint64))
        parts_a.append(a)
        parts_b.append(b)
        parts_d.append(d)
    if not parts_a:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    a, b, d = np.concatenate(parts_a), np.concatenate(parts_b), np.concatenate(parts_d)
    first = first_of_pairs_shared(a, b, shared)  # a pair comes out of each key it shares
    return a[first], b[first], d[first]


def first_of_pairs_shared(a: np.ndarray, b: np.ndarray, shared: int) -> np.ndarray:
    """Positions of the first occurrence of each pair (a[i], b[i]) that occurs ``shared`` times or more,
    in pair order. Why one int64 per pair: ``np.unique(axis=0)`` sorted 11.6M pairs of a 1M-row
    collection in 29 s, a 1-D sort of the same pairs packed into one integer in 1.6 s. Row ids are
    packed exactly while they fit in 32 bits (a table's first four billion rows); beyond, a 2-D sort."""
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    if int(a.min()) >= 0 and int(b.max()) < 1 << 32:
        packed = (a << 32) | b
        order = np.argsort(packed, kind="stable")
        ordered = packed[order]
    else:  # pragma: no cover - ids beyond 2^32
        order = np.lexsort((b, a))
        ordered = np.stack([a[order], b[order]], axis=1)
    new = np.r_[True, np.any(ordered[1:] != ordered[:-1], axis=-1) if ordered.ndim == 2 else ordered[1:] != ordered[:-1]]
    starts = np.flatnonzero(new)
    times = np.diff(np.r_[starts, len(ordered)])
    return order[starts[times >= shared]]


def band_id_pairs(cur, collection_id: int, hamming_pairs: Iterator, batch: int, shared: int = 1) -> Iterator[tuple]:
    """Candidate pairs of a banded collection in batches of about ``batch``: the band pairs (sharing at
    least ``shared`` keys: :func:`simdb.core.sketch.bands.min_shared` of the collection's scheme),
    then the pairs from ``hamming_pairs`` (the Hamming pairs within hamming_k, block by block)
    in which a row has no sketch (only read when the collection holds such rows)."""
    a, b, d = _band_candidates(cur, collection_id, shared)
    for s in range(0, len(a), batch):
        yield a[s : s + batch], b[s : s + batch], d[s : s + batch]
    bandless = np.array([r[0] for r in cur.execute(_BANDLESS_SQL, (collection_id,)).fetchall()], dtype=np.int64)
    if not len(bandless):
        return
    for ha, hb, hd in hamming_pairs:
        keep = np.isin(ha, bandless) | np.isin(hb, bandless)
        if keep.any():
            yield ha[keep], hb[keep], hd[keep]
