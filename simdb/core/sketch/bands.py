"""LSH band keys of a shingle set: the verified default's candidate stage (issue 26).

Pure (no database). A verified collection's rule is Jaccard of shingle sets >= 0.8; its
candidates used to be the rows within Hamming distance K = 11 of the query's SimHash, found by
548 probes of the four 16-bit block indexes. Each probe returns about N/65,536 rows, so that
stage grew with the collection (3.9 ms at 1M rows, 22 ms at 10M), and it missed rule pairs 12-15
bits apart. Here a row is a candidate when it shares one of :data:`BANDS` keys with the query:
a fixed number of index probes whatever the collection's size, and a miss probability that
depends on the pair's Jaccard only (the S-curve), not on how its bits fell.

How a key is made (MinHash, banded; scheme v1 as written, v2 differs in how the MinHash values
are made, below). The input is the text's **full set** of shingle hash values
(int32, whatever the scheme: the values are already well mixed hashes). Each of ``b * r``
hash functions is a multiply-shift ``h_j(x) = high 32 bits of (a_j * x + c_j) mod 2^64`` over
the value as an unsigned 32-bit number (``a_j`` odd, fixed seeds: keys never change between
versions of this module under the same :data:`BAND_SCHEME`); the minimum of each over the set is
one MinHash value; for two sets the minima agree with probability (close to) their Jaccard
``s``. The ``r`` minima of band ``i`` together with ``i`` itself are folded by odd multipliers
and murmur3's 64-bit finaliser into one int4 key, so a band matches with probability ``s^r``
and two rows share at least one key with probability ``1 - (1 - s^r)^b``.

Why b = 14, r = 5 (:func:`s_curve`; the benchmark ``benchmarks/bench_bands.py`` prints it): at
Jaccard 0.8 a pair shares at least one key with probability 0.9961, at 0.75 0.978, at 0.85 0.9997.
r = 4 (b = 11) would store 3 keys fewer but let through 16x more unrelated pairs; r = 6 needs b = 18,
4 more keys per row in the table and in the band indexes.

Why a candidate shares **two** keys (scheme v3, issue 26): unrelated English paragraphs are not at
Jaccard 0.05 but at 0.06-0.11 of character 4-grams (" the", "tion", ...), and ``s^5`` lives in that
tail: on 8,000 real paragraphs (``benchmarks/bench_dedup.py --data sentences``) a pair of different
texts shared one key with probability 2.4e-5, so a query at 1M rows drew 24 false candidates, each
fetched with its 1 kB sketch and verified: the candidate stage grew with the collection, and a 1M-record
``simdb dedup`` slowed 5x from its first 100k to its last. Two shared keys of the same 14 cut those
60-fold (13 pairs of 771 sharing one key shared two), for a candidate probability at Jaccard 0.8 of
0.970 (0.9967 at 0.85, 0.99995 at 0.9): measured on the one-edit copies within the rule
(``bench_short_texts.py --candidates``), 0.998 of the English 12-30-word ones and all others reach it.
The keys are v2's, so ``simdb convert`` moves a v2 collection to v3 by changing its config only.

Why int4 keys: 14 per row in ``simdb_fingerprints.bands`` (int4[], 80 bytes) and one btree per band;
a random collision of two different bands' keys has probability 2^-32 per pair of keys, i.e.
at 10M rows about 0.03 extra candidates a query: nothing beside the S-curve's own false
candidates, which the verification stage drops anyway.

Three schemes (a collection's config names its own, and keeps answering by it):

* ``oph-b14r5-m2-v3`` (:data:`BAND_SCHEME`, new collections): v2's keys; a candidate shares at
  least two of them (:func:`min_shared`).
* ``oph-b14r5-v2`` (:data:`OPH_SCHEME`): the 70 MinHash values come from
  one-permutation hashing with optimal densification (below, :func:`oph_values`): one hash per
  shingle, O(grams) per text; the same S-curve (measured against brute force in
  tests/test_bands_oph.py). About 14x cheaper than v1 on paragraphs, which was most of what a
  banded load paid beyond a plain one.
* ``minhash-b14r5-v1`` (:data:`MINHASH_SCHEME`, collections created before it): the 70
  multiply-shift functions described above, one (values x hashes) product per block of values
  and ``np.minimum.reduceat`` per set. ``simdb convert`` moves such a collection to v3.

Both are vectorised over a batch of sets (:func:`band_keys_many`), so a load of short texts pays
a few numpy calls a chunk, not a few per text.

**One-permutation hashing with optimal densification**: the MinHash values of band scheme ``oph-b14r5-v2``.

How scheme v2 makes its MinHash values (:func:`oph_values`, folded into band keys as v1's are).
Why: scheme ``minhash-b14r5-v1`` took ``b * r = 70`` hash products per shingle (one per MinHash
function), so band keys cost about 130 us per paragraph, the largest part of what a banded load paid beyond a plain one. Here each shingle is
hashed **once** (Li, Owen & Zhang 2012, "One permutation hashing"):

* the 64-bit hash ``h`` of a value picks its bin from its high bits (``bin = hi32(h) * bins >> 32``),
  and each bin keeps the minimum ``h`` of the values that fell in it. For two sets the minima of
  a bin that is non-empty in both agree with probability their Jaccard ``s``;
* a bin that received no value (short texts: ~100 grams over 70 bins leave about a quarter
  empty) borrows the value of another bin, chosen by Shrivastava's *optimal densification*
  (ICML 2017): bin ``i`` tries bins ``probe(i, 1), probe(i, 2), ...`` (a fixed pseudo-random
  sequence per bin, independent of the set) and takes the first non-empty one. Two sets with the
  same empty bins borrow from the same donors, so every bin still agrees with probability
  ``s`` exactly, and the donors are spread at random (not the next bin, as in the 2014 rotation,
  whose copies run in streaks and would make a band's ``r`` values agree together).

Cost: one hash, one scatter-minimum and a densification of at most ``bins`` values per set:
O(grams + bins), not O(grams x bins). The S-curve (``1 - (1 - s^r)^b``) is checked against
brute force on synthetic sets in tests/test_bands_oph.py; densified bins are not quite
independent, so for very small sets the measured curve is what the test bounds, not the formula.

The probe sequences come from a fixed seed: the same scheme name always gives the same keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

from simdb.core import sketch as _sketch
from simdb.core.sketch import chars as _chars
from simdb.core.sketch.chars import fmix64_high32
from simdb.errors import InvalidArgumentError

__all__ = [
    "BANDS",
    "PROBES",
    "BlockBandKeys",
    "block_band_keys",
    "BAND_SCHEME",
    "MINHASH_SCHEME",
    "RELIABLE_REACH",
    "OPH_SCHEME",
    "ROWS",
    "SCHEMES",
    "band_keys",
    "band_keys_many",
    "band_keys_text",
    "check_scheme",
    "key_scheme",
    "min_shared",
    "minhashes",
    "oph_values",
    "reliable_threshold",
    "s_curve",
    "sketched_band_keys",
    "text_band_keys",
]

#: bands per row (keys per row) and MinHash values per band
BANDS = 14
ROWS = 5
#: the name stored in a new collection's config: the same name always means the same keys and rule
BAND_SCHEME = "oph-b14r5-m2-v3"
#: collections banded before v3: the same keys, a candidate shares one (still answered so)
OPH_SCHEME = "oph-b14r5-v2"
#: the scheme of collections banded before one-permutation hashing (still computed for them)
MINHASH_SCHEME = "minhash-b14r5-v1"
#: every scheme this simdb computes
SCHEMES = (BAND_SCHEME, OPH_SCHEME, MINHASH_SCHEME)
#: how many keys a candidate shares with the query, per scheme (the module doc says why v3 asks two)
_MIN_SHARED = {BAND_SCHEME: 2, OPH_SCHEME: 1, MINHASH_SCHEME: 1}
#: the scheme whose keys a scheme stores (v3 stores v2's)
_KEYS_OF = {BAND_SCHEME: OPH_SCHEME}

_SEED = 0x5EED_BA4D
_rng = np.random.Generator(np.random.PCG64(_SEED))
_A = _rng.integers(1, 1 << 63, size=BANDS * ROWS, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_C = _rng.integers(0, 1 << 63, size=BANDS * ROWS, dtype=np.uint64)
_FOLD = _rng.integers(1, 1 << 63, size=ROWS + 1, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
del _rng
_S32 = np.uint64(32)
#: values per block of the (values x hashes) product: 4096 x 70 uint64 = 2.3 MB
_BLOCK = 4096
_BAND_NO = np.arange(BANDS, dtype=np.uint64)


def s_curve(s: float, bands: int = BANDS, rows: int = ROWS, shared: int = 1) -> float:
    """The probability that two sets of Jaccard ``s`` share at least ``shared`` of their ``bands`` keys:
    a band matches with probability p = s^r, so 1 - sum over i < shared of C(b, i) p^i (1-p)^(b-i)."""
    if not 0.0 <= s <= 1.0:
        raise InvalidArgumentError(f"s must be a Jaccard similarity in [0, 1], got {s!r}")
    p = s**rows
    return 1.0 - sum(comb(bands, i) * p**i * (1.0 - p) ** (bands - i) for i in range(shared))


#: the share of the pairs at exactly a threshold that its candidate stage must reach for that threshold to
#: be answered from the band keys (the issue's ">= 95 % found"); below, see :func:`reliable_threshold`
RELIABLE_REACH = 0.95


def reliable_threshold(scheme: str) -> float:
    """The lowest ``min_jaccard`` (in hundredths) whose pairs share enough band keys to be candidates
    with probability >= :data:`RELIABLE_REACH` under band ``scheme``: 0.79 for ``oph-b14r5-m2-v3``, 0.72
    for one shared key.

    Why it matters: the keys are fixed when a row is stored, and the S-curve falls fast below the rule
    they were made for (two keys of 14: 0.88 of the pairs at 0.75, 0.71 at 0.7, 0.30 at 0.6, 0.07 at 0.5), so a
    looser threshold answered from the keys alone would silently miss most of its pairs. The facade
    compares every row instead (``near``) or refuses (``pairs``, ``add_if_unique``)."""
    shared = min_shared(scheme)
    return next(t / 100 for t in range(1, 101) if s_curve(t / 100, shared=shared) >= RELIABLE_REACH)


def min_shared(scheme: str) -> int:
    """How many band keys a row shares with a query to be its candidate, under band ``scheme``."""
    return _MIN_SHARED[check_scheme(scheme)]


def key_scheme(scheme: str) -> str:
    """The scheme whose keys ``scheme`` stores (``oph-b14r5-m2-v3`` stores ``oph-b14r5-v2``'s): two
    schemes with one key scheme convert into each other by their config alone."""
    return _KEYS_OF.get(check_scheme(scheme), scheme)


def check_scheme(scheme: object) -> str:
    """``scheme`` if this simdb computes it; else :class:`~simdb.errors.InvalidArgumentError` naming it."""
    if scheme not in SCHEMES:
        raise InvalidArgumentError(f"band scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    return str(scheme)


def _as_u64(values: np.ndarray | Sequence[int]) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype != np.int32:
        v = v.astype(np.int64)
        if len(v) and (v.min() < -(1 << 31) or v.max() >= 1 << 31):
            raise InvalidArgumentError("shingle values must be signed 32-bit integers (int4)")
        v = v.astype(np.int32)
    return v.view(np.uint32).astype(np.uint64)


def _block_minima(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per segment (``starts``: first position of each, all < len(x), ascending), the minimum of
    each hash function: a (segments, b*r) uint64 array of 32-bit values."""
    h = x[:, None] * _A[None, :]
    h += _C[None, :]
    h >>= _S32
    return np.minimum.reduceat(h, starts, axis=0)


def minhashes(values: np.ndarray | Sequence[int]) -> np.ndarray | None:
    """Scheme v1's ``BANDS * ROWS`` MinHash values (uint64 holding 32-bit numbers) of one set; None if empty.

    Duplicates in ``values`` do not matter (a minimum is the same over a multiset)."""
    x = _as_u64(values)
    return _minhashes_u64(x) if len(x) else None


def _minhashes_u64(x: np.ndarray) -> np.ndarray:
    out: np.ndarray | None = None
    for s in range(0, len(x), _BLOCK):
        m = _block_minima(x[s : s + _BLOCK], np.zeros(1, dtype=np.int64))[0]
        out = m if out is None else np.minimum(out, m)
    assert out is not None
    return out


def _fold(mins: np.ndarray) -> np.ndarray:
    """(n, b*r) minima -> (n, b) int32 keys: each band's r minima and its number, mixed."""
    m = mins.reshape(len(mins), BANDS, ROWS)
    x = (m * _FOLD[None, None, :ROWS]).sum(axis=2, dtype=np.uint64)
    x += _BAND_NO[None, :] * _FOLD[ROWS]
    return fmix64_high32(x)


def band_keys(values: np.ndarray | Sequence[int], scheme: str = BAND_SCHEME) -> np.ndarray | None:
    """The ``BANDS`` int32 band keys of one shingle set (int4 values) under band ``scheme``; None for
    an empty set (nothing to compare: such a row is answered by Hamming distance, like a row
    without a sketch)."""
    return band_keys_many([values], scheme)[0]


def band_keys_many(
    sets: Sequence[np.ndarray | Sequence[int] | None], scheme: str = BAND_SCHEME
) -> list[np.ndarray | None]:
    """:func:`band_keys` of each set, computed for the whole batch at once (None for an empty set or None)."""
    check_scheme(scheme)
    sizes = np.fromiter((0 if s is None else len(s) for s in sets), dtype=np.int64, count=len(sets))
    live = np.flatnonzero(sizes)
    out: list[np.ndarray | None] = [None] * len(sets)
    if not len(live):
        return out
    x = _as_u64(np.concatenate([np.asarray(sets[i]) for i in live.tolist()]))
    if key_scheme(scheme) == OPH_SCHEME:
        owner = np.repeat(np.arange(len(live), dtype=np.int64), sizes[live])
        keys = _fold(oph_values(x, owner, len(live), BANDS * ROWS))
    else:
        keys = _fold(_minhash_many(x, sizes[live]))
    for row, i in enumerate(live.tolist()):
        out[i] = keys[row]
    return out


def _minhash_many(x: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Scheme v1's (sets, b*r) MinHash values of non-empty sets given as their concatenated values."""
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    mins = np.empty((len(sizes), BANDS * ROWS), dtype=np.uint64)
    # blocks of whole sets (a set longer than a block gets its own, cut in blocks by minhashes)
    i = 0
    while i < len(sizes):
        if offsets[i + 1] - offsets[i] > _BLOCK:
            mins[i] = _minhashes_u64(x[offsets[i] : offsets[i + 1]])
            i += 1
            continue
        j = int(np.searchsorted(offsets, offsets[i] + _BLOCK, side="right")) - 1  # sets i..j-1 fit
        mins[i:j] = _block_minima(x[offsets[i] : offsets[j]], offsets[i:j] - offsets[i])
        i = j
    return mins


# Scheme v2's values: one-permutation hashing with optimal densification (the module doc says why)

#: pseudo-random donor tries per empty bin before the fallback (the next non-empty bin, in order).
#: A set of one value leaves 69 of 70 bins empty; 1,024 tries miss its one bin with probability 4e-7.
PROBES = 1024

_OPH_SEED = 0x0F_0B_2017
_MUL = np.uint64(0x9E3779B97F4A7C15)
_ADD = np.uint64(0x632BE59BD9B4E019)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
#: the value of a bin no value fell in (before densification)
EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_probe_tables: dict[int, np.ndarray] = {}


def _probe_table(bins: int) -> np.ndarray:
    """(bins, PROBES) donor bins: row ``i`` is bin ``i``'s fixed sequence of tries (never ``i``)."""
    table = _probe_tables.get(bins)
    if table is None:
        rng = np.random.Generator(np.random.PCG64(_OPH_SEED + bins))
        table = rng.integers(0, bins - 1, size=(bins, PROBES), dtype=np.int64)
        table += table >= np.arange(bins)[:, None]  # skip the bin itself
        _probe_tables[bins] = table
    return table


def _hash64(x: np.ndarray) -> np.ndarray:
    """murmur3's fmix64 of ``x * MUL + ADD`` (uint64 in, uint64 out): a value's one hash."""
    h = x * _MUL
    h += _ADD
    h ^= h >> _S33
    h *= _FMIX1
    h ^= h >> _S33
    h *= _FMIX2
    h ^= h >> _S33
    return h


def oph_values(x: np.ndarray, owner: np.ndarray, sets: int, bins: int) -> np.ndarray:
    """The ``bins`` densified one-permutation MinHash values (uint64) of each of ``sets`` sets.

    ``x``: the sets' values as uint64 (each a 32-bit number), ``owner``: the set (0..sets-1) of
    each value; order and repetitions do not matter. Every set must have at least one value."""
    mins = np.full((sets, bins), EMPTY, dtype=np.uint64)
    oph_bins(mins, x, owner)
    return densify(mins)


def oph_bins(mins: np.ndarray, x: np.ndarray, owner: np.ndarray) -> None:
    """Fold values into ``mins`` (sets x bins uint64, :data:`EMPTY` where nothing fell yet), in place.

    Why separate: a bin's value is a minimum, so the values of a set may come in any number of
    pieces (a load's blocks of grams, not deduplicated: the grams it hashed for the sketch
    anyway) and the result is that of the whole set; :func:`densify` then fills the empty bins."""
    bins = mins.shape[1]
    h = _hash64(x)
    b = ((h >> _S32) * np.uint64(bins)) >> _S32
    np.minimum.at(mins.reshape(-1), owner.astype(np.int64) * bins + b.astype(np.int64), h)


def densify(mins: np.ndarray) -> np.ndarray:
    """The (sets x bins) values with every empty bin filled by optimal densification (each set
    must have a non-empty bin)."""
    empty = mins == EMPTY
    rows, cols = np.nonzero(empty)
    if not len(rows):
        return mins
    out = mins.copy()
    table = _probe_table(mins.shape[1])
    if len(rows) <= _FEW_EMPTY:
        return _densify_few(mins, empty, out, table, rows, cols)
    for t in range(PROBES):  # each try fills an empty bin with the share of bins that are full (~3/4 for a paragraph)
        donor = mins[rows, table[cols, t]]
        got = donor != EMPTY
        out[rows[got], cols[got]] = donor[got]
        rows, cols = rows[~got], cols[~got]
        if not len(rows):
            return out
    for r, c in zip(rows.tolist(), cols.tolist()):  # fallback: the next non-empty bin, in order
        full = np.flatnonzero(~empty[r])
        out[r, c] = mins[r, full[np.searchsorted(full, c) % len(full)]]
    return out


#: at most this many empty bins (a query's one text: ~a quarter of 70) are filled one by one in Python
_FEW_EMPTY = 96


def _densify_few(
    mins: np.ndarray, empty: np.ndarray, out: np.ndarray, table: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    """:func:`densify`'s result for a few empty bins, each walking its own tries.

    Why: the vectorised walk takes a round of ~6 numpy calls per try until the last bin is filled
    (~8 rounds for a paragraph), ~70 us for one text's keys; here a bin usually needs one or two
    tries (three quarters of the bins are full). The same donors in the same order, then the same
    fallback: the same values."""
    full_rows: dict[int, list[bool]] = {}
    for r, c in zip(rows.tolist(), cols.tolist()):
        full = full_rows.get(r)
        if full is None:
            full = full_rows[r] = (~empty[r]).tolist()
        tries = table[c]
        donor = -1
        for start in range(0, PROBES, 8):
            donor = next((d for d in tries[start : start + 8].tolist() if full[d]), -1)
            if donor >= 0:
                break
        if donor < 0:  # fallback: the next non-empty bin, in order
            idx = np.flatnonzero(~empty[r])
            donor = int(idx[np.searchsorted(idx, c) % len(idx)])
        out[r, c] = mins[r, donor]
    return out


class BlockBandKeys:
    """Scheme v2 keys of a batch of texts, made from the gram blocks their sketches are computed
    from (a :data:`simdb.core.sketch.chars.BlockHook`: pass the instance as ``each_block``).

    Why: a paragraph fills its 128-value sketch, so :func:`sketched_band_keys` had to tokenize and
    hash it a second time for its full set; a one-permutation bin is a minimum, so the grams of the
    sketch pass (in blocks, not deduplicated) give the same keys as the full set, for no second pass."""

    def __init__(self, texts: int) -> None:
        self._mins = np.full((texts, BANDS * ROWS), EMPTY, dtype=np.uint64)

    def __call__(self, values: np.ndarray, owner: np.ndarray) -> None:
        oph_bins(self._mins, values.view(np.uint32).astype(np.uint64), owner)

    def keys(self) -> list[np.ndarray | None]:
        """The keys of each text (None: no grams), as :func:`band_keys_many` of the full sets."""
        live = np.flatnonzero((self._mins != EMPTY).any(axis=1))
        out: list[np.ndarray | None] = [None] * len(self._mins)
        if len(live):
            keys = _fold(densify(self._mins[live]))
            for row, i in enumerate(live.tolist()):
                out[i] = keys[row]
        return out


def block_band_keys(texts: int, band_scheme: str | None, sketch_scheme: str) -> BlockBandKeys | None:
    """A :class:`BlockBandKeys` for ``texts`` texts where the schemes allow one (band keys of v2 over
    character grams); None otherwise (then :func:`sketched_band_keys`)."""
    ok = band_scheme is not None and key_scheme(band_scheme) == OPH_SCHEME and sketch_scheme == _sketch.SCHEME
    return BlockBandKeys(texts) if ok else None


def text_band_keys(
    texts: Sequence[str], scheme: str = _sketch.SCHEME, band_scheme: str = BAND_SCHEME
) -> list[np.ndarray | None]:
    """The ``band_scheme`` keys of each text's full shingle set under the verified ``scheme`` (None: no words)."""
    return band_keys_many(list(_sketch.shingle_sets(texts, scheme)), band_scheme)


def sketched_band_keys(
    texts: Sequence[str], sketches: Sequence[np.ndarray | Sequence[int] | None], size: int,
    scheme: str = _sketch.SCHEME, band_scheme: str = BAND_SCHEME,
) -> list[np.ndarray | None]:
    """The band keys of texts whose bottom-``size`` sketches are at hand (a load computed them).

    Why: a sketch with fewer than ``size`` values *is* the text's full shingle set (all the short
    texts, the common case), so its keys cost no second tokenization; only a full sketch (the set
    may be larger) sends its text through :func:`text_band_keys`; under v2 over character grams
    only through hashing its grams (no deduplication: a bin is a minimum, :class:`BlockBandKeys`)."""
    sets: list[np.ndarray | Sequence[int] | None] = list(sketches)
    full = {i for i, s in enumerate(sets) if s is not None and len(s) >= size}
    hook = block_band_keys(len(texts), band_scheme, scheme)
    if hook is not None:
        for i, s in enumerate(sets):
            if s is not None and len(s) and i not in full:
                hook(np.asarray(s, dtype=np.int32), np.full(len(s), i, dtype=np.int64))
        for i in full:  # a long text in blocks: bounded memory
            t = texts[i]
            if len(t) <= _chars.BLOCK_CHARS:
                grams = _chars.char_shingle_values(t)
                hook(grams, np.full(len(grams), i, dtype=np.int64))
            else:
                _chars.text_sketch(t, 0, hook, i)
        return hook.keys()
    for i, whole in zip(sorted(full), _sketch.shingle_sets([texts[i] for i in sorted(full)], scheme)):
        sets[i] = whole
    return band_keys_many(sets, band_scheme)


def band_keys_text(keys: np.ndarray | None) -> str | None:
    """Band keys as PostgreSQL's int4[] text (``{k1,...}``); None for no keys."""
    if keys is None:
        return None
    return "{" + ",".join(map(str, keys.tolist())) + "}"
