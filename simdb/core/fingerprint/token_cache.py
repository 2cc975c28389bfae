"""The per-process token -> xxh64 cache the fingerprint core hashes through.

Word frequencies are Zipfian, so hashing each distinct token once per process
(and looking it up at C speed afterwards) is most of the fingerprinting speed.
A cache is kept per (seed, stopwords?) and replaced, never cleared in place,
when it would grow past ``HASH_CACHE_MAX`` tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import xxhash

from simdb.core import tokenize as _tok
from simdb.errors import InvalidArgumentError

__all__ = ["CACHES", "HASH_CACHE_MAX", "TokenCache", "cache_for", "hash_keys", "stopword_set", "token_ids"]

HASH_CACHE_MAX = 1 << 18  # tokens per (seed, stopwords) cache; replaced when full

_xxh = xxhash.xxh64_intdigest


class TokenCache(dict):
    """token -> id, with ``hashes[id] = xxh64(token, seed)``; id 0 marks a stopword.

    ``hashes[0]`` stays 0 (ids start at 1), so a stopword's row adds no bits to a
    bit count (:func:`simdb.core.fingerprint.bitsum_lanes.short_majority` relies on it). An ASCII token
    may also be looked up as ``bytes`` (:mod:`simdb.core.fingerprint.ascii_words`): the bytes key is an
    alias of the str key, with the same id.

    Lookups are C-speed ``dict`` hits (``map(cache.__getitem__, tokens)``); a miss
    hashes the token under a lock. Ids are never reused within one cache, and a
    full cache is replaced by a fresh one (never cleared in place), so threads
    sharing it always see consistent hashes.
    """

    def __init__(self, seed: int, stop: frozenset[str] | None):
        super().__init__()
        self.seed = seed
        self.next_id = 1
        self.hashes = np.zeros(1024, dtype=np.uint64)
        #: ``is_stop[id]``: the token is a shipped stopword (a cache that keeps stopwords: the
        #: fingerprints that weigh them apart, ``Fingerprinter(stopwords=2/3)``)
        self.is_stop = np.zeros(1024, dtype=bool)
        self._stoplist = stopword_set() if stop is None else frozenset()
        self.lock = threading.Lock()
        if stop:
            for w in stop:
                dict.__setitem__(self, w, 0)

    def __missing__(self, key: str | bytes) -> int:
        if isinstance(key, bytes):  # an ASCII token as bytes (simdb.core.fingerprint.ascii_words): the id of its str
            i = self[key.decode("ascii")]
            dict.__setitem__(self, key, i)
            return i
        h = _xxh(key.encode("utf-8"), self.seed)  # UnicodeEncodeError for lone surrogates
        with self.lock:
            i = dict.get(self, key)
            if i is not None:
                return i
            i = self.next_id
            if i >= len(self.hashes):
                grown = np.zeros(2 * len(self.hashes), dtype=np.uint64)
                grown[: len(self.hashes)] = self.hashes
                flags = np.zeros(2 * len(self.hashes), dtype=bool)
                flags[: len(self.hashes)] = self.is_stop
                # readers index is_stop with ids they got before: publish it first
                self.is_stop = flags
                self.hashes = grown
            self.hashes[i] = h
            self.is_stop[i] = key in self._stoplist
            self.next_id = i + 1
            dict.__setitem__(self, key, i)
            return i


CACHES: dict[tuple[int, bool], TokenCache] = {}
CACHES_LOCK = threading.Lock()


def cache_for(seed: int, stop: bool, room: int = 0) -> TokenCache:
    """The token cache for (seed, stopwords?), replaced when it would grow past the bound."""
    key = (seed, stop)
    cache = CACHES.get(key)
    if cache is None or cache.next_id + room > HASH_CACHE_MAX:
        with CACHES_LOCK:
            cache = CACHES.get(key)
            if cache is None or cache.next_id + room > HASH_CACHE_MAX:
                cache = TokenCache(seed, stopword_set() if stop else None)
                CACHES[key] = cache
    return cache


def token_ids(cache: TokenCache, keys: Sequence[str | bytes]) -> np.ndarray:
    """The ids of ``keys`` (str tokens, or ASCII tokens as bytes) in ``cache``, adding the missing ones."""
    try:
        return np.fromiter(map(cache.__getitem__, keys), dtype=np.intp, count=len(keys))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"features must be valid Unicode text (UTF-8 encodable): {exc}") from None


def hash_keys(keys: list[str], seed: int, use_cache: bool = True) -> np.ndarray:
    """xxh64 of each key's UTF-8 bytes as a uint64 array (through the per-seed cache)."""
    if not use_cache:
        try:
            return np.fromiter((_xxh(k.encode("utf-8"), seed) for k in keys), dtype=np.uint64, count=len(keys))
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(f"features must be valid Unicode text (UTF-8 encodable): {exc}") from None
    cache = cache_for(seed, False, len(keys))
    ids = token_ids(cache, keys)
    return cache.hashes[ids]


@lru_cache(maxsize=1)
def stopword_set() -> frozenset[str]:
    """The shipped stopwords (English and Chinese), loaded once."""
    return _tok.stopwords()
