"""Verification sets of a "verified" collection: shingles, bottom-k sketches, Jaccard.

Pure (no database). What a verified collection stores per row and how two rows
are compared; the store keeps the sketch in ``simdb_fingerprints.shingles``.

The rule users read (``chr4-fmix64-v4``, :data:`SCHEME`, :mod:`simdb.core.sketch.chars`):
**near-duplicate = Jaccard similarity >= 0.8 of the character 4-grams of the normalised text,
a Han / kana / Hangul character counting as 2 characters** (the threshold is configurable).
The Hamming distance of the 64-bit SimHash is only how candidates are found; every answer
carries both numbers. A collection records its scheme in its config, and this simdb opens only
collections of :data:`SCHEME` (:func:`simdb.index.rules.open_rule` names any other).

The token 3-gram scheme ``tok3-xxh64-v3`` (:data:`SCHEME_V3`) is the rule-1 sketch of the verified
models' host tables (:mod:`simdb.core.model_verifier`, rows written before rule 2): Jaccard of
token 3-grams, where a *token* is one Han (or kana / Hangul) character or one run of other word
characters (:func:`tokens`). Each token's xxh64 (seed 0, through the fingerprint core's token
cache), three consecutive token hashes combined by odd multipliers and murmur3's 64-bit finaliser,
its high 32 bits as a signed int4, vectorised over a text's tokens.

Why a bottom-k sketch (:data:`SKETCH_SIZE` values; rule 1: 384): the stored set is bounded (at
most that many int4) whatever the text's length. For two sets
``A``, ``B`` with sketches ``S(A)``, ``S(B)`` (the ``k`` smallest hashes of
each), the ``k`` smallest values of ``S(A) | S(B)`` are exactly the ``k``
smallest of ``A | B``, and such a value is in ``A & B`` iff it is in both
sketches. So :func:`sketch_jaccard` (shared / ``min(k, |S(A) | S(B)|)`` over
those values) is

* **exactly** the Jaccard similarity when ``|A | B| <= k`` (short texts, where SimHash is
  weakest), and
* otherwise the standard bottom-k estimate (standard deviation about
  ``sqrt(J(1-J)/k)``: 0.020 at J = 0.8).

The same computation runs in SQL as ``simdb_sketch_jaccard(a, b, k)`` (migration
``simdb_0006_verified``); property tests check both against brute force.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from simdb.core import tokenize as _tok
from simdb.core.fingerprint.hashing import cache_for, token_ids
from simdb.core.sketch import chars as _chars
from simdb.core.validate import check_min_jaccard
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "DEFAULT_K",
    "DEFAULT_MIN_JACCARD",
    "NGRAM",
    "SCHEME",
    "SCHEMES",
    "SCHEME_V3",
    "SKETCH_SIZE",
    "TOKEN_PATTERN",
    "check_min_jaccard",
    "Verifier",
    "explain",
    "jaccard",
    "sketch",
    "sketch_jaccard",
    "shingle_set",
    "shingle_sets",
    "shingle_values",
    "sketch_of_set",
    "token_hashes",
    "token_shingles",
    "tokens",
]

#: the shingle scheme of verified collections: character 4-grams (simdb.core.sketch.chars)
SCHEME = _chars.CHAR_SCHEME
#: token 3-grams, xxh64 tokens: the sketches of the verified models' rule 1 (simdb.core.model_verifier)
SCHEME_V3 = "tok3-xxh64-v3"
#: the schemes a :class:`Verifier` computes
SCHEMES = (SCHEME, SCHEME_V3)
NGRAM = 3
#: sketch size of new collections (why this size: docs/near-duplicates.md, "Sketch size against storage
#: and quality": 128 values gave F1 0.927 on the English families in the pipeline, 256 give 0.956)
SKETCH_SIZE = 256
DEFAULT_MIN_JACCARD = 0.8
#: candidate radius of a verified collection: the Hamming distance on the candidate
#: fingerprint (simdb.core.fingerprint.VERIFIED_OPTIONS) within which rows are verified.
#: Measured (docs/near-duplicates.md): K = 11 keeps candidate recall >= .97 at J >= 0.8.
DEFAULT_K = 11

#: a token: a CJK character, or a run of word characters that are not CJK (nor "_")
TOKEN_PATTERN = _tok.TOKEN_PATTERN


def tokens(text: str) -> list[str]:
    """NFKC + casefold, then one token per CJK character and per run of other word characters."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
    return _tok.mixed_tokens(_tok.normalize(text))


#: above this many tokens, :func:`token_hashes` asks the cache for room for the distinct ones only
_COUNTED_ROOM = 1 << 14


def token_hashes(toks: list[str]) -> np.ndarray:
    """xxh64 (seed 0) of each token's UTF-8, as uint64, through the fingerprint core's token
    cache (the candidate fingerprint hashes the same words with the same function).

    The room asked of the cache is the number of distinct tokens for a long text, not its length:
    a 5 MB text's 900k tokens (40k distinct words) asked for more than a cache may hold
    (``HASH_CACHE_MAX``), so every long text replaced the cache and hashed every word again, after
    the candidate fingerprint of the same text had just cached them (a third of its rule-1 sketch,
    ``benchmarks/bench_django_post.py``)."""
    cache = cache_for(0, False, len(toks) if len(toks) <= _COUNTED_ROOM else len(set(toks)))
    ids = token_ids(cache, toks)  # first: a miss may grow (replace) cache.hashes
    return cache.hashes[ids]


# v3 shingle hash: odd multipliers per position (order matters: "a b c" != "c b a"), then
# murmur3's fmix64 so that every input bit reaches the kept high 32 bits.
_MUL = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)


def shingle_values(hashes: np.ndarray) -> np.ndarray:
    """``tok3-xxh64-v3``: the signed int4 hash of each token 3-gram of a text, from its tokens'
    xxh64 values in order (:func:`token_hashes`); one value for a text of 1-2 tokens (its
    tokens together), none for no tokens. Not deduplicated, not sorted."""
    n = len(hashes)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    if n < NGRAM:
        return _chars.fmix64_high32((hashes * _MUL[:n]).sum(dtype=np.uint64, keepdims=True))
    return _chars.fmix64_high32(hashes[:-2] * _MUL[0] + hashes[1:-1] * _MUL[1] + hashes[2:] * _MUL[2])


def _check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise InvalidArgumentError(f"scheme must be one of {list(SCHEMES)}, got {scheme!r}")
    return scheme


#: a sketch size no set reaches (the whole set)
_UNBOUNDED = 1 << 40


def shingle_set(text: str, scheme: str = SCHEME) -> np.ndarray:
    """The full shingle set of ``text`` under ``scheme``: sorted unique int32 hashes (its character
    grams, or its token 3-grams for the token schemes); empty for a text without word characters.
    The set a sketch keeps the bottom of, and the one LSH band keys are computed from."""
    if _check_scheme(scheme) == SCHEME:
        return _chars.char_shingle_set(text)
    return np.asarray(token_shingles(text, scheme), dtype=np.int32)


def shingle_sets(texts: Sequence[str], scheme: str = SCHEME) -> list[np.ndarray]:
    """:func:`shingle_set` of each text, batched where the scheme allows.

    Why: under the character-gram scheme nearly every text longer than a comment fills its
    sketch, so a load computes the full sets of most texts again for their band keys;
    one vectorised pass over the batch (:func:`simdb.core.sketch.chars.grouped_sketches` with no size
    bound) costs a fraction of one numpy round per text."""
    if _check_scheme(scheme) == SCHEME:
        values, offsets = _chars.grouped_sketches(list(texts), _UNBOUNDED)
        bounds = offsets.tolist()
        return [values[a:b] for a, b in zip(bounds, bounds[1:])]
    return [shingle_set(t, scheme) for t in texts]


def token_shingles(text: str, scheme: str = SCHEME) -> list[int]:
    """The full shingle set of ``text`` as a sorted list of signed int4 (:func:`shingle_set`;
    named for the token schemes, where a shingle is a token 3-gram)."""
    if _check_scheme(scheme) == SCHEME:
        return _chars.char_shingle_set(text).tolist()
    # sorted_unique, not np.unique: numpy >= 2.3 hashes first, 0.62 s against 0.006 s for a 5 MB
    # text's 714k 3-grams, half of that text's rule-1 sketch (benchmarks/bench_django_post.py)
    return _chars.sorted_unique(shingle_values(token_hashes(tokens(text)))).tolist()


def sketch_of_set(values: Iterable[int], size: int = SKETCH_SIZE) -> list[int]:
    """The ``size`` smallest distinct values, ascending (the bottom-k sketch of a hash set)."""
    return heapq.nsmallest(size, set(values))


def sketch(text: str, size: int = SKETCH_SIZE, scheme: str = SCHEME) -> list[int]:
    """The bottom-``size`` sketch of ``text``'s shingle set (sorted ascending; [] if none)."""
    if _check_scheme(scheme) == SCHEME:  # bounded memory whatever the text's length
        return _chars.text_sketch(text, size).tolist()
    return token_shingles(text, scheme)[:size]


def jaccard(a: Iterable[int], b: Iterable[int]) -> float | None:
    """Exact Jaccard similarity of two sets (None when both are empty)."""
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return None if union == 0 else len(sa & sb) / union


def sketch_jaccard(a: Sequence[int] | None, b: Sequence[int] | None, size: int = SKETCH_SIZE) -> float | None:
    """Bottom-``size`` Jaccard of two sketches: of the ``size`` smallest values of their union,
    the share present in both. Exact when the two full sets have at most ``size`` values
    together. None when either is missing or both are empty (nothing to compare)."""
    if not a or not b:
        return None
    sa, sb = set(a), set(b)
    union = sa | sb
    inter = sa & sb
    if len(union) <= size:
        return len(inter) / len(union)
    cutoff = sorted(union)[size - 1]  # the size-th smallest value of the union
    return sum(1 for v in inter if v <= cutoff) / size


@dataclass(frozen=True)
class Verifier:
    """The verification settings a collection records under ``config["verify"]``.

    ``k``: candidate radius (Hamming, 0..11); ``min_jaccard``: default threshold;
    ``size``: sketch size; ``scheme``: the shingle scheme (checked on open)."""

    k: int = DEFAULT_K
    min_jaccard: float = DEFAULT_MIN_JACCARD
    size: int = SKETCH_SIZE
    scheme: str = SCHEME

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "sketch": self.size, "k": self.k, "min_jaccard": self.min_jaccard}

    @classmethod
    def from_dict(cls, d: dict) -> Verifier:
        scheme = d.get("scheme")
        if scheme not in SCHEMES:
            raise ValueError(f"verification scheme {scheme!r} is unknown to this simdb (it knows {list(SCHEMES)})")
        return cls(k=int(d["k"]), min_jaccard=float(d["min_jaccard"]), size=int(d["sketch"]), scheme=scheme)

    def sketch(self, text: str) -> list[int] | None:
        """The stored sketch of ``text`` (None: no word characters, nothing to verify with)."""
        return sketch(text, self.size, self.scheme) or None

    def shingle_set(self, text: str) -> np.ndarray:
        """``text``'s full shingle set under this collection's scheme (sorted unique int32):
        what its sketch is the bottom ``size`` of (:func:`shingle_set`)."""
        return shingle_set(text, self.scheme)

    def similarity(self, a: Sequence[int] | None, b: Sequence[int] | None) -> float | None:
        return sketch_jaccard(a, b, self.size)

    def judge(
        self, stored: Sequence[int] | None, query: Sequence[int] | None, distance: int, min_jaccard: float, hamming_k: int
    ) -> tuple[bool, float | None]:
        """The verification stage for one candidate: (is it a near-duplicate, its Jaccard).

        With a sketch on both sides the Jaccard decides (>= ``min_jaccard``); a side without
        one (a row added by fingerprint, a text without words) has nothing to verify with,
        so the Hamming distance decides (<= ``hamming_k``) and the Jaccard is None."""
        if not stored or not query:
            return distance <= hamming_k, None
        j = sketch_jaccard(stored, query, self.size)
        return j is not None and j >= min_jaccard, j


def explain(a: str, b: str, scheme: str = SCHEME) -> dict:
    """Why two texts match (or not): their shared and differing tokens and exact shingle Jaccard.

    ``shared``: tokens in both texts; ``only_a`` / ``only_b``: tokens in one only (each in
    first-seen order); ``jaccard``: exact Jaccard of the full shingle sets of ``scheme``."""
    ta, tb = tokens(a), tokens(b)
    sa, sb = set(ta), set(tb)
    return {
        "jaccard": jaccard(token_shingles(a, scheme), token_shingles(b, scheme)),
        "shared": list(dict.fromkeys(t for t in ta if t in sb)),
        "only_a": list(dict.fromkeys(t for t in ta if t not in sb)),
        "only_b": list(dict.fromkeys(t for t in tb if t not in sa)),
    }
