"""Exact Jaccard answers (issue 8): stage-1 k from the threshold, stage-2 exact check.

Two stages:

1. **Candidates** by SimHash within Hamming distance ``k`` on a *candidate
   fingerprint* (words, term-frequency weights, stopwords KEPT), found exactly by
   the block indexes (k up to 11).
2. **Exact check** of every candidate on the stored shingle sets
   (:mod:`simdb.shingles`): ``icount(a & b)::float8 / icount(a | b)`` with the
   ``intarray`` extension inside PostgreSQL, or :func:`jaccard` in Python. Only
   pairs whose true Jaccard passes are returned, with the value.

Stage 2 makes precision exactly 1; recall is stage 1's candidate recall, so ``k``
is chosen from the threshold by the measured table :data:`THRESHOLD_K`
(``benchmarks/bench_quality.py``, real English and Chinese text).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "jaccard",
    "k_for_threshold",
    "THRESHOLD_K",
    "MIN_THRESHOLD",
    "candidate_fingerprinter",
    "CANDIDATE_OPTIONS",
    "SQL_JACCARD",
]

# threshold -> k for SimHash candidates: the smallest k whose candidate recall was
# >= 0.95 for the pairs at or above the threshold on both the English and the
# Chinese corpus of benchmarks/bench_quality.py (k = 11 where none reaches it:
# at 0.8 that is recall .994 English / .970 Chinese; at 0.7, .978 / .948).
# A threshold between rows uses the row below it. See the README table.
THRESHOLD_K: dict[float, int] = {
    0.95: 7,
    0.9: 9,
    0.8: 11,
    0.7: 11,
}
MIN_THRESHOLD = min(THRESHOLD_K)

# Options of the candidate Fingerprinter: words (jieba for CJK runs), TF weights,
# stopwords kept. Everything else is the default pipeline.
CANDIDATE_OPTIONS: dict = {"stopwords": False, "weighting": "tf"}

SQL_JACCARD = "icount({a} & {b})::float8 / NULLIF(icount({a} | {b}), 0)"


def jaccard(a: Iterable[int] | None, b: Iterable[int] | None) -> float | None:
    """Exact Jaccard similarity of two shingle sets; None when both are empty/None."""
    sa = set(a or ())
    sb = set(b or ())
    union = len(sa | sb)
    if union == 0:
        return None
    return len(sa & sb) / union


def _check_threshold(min_jaccard) -> float:
    if isinstance(min_jaccard, bool) or not isinstance(min_jaccard, (int, float)):
        raise TypeError(f"min_jaccard must be a number, not {type(min_jaccard).__name__}")
    t = float(min_jaccard)
    if not (0.0 < t <= 1.0):
        raise ValueError(f"min_jaccard must be in (0, 1], got {min_jaccard!r}")
    return t


def k_for_threshold(min_jaccard: float) -> int:
    """Stage-1 Hamming radius for a Jaccard threshold, from :data:`THRESHOLD_K`.

    Below :data:`MIN_THRESHOLD` SimHash candidates cannot reach the recall the
    table promises even at k = 11, so that is a ValueError (use MinHash banding,
    :mod:`simdb.minhash`, or a sequential scan with ``simdb_jaccard`` instead).
    """
    t = _check_threshold(min_jaccard)
    if t < MIN_THRESHOLD:
        raise ValueError(
            f"min_jaccard={min_jaccard!r} is below {MIN_THRESHOLD}: SimHash candidates (k <= 11) "
            "miss too many pairs there; use a sequential scan with simdb_jaccard() in SQL"
        )
    return THRESHOLD_K[max(x for x in THRESHOLD_K if x <= t)]


def candidate_fingerprinter():
    """The Fingerprinter whose fingerprints a Jaccard collection stores in ``fp``."""
    from simdb.fingerprint import Fingerprinter

    return Fingerprinter(**CANDIDATE_OPTIONS)
