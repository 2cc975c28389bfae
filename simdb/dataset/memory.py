"""The greedy rule of a dedup without a collection, decided in memory: :class:`MemoryEngine`.

Why: a dedup that keeps nothing afterwards (no ``--collection``) used a temporary collection as
scratch space: every kept record was written to the server, its band keys indexed, and every
batch's candidates fetched back, a kilobyte of sketch each. The records' features are computed
here anyway, so the kept records' keys and sketches stay in this process and the database is
never opened: the same decisions for a fraction of the time.

The same decisions because the rule is a new collection's, to the letter: its features
(:meth:`simdb.index.rules.BandedRule.texts_features`, or the fingerprints alone under the Hamming
rule), its arguments (``verify_params`` and ``check_reach``; ``check_k``), its candidates (two texts
with sketches share the keys of ``shared`` bands; a kept text without a sketch is a candidate of
every text within the Hamming ``k``; under the Hamming rule, every fingerprint within ``k``, found
by its blocks as the store finds them; a featureless text is nobody's candidate) and its judgement
(:func:`simdb.results.verified_matches_many`, or the distance, which also order the matches). A
record is removed when it matches a record kept before it (in an earlier batch, or earlier in its
own); the log names the first match in that order, ties to the earlier input position, as the
temporary collection's keys (zero-padded positions) did. A property test compares the two engines
record for record.

Memory: per kept record its sketch (256 int32: 1 KiB), band keys (14 int64) and fingerprint,
about 1.2 KiB (1.2 GB for a million kept records); under the Hamming rule about 200 bytes. Larger
datasets: ``dedup_records(..., in_memory=False)`` decides in a temporary collection instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from simdb.core.bits import BLOCKS, MASKS, block_values, even_radii, to_signed
from simdb.core.validate import check_k
from simdb.dataset.records import Record
from simdb.index.rules import HammingRule
from simdb.results import DedupStats, Match, Removal, match, verified_matches_many, verified_order

__all__ = ["BandRuns", "MemoryEngine"]


class BandRuns:
    """Keys of the kept records in a few columns (band keys, or fingerprint blocks), looked up by
    equality in each column.

    Sorted runs (one ``argsort`` per column when a run is made), merged when a run is no larger than
    the one after it, so a lookup searches O(log n) runs with ``np.searchsorted`` and an insert costs
    O(log n) amortised sorts: no Python object per key (a dict of 14 keys a record would take a
    kilobyte more per record than the keys themselves)."""

    def __init__(self) -> None:
        #: (keys sorted per column: (columns, n) int64, the record ids in that order: (columns, n) int64)
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add records (``keys``: (n, columns) int64, ``ids``: their ids)."""
        if not len(ids):
            return
        self.runs.append(self._sorted(keys.T, np.broadcast_to(ids, keys.T.shape)))
        while len(self.runs) > 1 and self.runs[-2][0].shape[1] <= self.runs[-1][0].shape[1]:
            (k1, i1), (k2, i2) = self.runs.pop(), self.runs.pop()
            self.runs.append(self._sorted(np.concatenate([k2, k1], axis=1), np.concatenate([i2, i1], axis=1)))

    @staticmethod
    def _sorted(keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(keys, axis=1, kind="stable")
        return np.take_along_axis(keys, order, axis=1), np.take_along_axis(ids, order, axis=1)

    def hits(self, column: int, values: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(owner, record id) of every stored record whose key in ``column`` is one of ``values``
        (each value asked for by its ``owners`` entry); a pair may repeat."""
        found_owner, found_id = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        if not self.runs:
            return found_owner[0], found_id[0]
        order = np.argsort(values)  # searched in order: fewer cache misses
        values, owners = values[order], owners[order]
        for keys, ids in self.runs:
            lo = np.searchsorted(keys[column], values, "left")
            counts = np.searchsorted(keys[column], values, "right") - lo
            total = int(counts.sum())
            if total:
                starts = np.repeat(lo - np.cumsum(counts) + counts, counts)  # each hit's offset in its run
                found_owner.append(np.repeat(owners, counts))
                found_id.append(ids[column][starts + np.arange(total)])
        return np.concatenate(found_owner), np.concatenate(found_id)

    def shared(self, queries: np.ndarray, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        """(query row, record id) of every stored record whose keys equal the query's in ``at_least``
        columns (``queries``: (m, columns) int64), each pair once, sorted by query then id."""
        owners = np.arange(len(queries), dtype=np.int64)
        pairs = [self.hits(c, queries[:, c], owners) for c in range(queries.shape[1])]
        return _pairs(np.concatenate([q for q, _ in pairs]), np.concatenate([r for _, r in pairs]), at_least)


def _pairs(owner: np.ndarray, rid: np.ndarray, at_least: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (owner, id) pairs found at least ``at_least`` times, sorted."""
    if not len(owner):
        return owner, rid
    span = int(rid.max()) + 1
    codes, times = np.unique(owner * span + rid, return_counts=True)
    codes = codes[times >= at_least]
    return codes // span, codes % span


def _blocks(fps: list[int]) -> np.ndarray:
    """The fingerprints' four 16-bit blocks, (n, 4) int64: the columns of an exact Hamming search."""
    return np.array([block_values(fp) for fp in fps], dtype=np.int64).reshape(-1, BLOCKS)


class MemoryEngine:
    """The greedy rule over batches of (position, record) in priority order, in memory (see the module
    doc): the :class:`simdb.dataset.dedup.Batcher` of a dedup without a collection, and the in-batch
    decisions (:meth:`decide`) of one into a collection (:class:`simdb.dataset.greedy.BatchEngine`)."""

    def __init__(self, rule: HammingRule, fingerprinter: Any, options: Mapping[str, Any],
                 on_removed: Callable[[Removal], Any] | None, stats: DedupStats):
        self.rule, self.fingerprinter = rule, fingerprinter
        self.verifier = rule.verifier
        if self.verifier is None:
            self.hamming_k, self.min_jaccard = check_k(options.get("k")), None
        else:
            _, self.hamming_k, self.min_jaccard = rule.verify_params(options.get("k"), options.get("min_jaccard"),
                                                                     "a dedup")
            rule.check_reach(self.min_jaccard, "a dedup")
        #: the block radii of the Hamming rule's candidates (the fingerprints within k); None: a verified
        #: rule's, by band keys
        self.radii = None if rule.banded else even_radii(self.hamming_k)
        self.on_removed, self.stats = on_removed, stats
        #: what the keys of the records decided here begin with: nothing, or (a dedup against a collection,
        #: :class:`simdb.dataset.greedy.BatchEngine`) a character after every stored key's first, so that
        #: these records sort after the collection's on a tie, as if they came after it
        self.key_prefix = ""
        #: the kept records' band keys (a banded rule) or fingerprint blocks
        self.columns = BandRuns()
        #: per kept record with a fingerprint (its id): unsigned fingerprint, sketch, position, input key
        self.fps: list[int] = []
        self.sketches: list[Any] = []
        self.positions: list[int] = []
        self.keys: list[str] = []
        #: ids of the kept records without a sketch in a banded rule (judged by distance: few, compared
        #: one by one)
        self.bare: list[int] = []

    def queries(self, items: list[tuple[int, Record]]) -> list:
        """The batch's features (fingerprint, sketch, band keys), by the rule: in the reading thread."""
        return self.rule.texts_features(self.fingerprinter, [rec.text for _, rec in items])

    def batch(self, items: list[tuple[int, Record]], queries: list | None = None) -> list[bool]:
        """Decide a batch (in priority order): kept flags, in the batch's order; the kept are remembered
        (their store keys: zero-padded positions, as a temporary collection's; their input keys ride as
        the matches' meta, which the log names)."""
        features = queries if queries is not None else self.queries(items)
        self.stats.read += len(items)
        kept, named = self.decide(items, features, self.store_keys(items), [rec.key for _, rec in items])
        for i, best in named.items():
            self._removal(items[i][1], best)
        self.remember(items, features, kept)
        return kept

    def decide(self, items: list, features: list, keys: list[str], metas: list,
               stored: list[list[Match]] | None = None) -> tuple[list[bool], dict[int, Match]]:
        """The kept flags of a batch in priority order, and the match each removed record is named by.

        Its candidates (:meth:`_candidates`): the kept records remembered here, and the batch's earlier
        records as if stored under ``keys`` (with ``metas``); every pair judged at once. ``stored``: each
        record's answers from a collection (all kept records). Then each record in turn is removed if a
        match is a record kept before it, named by the first in the rule's order
        (:func:`simdb.results.verified_order`), else kept."""
        live = [i for i, f in enumerate(features) if f[0] is not None]
        rows = self._candidates(features, live, keys, metas)
        if self.min_jaccard is None:
            found = self._by_distance(rows)
        else:
            found = verified_matches_many(rows, [f[1] for f in features], self.verifier, self.min_jaccard,
                                          self.hamming_k)
        at = {keys[i]: i for i in live}  # a match's store key -> its batch position
        kept = [False] * len(items)
        named: dict[int, Match] = {}
        for i in range(len(items)):
            heads = list(stored[i][:1]) if stored else []  # a collection's answers: kept records all
            first = next((m for m in found.get(i, ()) if m.key not in at or kept[at[m.key]]), None)
            if first is not None:
                heads.append(first)
            if heads:
                named[i] = min(heads, key=verified_order)
            else:
                kept[i] = True
                self.stats.kept += 1
        return kept, named

    def _candidates(self, features: list, live: list[int], keys: list[str], metas: list) -> list[tuple]:
        """Verification rows (query, store key, signed fp, distance, meta, sketch), as the store returns
        candidates: the kept records', and the batch's earlier records' as if stored."""
        rows: list[tuple] = []
        if self.radii is not None:
            searched = live
            columns = _blocks([features[i][0] for i in live])
        else:
            searched = [i for i in live if features[i][1] is not None]
            columns = np.array([features[i][2] for i in searched], dtype=np.int64)
        if searched:
            own = BandRuns()
            own.add(columns, np.arange(len(searched), dtype=np.int64))
            for runs, earlier in ((self.columns, False), (own, True)):
                qs, found = self._search(runs, columns)
                for q, r in zip(qs.tolist(), found.tolist()):
                    if not earlier:
                        rows.append(self._kept_row(searched[q], r, features[searched[q]][0]))
                    elif r < q:
                        rows.append(self._batch_row(searched[q], searched[r], features, keys, metas))
        if self.radii is None:  # a banded rule: the rows without a sketch are judged by distance against everyone
            bare = [i for i in live if features[i][1] is None]
            for i in live:
                fp = features[i][0]
                rows += [self._kept_row(i, r, fp) for r in self.bare if (self.fps[r] ^ fp).bit_count() <= self.hamming_k]
                rows += [self._batch_row(i, o, features, keys, metas) for o in bare
                         if o < i and (features[o][0] ^ fp).bit_count() <= self.hamming_k]
        return rows

    def _search(self, runs: BandRuns, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query row, id) of the candidates in ``runs``: records sharing ``shared`` band keys, or a
        fingerprint block within the block's radius (generalised pigeonhole: every record within the
        radius is found; the distance decides after)."""
        if self.radii is None:
            return runs.shared(columns, self.rule.shared)
        owners, found = [], []
        for column, radius in enumerate(self.radii):
            masks = np.array(MASKS[radius], dtype=np.int64)
            if len(masks):
                values = (columns[:, column][:, None] ^ masks[None, :]).ravel()
                got = runs.hits(column, values, np.repeat(np.arange(len(columns), dtype=np.int64), len(masks)))
                owners.append(got[0])
                found.append(got[1])
        if not owners:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return _pairs(np.concatenate(owners), np.concatenate(found))

    def _by_distance(self, rows: list[tuple]) -> dict[int, list[Match]]:
        """The Hamming rule's answers: the rows within ``k``, by distance then key (as ``near``)."""
        out: dict[int, list[Match]] = {}
        for q, key, signed, d, meta, _ in rows:
            if d <= self.hamming_k:
                out.setdefault(q, []).append(match(key, signed, d, meta))
        for answer in out.values():
            answer.sort(key=verified_order)
        return out

    def _kept_row(self, query: int, rid: int, fp: int) -> tuple:
        """The verification row (as the store returns a candidate) of the kept record ``rid``."""
        return (query, f"{self.key_prefix}{self.positions[rid]:012d}", to_signed(self.fps[rid]), (self.fps[rid] ^ fp).bit_count(),
                self.keys[rid], self.sketches[rid])

    @staticmethod
    def _batch_row(query: int, other: int, features: list, keys: list[str], metas: list) -> tuple:
        """The verification row of the batch's record ``other``, as if it were stored under its key."""
        fp = features[other][0]
        return (query, keys[other], to_signed(fp), (fp ^ features[query][0]).bit_count(), metas[other],
                features[other][1])

    def store_keys(self, items: list[tuple[int, Record]]) -> list[str]:
        """The keys the batch's records are compared under: their zero-padded positions (so that ties
        go to the earlier record), after :attr:`key_prefix`."""
        return [f"{self.key_prefix}{pos:012d}" for pos, _ in items]

    def remember(self, items: list, features: list, kept: list[bool]) -> None:
        """The batch's kept records (with features) become candidates of every later one."""
        searched, ids = [], []
        for i in (i for i, k in enumerate(kept) if k and features[i][0] is not None):
            fp, sketch, band_keys = features[i]
            rid = len(self.fps)
            self.fps.append(fp)
            self.sketches.append(sketch)
            self.positions.append(items[i][0])
            self.keys.append(items[i][1].key)
            if self.radii is not None:
                searched.append(fp)
                ids.append(rid)
            elif sketch is None:
                self.bare.append(rid)
            else:
                searched.append(band_keys)
                ids.append(rid)
        if ids:
            columns = _blocks(searched) if self.radii is not None else np.array(searched, dtype=np.int64)
            self.columns.add(columns, np.array(ids, dtype=np.int64))

    def _removal(self, rec: Record, m: Match) -> None:
        r = Removal(rec.key, m.meta, m.distance, m.similarity, m.jaccard, rec.where)
        self.stats.removed += 1
        if self.on_removed is not None:
            self.on_removed(r)
