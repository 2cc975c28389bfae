"""Fingerprinting a long text in memory proportional to its distinct features.

Why: the SimHash majority of ``n`` feature occurrences was computed from an
``n x 64`` bit matrix (64 bytes per occurrence, and a float32 copy of it), plus
one Python string per token: a 200 MB text peaked at 5 GB (issue 15, item 4).
Two exact rewrites of the same sum:

* :func:`majority` counts equal hashes first (``np.unique``) and weighs each
  distinct hash's bits by its count: ``sum over occurrences of bits(h)`` equals
  ``sum over distinct h of count(h) * bits(h)``, so the bit matrix has one row
  per *distinct* feature.
* :func:`segments` cuts an already normalised text at whitespace into pieces of
  about :data:`SEGMENT_CHARS` characters. Tokens (``\\w+`` words, Han runs) never
  span whitespace, so tokenizing the pieces gives the same tokens in the same
  order as tokenizing the whole; each piece's hashes are reduced to (distinct
  hash, count) pairs before the next piece is read, so only one piece's tokens
  are alive at a time.

The answer is identical bit for bit (a property test compares with the
one-shot computation), but for one case: with ``binary`` weighting two distinct
features whose 64-bit hashes collide count once here, twice in the one-shot path. Pure numpy: no database imports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import numpy as np

__all__ = ["LARGE", "SEGMENT_CHARS", "majority", "reduce_counts", "segments", "unigram_fingerprint"]

#: texts (normalised) longer than this are tokenized piece by piece
SEGMENT_CHARS = 1 << 20
#: from this many occurrences, the majority is taken over distinct hashes with counts
LARGE = 1 << 16

_WHITESPACE = re.compile(r"\s")


def segments(text: str, size: int = SEGMENT_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``size`` characters, each cut just after a whitespace
    character (a piece may be longer when there is no whitespace for a while)."""
    start, n = 0, len(text)
    while start < n:
        if n - start <= size:
            yield text[start:]
            return
        m = _WHITESPACE.search(text, start + size)
        end = n if m is None else m.end()
        yield text[start:end]
        start = end


def reduce_counts(hashes: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct hashes, total count of each) of ``hashes`` (with multiplicities ``counts``)."""
    if counts is None:
        return np.unique(hashes, return_counts=True)
    uniq, inverse = np.unique(hashes, return_inverse=True)
    return uniq, np.bincount(inverse.ravel(), weights=counts, minlength=len(uniq)).astype(np.int64)


def majority(hashes: np.ndarray, counts: np.ndarray) -> int:
    """The SimHash of distinct ``hashes`` with occurrence ``counts``: bit i set iff more than half of
    all occurrences have bit i set (the same rule as summing +-1 per occurrence)."""
    total = int(counts.sum())
    bits = np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8), bitorder="little").reshape(-1, 64)
    p = counts.astype(np.int64) @ bits.astype(np.int64)
    return int.from_bytes(np.packbits(2 * p > total, bitorder="little").tobytes(), "little")


def unigram_fingerprint(
    text: str, hashes_of: Callable[[str], np.ndarray], binary: bool, empty
):
    """SimHash of the single-word features of a long normalised ``text``, piece by piece.

    ``hashes_of(piece)``: the hash of each kept feature occurrence of the piece (stopwords
    already dropped). ``binary``: every distinct feature counts once.
    """
    acc_h = np.zeros(0, dtype=np.uint64)
    acc_c = np.zeros(0, dtype=np.int64)
    for piece in segments(text, SEGMENT_CHARS):
        h, c = reduce_counts(hashes_of(piece))
        acc_h, acc_c = reduce_counts(np.concatenate([acc_h, h]), np.concatenate([acc_c, c]))
    if len(acc_h) == 0:
        return empty
    if binary:
        acc_c = np.ones(len(acc_h), dtype=np.int64)
    return majority(acc_h, acc_c)
