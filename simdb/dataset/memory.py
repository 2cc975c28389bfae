"""The greedy rule of a dedup without a collection, decided in memory: :class:`MemoryEngine`.

Why: a dedup that keeps nothing afterwards (no ``--collection``) used a temporary collection as
scratch space: every kept record was written to the server, its band keys indexed, and every
batch's candidates fetched back, a kilobyte of sketch each. The records' features are computed
here anyway, so the kept records' band keys and sketches stay in this process and the database is
never opened: the same decisions for a fraction of the time.

The same decisions because the rule is the default collection's, to the letter: its features
(:meth:`simdb.index.rules.BandedRule.texts_features`), its arguments (``verify_params`` and
``check_reach``), its candidate stage (two texts with sketches are candidates when their band keys
are equal in ``shared`` bands; a kept text without a sketch is a candidate of every text whose
fingerprint is within the Hamming ``k``; a featureless text is nobody's) and its verification
(:func:`simdb.results.verified_matches_many`, which also orders the matches). A record is removed
when it matches a record kept before it (in an earlier batch, or earlier in its own); the removal
log names the best match in that order, ties to the earlier input position, as the store's keys
(zero-padded positions) did. A property test compares the two engines record for record.

Memory: per kept record its sketch (256 int32: 1 KiB), band keys (14 int64) and fingerprint,
about 1.2 KiB; 1.2 GB for a million kept records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from simdb.dataset.records import Record
from simdb.index.rules import BandedRule
from simdb.results import DedupStats, Match, Removal, verified_matches_many

__all__ = ["BandRuns", "MemoryEngine"]


class BandRuns:
    """Band keys of the kept records, looked up by equality in each band.

    Sorted runs (one ``argsort`` per band when a run is made), merged when a run is no larger than
    the one after it, so a lookup searches O(log n) runs with ``np.searchsorted`` and an insert costs
    O(log n) amortised sorts: no Python object per key (a dict of 14 keys a record would take a
    kilobyte more per record than the keys themselves)."""

    def __init__(self) -> None:
        #: (keys sorted per band: (bands, n) int64, the record ids in that order: (bands, n) int64)
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add records (``keys``: (n, bands) int64, ``ids``: their ids)."""
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

    def shared(self, queries: np.ndarray, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        """(query row, record id) of every stored record whose keys equal the query's in ``at_least``
        bands (``queries``: (m, bands) int64), each pair once, sorted by query then id."""
        hits_q, hits_id = [], []
        for keys, ids in self.runs:
            for band in range(keys.shape[0]):
                lo = np.searchsorted(keys[band], queries[:, band], "left")
                counts = np.searchsorted(keys[band], queries[:, band], "right") - lo
                total = int(counts.sum())
                if not total:
                    continue
                starts = np.repeat(lo - np.cumsum(counts) + counts, counts)  # each hit's run start
                hits_q.append(np.repeat(np.arange(len(queries)), counts))
                hits_id.append(ids[band][starts + np.arange(total)])
        if not hits_q:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        q, rid = np.concatenate(hits_q), np.concatenate(hits_id)
        span = int(rid.max()) + 1
        codes, times = np.unique(q * span + rid, return_counts=True)
        codes = codes[times >= at_least]
        return codes // span, codes % span


class MemoryEngine:
    """The greedy rule over batches of (position, record) in priority order, in memory (see the module
    doc): the :class:`simdb.dataset.dedup.Batcher` of a dedup without a collection."""

    def __init__(self, rule: BandedRule, fingerprinter: Any, options: Mapping[str, Any],
                 on_removed: Callable[[Removal], Any] | None, stats: DedupStats):
        self.rule, self.fingerprinter = rule, fingerprinter
        _, self.hamming_k, self.min_jaccard = rule.verify_params(options.get("k"), options.get("min_jaccard"),
                                                                 "a dedup")
        rule.check_reach(self.min_jaccard, "a dedup")
        self.on_removed, self.stats = on_removed, stats
        self.bands = BandRuns()
        #: per kept record with a fingerprint (its id): signed fingerprint, unsigned, sketch, position, input key
        self.signed: list[int] = []
        self.fps: list[int] = []
        self.sketches: list[Any] = []
        self.positions: list[int] = []
        self.keys: list[str] = []
        #: ids of the kept records without a sketch (judged by distance: few, compared one by one)
        self.bare: list[int] = []

    def queries(self, items: list[tuple[int, Record]]) -> list:
        """The batch's features (fingerprint, sketch, band keys), by the rule: in the reading thread."""
        return self.rule.texts_features(self.fingerprinter, [rec.text for _, rec in items])

    def batch(self, items: list[tuple[int, Record]], queries: list | None = None) -> list[bool]:
        """Decide a batch (in priority order): kept flags, in the batch's order; the kept are remembered.

        Every candidate pair is verified at once (the kept records of earlier batches, and the batch's
        own earlier records, whether kept or not); then each record in turn is removed if a match is a
        record kept before it, else kept."""
        features = queries if queries is not None else self.queries(items)
        self.stats.read += len(items)
        live = [i for i, (fp, _, _) in enumerate(features) if fp is not None]
        keyed = [i for i in live if features[i][1] is not None]
        rows: list[tuple] = []  # (query, store key, signed fp, distance, input key, sketch)
        batch_key = {i: f"{items[i][0]:012d}" for i in live}  # the store's key of a temporary collection
        if keyed:
            keys = np.array([features[i][2] for i in keyed], dtype=np.int64)
            qs, rids = self.bands.shared(keys, self.rule.shared)
            for q, rid in zip(qs.tolist(), rids.tolist()):
                rows.append(self._kept_row(keyed[q], rid, features[keyed[q]][0]))
            own = BandRuns()
            own.add(keys, np.arange(len(keyed), dtype=np.int64))
            qs, others = own.shared(keys, self.rule.shared)
            for q, o in zip(qs.tolist(), others.tolist()):
                if o < q:  # an earlier record of the batch, as if stored before this one
                    rows.append(self._batch_row(keyed[q], keyed[o], items, features, batch_key))
        bare = [i for i in live if features[i][1] is None]
        for i in live:
            fp = features[i][0]
            rows += [self._kept_row(i, rid, fp) for rid in self.bare if (self.fps[rid] ^ fp).bit_count() <= self.hamming_k]
            rows += [self._batch_row(i, o, items, features, batch_key) for o in bare
                     if o < i and (features[o][0] ^ fp).bit_count() <= self.hamming_k]
        found = verified_matches_many(rows, [f[1] for f in features], self.rule.verifier, self.min_jaccard,
                                      self.hamming_k)
        at = {key: i for i, key in batch_key.items()}  # a match's store key -> its batch position
        kept = [False] * len(items)
        new_keys: list = []
        new_ids: list[int] = []
        for i in range(len(items)):
            best = next((m for m in found.get(i, []) if m.key not in at or kept[at[m.key]]), None)
            if best is None:
                kept[i] = True
                self.stats.kept += 1
                if i in batch_key:
                    rid = self._remember(items[i], features[i])
                    if features[i][1] is not None:
                        new_keys.append(features[i][2])
                        new_ids.append(rid)
            else:
                self._removal(items[i][1], best)
        if new_ids:
            self.bands.add(np.array(new_keys, dtype=np.int64), np.array(new_ids, dtype=np.int64))
        return kept

    def _kept_row(self, query: int, rid: int, fp: int) -> tuple:
        """The verification row (as the store returns a candidate) of the kept record ``rid``."""
        return (query, f"{self.positions[rid]:012d}", self.signed[rid], (self.fps[rid] ^ fp).bit_count(),
                self.keys[rid], self.sketches[rid])

    @staticmethod
    def _batch_row(query: int, other: int, items: list, features: list, batch_key: dict[int, str]) -> tuple:
        """The verification row of the batch's record ``other``, as if it were stored."""
        fp = features[other][0]
        return (query, batch_key[other], fp - (1 << 64) if fp >> 63 else fp,
                (fp ^ features[query][0]).bit_count(), items[other][1].key, features[other][1])

    def _remember(self, item: tuple[int, Record], features: tuple) -> int:
        """A kept record becomes a candidate of every later one (its band keys: by the caller); its id."""
        fp, sketch, _ = features
        rid = len(self.fps)
        self.fps.append(fp)
        self.signed.append(fp - (1 << 64) if fp >> 63 else fp)
        self.sketches.append(sketch)
        self.positions.append(item[0])
        self.keys.append(item[1].key)
        if sketch is None:
            self.bare.append(rid)
        return rid

    def _removal(self, rec: Record, match: Match) -> None:
        r = Removal(rec.key, match.meta, match.distance, match.similarity, match.jaccard, rec.where)
        self.stats.removed += 1
        if self.on_removed is not None:
            self.on_removed(r)
