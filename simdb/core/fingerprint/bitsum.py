"""The numeric core of SimHash: hash bits and weights -> one 64-bit fingerprint, exactly.

The pinned rule: fingerprint bit i = 1 iff the sum of ``+w`` (bit i of the
feature's hash set) and ``-w`` (clear) is > 0, the sum taken exactly and so
independent of order. Two ways to take it, both exact, in this module:

**A matrix product** (:func:`majority`, :func:`count_majority`, :func:`weighted_count_majority`): the
sums are a BLAS matrix-vector product over the unpacked hash bits, exact because integer weights
stay below 2^24 (float32) or 2^53 (float64); float weights are checked against a rounding error
bound and the few doubtful bits are recomputed exactly in Python integers. Very many occurrences
are first reduced to distinct hashes with counts (:mod:`simdb.core.fingerprint.long_texts`).

**Byte lanes** (:func:`short_majority`, :func:`short_weighted_majority`, :func:`segment_bit_counts`):
many texts at once, or one short text, in a few numpy calls. Why: on a short paragraph (~150 kept
words) the bit sums themselves are a few hundred nanoseconds of arithmetic, but each numpy call
costs ~0.1-1 us of fixed overhead, and the matrix-product path makes about a dozen.
:func:`segment_bit_counts` counts the hashes of every text of a batch in one pass, so that overhead
is paid once per batch (``Fingerprinter.many``); :func:`short_majority` and
:func:`short_weighted_majority` make fewer, cheaper calls for one short text
(``Fingerprinter.fingerprint``).

How the lanes stay exact: ``np.unpackbits`` turns each hash into 64 bytes of 0/1; viewed as
eight ``uint64`` words, each word holds eight *byte lanes*. Adding such words adds
the lanes independently as long as no lane exceeds 255, so a sum over at most 255
hashes counts 64 bits with 8 additions per hash. Longer texts are cut into runs of
255 and their run counts added in int64; weighted sums use 16-bit lanes. Every
count is an exact integer, so the majority ``2 * count > total`` is the pinned rule
bit for bit (the product path's ``p > n / 2`` on exact float32 sums). The bit order
inside a byte is numpy's default (most significant first) on the way in and on the
way out (``packbits``), so positions round-trip.

Also here: XXH64 of every window of a byte string, vectorised (ASCII character n-grams).
Pure numpy: no database imports.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from simdb.core.bits import MASK64
from simdb.core.fingerprint import long_texts as _long

__all__ = [
    "F32_EXACT", "F64_EXACT", "LANE_MAX", "SHORT_WEIGHTED_MAX", "count_majority", "majority", "majority_rows",
    "pack_bits", "segment_bit_counts", "short_majority", "short_weighted_majority", "unpack_bits",
    "weighted_count_majority", "xxh64_windows",
]

F32_EXACT = 1 << 24
F64_EXACT = 1 << 53
_U = 2.0**-53
_ONES32 = np.ones(1 << 14, dtype=np.float32)
_ONES32.flags.writeable = False

_P1, _P2, _P3 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_P4, _P5 = np.uint64(0x85EBCA77C2B2AE63), np.uint64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _read_le(b: np.ndarray, starts: np.ndarray, nbytes: int) -> np.ndarray:
    v = np.zeros(len(starts), dtype=np.uint64)
    for j in range(nbytes):
        v |= b[starts + j] << np.uint64(8 * j)
    return v


def xxh64_windows(data: bytes, width: int, seed: int) -> np.ndarray:
    """XXH64 of every ``width``-byte window of ``data`` (width < 32), vectorised.

    The short-input branch of the xxHash64 specification, on arrays; used for
    ASCII character n-grams, where a window of n characters is n bytes.
    """
    b = np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    m = len(data) - width + 1
    starts = np.arange(m)
    with np.errstate(over="ignore"):
        h = np.full(m, (seed + 0x27D4EB2F165667C5 + width) & MASK64, dtype=np.uint64)
        off = 0
        while width - off >= 8:
            k1 = _rotl(_read_le(b, starts + off, 8) * _P2, 31) * _P1
            h ^= k1
            h = _rotl(h, 27) * _P1 + _P4
            off += 8
        if width - off >= 4:
            h ^= _read_le(b, starts + off, 4) * _P1
            h = _rotl(h, 23) * _P2 + _P3
            off += 4
        while off < width:
            h ^= b[starts + off] * _P5
            h = _rotl(h, 11) * _P1
            off += 1
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    return h


def unpack_bits(hashes: np.ndarray) -> np.ndarray:
    """(n,) uint64 -> (n, 64) uint8 bit matrix, column i = bit i (least significant first)."""
    return np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8), bitorder="little").reshape(-1, 64)


def pack_bits(mask: np.ndarray) -> int:
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def _exact_scaled(w: float | int) -> int:
    """An int proportional (by 2^1074) to ``w``: exact arithmetic on IEEE doubles."""
    if isinstance(w, int):
        return w << 1074
    num, den = float(w).as_integer_ratio()
    return num * ((1 << 1074) // den)


def _exact_bits(hashes: np.ndarray, weights: list, bits_to_do) -> dict[int, bool]:
    """Decide the given bits exactly in Python (rare: huge ints, near-tie floats)."""
    scaled = [_exact_scaled(w) for w in weights]
    hs = hashes.tolist()
    out = {}
    for i in bits_to_do:
        s = 0
        for h, w in zip(hs, scaled):
            s += w if (h >> i) & 1 else -w
        out[i] = s > 0
    return out


def majority(hashes: np.ndarray, weights: list, int_weights: bool, abs_total=None) -> int:
    """Fingerprint from hashes and weights by the pinned rule (exact, order independent)."""
    n = len(weights)
    bits = unpack_bits(hashes)
    if int_weights:
        a = abs_total if abs_total is not None else sum(map(abs, weights))
        if a < F32_EXACT:
            w = np.fromiter(weights, dtype=np.float32, count=n)
            p = w @ bits.astype(np.float32)
            return pack_bits(2 * p > float(sum(weights)))
        if a < F64_EXACT:
            w = np.fromiter(weights, dtype=np.float64, count=n)
            p = w @ bits.astype(np.float64)
            return pack_bits(2 * p > float(sum(weights)))
        decided = _exact_bits(hashes, weights, range(64))
        return sum(1 << i for i, on in decided.items() if on)
    w = np.fromiter(weights, dtype=np.float64, count=n)
    with np.errstate(over="ignore", invalid="ignore"):
        a = float(np.abs(w).sum())
        p = w @ bits.astype(np.float64)
        v = 2.0 * p - float(w.sum())
        if math.isfinite(a):
            bound = (4 * n + 8) * _U * a + n * 5e-324
            doubtful = np.flatnonzero(~(np.abs(v) > bound) | ~np.isfinite(v))
        else:
            doubtful = np.arange(64)
    mask = v > 0
    if len(doubtful):
        for i, on in _exact_bits(hashes, weights, doubtful.tolist()).items():
            mask[i] = on
    return pack_bits(mask)


def count_majority(hashes: np.ndarray) -> int:
    """Fingerprint of hashes each with weight 1 (one per feature occurrence); ``hashes`` is not empty."""
    n = len(hashes)
    if n >= _long.LARGE:  # one bit row per distinct hash, not per occurrence
        return _long.majority(*_long.reduce_counts(hashes))
    bits = unpack_bits(hashes)
    if n <= len(_ONES32):  # (a shared ones vector: no allocation per call on short texts)
        p = _ONES32[:n] @ bits.astype(np.float32)
    elif n < F32_EXACT:
        p = np.ones(n, dtype=np.float32) @ bits.astype(np.float32)
    else:
        p = bits.sum(axis=0, dtype=np.int64)
    return pack_bits(p > n / 2)  # p holds exact integers, n / 2 is exact: the same as 2 * p > n


def weighted_count_majority(hashes: np.ndarray, weights: np.ndarray) -> int:
    """Fingerprint of hashes each with a positive integer weight (one per feature occurrence):
    bit i is set iff the weights of the hashes with bit i set sum to more than half the total.
    Exact: float32 sums of integers below 2^24, int64 sums above."""
    total = int(weights.sum())
    if total < F32_EXACT:
        p = weights.astype(np.float32) @ unpack_bits(hashes).astype(np.float32)
        return pack_bits(2 * p > total)
    return _long.majority(hashes, weights.astype(np.int64))


# Byte lanes: exact counts in a few numpy calls (the module doc says how)

#: hashes per ``reduceat`` run: a byte lane holds counts up to 255
LANE_MAX = 255
#: occurrences :func:`short_weighted_majority` takes: weights <= 16 keep a 16-bit lane <= 65535
SHORT_WEIGHTED_MAX = 4095

_ONES64 = np.ones(LANE_MAX, dtype=np.uint64)
_ONES64.flags.writeable = False


_LITTLE = sys.byteorder == "little"
_WEIGHTS: dict[tuple[int, int], np.ndarray] = {}


def _lane_bits(hashes: np.ndarray) -> np.ndarray:
    """(n,) uint64 -> (64 n,) uint8 0/1, hash by hash, byte by byte (least significant byte first)."""
    return np.unpackbits(hashes.view(np.uint8) if _LITTLE else hashes.astype("<u8").view(np.uint8))


def _lanes(hashes: np.ndarray) -> np.ndarray:
    """(n,) uint64 -> (n, 8) uint64 words of eight byte lanes, one lane per hash bit."""
    return _lane_bits(hashes).view(np.uint64).reshape(-1, 8)


def _pack_lanes(mask: np.ndarray) -> int:
    """64 bools in :func:`_lane_bits` order -> the fingerprint int."""
    return int.from_bytes(np.packbits(mask).tobytes(), "little")


def short_majority(table: np.ndarray, ids: np.ndarray, empty: Any) -> Any:
    """Fingerprint of the hashes ``table[ids]``, weight 1 each (at most ``LANE_MAX`` ids).

    Id 0 is a dropped stopword (``simdb.core.fingerprint.hashing``: ``table[0] == 0``): it adds no
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
    lanes16 = _lane_bits(table[ids]).astype(np.uint16).view(np.uint64).reshape(-1, 16)
    counts = np.dot(weights[stop.view(np.uint8)], lanes16).view(np.uint16)
    return _pack_lanes(counts > (total >> 1))


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
