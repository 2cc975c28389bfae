"""The greedy rule of :func:`simdb.dataset.dedup.dedup_records` into a collection: :class:`BatchEngine`.

How (batches, exact): for a batch of records in priority order, ``near_many`` against the collection
finds each record's stored near-duplicates (kept records all); then the batch is decided in memory by the
collection's own rule (:meth:`simdb.dataset.memory.MemoryEngine.decide`: the batch's earlier records as
candidates, as if stored), each record removed if a stored or an earlier kept record matches it, and only
the kept ones are added. The collection then holds exactly the kept records, so the next batch sees them.

Fingerprint once where that is the definition: in a plain (Hamming-only) collection
``near(text)`` *is* ``near(fingerprint(text))`` with the collection's Fingerprinter, so
each text is fingerprinted once and the index is asked by fingerprint. Any other collection -- with a
verification stage, or with configuration this module does not know (a newer default) -- is asked by
text, so its own definition applies, and its features are computed once (:meth:`SimhashIndex.prepare`).

Why a batch may be decided twice: another process's ``simdb convert`` (or texts kept from now on) changes
how the collection's rows are encoded and found while a run goes on. The store refuses a batch computed
by the old rule (nothing of it is stored), the index follows the new one, and the batch is decided again
from the start by it (:meth:`BatchEngine.batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simdb.dataset.memory import MemoryEngine
from simdb.dataset.records import Record
from simdb.dataset.undo import RunJournal
from simdb.errors import CollectionChangedError, InputError
from simdb.index import SimhashIndex
from simdb.results import DedupStats, Removal

__all__ = ["PLAIN_CONFIG_KEYS", "RULE_RETRIES", "BatchEngine"]

#: a collection whose config has only these keys answers by fingerprint alone (see the module doc)
PLAIN_CONFIG_KEYS = frozenset({"fingerprinter", "store"})
#: times a batch is decided again when the collection's rule changes meanwhile (simdb convert elsewhere)
RULE_RETRIES = 5
#: what the keys of new records begin with in a dedup against a collection (they are never stored): the
#: last code point, so that on a tie (same Jaccard and distance) a stored record is named first, as if
#: the new records came after the collection's
NEW_KEY_PREFIX = "\U0010ffff"


class _Queries(list):
    """A batch's queries, with the configuration version they were computed by."""

    version: str | None = None


class BatchEngine:
    """The greedy rule over batches of (position, record) in priority order (see the module doc)."""

    _stored = False  # whether the batch being decided has stored rows (see batch)

    def __init__(self, index: SimhashIndex, options: dict, temporary: bool,
                 on_removed: Callable[[Removal], Any] | None, stats: DedupStats, journal: RunJournal | None = None,
                 read_only: bool = False):
        self.index = index
        self.journal = journal
        self.options = options
        self.temporary = temporary
        #: a dedup *against* the collection: it is only read; the kept records are remembered in memory
        self.read_only = read_only
        self.on_removed = on_removed
        self.stats = stats
        self._configure()

    def _configure(self) -> None:
        """How to ask and decide by the index's configuration (again after it followed a change of rule)."""
        index, options = self.index, self.options
        self.version = getattr(index, "config_version", None)
        config = index.config if isinstance(index.config, Mapping) else {"unknown": True}
        self._by_fp = set(options) <= {"k"} and set(config) <= PLAIN_CONFIG_KEYS
        # the batch decided among itself by the collection's own rule, in memory
        self.memory = MemoryEngine(index.rule, index.fingerprinter, options, None, self.stats)
        if self.read_only:
            self.memory.key_prefix = NEW_KEY_PREFIX

    def _near(self, queries: list) -> list[list]:
        """Answers for texts, or for fingerprints (None: a featureless text, no answer)."""
        live = [i for i, q in enumerate(queries) if q is not None]
        out: list[list] = [[] for _ in queries]
        got = self.index.near_many([queries[i] for i in live], **self.options) if live else []
        for i, answer in zip(live, got):
            out[i] = answer
        return out

    def _store_key(self, pos: int, rec: Record) -> str:
        # temporary collection: positions as keys (input keys may repeat), zero-padded so the
        # index's tie order (distance, then key) is input order; the input key rides in meta
        return f"{pos:012d}" if self.temporary else rec.key

    def _kept_key(self, match) -> str:
        if self.read_only:  # a new record (its input key rides in meta), or one of the collection's
            return match.meta if match.key.startswith(NEW_KEY_PREFIX) else match.key
        return match.meta if self.temporary and isinstance(match.meta, str) else match.key

    def _removal(self, rec: Record, match) -> Removal:
        r = Removal(rec.key, self._kept_key(match), match.distance, match.similarity,
                    getattr(match, "jaccard", None), rec.where)
        self.stats.removed += 1
        if not self.temporary and not self.read_only and r.kept_key == r.key:
            self.stats.same_key += 1
        if self.on_removed is not None:
            self.on_removed(r)
        return r

    def queries(self, items: list[tuple[int, Record]]) -> list:
        """What the index is asked about for these records: fingerprints (plain collections) or texts."""
        version, by_fp = self.version, self._by_fp
        if by_fp:
            out = _Queries(self.index.fingerprinter.many([rec.text for _, rec in items], empty=None))
        else:
            out = _Queries(rec.text for _, rec in items)
            self.index.prepare(out)  # features computed here, in the reading thread, while the server works
        out.version = version
        return out

    @staticmethod
    def _check_keys(items: list[tuple[int, Record]], survivors: list[int], keys: list[str]) -> None:
        """The survivors' store keys are unique: a repeated one is an input error."""
        seen: dict[str, int] = {}
        for i in survivors:
            if keys[i] in seen:
                raise InputError(f"{items[i][1].where}: key {keys[i]!r} appears twice in the input "
                                 f"(also {items[seen[keys[i]]][1].where}): incremental dedup stores kept "
                                 "records under their keys, which must be unique (use --key-field)")
            seen[keys[i]] = i

    def _store(self, items: list[tuple[int, Record]], survivors: list[int], keys: list[str], queries: list) -> None:
        """Add the batch's kept records (by fingerprint when already computed) so the next batch sees them
        (incrementally, noted in the run's journal first: an unfinished run is undone)."""
        if getattr(self.index, "config_version", None) != self.version:  # the index followed a change of rule
            raise CollectionChangedError("the collection's rule changed while this batch was decided")
        if self.journal is not None:
            self.journal.before_store(keys)
        self._stored = True  # (if add_many raises, nothing of it was stored: see batch)
        meta = [items[i][1].key if self.temporary else None for i in survivors]
        if self._by_fp:
            self.index.add_many({"key": key, "fp": queries[i], "meta": m} if queries[i] is not None
                                else {"key": key, "text": items[i][1].text, "meta": m}
                                for key, i, m in zip(keys, survivors, meta))
        else:
            # verified: near_many just computed these texts' features (the index's memo, used in
            # process only), so there is nothing left to spread over workers
            workers = 1 if self.index.verifier is not None else None
            self.index.add_many(({"key": key, "text": items[i][1].text, "meta": m}
                                 for key, i, m in zip(keys, survivors, meta)), workers=workers)

    def batch(self, items: list[tuple[int, Record]], queries: list | None = None) -> list[bool]:
        """Decide a batch (in priority order): kept flags, in the batch's order; kept ones are stored.

        A record near a stored row is removed, but is still asked about among the batch: an earlier
        kept record of the batch may be nearer, and the log names the nearest (the index's order),
        wherever the batch boundaries fall.

        Why again on a change of rule: another process's ``simdb convert`` (or texts kept from now on)
        changes how rows are encoded and found while the run goes on. The store refuses a batch
        computed by the old rule (nothing of it stored), the index follows the new one, and the batch
        is decided again from the start by it: its answers, its features and its rows. Its removals are
        reported only once it is decided."""
        stats = self.stats
        for attempt in range(RULE_RETRIES):
            if queries is not None and getattr(queries, "version", self.version) != self.version:
                queries = None  # computed ahead by the old rule
            saved = (stats.read, stats.kept)
            try:
                return self._batch(items, queries)
            except CollectionChangedError:
                # the index has followed the new rule (a refused load does); none: dropped, or no end in sight;
                # against a collection, the new records kept so far were judged by the old rule: no retry
                if (attempt == RULE_RETRIES - 1 or self.read_only
                        or getattr(self.index, "config_version", None) == self.version):
                    raise
                stats.read, stats.kept = saved
                stats.redone += 1
                self._configure()
                queries = None
        raise AssertionError("unreachable")

    def _batch(self, items: list[tuple[int, Record]], queries: list | None) -> list[bool]:
        self._stored = False
        self.stats.read += len(items)
        if queries is None:
            queries = self.queries(items)
        first = self._near(queries)
        if self._by_fp:
            features = [(fp, None, None) for fp in queries]
        else:  # computed by prepare (and near_many): the memo's
            features = self.index.text_features(list(queries))
        survivors = [i for i, matches in enumerate(first) if not matches]
        metas: list[str | None] = [rec.key if self.temporary or self.read_only else None for _, rec in items]
        if self.read_only:
            keys = self.memory.store_keys(items)
        else:
            # the survivors under their store keys; the others (removed whatever else matches) under keys
            # no record has (a NUL), as candidates that are never kept
            keys = [f"\0{i}" for i in range(len(items))]
            for i in survivors:
                keys[i] = self._store_key(*items[i])
            self._check_keys(items, survivors, keys)
        kept, named = self.memory.decide(items, features, keys, metas, stored=first)
        chosen = [i for i in survivors if kept[i]]
        if self.read_only:
            self.memory.remember(items, features, kept)
        elif chosen:
            self._store(items, chosen, [keys[i] for i in chosen], queries)
        if not self._stored and getattr(self.index, "config_version", None) != self.version:
            # answered (partly) by the old rule, nothing stored: decided again by the new one
            raise CollectionChangedError("the collection's rule changed while this batch was decided")
        for i in sorted(named):  # the log in priority order
            self._removal(items[i][1], named[i])
        return kept
