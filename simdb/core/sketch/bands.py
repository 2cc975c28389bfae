"""LSH band keys of a shingle set: the candidate stage of banded verified collections.

Pure (no database). A verified collection's rule is Jaccard of shingle sets >= 0.8. A row is a
candidate of a query when it shares two of :data:`BANDS` keys with it: a fixed number of index
probes whatever the collection's size, and a miss probability that depends on the pair's Jaccard
only (the S-curve), not on how its SimHash bits fell (Hamming candidates within K = 11 grow with
the collection, about N/65,536 rows a probe, and miss rule pairs 12-15 bits apart).

How a key is made (:data:`BAND_SCHEME`, ``oph-b14r5-m2-v3``). The input is the text's **full set**
of shingle hash values (int32: already well mixed hashes). ``b * r`` MinHash values come from
one-permutation hashing with optimal densification (below, :func:`oph_values`); for two sets a
value agrees with probability their Jaccard ``s``. The ``r`` values of band ``i`` together with
``i`` itself are folded by odd multipliers and murmur3's 64-bit finaliser into one int4 key, so a
band matches with probability ``s^r`` (fixed seeds: the same scheme name always gives the same keys).

Why b = 14, r = 5 (:func:`s_curve`; the benchmark ``benchmarks/bench_bands.py`` prints it): r = 4
(b = 11) would store 3 keys fewer but let through 16x more unrelated pairs; r = 6 needs b = 18,
4 more keys per row in the table and in the band indexes.

Why a candidate shares **two** keys (:func:`min_shared`): unrelated English paragraphs are not at
Jaccard 0.05 but at 0.06-0.11 of character 4-grams (" the", "tion", ...), and ``s^5`` lives in that
tail: on 8,000 real paragraphs (``benchmarks/bench_dedup.py --data sentences``) a pair of different
texts shared one key with probability 2.4e-5, so a query at 1M rows drew 24 false candidates, each
fetched with its 1 kB sketch and verified. Two shared keys of the same 14 cut those 60-fold, for a
candidate probability at Jaccard 0.8 of 0.970 (0.9967 at 0.85, 0.99995 at 0.9): measured on the
one-edit copies within the rule (``bench_short_texts.py --candidates``), 0.998 of the English
12-30-word ones and all others reach it.

Why int4 keys: 14 per row in ``simdb_fingerprints.bands`` (int4[], 80 bytes) and one btree per band;
a random collision of two different bands' keys has probability 2^-32 per pair of keys, i.e.
at 10M rows about 0.03 extra candidates a query: nothing beside the S-curve's own false
candidates, which the verification stage drops anyway.

Keys are vectorised over a batch of sets (:func:`band_keys_many`), so a load of short texts pays
a few numpy calls a chunk, not a few per text.

**One-permutation hashing with optimal densification** (:func:`oph_values`). Why: ``b * r = 70``
independent hash functions take 70 hash products per shingle (about 130 us a paragraph, the largest
part of what a banded load paid beyond a plain one). Here each shingle is hashed **once** (Li, Owen
& Zhang 2012, "One permutation hashing"):

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
from simdb.core.sketch.chars import fmix64_high32
from simdb.errors import InvalidArgumentError

__all__ = [
    "BANDS",
    "PROBES",
    "BlockBandKeys",
    "block_band_keys",
    "BAND_SCHEME",
    "RELIABLE_REACH",
    "ROWS",
    "SCHEMES",
    "band_keys",
    "band_keys_many",
    "band_keys_text",
    "check_scheme",
    "key_scheme",
    "min_shared",
    "oph_values",
    "reliable_threshold",
    "s_curve",
    "text_band_keys",
]

#: bands per row (keys per row) and MinHash values per band
BANDS = 14
ROWS = 5
#: the name stored in a banded collection's config: the same name always means the same keys and rule
BAND_SCHEME = "oph-b14r5-m2-v3"
#: every band scheme this simdb computes (a collection of another one is refused: simdb.index.rules.open_rule)
SCHEMES = (BAND_SCHEME,)
#: how many keys a candidate shares with the query (the module doc says why two)
_MIN_SHARED = 2

_SEED = 0x5EED_BA4D
_rng = np.random.Generator(np.random.PCG64(_SEED))
# the first two draws were the multiply-shift functions of the retired minhash-b14r5-v1 scheme: still
# drawn, so that the fold's multipliers (the third draw) and with them every stored key stay the same
_rng.integers(1, 1 << 63, size=BANDS * ROWS, dtype=np.uint64)
_rng.integers(0, 1 << 63, size=BANDS * ROWS, dtype=np.uint64)
_FOLD = _rng.integers(1, 1 << 63, size=ROWS + 1, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
del _rng
_S32 = np.uint64(32)
_BAND_NO = np.arange(BANDS, dtype=np.uint64)


def s_curve(s: float, bands: int = BANDS, rows: int = ROWS, shared: int = 1) -> float:
    """The probability that two sets of Jaccard ``s`` share at least ``shared`` of their ``bands`` keys:
    a band matches with probability p = s^r, so 1 - sum over i < shared of C(b, i) p^i (1-p)^(b-i)."""
    if not 0.0 <= s <= 1.0:
        raise InvalidArgumentError(f"s must be a Jaccard similarity in [0, 1], got {s!r}")
    p = s**rows
    return 1.0 - sum(comb(bands, i) * p**i * (1.0 - p) ** (bands - i) for i in range(shared))


#: the share of the pairs at exactly a threshold that its candidate stage must reach for that threshold to
#: be answered from the band keys (">= 95 % found"); below, see :func:`reliable_threshold`
RELIABLE_REACH = 0.95


def reliable_threshold(scheme: str) -> float:
    """The lowest ``min_jaccard`` (in hundredths) whose pairs share enough band keys to be candidates
    with probability >= :data:`RELIABLE_REACH` under band ``scheme``: 0.79 for ``oph-b14r5-m2-v3``.

    Why it matters: the keys are fixed when a row is stored, and the S-curve falls fast below the rule
    they were made for (two keys of 14: 0.88 of the pairs at 0.75, 0.71 at 0.7, 0.30 at 0.6, 0.07 at 0.5), so a
    looser threshold answered from the keys alone would silently miss most of its pairs. The facade
    compares every row instead (``near``) or refuses (``pairs``, ``add_if_unique``)."""
    shared = min_shared(scheme)
    return next(t / 100 for t in range(1, 101) if s_curve(t / 100, shared=shared) >= RELIABLE_REACH)


def min_shared(scheme: str) -> int:
    """How many band keys a row shares with a query to be its candidate, under band ``scheme``."""
    check_scheme(scheme)
    return _MIN_SHARED


def key_scheme(scheme: str) -> str:
    """The scheme whose keys ``scheme`` stores: itself, now that one band scheme is left (two schemes of
    one key scheme would convert into each other by their config alone)."""
    return check_scheme(scheme)


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


def _fold(mins: np.ndarray) -> np.ndarray:
    """(n, b*r) MinHash values -> (n, b) int32 keys: each band's r values and its number, mixed."""
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
    owner = np.repeat(np.arange(len(live), dtype=np.int64), sizes[live])
    keys = _fold(oph_values(x, owner, len(live), BANDS * ROWS))
    for row, i in enumerate(live.tolist()):
        out[i] = keys[row]
    return out


# The MinHash values: one-permutation hashing with optimal densification (the module doc says why)

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
    """The keys of a batch of texts, made from the gram blocks their sketches are computed from (a
    :data:`simdb.core.sketch.chars.BlockHook`: pass the instance as ``each_block``).

    Why: a paragraph fills its sketch, so keys made from the full set would tokenize and hash it a
    second time; a one-permutation bin is a minimum, so the grams of the sketch pass (in blocks, not
    deduplicated) give the same keys as the full set, for no second pass."""

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
    """A :class:`BlockBandKeys` for ``texts`` texts of a collection banded by ``band_scheme`` (None: not
    banded, no keys) whose sketches are of ``sketch_scheme``: band keys are made of character grams."""
    if band_scheme is None:
        return None
    check_scheme(band_scheme)
    if sketch_scheme != _sketch.SCHEME:
        raise InvalidArgumentError(f"band keys are made of the {_sketch.SCHEME} grams, not {sketch_scheme!r}")
    return BlockBandKeys(texts)


def text_band_keys(
    texts: Sequence[str], scheme: str = _sketch.SCHEME, band_scheme: str = BAND_SCHEME
) -> list[np.ndarray | None]:
    """The ``band_scheme`` keys of each text's full shingle set under the verified ``scheme`` (None: no words)."""
    return band_keys_many(list(_sketch.shingle_sets(texts, scheme)), band_scheme)


def band_keys_text(keys: np.ndarray | None) -> str | None:
    """Band keys as PostgreSQL's int4[] text (``{k1,...}``); None for no keys."""
    if keys is None:
        return None
    return "{" + ",".join(map(str, keys.tolist())) + "}"
