"""``Fingerprinter.many()`` for single-word features (tf or binary weights), a batch of texts at a time.

Why: a short paragraph (300-2,000 characters, a user post) is ~150 words, and the
per-text path spent as long in the fixed cost of its numpy calls (token ids, the
stopword filter, the bit sums, packing) as in looking its words up. Here the words
of many texts are looked up in the token cache in one ``np.fromiter``, filtered
and counted (:mod:`simdb.bitsum_lanes`) in one set of numpy calls per batch of
~16k words.

The result is the per-text result bit for bit: the same tokens, the same token
cache ids and hashes, and exact integer bit counts under the same majority rule
(a property test compares the two paths). Texts longer than ``ONE_BY_ONE_CHARS``
take the per-text path, whose overhead is small beside them and which keeps their
memory bounded (:mod:`simdb.long_texts`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from simdb.bitsum_lanes import majority_rows, segment_bit_counts
from simdb.token_cache import cache_for, token_ids

__all__ = ["CHUNK_TOKENS", "ONE_BY_ONE_CHARS", "unigram_many"]

#: words per batch: the bit matrix stays ~1 MB (cache friendly), and so does the token cache's room
CHUNK_TOKENS = 1 << 14
#: longer texts are fingerprinted one at a time
ONE_BY_ONE_CHARS = 1 << 16


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
    where: list[int] = []
    flat: list[str | bytes] = []
    lengths: list[int] = []
    opts = (seed, drop_stopwords, stop_weights, empty)
    for i, text in enumerate(texts):
        if len(text) > ONE_BY_ONE_CHARS:
            out[i] = one(text)
            continue
        toks: Collection[str | bytes] = words(text)
        if binary:  # each distinct word once (cheaper than sorting the batch's ids by text)
            toks = set(toks)
        flat += toks
        lengths.append(len(toks))
        where.append(i)
        if len(flat) >= CHUNK_TOKENS:
            for j, v in zip(where, _batch(flat, lengths, *opts)):
                out[j] = v
            where, flat, lengths = [], [], []
    if where:
        for j, v in zip(where, _batch(flat, lengths, *opts)):
            out[j] = v
    return out


def _batch(
    flat: list[str | bytes],
    lengths_: list[int],
    seed: int,
    drop_stopwords: bool,
    stop_weights: tuple[int, int] | None,
    empty: Any,
) -> list:
    """Fingerprints of the texts whose words, concatenated, are ``flat`` (``lengths_`` words each)."""
    k = len(lengths_)
    lengths = np.array(lengths_, dtype=np.int64)
    cache = cache_for(seed, drop_stopwords, len(flat))
    ids = token_ids(cache, flat)  # first: a miss may grow (replace) the cache's arrays
    if stop_weights is not None:  # stopwords kept, weighted p : q against other words
        p, q = stop_weights
        hashes = cache.hashes[ids]
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
    fps = majority_rows(counts, totals)
    for j in np.flatnonzero(totals == 0).tolist():
        fps[j] = empty
    return fps
