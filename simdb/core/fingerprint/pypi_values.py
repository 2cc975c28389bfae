"""The PyPI ``simhash`` package's algorithm (2.x, by 1e0n): the same values, faster.

A pure module (numpy only, nothing of simdb's): ``simdb.core.fingerprint`` imports it for
``Fingerprinter.preset("simhash-pypi")``, ``simdb.compat.simhash`` for the drop-in
classes, and it imports neither (so no import cycle). ``simdb.compat`` re-exports it.

``pypi_simhash(value)`` returns what ``simhash.Simhash(value).value`` returns
(64-bit, default regex and md5 hash), and ``Fingerprinter.preset("simhash-pypi")``
uses it, so users migrating from that package can import their stored values.

The package's algorithm, reproduced here with its quirks:

- text: ``text.lower()``; keep the matches of ``[\\w\\u4e00-\\u9fcc]+`` joined
  together; every 4-character window (``max(len - 3, 1)`` windows, so a text
  shorter than 4 characters -- even the empty text -- is one feature, possibly
  ``''``); each distinct window weighted by its count.
- hash: the last 8 bytes of ``md5(feature.encode("utf-8"))`` read big-endian
  (the first byte's most significant bit is fingerprint bit 63).
- rule: fingerprint bit i is 1 iff the weights of the features whose hash has
  bit i set sum to more than half the total weight (``count / 2``).
- feature input: a ``dict`` gives ``(feature, weight)`` items; any other iterable
  is walked item by item (a non-dict mapping therefore yields its keys). A
  ``str`` item takes the weight ``w`` of the previous ``(feature, w)`` item
  (initially 1) -- the package never resets it. A Python ``int`` weight <= 50 adds
  ``max(w, 0)`` per set bit (``bytes * w`` is empty for w <= 0) while every
  other weight (larger ints, floats, numpy numbers) adds ``w``; every weight
  counts in the total. No features at all -> 0.

Where the package fails under NumPy 2 (an ``int`` weight > 255 overflows its
``uint8`` arithmetic) this module returns the value the package computes under
NumPy 1, i.e. the arithmetic it intends.
"""

from __future__ import annotations

import hashlib
import numbers
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from simdb.errors import InvalidTypeError

__all__ = ["PYPI_REGEX", "pypi_hash", "pypi_simhash", "pypi_simhash_features", "pypi_simhash_items", "pypi_tokenize"]

PYPI_REGEX = re.compile(r"[\w\u4e00-\u9fcc]+")
_LARGE_WEIGHT_CUTOFF = 50
_BATCH_SIZE = 200
_md5 = hashlib.md5
_cache: dict[str, int] = {}
_CACHE_MAX = 1 << 17


def pypi_tokenize(text: str, reg: Any = PYPI_REGEX) -> list[str]:
    """The package's features of ``text``: 4-character windows of the joined matches of ``reg``
    (a pattern string or compiled regex; the package's ``Simhash(reg=...)``)."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
    content = "".join(re.findall(reg, text.lower()))
    return [content[i : i + 4] for i in range(max(len(content) - 4 + 1, 1))]


def pypi_hash(feature: str) -> int:
    """The package's 64-bit feature hash: md5's last 8 bytes, big-endian."""
    return int.from_bytes(_md5(feature.encode("utf-8")).digest()[-8:], "big")


def _hashes(keys: list[str]) -> np.ndarray:
    cache = _cache
    missing = set(keys).difference(cache)
    if missing:
        if len(cache) + len(missing) > _CACHE_MAX:
            cache.clear()
            missing = set(keys)
        for k in missing:
            cache[k] = int.from_bytes(_md5(k.encode("utf-8")).digest()[-8:], "big")
    return np.fromiter(map(cache.__getitem__, keys), dtype=np.uint64, count=len(keys))


def _int_rule(keys: list[str], contrib: list[int], total: int) -> int:
    """Bit i set iff sum of contributions with bit i set > total / 2 (exact integers)."""
    hashes = _hashes(keys)
    bits = np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8), bitorder="little").reshape(-1, 64)
    a = sum(abs(c) for c in contrib)
    if a < (1 << 53) and abs(total) < (1 << 52):
        p = np.fromiter(contrib, dtype=np.float64, count=len(contrib)) @ bits.astype(np.float64)
        return int.from_bytes(np.packbits(2 * p > total, bitorder="little").tobytes(), "little")
    hs = hashes.tolist()
    value = 0
    for i in range(64):
        s = sum(c for h, c in zip(hs, contrib) if (h >> i) & 1)
        if 2 * s > total:
            value |= 1 << i
    return value


def pypi_simhash(value: Any) -> int:
    """``simhash.Simhash(value).value`` for a ``str`` or features (see module docs)."""
    if isinstance(value, str):
        counts = Counter(pypi_tokenize(value))
        keys = list(counts)
        weights = list(counts.values())
        return _int_rule(keys, weights, sum(weights))
    return pypi_simhash_features(value)


def pypi_simhash_features(features: Any) -> int:
    """``simhash.Simhash(features).value`` for a dict or an iterable of str / (str, weight)."""
    if isinstance(features, (str, bytes, bytearray)) or not isinstance(features, Iterable):
        raise InvalidTypeError(f"features must be a dict or an iterable of str / (str, weight), got {type(features).__name__}")
    items = features.items() if isinstance(features, dict) else features
    keys: list[str] = []
    weights: list = []
    pairs: list[bool] = []
    w: Any = 1
    for i, f in enumerate(items):
        pairs.append(not isinstance(f, str))
        if not isinstance(f, str):
            try:
                f, w = f
            except (TypeError, ValueError):
                raise InvalidTypeError(f"features[{i}] must be a str or a (str, weight) pair") from None
            if not isinstance(f, str):
                raise InvalidTypeError(f"features[{i}] must have a str feature, got {type(f).__name__}")
            if not isinstance(w, numbers.Real):
                raise InvalidTypeError(f"features[{i}] weight must be a real number, got {type(w).__name__}")
        keys.append(f)
        weights.append(w)
    if not keys:
        return 0
    if all(type(x) is int or type(x) is bool for x in weights):
        # bytes * w for w <= 50 (and for str items), bits * w above: max(w, 0) either way
        contrib = [max(x, 0) for x in weights]
        return _int_rule(keys, contrib, sum(weights))
    return _faithful(keys, weights, pairs)


def _md5_digest(data: bytes) -> bytes:
    return _md5(data).digest()[-8:]


def pypi_simhash_items(features: Any, digest: Any = _md5_digest) -> int:
    """``Simhash(features, hashfunc=...).value`` through the literal port below, with ``digest``
    (bytes -> 8 bytes) standing for the package's ``hashfunc``: the path for a custom hash
    function, where the md5 fast paths above do not apply. Same input rules and errors as
    :func:`pypi_simhash_features`."""
    if isinstance(features, (str, bytes, bytearray)) or not isinstance(features, Iterable):
        raise InvalidTypeError(f"features must be a dict or an iterable of str / (str, weight), got {type(features).__name__}")
    keys: list[str] = []
    weights: list = []
    pairs: list[bool] = []
    w: Any = 1
    for i, f in enumerate(features.items() if isinstance(features, dict) else features):
        pairs.append(not isinstance(f, str))
        if not isinstance(f, str):
            try:
                f, w = f
            except (TypeError, ValueError):
                raise InvalidTypeError(f"features[{i}] must be a str or a (str, weight) pair") from None
            if not isinstance(f, str):
                raise InvalidTypeError(f"features[{i}] must have a str feature, got {type(f).__name__}")
            if not isinstance(w, numbers.Real):
                raise InvalidTypeError(f"features[{i}] weight must be a real number, got {type(w).__name__}")
        keys.append(f)
        weights.append(w)
    if not keys:
        return 0
    return _faithful(keys, weights, pairs, digest)


def _faithful(keys: list[str], weights: list, pairs: list[bool], digest: Any = _md5_digest) -> int:
    """A literal port of ``Simhash.build_by_features`` (needed for float weights: same summation order)."""
    sums: list = []
    batch: list = []
    count: Any = 0
    hashes = [digest(k.encode("utf-8")) for k in keys]
    for h, w, pair in zip(hashes, weights, pairs):
        # only (feature, weight) items can skip the batch; a str item reuses w in the batch
        skip_batch = pair and (w > _LARGE_WEIGHT_CUTOFF or not isinstance(w, int))
        count += w
        if skip_batch:
            bits = np.unpackbits(np.frombuffer(h, dtype=">B"))
            if isinstance(w, int):  # NumPy 1 arithmetic (NumPy 2 overflows uint8 here)
                sums.append(bits.astype(np.uint64) * np.uint64(w))
            else:
                sums.append(bits * w)
        else:
            batch.append(h * w)
            if len(batch) >= _BATCH_SIZE:
                sums.append(_sum_hashes(batch))
                batch = []
        if len(sums) >= _BATCH_SIZE:
            sums = [np.sum(sums, 0)]
    if batch:
        sums.append(_sum_hashes(batch))
    combined = np.sum(sums, 0)
    return int.from_bytes(np.packbits(combined > count / 2).tobytes(), "big")


def _sum_hashes(digests: list[bytes]) -> np.ndarray:
    bitarray = np.unpackbits(np.frombuffer(b"".join(digests), dtype=">B"))
    return np.sum(np.reshape(bitarray, (-1, 64)), 0)
