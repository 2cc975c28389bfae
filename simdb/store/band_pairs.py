"""Candidate pairs of a banded verified collection (issue 26): rows that share band keys.

``pairs()``, ``clusters()`` and ``simdb dedup`` of a banded collection use the same candidate
stage as ``near(text)`` (:mod:`simdb.store.candidates`), then the same verification stage as
every verified collection (:func:`simdb.store.pairs` checks each candidate pair's sketches):

* **shared band keys**: PostgreSQL unnests the collection's band keys and groups the rows by key
  (``GROUP BY key HAVING count(*) > 1``: only keys held by two rows or more come out); the groups
  arrive aggregated per 1/64th of the key space as two ``bytea`` (the group sizes, then the
  groups' (id, fp) rows), so the client handles 64 messages, not one per group, and makes the
  pairs of each group with numpy. A pair sharing several keys is reported once (``np.unique``
  over all of them: 16 bytes a candidate pair in memory, about 15 per true pair), and only when it
  shares as many keys as the collection's band scheme asks (two in scheme v3).
* **rows without a sketch** (added by fingerprint; hence without band keys): the pairs within
  ``hamming_k`` by the block groups, as before, kept when one of the two rows has no sketch.

The cost is one scan of the collection's keys and a sort by key, whatever the number of rows
per key; it does not probe anything per row, so a dedup's records/s does not fall as the
collection grows (the K = 11 radius join grew as N^2/65,536 per block).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simdb.store import sql as _sql

__all__ = ["BAND_GROUPS_SQL", "band_id_pairs", "first_of_pairs_shared", "group_pairs"]

F = _sql.FINGERPRINTS

#: per 1/64th of the key space: (the sizes of the groups of rows sharing a key, as int4, and the
#: groups' rows as (id, fp) int8 pairs, in the same order). Parameter: the collection id.
BAND_GROUPS_SQL = f"""
SELECT string_agg(int4send(g.n), ''::bytea ORDER BY g.k), string_agg(g.rows, ''::bytea ORDER BY g.k)
FROM (
  SELECT r.k, count(*)::int AS n, string_agg(int8send(r.id) || int8send(r.fp), ''::bytea) AS rows
  FROM (SELECT f.id, f.fp, b.k FROM {F} f CROSS JOIN unnest(f.bands) AS b(k)
        WHERE f.collection_id = %s AND f.bands IS NOT NULL AND f.fp IS NOT NULL) r
  GROUP BY r.k HAVING count(*) > 1
) g
GROUP BY g.k & 63
"""

#: does the collection hold rows without a sketch, hence without band keys (they pair by Hamming distance)?
UNBANDED_SQL = f"SELECT EXISTS (SELECT 1 FROM {F} WHERE collection_id = %s AND fp IS NOT NULL AND shingles IS NULL)"
_BANDLESS_SQL = f"SELECT id FROM {F} WHERE collection_id = %s AND fp IS NOT NULL AND shingles IS NULL"


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
    if not cur.execute(UNBANDED_SQL, (collection_id,)).fetchone()[0]:
        return
    bandless = np.array([r[0] for r in cur.execute(_BANDLESS_SQL, (collection_id,)).fetchall()], dtype=np.int64)
    bandless.sort()
    for ha, hb, hd in hamming_pairs:
        keep = np.isin(ha, bandless, assume_unique=False) | np.isin(hb, bandless, assume_unique=False)
        if keep.any():
            yield ha[keep], hb[keep], hd[keep]
