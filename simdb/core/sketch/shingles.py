"""Shingle sets for exact Jaccard similarity (issue 8).

A text's shingle set is what "Jaccard >= 0.8" is measured on. It is stored in
``simdb_fingerprints.shingles`` as a sorted ``int4[]`` of unique values, so the
``intarray`` extension can compute ``icount(a & b)::float / icount(a | b)``
inside PostgreSQL.

The scheme (pinned; recorded in a collection's configuration as
``SCHEME = "w3c5-xxh32-v1"`` and never changed silently):

1. Normalise: Unicode NFKC, then ``str.casefold()``.
2. If the text is *mostly CJK* (more than half of its ``\\w`` characters are Han,
   kana or Hangul), the shingles are the overlapping **character 5-grams** of the
   normalised text with every whitespace run collapsed to one space and the ends
   stripped. Punctuation is kept. A text shorter than 5 characters is one shingle.
3. Otherwise the shingles are the overlapping **word 3-grams** over *all* words
   (``\\w+`` runs; stopwords are kept because shingles carry word order), each
   written as the three words joined by one space. A text with 1 or 2 words is
   one shingle of those words.
4. Each shingle string is hashed with **xxh32, seed 0, of its UTF-8 bytes** and
   the unsigned 32-bit result is stored as a signed two's-complement ``int4``
   (values >= 2^31 have 2^32 subtracted).
5. The values are de-duplicated and sorted ascending (signed order, which is
   the order ``intarray``'s ``sort()`` produces).

A text with no ``\\w`` characters has the empty set; the store keeps ``NULL`` for
it and such rows never match anything (Jaccard of two empty sets is undefined).

Collisions: two different shingles share an xxh32 value with probability
2**-32 per pair; for two 1,000-shingle texts that is about 2e-4 of one spurious
common element, i.e. a Jaccard error below 1e-6 — negligible against the
0.01-wide bins anyone thresholds on.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

import xxhash

from simdb.errors import InvalidTypeError

__all__ = [
    "SCHEME",
    "WORD_N",
    "CHAR_N",
    "normalize",
    "is_mostly_cjk",
    "shingle_strings",
    "shingles",
    "shingles_many",
    "hash32",
]

SCHEME = "w3c5-xxh32-v1"
WORD_N = 3
CHAR_N = 5

_WORD = re.compile(r"\w+")
_WS = re.compile(r"\s+")
# Han (incl. extensions A-F and compatibility ideographs), kana, Hangul, bopomofo.
_CJK = re.compile(
    "[\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3100-\u312f"
    "\u3130-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)
_WORDCHARS = re.compile(r"[^\W]")

_xxh32 = xxhash.xxh32_intdigest


def normalize(text: str) -> str:
    """NFKC then casefold: the form every shingle is taken from."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be str, not {type(text).__name__}")
    return unicodedata.normalize("NFKC", text).casefold()


def is_mostly_cjk(text: str) -> bool:
    """True when more than half of the word characters of ``text`` are CJK."""
    if text.isascii():  # the common case, without scanning every character twice
        return False
    words = len(_WORDCHARS.findall(text))
    if words == 0:
        return False
    return 2 * len(_CJK.findall(text)) > words


def hash32(s: str) -> int:
    """The pinned shingle hash: xxh32 (seed 0) of UTF-8, as a signed int4."""
    v = _xxh32(s.encode("utf-8"), 0)
    return v - 0x100000000 if v >= 0x80000000 else v


def shingle_strings(text: str) -> list[str]:
    """The shingles of ``text`` before hashing, in text order (with repeats)."""
    norm = normalize(text)
    if is_mostly_cjk(norm):
        s = _WS.sub(" ", norm).strip()
        if not s:
            return []
        if len(s) <= CHAR_N:
            return [s]
        return [s[i : i + CHAR_N] for i in range(len(s) - CHAR_N + 1)]
    words = _WORD.findall(norm)
    if not words:
        return []
    if len(words) <= WORD_N:
        return [" ".join(words)]
    return [" ".join(words[i : i + WORD_N]) for i in range(len(words) - WORD_N + 1)]


def shingles(text: str) -> list[int]:
    """Sorted unique signed 32-bit hashes of the shingles of ``text`` (may be empty)."""
    unsigned = {_xxh32(s.encode("utf-8"), 0) for s in shingle_strings(text)}  # hash32, inlined
    return sorted(v - 0x100000000 if v >= 0x80000000 else v for v in unsigned)


def shingles_many(texts: Iterable[str]) -> list[list[int]]:
    """:func:`shingles` of each text, in order."""
    return [shingles(t) for t in texts]
