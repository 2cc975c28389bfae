"""Near-duplicates *among* a list of texts by a banded collection's rule, without the store.

Why: ``simdb dedup`` decides a batch in two steps: the batch against the rows already stored
(``near_many``), then the survivors against each other. The second step used to store every
survivor, ask the store about all of them again, and delete the ones not kept: a second round of
14 band probes per record, every survivor fetched back as its own candidate (a kilobyte of sketch
each), and one delete per dropped record (issue 26, item 3). The survivors' features are already
in memory, so their candidates can be found there.

The answer is the one the store would give if the texts were stored under ``keys`` (with
``metas``), because it applies :data:`simdb.store.candidates.BAND_NEAR_SQL`'s candidate stage and
the same verification function (:func:`simdb.results.verified_matches_many`):

* a text with band keys is a candidate of another with band keys when they share the keys of
  ``shared`` bands (same band, same key; two in scheme v3);
* a text without a sketch (but with a fingerprint) is a candidate of every text whose fingerprint
  is within the Hamming radius of sketch-less rows;
* a featureless text (no fingerprint) is nobody's candidate and has none.

Cost: one sort per band of the batch's keys, then the pairs inside runs of equal keys (the true
near-duplicates and the band collisions of the batch), verified in one vectorised call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from simdb.core.bits import hamming, to_signed
from simdb.results import Match, verified_matches_many

__all__ = ["band_pairs", "near_within"]


def band_pairs(keys: Sequence[Any], shared: int = 1) -> set[tuple[int, int]]:
    """(a, b) with a < b for every two positions whose band keys (arrays of one length, or None:
    no keys) are equal in at least ``shared`` bands."""
    live = [i for i, k in enumerate(keys) if k is not None]
    out: Counter[tuple[int, int]] = Counter()
    if len(live) < 2:
        return set()
    matrix = np.stack([np.asarray(keys[i], dtype=np.int64) for i in live])
    pos = np.asarray(live, dtype=np.int64)
    for band in range(matrix.shape[1]):
        col = matrix[:, band]
        order = np.argsort(col, kind="stable")
        sorted_col = col[order]
        starts = np.flatnonzero(np.r_[True, sorted_col[1:] != sorted_col[:-1]])
        ends = np.r_[starts[1:], len(sorted_col)]
        for s, e in zip(starts[ends - starts > 1].tolist(), ends[ends - starts > 1].tolist()):
            members = sorted(pos[order[s:e]].tolist())
            out.update((members[x], members[y]) for x in range(len(members)) for y in range(x + 1, len(members)))
    return {pair for pair, times in out.items() if times >= shared}


def _sketchless_pairs(fps: Sequence[int | None], sketches: Sequence[Any], hamming_k: int) -> set[tuple[int, int]]:
    """(stored, query) for every text without a sketch and every other text within ``hamming_k``."""
    out: set[tuple[int, int]] = set()
    bare = [i for i, (f, s) in enumerate(zip(fps, sketches)) if f is not None and s is None]
    if not bare:
        return out
    for a in bare:
        for b, f in enumerate(fps):
            if b != a and f is not None and hamming(f, fps[a]) <= hamming_k:  # type: ignore[arg-type]
                out.add((a, b))
    return out


def near_within(
    features: Sequence[tuple[int | None, Any, Any]], keys: Sequence[str], metas: Sequence[Any], verifier: Any,
    min_jaccard: float, hamming_k: int, shared: int = 1,
) -> list[list[Match]]:
    """For each text (its features: unsigned fingerprint, sketch, band keys), the other texts that
    are its near-duplicates by a banded collection's rule, as the Matches ``near`` would return if
    they were stored under ``keys`` with ``metas``, in ``near``'s order."""
    fps = [f[0] for f in features]
    sketches = [f[1] for f in features]
    directed: set[tuple[int, int]] = set()  # (stored, query)
    for a, b in band_pairs([f[2] if f[0] is not None else None for f in features], shared):
        directed.update(((a, b), (b, a)))
    directed |= _sketchless_pairs(fps, sketches, hamming_k)
    rows = []
    for a, b in sorted(directed, key=lambda p: (p[1], p[0])):
        fa, fb = fps[a], fps[b]
        assert fa is not None and fb is not None
        rows.append((b, keys[a], to_signed(fa), hamming(fa, fb), metas[a], sketches[a]))
    found = verified_matches_many(rows, sketches, verifier, min_jaccard, hamming_k)
    return [found.get(i, []) for i in range(len(features))]
