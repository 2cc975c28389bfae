"""The values simdb's answers are made of, shared by every layer (store, public API, apps).

They live apart from the code that produces them so that the store can build them without
importing the public API (``simdb.index``), and the public API can hand them on without
importing the store's internals: one definition each, importable from everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from simdb.core.bits import BITS, to_unsigned
from simdb.core.sketch.compare import candidate_jaccards, candidate_jaccards_many

__all__ = ["AddResult", "Cluster", "DedupStats", "Entry", "Removal", "Match", "Pair", "VerifiedPair", "match", "verified_matches", "verified_matches_many",
           "verified_order"]


@dataclass(frozen=True, slots=True)
class Match:
    """One near-duplicate: its key, unsigned fingerprint, Hamming distance, Hamming similarity,
    Jaccard and metadata.

    ``jaccard`` is the measure of a verified collection's rule (the default: Jaccard of character
    4-grams >= 0.8): the Jaccard of the two texts' stored sketches (256 values for new collections),
    exact when the two texts' gram sets together have at most that many values (comments and short
    paragraphs, up to about 45 words) and the sketch's estimate for longer texts. Present on every
    answer of a verified collection; None in a Hamming-only collection, and for a row without a
    sketch (its distance decided it).

    ``similarity`` is the *Hamming* similarity of the fingerprints, ``1 - distance/64``: not the
    rule's measure (that is ``jaccard``), and on another scale (a pair 3 bits apart has similarity
    0.953 whatever its Jaccard). Its name is kept for compatibility.
    """

    key: str
    fp: int
    distance: int
    similarity: float
    jaccard: float | None = None
    meta: Any = None


def match(key: str, fp: int, distance: int, meta: Any = None, jaccard: float | None = None) -> Match:
    """A :class:`Match` from a stored row: ``fp`` as the store keeps it (a signed ``bigint``)."""
    d = int(distance)
    return Match(key, to_unsigned(fp), d, 1.0 - d / BITS, jaccard, meta)


def _kept(rows: Iterable[tuple], jaccards: Any, min_jaccard: float, hamming_k: int) -> list[Match]:
    """The rows (key, fp signed, distance, meta, ...) the verification stage keeps: by Jaccard (NaN:
    nothing to verify with, the distance decides), sorted by Jaccard (highest first; rows judged by
    distance last), distance, key."""
    out = []
    for (key, f, d, meta, *_), j in zip(rows, jaccards.tolist()):
        if j != j:  # NaN: no sketch on one side
            if d <= hamming_k:
                out.append(match(key, f, d, meta, None))
        elif j >= min_jaccard:
            out.append(match(key, f, d, meta, j))
    out.sort(key=verified_order)
    return out


def verified_order(m: Match) -> tuple:
    """The order of a verified answer: by Jaccard (highest first; rows judged by distance last),
    distance, key. A function of its own so that an answer verified in pieces (the async index
    verifies candidates as they arrive) is put in the same order."""
    return (m.jaccard is None, -(m.jaccard or 0.0), m.distance, m.key)


def verified_matches(
    rows: Iterable[tuple], query_sketch: Any, verifier: Any, min_jaccard: float, hamming_k: int, exclude: str | None = None,
) -> list[Match]:
    """The verification stage over one query's candidate rows (key, fp signed, distance, meta,
    sketch): the Jaccards (:func:`simdb.core.sketch.compare.candidate_jaccards`, pure arithmetic),
    then the kept rows as Matches. ``exclude``: a key never kept (``near_key``'s own row; the row
    ``add_if_unique`` would replace). Here, beside :class:`Match`: every rule's answers and the
    store's atomic ``add_if_unique`` are made of it, and the store may not import the rules."""
    rows = [r for r in rows if r[0] != exclude] if exclude is not None else list(rows)
    jac = candidate_jaccards([r[4] for r in rows], query_sketch, verifier.size, min_jaccard)
    return _kept(rows, jac, min_jaccard, hamming_k)


def verified_matches_many(
    rows: list[tuple], query_sketches: list, verifier: Any, min_jaccard: float, hamming_k: int,
) -> dict[int, list[Match]]:
    """:func:`verified_matches` of many queries at once: ``rows`` are (query number, key, fp signed,
    distance, meta, sketch), ``query_sketches`` the queries' sketches by number; the kept Matches per
    query number (:func:`simdb.core.sketch.compare.candidate_jaccards_many`: one call a batch)."""
    jac = candidate_jaccards_many([r[0] for r in rows], [r[5] for r in rows], query_sketches, verifier.size,
                                  min_jaccard)
    by_query: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_query.setdefault(r[0], []).append(i)
    out: dict[int, list[Match]] = {}
    for qi, members in by_query.items():
        found = _kept([rows[i][1:] for i in members], jac[members], min_jaccard, hamming_k)
        if found:
            out[qi] = found
    return out


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored row as returned by :meth:`SimhashIndex.get` (``fp`` None: the text had no features)."""

    key: str
    fp: int | None
    meta: Any
    created_at: datetime


@dataclass(frozen=True)
class AddResult:
    """What :func:`add_if_unique` did: ``inserted`` and the near-duplicates that stopped it.

    ``matches`` is empty when the text was inserted; otherwise the stored near-duplicates that
    stopped it, as :class:`Match` values: in a verified collection those passing the rule, sorted by
    Jaccard (highest first; rows without a sketch, judged by distance, last), then distance, then
    key; in a Hamming collection those within k, sorted by distance, then key. Truthy iff inserted.
    """

    inserted: bool
    matches: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.inserted


class Pair(NamedTuple):
    """A near-duplicate pair: ``key_a`` was added before ``key_b`` (smaller row id)."""

    key_a: str
    key_b: str
    distance: int


class VerifiedPair(NamedTuple):
    """A pair of a verified collection: Hamming ``distance`` and sketch ``jaccard`` (None when a
    row has no sketch and the distance decided); ``key_a`` was added before ``key_b``."""

    key_a: str
    key_b: str
    distance: int
    jaccard: float | None


@dataclass(frozen=True)
class Cluster:
    """A connected component of the near-duplicate graph.

    ``representative`` is the earliest added member (smallest row id);
    ``keys`` lists all members in the order they were added (representative first).
    """

    representative: str
    keys: list[str]

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def size(self) -> int:
        return len(self.keys)


@dataclass(frozen=True, slots=True)
class Removal:
    """One removed record: its key, the kept record's key it is a near-duplicate of, and how near.

    Incrementally, the kept record may be one stored before this run. ``where`` is the
    removed record's input position (``FILE:LINE``). ``jaccard`` is the rule's measure (None where
    the answer was by Hamming distance); ``similarity`` is the Hamming similarity ``1 - distance/64``,
    as :class:`simdb.results.Match`'s.

    The removal log (:meth:`to_dict`) names them as every simdb output does: ``key`` is written
    ``removed``, ``kept_key`` ``kept``; ``jaccard``, ``distance`` and ``where`` keep their names, and
    ``similarity`` is left out (it follows from ``distance``)."""

    key: str
    kept_key: str
    distance: int
    similarity: float
    jaccard: float | None = None
    where: str | None = None

    def to_dict(self) -> dict:
        """The removal log's line: how near under the two names every simdb output uses, ``jaccard``
        (the rule's similarity; None where the answer was by Hamming distance) and ``distance``."""
        d = {"removed": self.key, "kept": self.kept_key,
             "jaccard": None if self.jaccard is None else round(float(self.jaccard), 4), "distance": self.distance}
        if self.where is not None:
            d["where"] = self.where
        return d


@dataclass
class DedupStats:
    """Counters of a run (filled while it streams)."""

    read: int = 0
    kept: int = 0
    removed: int = 0
    #: incremental: kept records whose key was already stored (their row was replaced)
    replaced: int = 0
    #: incremental: removed records whose match was a stored row with their own key -- the sign of an
    #: input deduplicated into the collection before (each record is then a near-duplicate of itself)
    same_key: int = 0
    #: incremental run stopped before its end: the keys it had stored, taken out again (see dedup_undo)
    undone: int | None = None
    #: incremental: keys an earlier run into the collection stored before it was killed outright
    #: (SIGKILL), taken out before this run began (simdb.dataset.undo.undo_abandoned)
    recovered: int = 0
    #: incremental, undoing: replaced rows that could not be put back (the collection's rule changed during
    #: the run and they had no text to re-encode): the run's own row stays for each of these keys
    unrestored: int = 0
    #: incremental: batches decided again because the collection's rule changed while they were decided
    redone: int = 0
