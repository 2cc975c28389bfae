"""Character-gram shingles (scheme ``chr4-fmix64-v4``): the verification sets of new verified collections.

Pure (no database), numpy-vectorised. The rule users read (issue 26, measured in
docs/near-duplicates.md): **near-duplicate = Jaccard >= 0.8 of the character 4-grams of the
normalised text, a Han / kana / Hangul character counting as 2 characters**.

* The normalised text: NFKC, casefold, then only its word characters, in order (punctuation,
  whitespace and ``_`` dropped): the characters of :func:`simdb.core.tokenize.mixed_tokens`'s tokens
  concatenated. So a re-cased, re-punctuated or re-spaced copy is the *same* text.
* A gram: from each character, the shortest run of characters whose width reaches 4, where a
  Han / kana / Hangul character (:data:`simdb.core.tokenize.TOKEN_CJK_RANGES`) is 2 wide and any
  other 1: four letters or digits, two Han characters, or a mix ("ab中", "abc中", "a中文").
  Runs cut short by the text's end are no grams, except for a text narrower than 4 (its one
  gram is the whole text).

Why characters and not token 3-grams (``tok3-xxh64-v3``): one edited word changes 3 of the ~20
token 3-grams of a 20-word comment (Jaccard ~0.71, below 0.8), but only the ~4-11 character
grams that overlap it out of ~100: a comment with a typo, a word replaced, dropped or inserted
stays above 0.8 (96 % of one-edit copies of 12-30-word texts, against 61 % with token 3-grams),
while unrelated comments share almost no 4-grams. Why 4 and not 5 or 3 (measured,
docs/near-duplicates.md): 5-grams found 93 % of those copies, 3-grams admit more different texts.
Why 2 for CJK: a Han character carries about as much as 2-3 letters; as one letter, a "4-gram"
of Chinese would be a 4-character phrase and one edited character would break 4 of ~40, as 2 a
gram is a Han bigram (one edit breaks 2).

The hash of a gram: its (up to 4) code points and its length combined by odd multipliers per
position, then murmur3's fmix64, whose high 32 bits are the signed int4 stored (the same
finaliser as ``tok3-xxh64-v3``, so the bottom-k sketch, the Jaccard of two sketches and SQL's
``simdb_sketch_jaccard`` are unchanged). :func:`char_shingle_set` is the text's full set, the
input of LSH band keys; a property test checks both against a plain-Python reference.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from simdb.core import tokenize as _tok
from simdb.errors import InvalidTypeError

__all__ = [
    "CHAR_SCHEME",
    "GRAM_CHARS",
    "WIDE_WIDTH",
    "char_shingle_set",
    "char_shingle_values",
    "char_sketch",
    "char_stream",
    "text_sketch",
    "codepoints",
    "grouped_sketches",
    "is_wide",
    "sorted_unique",
]

#: the scheme name stored in a collection's config (never changed silently: a new hash is a new name)
CHAR_SCHEME = "chr4-fmix64-v4"
#: a gram's width, in characters
GRAM_CHARS = 4
#: a Han / kana / Hangul character's width, in characters
WIDE_WIDTH = 2

_MAX_LEN = 4  # the longest gram: four narrow characters
_W_NARROW, _W_WIDE, _W_GRAM = 1, WIDE_WIDTH, GRAM_CHARS
_MUL = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63], dtype=np.uint64)
_MUL_LEN = np.uint64(0xD6E8FEB86659FD93)
_FULL_LEN = np.uint64((_MAX_LEN * 0xD6E8FEB86659FD93) & 0xFFFFFFFFFFFFFFFF)  # a full gram's length term
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S32 = np.uint64(32)

_TOKEN = re.compile(_tok.TOKEN_PATTERN).findall
# ASCII: delete every byte that is not a letter or digit, lower-case the rest (one C call)
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_ASCII_DROP = bytes(c for c in range(128) if not chr(c).isalnum())


def _wide_bounds() -> np.ndarray:
    """TOKEN_CJK_RANGES as sorted [lo, hi + 1, lo, hi + 1, ...] code points."""
    spec = _tok.TOKEN_CJK_RANGES
    out: list[int] = []
    i = 0
    while i < len(spec):
        lo = hi = ord(spec[i])
        if i + 2 < len(spec) and spec[i + 1] == "-":
            hi = ord(spec[i + 2])
            i += 3
        else:
            i += 1
        out += [lo, hi + 1]
    return np.array(out, dtype=np.uint32)


_BOUNDS = _wide_bounds()


def char_stream(text: str) -> str:
    """The normalised text the grams slide over: NFKC + casefold, word characters only (no ``_``)."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_LOWER, _ASCII_DROP).decode("ascii")
    return "".join(_TOKEN(_tok.normalize(text)))


def codepoints(stream: str) -> np.ndarray:
    """The code points of a (normalised) stream as uint32."""
    return np.frombuffer(stream.encode("utf-32-le"), dtype=np.uint32)


def is_wide(cps: np.ndarray) -> np.ndarray:
    """Which code points are Han / kana / Hangul (2 characters wide)."""
    return (np.searchsorted(_BOUNDS, cps, side="right") & 1).astype(bool)


def _gram_ends(cps: np.ndarray, text_end: np.ndarray) -> np.ndarray:
    """For each position, the end of its gram (the shortest run reaching the gram's width);
    a value > ``text_end`` means the run leaves its text (no gram starts there)."""
    widths = np.where(is_wide(cps), _W_WIDE, _W_NARROW)
    cum = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(widths, out=cum[1:])
    ends = np.searchsorted(cum, cum[:-1] + _W_GRAM, side="left")
    return np.where(ends <= text_end, ends, text_end + 1)


def _hash_grams(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The int4 hash of each gram ``cps[starts[g] : starts[g] + lengths[g]]`` (lengths 1..4)."""
    padded = np.concatenate([cps.astype(np.uint64), np.zeros(_MAX_LEN, dtype=np.uint64)])
    h = lengths.astype(np.uint64) * _MUL_LEN
    for o in range(_MAX_LEN):
        h += np.where(lengths > o, padded[starts + o], np.uint64(0)) * _MUL[o]
    return fmix64_high32(h)


def _values_of(cps: np.ndarray, lens: np.ndarray, whole: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(gram hashes, owning text) of texts given as concatenated code points and their lengths
    (each > 0). Not deduplicated. ``whole``: these are whole texts (one narrower than a gram is
    its own gram); False for a block of a longer text."""
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    text_end = offsets[1:][owner]
    if len(cps) and int(cps.max()) < int(_BOUNDS[0]):
        return _narrow_values(cps, offsets, owner, text_end, whole)
    ends = _gram_ends(cps, text_end)
    starts = np.arange(len(cps), dtype=np.int64)
    ok = ends <= text_end
    # a text narrower than one gram: its one gram is the whole text
    narrow = np.flatnonzero(~ok[offsets[:-1]]) if whole else np.zeros(0, dtype=np.int64)
    ok[offsets[:-1][narrow]] = True
    ends = np.where(ok, ends, 0)
    ends[offsets[:-1][narrow]] = offsets[1:][narrow]
    starts, ends, owner = starts[ok], ends[ok], owner[ok]
    return _hash_grams(cps, starts, ends - starts), owner


def _narrow_values(
    cps: np.ndarray, offsets: np.ndarray, owner: np.ndarray, text_end: np.ndarray, whole: bool
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_values_of` when no character is wide (Latin, digits, Cyrillic ...: the common case):
    every gram is the next 4 characters, so the hash is 4 shifted slices, no gather."""
    n = len(cps)
    padded = np.concatenate([cps.astype(np.uint64), np.zeros(_MAX_LEN, dtype=np.uint64)])
    h = padded[:n] * _MUL[0]
    for o in range(1, _MAX_LEN):
        h += padded[o : n + o] * _MUL[o]
    h += _FULL_LEN
    ok = np.arange(_MAX_LEN, n + _MAX_LEN, dtype=np.int64) <= text_end
    vals, own = fmix64_high32(h[ok]), owner[ok]
    lens = np.diff(offsets)
    narrow = np.flatnonzero(lens < _MAX_LEN) if whole else np.zeros(0, dtype=np.int64)
    if len(narrow):  # a text narrower than one gram: its one gram is the whole text
        short = _hash_grams(cps, offsets[:-1][narrow], lens[narrow])
        vals, own = np.concatenate([vals, short]), np.concatenate([own, narrow])
    return vals, own


def fmix64_high32(h: np.ndarray) -> np.ndarray:
    """murmur3's fmix64 of uint64 values (in place), their high 32 bits as int4: the one finisher
    of every shingle and band-key hash (character grams here, token 3-grams in :mod:`simdb.core.sketch`,
    band keys in :mod:`simdb.core.sketch.bands`)."""
    h ^= h >> _S33
    h *= _FMIX1
    h ^= h >> _S33
    h *= _FMIX2
    h ^= h >> _S33
    return (h >> _S32).astype(np.uint32).view(np.int32)



def char_shingle_values(text: str) -> np.ndarray:
    """The int4 hash of every gram of ``text`` in order (not deduplicated); empty without word characters."""
    cps = codepoints(char_stream(text))
    if not len(cps):
        return np.zeros(0, dtype=np.int32)
    return _values_of(cps, np.array([len(cps)], dtype=np.int64))[0]


def char_shingle_set(text: str) -> np.ndarray:
    """The full shingle set of ``text`` (sorted unique int32): what the sketch keeps the bottom of,
    and what LSH band keys are computed from."""
    stream = char_stream(text)
    if not stream:
        return np.zeros(0, dtype=np.int32)
    return sorted_unique(np.concatenate(list(_block_values(stream))))


def _block_values(stream: str):
    """The gram hashes of a non-empty stream, block by block (:data:`BLOCK_CHARS` characters, each
    read with the next 3 so that every gram starting in it is whole)."""
    for a in range(0, len(stream), BLOCK_CHARS):
        part = codepoints(stream[a : a + BLOCK_CHARS + _MAX_LEN - 1])
        yield _values_of(part, np.array([len(part)], dtype=np.int64), whole=a == 0)[0]


_FLIP = np.uint64(0x80000000)  # int32 order = uint32 order after flipping the sign bit
_LOW32 = np.uint64(0xFFFFFFFF)


#: characters per block of batched sketches: cache-sized temporaries, and a bound on memory
BLOCK_CHARS = 65_536


#: ``each_block(values, owner)``: the (not deduplicated) int32 gram hashes of a block of texts and
#: the text number (int64) of each, as a sketch computes them (band keys reuse them)
BlockHook = Callable[[np.ndarray, np.ndarray], None]


def char_sketch(stream: str, size: int, each_block: BlockHook | None = None, owner: int = 0) -> np.ndarray:
    """The bottom-``size`` sketch (int32 ascending) of one normalised stream of any length, in
    blocks of :data:`BLOCK_CHARS` (each read with the next 3 characters, so every gram that starts
    in a block is whole): memory stays bounded for a text of megabytes. ``each_block`` sees each
    block's grams (as text number ``owner``)."""
    best = np.zeros(0, dtype=np.int32)
    for vals in _block_values(stream) if stream else ():
        if each_block is not None:
            each_block(vals, np.full(len(vals), owner, dtype=np.int64))
        best = sorted_unique(np.concatenate([best, vals]))[:size]
    return best


def text_sketch(text: str, size: int, each_block: BlockHook | None = None, owner: int = 0) -> np.ndarray:
    """:func:`char_sketch` of a raw text (its :func:`char_stream`): what one text's sketch takes."""
    return char_sketch(char_stream(text), size, each_block, owner)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` (sorted, distinct) by one sort and a mask. Why: numpy >= 2.3's
    ``np.unique`` hashes first and then sorts, several times slower on a text's few hundred grams
    (measured ~100 us against ~11 us for 600 values): most of a query's sketch."""
    out = np.sort(values)
    if len(out) < 2:
        return out
    keep = np.empty(len(out), dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def grouped_sketches(texts: list[str], size: int, each_block: BlockHook | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The bottom-``size`` sketches of many texts as CSR (int32 values ascending, int64 offsets;
    text ``j`` is ``values[offsets[j]:offsets[j + 1]]``, empty without word characters).

    Why batched: a comment's grams are ~100 values, where numpy's per-call overhead would
    dominate; here the streams of a block of texts are joined, encoded, hashed, sorted and cut
    in one set of array operations (keys = text number << 32 | value). A text longer than a
    block takes :func:`char_sketch`. ``each_block``: called with the grams of each block
    (:data:`BlockHook`), so that band keys need no second pass over the texts."""
    streams = [char_stream(t) for t in texts]
    lens = np.fromiter(map(len, streams), dtype=np.int64, count=len(streams))
    parts: list[np.ndarray] = []
    counts = np.zeros(len(texts), dtype=np.int64)
    i = 0
    while i < len(texts):
        if lens[i] > BLOCK_CHARS:
            parts.append(char_sketch(streams[i], size, each_block, i))
            counts[i] = len(parts[-1])
            i += 1
            continue
        j, chars = i, 0
        while j < len(texts) and chars + lens[j] <= BLOCK_CHARS:
            chars += int(lens[j])
            j += 1
        v, o = _block_sketches(streams[i:j], lens[i:j], size, each_block, i)
        parts.append(v)
        counts[i:j] = np.diff(o)
        i = j
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)), offsets


def _block_sketches(
    streams: list[str], lens: np.ndarray, size: int, each_block: BlockHook | None = None, first: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grouped_sketches` of one block of streams (together at most a block's characters;
    the first is text number ``first`` for ``each_block``)."""
    nonempty = np.flatnonzero(lens > 0)
    if not len(nonempty):
        return np.zeros(0, dtype=np.int32), np.zeros(len(streams) + 1, dtype=np.int64)
    vals, owner = _values_of(codepoints("".join(streams)), lens[nonempty])
    if each_block is not None:
        each_block(vals, nonempty[owner] + first)
    return _bottom_k_groups(vals, nonempty[owner].astype(np.uint64), len(streams), size)


def _bottom_k_groups(values: np.ndarray, group: np.ndarray, groups: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``size`` smallest distinct int32 ``values`` of each group (``group``: uint64 group number
    of each value, any order) as CSR: ascending values, int64 offsets of ``groups + 1``; one sort of
    (group << 32 | value) keys."""
    key = (group << np.uint64(32)) | (values.view(np.uint32).astype(np.uint64) ^ _FLIP)
    key.sort()
    if len(key) > 1:
        first = np.empty(len(key), dtype=bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        key = key[first]
    owner = (key >> np.uint64(32)).astype(np.int64)
    group_start = np.searchsorted(owner, np.arange(groups))
    keep = np.arange(len(key)) - group_start[owner] < size
    key, owner = key[keep], owner[keep]
    kept = ((key & _LOW32) ^ _FLIP).astype(np.uint32).view(np.int32)
    return kept, np.searchsorted(owner, np.arange(groups + 1)).astype(np.int64)
