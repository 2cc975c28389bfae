"""SimHash bit counts in byte lanes: many texts at once, or one short text, in a few numpy calls.

Why: on a short paragraph (~150 kept words) the bit sums themselves are a few
hundred nanoseconds of arithmetic, but each numpy call costs ~0.1-1 us of fixed
overhead, and the float32 matrix-product path (:func:`simdb.core.fingerprint.bitsum.count_majority`)
makes about a dozen. :func:`segment_bit_counts` counts the hashes of every text of a
batch in one pass, so that overhead is paid once per batch (``Fingerprinter.many``);
:func:`short_majority` and :func:`short_weighted_majority` make fewer, cheaper calls
for one short text (``Fingerprinter.fingerprint``).

How, exactly: ``np.unpackbits`` turns each hash into 64 bytes of 0/1; viewed as
eight ``uint64`` words, each word holds eight *byte lanes*. Adding such words adds
the lanes independently as long as no lane exceeds 255, so a sum over at most 255
hashes counts 64 bits with 8 additions per hash. Longer texts are cut into runs of
255 and their run counts added in int64; weighted sums use 16-bit lanes. Every
count is an exact integer, so the majority ``2 * count > total`` is the pinned rule
bit for bit (``simdb.core.fingerprint.bitsum``: ``p > n / 2`` on exact float32 sums). The bit order
inside a byte is numpy's default (most significant first) on the way in and on the
way out (``packbits``), so positions round-trip. Pure numpy: no database imports.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = [
    "LANE_MAX", "SHORT_WEIGHTED_MAX", "majority_rows", "segment_bit_counts", "short_majority",
    "short_weighted_majority",
]

#: hashes per ``reduceat`` run: a byte lane holds counts up to 255
LANE_MAX = 255
#: occurrences :func:`short_weighted_majority` takes: weights <= 16 keep a 16-bit lane <= 65535
SHORT_WEIGHTED_MAX = 4095

_ONES64 = np.ones(LANE_MAX, dtype=np.uint64)
_ONES64.flags.writeable = False


_LITTLE = sys.byteorder == "little"
_WEIGHTS: dict[tuple[int, int], np.ndarray] = {}


def _bits(hashes: np.ndarray) -> np.ndarray:
    """(n,) uint64 -> (64 n,) uint8 0/1, hash by hash, byte by byte (least significant byte first)."""
    return np.unpackbits(hashes.view(np.uint8) if _LITTLE else hashes.astype("<u8").view(np.uint8))


def _lanes(hashes: np.ndarray) -> np.ndarray:
    """(n,) uint64 -> (n, 8) uint64 words of eight byte lanes, one lane per hash bit."""
    return _bits(hashes).view(np.uint64).reshape(-1, 8)


def _pack(mask: np.ndarray) -> int:
    """64 bools in :func:`_bits` order -> the fingerprint int."""
    return int.from_bytes(np.packbits(mask).tobytes(), "little")


def short_majority(table: np.ndarray, ids: np.ndarray, empty: Any) -> Any:
    """Fingerprint of the hashes ``table[ids]``, weight 1 each (at most ``LANE_MAX`` ids).

    Id 0 is a dropped stopword (``simdb.core.fingerprint.token_cache``: ``table[0] == 0``): it adds no
    bits and is not counted. ``empty`` when no id counts.
    """
    n = int(np.count_nonzero(ids))
    if not n:
        return empty
    hashes = table[ids]
    lanes = np.unpackbits(hashes.view(np.uint8) if _LITTLE else hashes.astype("<u8").view(np.uint8))
    counts = np.dot(_ONES64[: len(ids)], lanes.view(np.uint64).reshape(-1, 8)).view(np.uint8)  # (64,) counts
    return int.from_bytes(np.packbits(counts > (n >> 1)).tobytes(), "little")  # 2 c > n  <=>  c > n // 2


def short_weighted_majority(table: np.ndarray, ids: np.ndarray, is_stop: np.ndarray, p: int, q: int) -> int:
    """Fingerprint of the hashes ``table[ids]`` (1 to ``SHORT_WEIGHTED_MAX`` ids), those with
    ``is_stop[id]`` weighing ``p`` and the others ``q`` (positive integers <= 16)."""
    stop = is_stop[ids]
    n_stop = int(np.count_nonzero(stop))
    total = p * n_stop + q * (len(ids) - n_stop)
    weights = _WEIGHTS.get((p, q))
    if weights is None:
        weights = np.array([q, p], dtype=np.uint64)  # [other word, stopword]
        weights.flags.writeable = False
        _WEIGHTS[(p, q)] = weights
    lanes16 = _bits(table[ids]).astype(np.uint16).view(np.uint64).reshape(-1, 16)
    counts = np.dot(weights[stop.view(np.uint8)], lanes16).view(np.uint16)
    return _pack(counts > (total >> 1))


def segment_bit_counts(hashes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(k, 64) int64: row j, column c = how many of segment j's hashes have bit
    ``8 * (c // 8) + 7 - c % 8`` set (numpy's ``unpackbits`` order, which :func:`majority_rows` packs back).

    ``hashes`` (uint64) is the concatenation of k segments of ``lengths[j]`` hashes
    each, in order (empty segments allowed: their row is 0).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    k = len(lengths)
    out = np.zeros((k, 64), dtype=np.int64)
    nz = np.flatnonzero(lengths)
    if not len(nz):
        return out
    starts = np.cumsum(lengths) - lengths
    lens = lengths[nz]
    lanes = _lanes(hashes)
    if int(lens.max()) <= LANE_MAX:  # the usual case: one run per segment
        out[nz] = np.add.reduceat(lanes, starts[nz], axis=0).view(np.uint8).reshape(-1, 64)
        return out
    runs = (lens + (LANE_MAX - 1)) // LANE_MAX  # runs per non-empty segment
    first = np.cumsum(runs) - runs  # index of each segment's first run
    within = np.arange(int(runs.sum())) - np.repeat(first, runs)
    run_starts = np.repeat(starts[nz], runs) + LANE_MAX * within
    per_run = np.add.reduceat(lanes, run_starts, axis=0).view(np.uint8).reshape(-1, 64)
    out[nz] = np.add.reduceat(per_run.astype(np.int64), first, axis=0)
    return out


def majority_rows(counts: np.ndarray, totals: np.ndarray) -> list[int]:
    """The fingerprint of each row of :func:`segment_bit_counts`: a bit is set iff ``2 * count > totals[j]``
    (exact integers)."""
    mask = 2 * counts > np.asarray(totals, dtype=np.int64)[:, None]
    return np.packbits(mask, axis=1).view("<u8").ravel().tolist()  # row bytes: least significant first
