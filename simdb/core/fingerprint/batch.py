"""``Fingerprinter.many()``: single-word features (tf or binary weights) a batch of texts at a time, and
any features across a process pool.

Why: a short paragraph (300-2,000 characters, a user post) is ~150 words, and the
per-text path spent as long in the fixed cost of its numpy calls (token ids, the
stopword filter, the bit sums, packing) as in looking its words up. Here the words
of many texts are looked up in the token cache in one ``np.fromiter``, filtered
and counted (:mod:`simdb.core.fingerprint.bitsum`, byte lanes) in one set of numpy calls per batch of
~16k words.

The result is the per-text result bit for bit: the same tokens, the same token
cache ids and hashes, and exact integer bit counts under the same majority rule
(a property test compares the two paths). Texts longer than ``ONE_BY_ONE_CHARS``
take the per-text path, whose overhead is small beside them and which keeps their
memory bounded (:mod:`simdb.core.fingerprint.long_texts`).

``Fingerprinter.many(workers=N)`` spreads the texts over a process pool (:func:`many_pool`). The pool
itself (:mod:`simdb.util.parallel`: one per worker count, started once, reused, shut down at exit) is
generic; this module only decides how texts travel: in chunks of at least 64k characters (transfer
and task overhead stay small), at least 4 per worker (load balance), at most 4M characters
(memory), with fingerprints coming back as arrays (cheap to send). It takes the fingerprinter as
any object with ``many(texts, None, empty)`` so that it need not import
:mod:`simdb.core.fingerprint`, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import numpy as np

from simdb.core.fingerprint.bitsum import majority_rows, segment_bit_counts
from simdb.core.fingerprint.hashing import TokenCache, cache_for, token_ids
from simdb.util import parallel as _parallel

__all__ = ["CHUNK_TOKENS", "LOOKUP_NOW", "ONE_BY_ONE_CHARS", "fingerprints_of_ids", "many_pool", "unigram_many"]

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


# Across processes: how texts travel to the pool and back

def _many_chunk(fp: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """In a worker: (uint64 fingerprints, bool "no features") of a chunk, as arrays (cheap to send)."""
    out = np.zeros(len(texts), dtype=np.uint64)
    none = np.zeros(len(texts), dtype=bool)
    for i, v in enumerate(fp.many(texts, None, None)):
        if v is None:
            none[i] = True
        else:
            out[i] = v
    return out, none


def _text_chunks(texts: list[str], target: int) -> Iterable[list[str]]:
    cur: list[str] = []
    size = 0
    for t in texts:
        cur.append(t)
        size += len(t)
        if size >= target:
            yield cur
            cur, size = [], 0
    if cur:
        yield cur


def many_pool(fp: Any, texts: list[str], workers: int, empty: Any) -> list:
    """``fp``'s fingerprints of ``texts`` in order, computed by ``workers`` processes."""
    total = sum(map(len, texts))
    target = max(1 << 16, min(1 << 22, total // (workers * 4) + 1))
    out: list = []
    for fps, none in _parallel.imap(partial(_many_chunk, fp), _text_chunks(texts, target), workers):
        vals = fps.tolist()
        if none.any():
            for i in np.flatnonzero(none).tolist():
                vals[i] = empty
        out.extend(vals)
    return out
