"""How a word becomes its hash: the per-process token -> xxh64 cache, and ASCII words cut as ``bytes``.

**The token cache.** Word frequencies are Zipfian, so hashing each distinct token once per
process (and looking it up at C speed afterwards) is most of the fingerprinting speed.
A cache is kept per (seed, stopwords?) and replaced, never cleared in place,
when it would grow past ``HASH_CACHE_MAX`` tokens or ``HASH_CACHE_BYTES`` bytes.

Memory is bounded by those two settings, not by the input: a token longer than
``LONG_TOKEN`` characters (a hex blob, a base64 image, a URL) is hashed every time it
is met and never kept, and once a cache holds ``HASH_CACHE_BYTES`` no token is added
until it is replaced. Why: the cache used to keep every distinct token, whatever its
length, as ``str`` and as ``bytes``; a web app's validator fed 2,000 posts of one
100 KB hex token each grew by 280 MB and kept climbing. A token not kept still gets a
fresh id (its hash in ``hashes``: 9 bytes, until the cache is replaced), so a text's
ids are no longer one per distinct token: callers that want each distinct token once
(binary weighting) dedupe by hash, :func:`distinct_ids`.

**ASCII words** (:func:`ascii_words`): word tokens as ``bytes``, by one ``bytes.translate`` and
one ``bytes.split``, for text whose words are ASCII. Why: on English short paragraphs,
``re.findall(r"\\w+")`` was the largest cost of fingerprinting (~20 ns a character, more than the
token-cache lookups and the bit sums together); a translate table and a whitespace split do the
same cut at a few ns a character, and the token cache looks ``bytes`` tokens up as the ``str``
tokens they spell (one id, one hash: an ASCII token's bytes are its str's UTF-8).

Exact: on ASCII characters ``\\w`` (Python ``re``, str patterns) is ``[A-Za-z0-9_]``,
``simdb.core.tokenize.normalize`` is ``str.lower`` (A-Z -> a-z, nothing else), and the
``"tokens"`` tokenizer's ASCII pattern is ``[A-Za-z0-9]+``. The table keeps the word
bytes (lower-casing A-Z when normalising) and turns every other byte into a space,
so the whitespace split yields exactly the maximal runs the regular expressions
match, in order. Text with non-ASCII characters (curly quotes, dashes, emoji in
English posts) takes the same route when every such character separates words for
every word tokenizer (not ``\\w``, not Han / kana / Hangul): the encoder's error
handler turns each run of them into a space, and gives up (None: the caller uses
the regular expressions) at the first one that could be part of a token. Tests
compare both routes with the regular expressions on random text.
"""

from __future__ import annotations

import codecs
import re
import sys
import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import xxhash

from simdb.core import tokenize as _tok
from simdb.errors import InvalidArgumentError

__all__ = [
    "CACHES", "HASH_CACHE_BYTES", "HASH_CACHE_MAX", "LONG_TOKEN", "TokenCache", "ascii_table", "ascii_words",
    "cache_for", "distinct_ids", "hash_keys", "lookup", "stopword_set", "token_ids",
]

HASH_CACHE_MAX = 1 << 18  # token ids per (seed, stopwords) cache; replaced when full
#: what the tokens a cache keeps may take, their dict entries and ids included (see ``TokenCache.nbytes``):
#: ~90,000 words looked up both as str and as bytes (ASCII text), a large corpus's working vocabulary.
#: The id arrays come on top: 9 bytes an id, at most ``HASH_CACHE_MAX`` ids but for one call's overflow
HASH_CACHE_BYTES = 24 << 20
#: longer tokens (characters; bytes for an ASCII token looked up as bytes) are hashed each time, never kept
LONG_TOKEN = 64
#: a kept key's share of the dict (hash, key and value slots, index, load factor) and its id's int object
ENTRY_BYTES = 80

_xxh = xxhash.xxh64_intdigest


class TokenCache(dict):
    """token -> id, with ``hashes[id] = xxh64(token, seed)``; id 0 marks a stopword.

    ``hashes[0]`` stays 0 (ids start at 1), so a stopword's row adds no bits to a
    bit count (:func:`simdb.core.fingerprint.bitsum.short_majority` relies on it). An ASCII token
    may also be looked up as ``bytes`` (:func:`ascii_words`): the bytes key is an
    alias of the str key, with the same id.

    Lookups are C-speed ``dict`` hits (``map(cache.__getitem__, tokens)``); a miss
    hashes the token under a lock. Ids are never reused within one cache, and a
    full cache is replaced by a fresh one (never cleared in place), so threads
    sharing it always see consistent hashes. A long token, or any new token once
    ``nbytes`` has reached ``HASH_CACHE_BYTES``, is not kept: each lookup of it hashes it
    again and answers a new id (see the module doc).
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
        #: what the kept keys take (``sys.getsizeof`` of each key plus ``ENTRY_BYTES``); the
        #: stopwords a stopword cache starts with are not counted (fixed, a few kB)
        self.nbytes = 0
        #: a key did not fit: :func:`cache_for` replaces the cache at the next call
        self.full = False
        if stop:
            for w in stop:
                dict.__setitem__(self, w, 0)

    def _new_id(self, h: int, stop: bool) -> int:
        """The next id, its hash ``h`` recorded (under ``self.lock``)."""
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
        self.is_stop[i] = stop
        self.next_id = i + 1
        return i

    def _keep(self, key: str | bytes, i: int) -> bool:
        """Keep ``key`` -> ``i`` unless the cache is full (under ``self.lock``); whether it was kept."""
        size = sys.getsizeof(key) + ENTRY_BYTES
        if self.nbytes + size <= HASH_CACHE_BYTES:
            self.nbytes += size
            dict.__setitem__(self, key, i)
            return True
        self.full = True
        return False

    def __missing__(self, key: str | bytes) -> int:
        if isinstance(key, bytes):  # an ASCII token as bytes (ascii_words): the id of its str
            if len(key) > LONG_TOKEN:  # not kept either way: no str to look up first
                with self.lock:
                    return self._new_id(_xxh(key, self.seed), False)
            s = key.decode("ascii")
            i = dict.get(self, s)
            h = _xxh(key, self.seed) if i is None else 0  # an ASCII token's bytes are its str's UTF-8
            with self.lock:
                if i is None:
                    i = dict.get(self, s)
                    if i is None:
                        i = self._new_id(h, s in self._stoplist)
                        if not self._keep(s, i):
                            return i
                self._keep(key, i)  # an alias of a kept str
            return i
        h = _xxh(key.encode("utf-8"), self.seed)  # UnicodeEncodeError for lone surrogates
        with self.lock:
            i = dict.get(self, key)
            if i is not None:
                return i
            i = self._new_id(h, key in self._stoplist)
            if len(key) <= LONG_TOKEN:
                self._keep(key, i)
            return i


CACHES: dict[tuple[int, bool], TokenCache] = {}
CACHES_LOCK = threading.Lock()


def cache_for(seed: int, stop: bool, room: int = 0) -> TokenCache:
    """The token cache for (seed, stopwords?), replaced when it would grow past ``HASH_CACHE_MAX`` ids
    (``room``: the ids the caller may add) or once a token did not fit in ``HASH_CACHE_BYTES``."""
    key = (seed, stop)
    cache = CACHES.get(key)
    if cache is None or cache.full or cache.next_id + room > HASH_CACHE_MAX:
        with CACHES_LOCK:
            cache = CACHES.get(key)
            if cache is None or cache.full or cache.next_id + room > HASH_CACHE_MAX:
                cache = TokenCache(seed, stopword_set() if stop else None)
                CACHES[key] = cache
    return cache


def token_ids(cache: TokenCache, keys: Sequence[str | bytes]) -> np.ndarray:
    """The ids of ``keys`` (str tokens, or ASCII tokens as bytes) in ``cache``, adding the missing ones."""
    try:
        return np.fromiter(map(cache.__getitem__, keys), dtype=np.intp, count=len(keys))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"features must be valid Unicode text (UTF-8 encodable): {exc}") from None


def lookup(seed: int, stop: bool, keys: Sequence[str | bytes]) -> tuple[TokenCache, np.ndarray]:
    """(the token cache, the ids of ``keys`` in it): :func:`cache_for` with room for the keys, then
    :func:`token_ids`. Why together: the ids index the cache's arrays only as they are after the
    lookup (a miss may grow, i.e. replace, them), so a caller reads ``cache.hashes`` after this call,
    never before; one function keeps that order in one place."""
    cache = cache_for(seed, stop, len(keys))
    return cache, token_ids(cache, keys)


def distinct_ids(cache: TokenCache, ids: np.ndarray) -> np.ndarray:
    """``ids`` with each distinct token once (binary weighting): one per distinct hash, since a token the
    cache does not keep gets a new id at each lookup. Id 0 (a stopword; hash 0) stays once."""
    _, first = np.unique(cache.hashes[ids], return_index=True)
    return ids[first]


def hash_keys(keys: list[str], seed: int, use_cache: bool = True) -> np.ndarray:
    """xxh64 of each key's UTF-8 bytes as a uint64 array (through the per-seed cache)."""
    if not use_cache:
        try:
            return np.fromiter((_xxh(k.encode("utf-8"), seed) for k in keys), dtype=np.uint64, count=len(keys))
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(f"features must be valid Unicode text (UTF-8 encodable): {exc}") from None
    cache, ids = lookup(seed, False, keys)
    return cache.hashes[ids]


@lru_cache(maxsize=1)
def stopword_set() -> frozenset[str]:
    """The shipped stopwords (English and Chinese), loaded once."""
    return _tok.stopwords()


# ASCII words: the cut that feeds the cache ``bytes`` tokens

_LOWER = bytes(range(ord("a"), ord("z") + 1))
_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_DIGITS = b"0123456789"
#: a non-ASCII character some word tokenizer may keep in a token
_WORDLIKE = re.compile(f"[^\\W\\x00-\\x7f]|[{_tok.CJK_CLASS}{_tok.TOKEN_CJK_RANGES}]")
_HANDLER = "simdb.core.fingerprint.hashing"


def _table(keep: bytes, lower: bool) -> bytes:
    table = bytearray(b" " * 256)
    for c in keep:
        table[c] = c
    if lower:
        for c in _UPPER:
            table[c] = c + 32
    return bytes(table)


#: (tokenizer, normalize) -> translate table; word tokenizers only
_TABLES = {
    (tokenizer, normalize): _table(_LOWER + _UPPER + _DIGITS + (b"_" if tokenizer != "tokens" else b""), normalize)
    for tokenizer in ("default", "words", "tokens")
    for normalize in (True, False)
}


class _WordLike(Exception):
    """A non-ASCII character that may belong to a token: the text needs the regular expressions."""


def _separators(err: UnicodeError) -> tuple[str, int]:
    """Encoder error handler: a run of non-ASCII separators -> one space; else give up."""
    if not isinstance(err, UnicodeEncodeError) or _WORDLIKE.search(err.object, err.start, err.end) is not None:
        raise _WordLike
    return " ", err.end


codecs.register_error(_HANDLER, _separators)


def ascii_table(tokenizer: str, normalize: bool) -> bytes | None:
    """The translate table for a word tokenizer (``"default"``, ``"words"``, ``"tokens"``) with or
    without normalisation; None for other tokenizers."""
    return _TABLES.get((tokenizer, normalize))


def ascii_words(text: str, table: bytes) -> list[bytes] | None:
    """The word tokens of ``text`` (already normalised unless it is ASCII) as the UTF-8 bytes of the
    ``str`` tokens; None when a non-ASCII character of ``text`` may be part of a token."""
    try:
        data = text.encode("ascii", _HANDLER)
    except _WordLike:
        return None
    return data.translate(table).split()
