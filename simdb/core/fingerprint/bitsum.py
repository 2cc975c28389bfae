"""The numeric core of SimHash: hash bits and weights -> 64-bit fingerprints, exactly, one text or a batch.

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

**A batch of texts** (:func:`unigram_many`, ``Fingerprinter.many()`` with single-word features, tf or
binary weights). Why: a short paragraph (300-2,000 characters, a user post) is ~150 words, and the
per-text path spent as long in the fixed cost of its numpy calls (token ids, the stopword filter, the
bit sums, packing) as in looking its words up. Here the words of many texts are looked up in the
token cache in one ``np.fromiter``, filtered and counted in byte lanes in one set of numpy calls per
batch of ~16k words (:func:`fingerprints_of_ids`). The result is the per-text result bit for bit: the
same tokens, the same token cache ids and hashes, and exact integer bit counts under the same
majority rule (a property test compares the two paths). Texts longer than ``ONE_BY_ONE_CHARS`` take
the per-text path, whose overhead is small beside them and which keeps their memory bounded
(:mod:`simdb.core.fingerprint.long_texts`).

Also here: XXH64 of every window of a byte string, vectorised (ASCII character n-grams).
Pure numpy: no database imports.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from simdb.core.bits import MASK64
from simdb.core.fingerprint import long_texts as _long
from simdb.core.fingerprint.hashing import TokenCache, cache_for, token_ids

__all__ = [
    "CHUNK_TOKENS", "F32_EXACT", "F64_EXACT", "LANE_MAX", "LOOKUP_NOW", "ONE_BY_ONE_CHARS", "SHORT_WEIGHTED_MAX",
    "count_majority", "fingerprints_of_ids", "majority", "majority_rows", "pack_bits", "segment_bit_counts",
    "short_majority", "short_weighted_majority", "unigram_many", "unpack_bits", "weighted_count_majority",
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


# A batch of texts: their words' ids counted together (the module doc says why)

#: words per batch: the bit matrix stays ~1 MB (cache friendly), and so does the token cache's room
CHUNK_TOKENS = 1 << 14
#: longer texts are fingerprinted one at a time
ONE_BY_ONE_CHARS = 1 << 16
#: a text with this many words has them looked up at once (see ``_Chunk``)
LOOKUP_NOW = 256


def unigram_many(
    texts: list[str],
    words: Callable[[str], list[str] | list[bytes]],
    one: Callable[[str], Any],
    *,
    seed: int,
    drop_stopwords: bool,
    stop_weights: tuple[int, int] | None,
    binary: bool,
    empty: Any,
) -> list:
    """Fingerprints of ``texts`` in order.

    ``words(text)``: the text's word tokens (normalised, in order); ``one(text)``: the
    per-text fingerprint (for long texts). ``drop_stopwords``: stopwords are removed
    (token id 0 in the stopword cache); ``stop_weights``: (p, q), stopwords weigh p and
    other words q; ``binary``: each distinct word counts once per text (its set of words).
    """
    out: list = [empty] * len(texts)
    chunk: _Chunk | None = None
    for i, text in enumerate(texts):
        if len(text) > ONE_BY_ONE_CHARS:
            out[i] = one(text)
            continue
        toks: Sequence[str | bytes] = words(text)
        if binary:  # each distinct word once (cheaper than sorting the batch's ids by text)
            toks = list(set(toks))
        if chunk is None or chunk.size + len(toks) > CHUNK_TOKENS:
            if chunk is not None:
                chunk.finish(out, drop_stopwords, stop_weights, empty)
            chunk = _Chunk(cache_for(seed, drop_stopwords, max(CHUNK_TOKENS, len(toks))))
        chunk.add(i, toks)
    if chunk is not None:
        chunk.finish(out, drop_stopwords, stop_weights, empty)
    return out


class _Chunk:
    """The texts of one batch: their words' ids in one token cache, word counts and positions.

    Short word lists wait to be looked up together (one ``np.fromiter`` for many texts);
    a list of ``LOOKUP_NOW`` words or more is looked up at once: the call's fixed cost is
    small beside it, and its freshly made words are still in the CPU cache (measured ~4%
    faster on Chinese paragraphs)."""

    def __init__(self, cache: TokenCache):
        self.cache = cache
        self.ids: list[np.ndarray] = []
        self.pending: list[str | bytes] = []
        self.lengths: list[int] = []
        self.where: list[int] = []
        self.size = 0

    def add(self, i: int, toks: Sequence[str | bytes]) -> None:
        if len(toks) >= LOOKUP_NOW:
            self._lookup()
            self.ids.append(token_ids(self.cache, toks))
        else:
            self.pending += toks
        self.lengths.append(len(toks))
        self.where.append(i)
        self.size += len(toks)

    def _lookup(self) -> None:
        if self.pending:
            self.ids.append(token_ids(self.cache, self.pending))
            self.pending = []

    def finish(self, out: list, drop_stopwords: bool, stop_weights: tuple[int, int] | None, empty: Any) -> None:
        """Write the chunk's fingerprints into ``out``."""
        self._lookup()
        ids = np.concatenate(self.ids) if self.ids else np.zeros(0, dtype=np.intp)
        fps = fingerprints_of_ids(self.cache, ids, np.array(self.lengths, dtype=np.int64), drop_stopwords, stop_weights)
        for j, v in zip(self.where, fps):
            out[j] = empty if v is None else v


def fingerprints_of_ids(
    cache: TokenCache, ids: np.ndarray, lengths: np.ndarray, drop_stopwords: bool, stop_weights: tuple[int, int] | None
) -> list:
    """Fingerprints (None: no features) of the texts whose word ids, concatenated, are ``ids``."""
    k = len(lengths)
    if stop_weights is not None:  # stopwords kept, weighted p : q against other words
        p, q = stop_weights
        hashes = cache.hashes[ids]  # read after the lookups: a miss may grow (replace) the arrays
        stop = cache.is_stop[ids]
        n_stop = np.bincount(np.repeat(np.arange(k), lengths)[stop], minlength=k)
        every = segment_bit_counts(hashes, lengths)
        stops = segment_bit_counts(hashes[stop], n_stop)
        counts = p * stops + q * (every - stops)
        totals = p * n_stop + q * (lengths - n_stop)
    else:
        if drop_stopwords:
            keep = ids != 0
            lengths = np.bincount(np.repeat(np.arange(k), lengths)[keep], minlength=k)
            ids = ids[keep]
        counts = segment_bit_counts(cache.hashes[ids], lengths)
        totals = lengths
    fps: list = majority_rows(counts, totals)
    for j in np.flatnonzero(totals == 0).tolist():
        fps[j] = None
    return fps
