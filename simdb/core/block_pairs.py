"""All pairs within k <= 3 among rows that share a block, compared vectorised in numpy, and the
connected components of a pair graph: pure maths on arrays (no database), tested against brute
force; :mod:`simdb.store.pairs` feeds it the collection's rows.

Two fingerprints within 3 that share block i differ in at most 3 of the other 48 bits, so
they also share one of four 12-bit sub-blocks of those bits. Per sub-block the chunk is sorted
once on the 28-bit key (b_i, sub-block) packed with the row position into one uint64, and only
equal-key runs are compared. A pair is reported at the first block (and first sub-block) it
shares, so every pair comes out exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simdb.core import radius_pairs as _radius_pairs
from simdb.core import validate as _validate

__all__ = ["CANDIDATE_LIMIT", "SHIFTS", "check_pairs_k", "components", "pairs_in_chunk"]

#: the bit offset of each block (block i holds bits [SHIFTS[i], SHIFTS[i] + 16))
SHIFTS = (48, 32, 16, 0)
_BLOCK_MASK = tuple(0xFFFF << s for s in SHIFTS)


def _sub_masks(i: int) -> tuple[int, int, int, int]:
    """Four 12-bit masks splitting the 48 bits outside block i (most significant first)."""
    bits = [b for b in range(63, -1, -1) if not SHIFTS[i] <= b < SHIFTS[i] + 16]
    return tuple(sum(1 << b for b in bits[12 * j: 12 * j + 12]) for j in range(4))  # type: ignore[return-value]


_SUB_MASK = tuple(_sub_masks(i) for i in range(4))


def _bit_runs(mask: int) -> list[tuple[int, int]]:
    """(low bit, length) of each run of set bits of ``mask``, most significant first."""
    runs = []
    b = 63
    while b >= 0:
        if mask >> b & 1:
            e = b
            while e >= 0 and mask >> e & 1:
                e -= 1
            runs.append((e + 1, b - e))
            b = e
        else:
            b -= 1
    return runs


_KEY_RUNS = {(i, j): _bit_runs(_BLOCK_MASK[i] | _SUB_MASK[i][j]) for i in range(4) for j in range(4)}
_KEY_BITS = 28
_POS_BITS = 64 - _KEY_BITS
_POS_MASK = np.uint64((1 << _POS_BITS) - 1)

#: most candidate pairs materialised at once (bounds memory for huge equal-key runs)
CANDIDATE_LIMIT = 1 << 20


def _sorted_keys(fps: np.ndarray, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``fps`` sorted by the 28-bit key (b_i, sub-block j), and the sorted keys.

    The key bits are gathered to the top of a uint64 and the row position put
    in the low 36 bits, so one ``np.sort`` (much faster than argsort) does it.
    """
    comp = np.zeros(len(fps), dtype=np.uint64)
    for low, length in _KEY_RUNS[(i, j)]:
        comp <<= np.uint64(length)
        comp |= (fps >> np.uint64(low)) & np.uint64((1 << length) - 1)
    comp <<= np.uint64(_POS_BITS)
    comp |= np.arange(len(fps), dtype=np.uint64)
    comp.sort()
    return (comp & _POS_MASK).astype(np.int64), comp >> np.uint64(_POS_BITS)


def _run_candidates(ks: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs of positions within equal runs of the sorted array ``ks``, at most ~CANDIDATE_LIMIT at a time."""
    n = len(ks)
    if n < 2:
        return
    starts = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1])))
    lens = np.diff(np.append(starts, n))
    multi = lens >= 2
    if multi.any():
        # read at call time: tests lower it to exercise the batching
        yield from _radius_pairs.expand_runs(starts[multi], lens[multi], CANDIDATE_LIMIT)


def pairs_in_chunk(
    ids: np.ndarray, fps: np.ndarray, i: int, k: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Pairs within ``k`` (0..3) whose first shared block is ``i``, among rows holding whole b_i groups.

    ``ids`` int64, ``fps`` uint64 (unsigned fingerprints). Yields (id_a, id_b,
    distance) arrays with id_a < id_b. Every qualifying pair of the chunk comes
    out exactly once (at the first 12-bit sub-block of the other 48 bits it shares).
    """
    earlier = [np.uint64(_BLOCK_MASK[e]) for e in range(i)]
    subs = [np.uint64(m) for m in _SUB_MASK[i]]
    for j in range(4):
        order, ks = _sorted_keys(fps, i, j)
        for a, b in _run_candidates(ks):
            ia = order[a]
            ib = order[b]
            x = fps[ia] ^ fps[ib]
            d = np.bitwise_count(x)
            keep = d <= k
            for e in earlier:
                keep &= (x & e) != 0
            for jj in range(j):
                keep &= (x & subs[jj]) != 0
            if keep.any():
                ida = ids[ia[keep]]
                idb = ids[ib[keep]]
                yield np.minimum(ida, idb), np.maximum(ida, idb), d[keep].astype(np.int64)


def check_pairs_k(k: object) -> int:
    """Validate k for pairs/clusters: 0..11, like every block search (:func:`simdb.core.validate.check_k`)."""
    return _validate.check_k(k, default=None)




def components(id_a: np.ndarray, id_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union-find over the edges; returns (node ids sorted by (root id, id), root id per node)."""
    nodes, inv = np.unique(np.concatenate([id_a, id_b]), return_inverse=True)
    m = len(id_a)
    ea = inv[:m].tolist()
    eb = inv[m:].tolist()
    parent = list(range(len(nodes)))
    for x, y in zip(ea, eb):
        # find with path halving
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x != y:
            # the smaller index (= smaller id, nodes are sorted) becomes the root
            if x < y:
                parent[y] = x
            else:
                parent[x] = y
    for x in range(len(parent)):
        parent[x] = parent[parent[x]]  # roots precede their members, so one pass flattens
    root = np.asarray(parent, dtype=np.int64)
    order = np.lexsort((np.arange(len(nodes)), root))
    return nodes[order], nodes[root[order]]


