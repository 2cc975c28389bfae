"""One-permutation hashing with optimal densification: the MinHash values of band scheme ``oph-b14r5-v2``.

Pure (no database), numpy-vectorised. :mod:`simdb.core.sketch.bands` folds ``bins`` values per set into band
keys; this module makes those values. Why it exists: scheme ``minhash-b14r5-v1`` took ``b * r = 70``
hash products per shingle (one per MinHash function), so band keys cost about 130 us per
paragraph, the largest part of what a banded load paid beyond a plain one. Here each shingle is
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

import numpy as np

__all__ = ["EMPTY", "PROBES", "densify", "oph_bins", "oph_values"]

#: pseudo-random donor tries per empty bin before the fallback (the next non-empty bin, in order).
#: A set of one value leaves 69 of 70 bins empty; 1,024 tries miss its one bin with probability 4e-7.
PROBES = 1024

_SEED = 0x0F_0B_2017
_MUL = np.uint64(0x9E3779B97F4A7C15)
_ADD = np.uint64(0x632BE59BD9B4E019)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
#: the value of a bin no value fell in (before densification)
EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_EMPTY = EMPTY
_probe_tables: dict[int, np.ndarray] = {}


def _probe_table(bins: int) -> np.ndarray:
    """(bins, PROBES) donor bins: row ``i`` is bin ``i``'s fixed sequence of tries (never ``i``)."""
    table = _probe_tables.get(bins)
    if table is None:
        rng = np.random.Generator(np.random.PCG64(_SEED + bins))
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
    mins = np.full((sets, bins), _EMPTY, dtype=np.uint64)
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
    empty = mins == _EMPTY
    rows, cols = np.nonzero(empty)
    if not len(rows):
        return mins
    out = mins.copy()
    table = _probe_table(mins.shape[1])
    if len(rows) <= _FEW_EMPTY:
        return _densify_few(mins, empty, out, table, rows, cols)
    for t in range(PROBES):  # each try fills an empty bin with the share of bins that are full (~3/4 for a paragraph)
        donor = mins[rows, table[cols, t]]
        got = donor != _EMPTY
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
