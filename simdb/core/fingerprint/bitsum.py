"""The numeric core of SimHash: hash bits and weights -> one 64-bit fingerprint, exactly.

The pinned rule: fingerprint bit i = 1 iff the sum of ``+w`` (bit i of the
feature's hash set) and ``-w`` (clear) is > 0, the sum taken exactly and so
independent of order. The sums are a BLAS matrix-vector product over the
unpacked hash bits, exact because integer weights stay below 2^24 (float32) or
2^53 (float64); float weights are checked against a rounding error bound and
the few doubtful bits are recomputed exactly in Python integers. Also here:
XXH64 of every window of a byte string, vectorised (ASCII character n-grams).
"""

from __future__ import annotations

import math

import numpy as np

from simdb.core.bits import MASK64
from simdb.core.fingerprint import long_texts as _long

__all__ = [
    "F32_EXACT", "F64_EXACT", "count_majority", "majority", "pack_bits", "unpack_bits", "weighted_count_majority",
    "xxh64_windows",
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
