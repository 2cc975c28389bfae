"""All pairs within Hamming distance k = 4..11, in numpy (the generalized pigeonhole, joined).

For k <= 3 two fingerprints within k share a whole 16-bit block, and the
all-pairs search only compares rows inside equal-block groups
(:func:`simdb.core.block_pairs.pairs_in_chunk`). For larger k the same four blocks still
answer exactly (:mod:`simdb.core.bits`): give block i a radius t_i with
sum(t_i) = k - 3; two fingerprints within k differ in at most t_i bits of
some block i. So per block i and per 16-bit mask m with popcount(m) <= t_i,
every row of group g is compared with every row of group g ^ m.

Each pair is reported once: at the first block whose radius it is within
(later blocks drop pairs an earlier block already covers), and within that
block under the one mask equal to the XOR of their block values (for m != 0
only the group pair with g < g ^ m is expanded).

The radii are chosen per collection from its exact bucket sizes: the
candidate count of (block i, radius t) is a sum over group pairs of
``count[g] * count[g ^ m]``, cheap to compute from a 65536-entry histogram,
so a skewed block (one huge bucket) gets a smaller radius than a uniform one.
Any choice is exact; only the work differs.

The rows (ids and unsigned fingerprints) are held in memory, 16 bytes a row;
candidate pairs are materialised at most ``CANDIDATE_LIMIT`` at a time per thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from simdb.core import bits as _bits
from simdb.core import validate as _validate

__all__ = ["CANDIDATE_LIMIT", "choose_pair_radii", "candidate_counts", "pairs_within"]

#: most candidate pairs materialised at once (bounds memory for huge buckets)
CANDIDATE_LIMIT = 1 << 18

_GROUPS = 1 << _bits.BLOCK_BITS
_SHIFTS = (48, 32, 16, 0)  # block i holds bits [_SHIFTS[i], _SHIFTS[i] + 16)


def _block_keys(fps: np.ndarray, i: int) -> np.ndarray:
    return ((fps >> np.uint64(_SHIFTS[i])) & np.uint64(0xFFFF)).astype(np.int64)


def _mask_pairs(counts: np.ndarray, occupied: np.ndarray, mask: int) -> int:
    """Candidate pairs between groups g and g ^ mask (within groups for mask 0).

    Only the ``occupied`` groups (those with a row) are visited: a few thousand rows fill a
    few thousand of the 65,536 groups, and the 137 masks of radius 2 over all groups cost
    more than the comparisons themselves on small inputs."""
    c = counts[occupied]
    if mask == 0:
        return int((c * (c - 1) // 2).sum())
    return int((c * counts[occupied ^ mask]).sum() // 2)


def candidate_counts(fps: np.ndarray) -> list[dict[int, int]]:
    """``cost[i][t]``: candidate pairs block i would produce with radius t (-1..2)."""
    cost = []
    for i in range(_bits.BLOCKS):
        counts = np.bincount(_block_keys(fps, i), minlength=_GROUPS).astype(np.int64)
        occupied = np.flatnonzero(counts)
        c = {-1: 0}
        total = 0
        prev = 0
        for t in range(0, _bits.MAX_RADIUS + 1):
            for m in _bits.MASKS[t][prev:]:
                total += _mask_pairs(counts, occupied, m)
            prev = len(_bits.MASKS[t])
            c[t] = total
        cost.append(c)
    return cost


def choose_pair_radii(fps: np.ndarray, k: int) -> tuple[int, ...]:
    """The exact radius assignment for k with the fewest candidate pairs on these fingerprints."""
    k = _validate.check_k(k, default=None)
    cost = candidate_counts(fps)
    best: tuple[int, ...] = _bits.even_radii(k)
    best_cost = sum(cost[i][t] for i, t in enumerate(best))
    for opt in _bits.radii_options(k):
        c = sum(cost[i][t] for i, t in enumerate(opt))
        if c < best_cost:
            best, best_cost = opt, c
    return best


def expand_runs(
    starts: np.ndarray, lens: np.ndarray, limit: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """All (p, q), p < q, inside each run [start, start + len), in pieces of about ``limit``
    (default CANDIDATE_LIMIT) pairs; a run with more pairs than that is split by rows."""
    limit = CANDIDATE_LIMIT if limit is None else limit
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    huge = lens * (lens - 1) // 2 > limit
    for s, n in zip(starts[huge].tolist(), lens[huge].tolist()):
        r = 0
        while r < n - 1:  # split a huge run by rows
            r2, cnt = r, 0
            while r2 < n - 1 and (r2 == r or cnt + (n - 1 - r2) <= limit):
                cnt += n - 1 - r2
                r2 += 1
            p = np.arange(r, r2)
            c = n - 1 - p
            a = np.repeat(p, c)
            off = np.arange(len(a)) - np.repeat(np.cumsum(c) - c, c) + 1
            yield s + a, s + a + off
            r = r2
    st, ln = starts[~huge], lens[~huge]
    if not len(st):
        return
    npairs = ln * (ln - 1) // 2
    cum = np.cumsum(npairs)
    lo = 0
    while lo < len(st):
        done = int(cum[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(cum, done + limit, side="right")))
        s, n = st[lo:hi], ln[lo:hi]
        rows = n - 1
        rs = np.repeat(s, rows)
        rl = np.repeat(n, rows)
        row = np.arange(len(rs)) - np.repeat(np.cumsum(rows) - rows, rows)
        cnt = rl - 1 - row
        a = np.repeat(rs + row, cnt)
        off = np.arange(len(a)) - np.repeat(np.cumsum(cnt) - cnt, cnt) + 1
        yield a, a + off
        lo = hi


def _expand_cross(
    sa: np.ndarray, na: np.ndarray, sb: np.ndarray, nb: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every (p, q) of [sa, sa + na) x [sb, sb + nb) per group pair, in pieces of about CANDIDATE_LIMIT."""
    # split a group pair whose product exceeds the limit into row ranges of its a side
    rows_per = np.maximum(1, CANDIDATE_LIMIT // np.maximum(nb, 1))
    pieces = -(-na // rows_per)
    if (pieces > 1).any():
        rep = np.repeat(np.arange(len(na)), pieces)
        piece = np.arange(len(rep)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        first = piece * rows_per[rep]
        na = np.minimum(rows_per[rep], na[rep] - first)
        sa = sa[rep] + first
        sb, nb = sb[rep], nb[rep]
    sizes = na * nb
    cum = np.cumsum(sizes)
    lo = 0
    while lo < len(sizes):
        done = int(cum[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(cum, done + CANDIDATE_LIMIT, side="right")))
        sz = sizes[lo:hi]
        rep = np.repeat(np.arange(lo, hi), sz)
        j = np.arange(len(rep)) - np.repeat(np.cumsum(sz) - sz, sz)
        row, col = np.divmod(j, nb[rep])
        yield sa[rep] + row, sb[rep] + col
        lo = hi


def pairs_within(
    ids: np.ndarray,
    fps: np.ndarray,
    k: int,
    radii: Sequence[int] | None = None,
    *,
    threads: int | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every pair of rows within Hamming distance ``k`` (0..11), exactly once.

    ``ids`` int64 and ``fps`` uint64 (unsigned fingerprints) of the same length.
    Yields (id_a, id_b, distance) arrays with id_a < id_b. ``radii`` (an exact
    assignment for k) defaults to :func:`choose_pair_radii`. The masks of a block
    are compared on ``threads`` threads (default: the CPU count, at most 4; numpy
    releases the GIL in the comparisons).
    """
    k = _validate.check_k(k, default=None)
    if radii is None:
        radii = choose_pair_radii(fps, k)
    else:
        _bits.check_radii(radii, k)
    if threads is None:
        threads = min(4, os.cpu_count() or 1)
    if len(fps) < 2:
        return
    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="simdb-pairs")
    try:
        for i, t in enumerate(radii):
            if t < 0:
                continue
            block = _Block(ids, fps, k, radii, i)
            for found in pool.map(block.compare, _bits.MASKS[t]):
                yield from found
    finally:  # an abandoned iteration does not wait for the masks not yet started
        pool.shutdown(wait=True, cancel_futures=True)


class _Block:
    """Block i's rows sorted by its 16-bit value, and the comparison of groups g and g ^ mask."""

    def __init__(self, ids: np.ndarray, fps: np.ndarray, k: int, radii: Sequence[int], i: int):
        keys = _block_keys(fps, i)
        order = np.argsort(keys, kind="stable")
        self.fps, self.ids, self.k = fps[order], ids[order], k
        self.counts = np.bincount(keys, minlength=_GROUPS).astype(np.int64)
        self.starts = np.cumsum(self.counts) - self.counts
        self.occupied = np.flatnonzero(self.counts)  # groups with a row (see _mask_pairs)
        # pairs within an earlier block's radius are reported there
        self.earlier = [(np.uint64(_SHIFTS[e]), radii[e]) for e in range(i) if radii[e] >= 0]

    def compare(self, mask: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        counts, starts = self.counts, self.starts
        if mask == 0:  # inside each group
            multi = counts >= 2
            pieces = expand_runs(starts[multi], counts[multi])
        else:
            g = self.occupied
            low = g[(g & (1 << (mask.bit_length() - 1))) == 0]  # g < g ^ mask: each group pair once
            high = low ^ mask
            both = (counts[low] > 0) & (counts[high] > 0)
            low, high = low[both], high[both]
            pieces = _expand_cross(starts[low], counts[low], starts[high], counts[high]) if len(low) else iter(())
        found = []
        for a, b in pieces:
            x = self.fps[a] ^ self.fps[b]
            d = np.bitwise_count(x)
            ok = d <= self.k
            for shift, te in self.earlier:
                ok &= np.bitwise_count((x >> shift) & np.uint64(0xFFFF)) > te
            if ok.any():
                ia, ib = self.ids[a[ok]], self.ids[b[ok]]
                found.append((np.minimum(ia, ib), np.maximum(ia, ib), d[ok].astype(np.int64)))
        return found
