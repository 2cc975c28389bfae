"""Deduplicate a stream of records: keep one record per group of near-duplicates.

:func:`dedup_records` is what ``simdb dedup`` runs. Near-duplicate means exactly what it means
for a collection everywhere else (its rule, or the ``k`` / ``min_jaccard`` the caller gives): into a
collection, the decisions are built on :class:`~simdb.SimhashIndex`'s public API
(:mod:`simdb.dataset.greedy`); without one, the default collection's rule is applied in memory
(:mod:`simdb.dataset.memory`), with the same answers. When the default definition changes, dedup
follows.

The rule (greedy in priority order). Records are taken in priority order (input
order for ``keep="first"``, reversed for ``"last"``, longest text first for
``"longest"``, ties in input order). A record is *kept* unless it is a
near-duplicate of a record already kept (or, incrementally, already stored in the
collection); then it is *removed*, and the log names that kept record. So:

- no two kept records are near-duplicates of each other (nor of a stored one);
- every removed record names a kept (or stored) record it is a near-duplicate of;
- texts without features (e.g. empty) are never near-duplicates: always kept.

This differs from "one per connected component" (``simdb dups``) on chains
A~B~C with A and C far apart: A and C are both kept, because C is not a
near-duplicate of anything kept. Components would drop C with no record it is
actually close to; the greedy rule keeps the log honest.

The order (this module): ``keep="first"`` streams, each batch decided as it is read (one batch read
ahead in a thread: :func:`streamed`); ``"last"`` and ``"longest"`` must see every record before deciding
the first, so records go to a temporary file (:class:`Spill`), are decided in priority order and are
yielded back in input order (:func:`prioritised`). A batch is decided by a :class:`Batcher`, exactly as
one record at a time would be.

Memory: ``keep="first"`` streams (one batch of records in memory; the collection, or the in-memory
engine, holds the kept ones). ``"last"`` and ``"longest"`` need the whole priority order first: the
records are spilled to a temporary file (about the size of the input) and
``np``-arrays of 25 bytes per record hold offsets, lengths, order and the kept
flags (250 MB for 10M records); the output is then written in input order.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch import Verifier
from simdb.core.sketch.bands import BAND_SCHEME
from simdb.core.sketch.features import candidate_fingerprinter
from simdb.core.validate import check_items, check_key, check_text
from simdb.dataset.defaults import BATCH, BATCH_CHARS, KEEP, MAX_BATCH
from simdb.dataset.greedy import BatchEngine
from simdb.dataset.memory import MemoryEngine
from simdb.dataset.records import Record, record_text
from simdb.dataset.undo import RunJournal, undo_abandoned
from simdb.errors import InputError, InvalidArgumentError
from simdb.index import SimhashIndex
from simdb.index.rules import BandedRule, HammingRule
from simdb.results import DedupStats, Removal

__all__ = ["KEEP", "DedupStats", "Removal", "dedup_records", "temporary_collection_name"]

#: prefix of the temporary collections (dropped at the end, also on Ctrl-C; a killed
#: process leaves one behind: ``simdb collections`` shows it, ``simdb drop`` removes it)
TEMP_PREFIX = "_simdb_dedup_"


def temporary_collection_name() -> str:
    return f"{TEMP_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"


def _as_record(item: Any, n: int, text_field: str, key_field: str | None, max_text: int | None = None) -> Record:
    if isinstance(item, Record):
        return item
    if not isinstance(item, Mapping):
        raise InputError(f"record {n}: expected a mapping (dict) or simdb.dataset.records.Record, got {type(item).__name__}")
    where = f"record {n}"
    text = record_text(item, where, text_field)
    key = item.get(key_field) if key_field else None
    if key is None or key == "":
        key = f"#{n}"
    elif isinstance(key, (dict, list, bytes)):
        raise InputError(f"{where}: field {key_field!r} must be a string or number, not {type(key).__name__}")
    try:  # here, naming the record: the store would name a batch position and a temporary key
        key = check_key(str(key), f"key {key_field!r}")
        check_text(text, f"field {text_field!r}", max_text)
    except InputError as exc:
        raise type(exc)(f"{where}: {exc}") from None  # the same type (InputTooLargeError, ...)
    return Record(key, text, item, where)


def dedup_records(
    records: Iterable[Any],
    *,
    index: SimhashIndex | None = None,
    collection: str | None = None,
    database=None,
    keep: str = "first",
    text_field: str = "text",
    key_field: str | None = "id",
    k: int | None = None,
    min_jaccard: float | None = None,
    on_removed: Callable[[Removal], Any] | None = None,
    stats: DedupStats | None = None,
    batch_size: int = BATCH,
    spill_dir: str | None = None,
    finish: Callable[[], Any] | None = None,
    in_memory: bool = True,
    against: SimhashIndex | None = None,
) -> Iterator[Any]:
    """Yield the records to keep, one per group of near-duplicates, unchanged (see the module doc).

    ``records``: mappings (the text in ``text_field``, the key in ``key_field``; a
    missing key becomes ``#N``, the 1-based position) or :class:`simdb.dataset.records.Record`.
    A text of None (JSON ``null``) is an empty text, as ``simdb dedup`` reads it: it has no
    features, so the record is kept (never a near-duplicate); a text of another type is an InputError.
    Where the near-duplicates are looked up:

    - ``index`` (a :class:`SimhashIndex`) or ``collection`` (a name, opened on
      ``database``): *incremental* -- records near-duplicate to rows already stored
      are removed, and the kept records are added to the collection under their keys
      (a key already stored is replaced, as ``add`` does; counted in ``stats.replaced``);
    - ``against`` (a :class:`SimhashIndex`): the records against a collection *read only* -- a record
      near-duplicate to a stored row (or to a record kept before it) is removed, and the log names
      the stored key; nothing is stored, the kept records are remembered in memory, so the cost grows
      with the new records only. The decisions are those of one run over the collection's records
      followed by these (a tie goes to the stored record); the collection's rule decides.
    - none of these: a new collection's rule (``k`` alone: the Hamming rule) decided in memory
      (:mod:`simdb.dataset.memory`: about 1.2 KiB per kept record, about 200 bytes under the Hamming rule;
      the database is not opened), or, with ``in_memory=False``, in a temporary collection on ``database`` (default:
      ``SIMDB_DATABASE_URL``, else the embedded server), created with the default options and dropped
      at the end, also when the caller stops early or on Ctrl-C. The same records are kept and the
      same removals logged either way.

    ``k`` and ``min_jaccard`` are passed to the index only when given, so the
    collection's own default decides otherwise. ``on_removed`` is called with a
    :class:`Removal` for every removed record (e.g. ``log.append``). The work happens
    as the iterator is consumed; close it (or exhaust it) to release the collection.

    Incrementally, a run that does not finish is undone: closed early (or stopped by Ctrl-C, SIGTERM, an
    error) at once, killed outright (SIGKILL) by the next incremental run into the collection, which
    undoes it before it begins (:mod:`simdb.dataset.undo`). ``finish``: called once every record is
    decided and stored, before the run counts as finished; where the caller commits what it wrote
    (``simdb dedup`` renames its output into place there), so that a run killed before that commit is
    undone and one killed after it is not. An error it raises undoes the run.
    """
    check_items(records, "records", f"mappings (the text in {text_field!r}) or Records")
    if keep not in KEEP:
        raise InvalidArgumentError(f"keep must be one of {', '.join(KEEP)}, got {keep!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise InvalidArgumentError(f"batch_size must be an int from 1 to {MAX_BATCH:,}, got {batch_size!r}")
    if sum(x is not None for x in (index, collection, against)) > 1:
        raise InvalidArgumentError("give one of index, collection and against")
    options = {name: v for name, v in (("k", k), ("min_jaccard", min_jaccard)) if v is not None}
    stats = stats if stats is not None else DedupStats()
    if against is not None:
        return _against(records, against, keep, text_field, key_field, options, on_removed, stats, batch_size,
                        spill_dir, finish)
    if index is None and collection is None and in_memory:
        return _in_memory(records, keep, text_field, key_field, options, on_removed, stats, batch_size,
                          spill_dir, finish)
    return _run(records, index, collection, database, keep, text_field, key_field, options, on_removed, stats,
                batch_size, spill_dir, finish)


def _in_memory(records, keep, text_field, key_field, options, on_removed, stats, batch_size, spill_dir,
               finish) -> Iterator[Any]:
    """A dedup that keeps nothing afterwards, by a new collection's rule (``k`` alone: the Hamming
    rule, as a Hamming-only collection answers): in memory (:mod:`simdb.dataset.memory`), the database
    never opened."""
    if set(options) == {"k"}:
        rule, fingerprinter = HammingRule(), Fingerprinter()
    else:
        rule, fingerprinter = BandedRule(Verifier(), BAND_SCHEME), candidate_fingerprinter()
    engine = MemoryEngine(rule, fingerprinter, options, on_removed, stats)
    pairs = ((x, _as_record(x, n, text_field, key_field)) for n, x in enumerate(records, 1))
    yield from _in_order(pairs, keep, engine, batch_size, spill_dir)
    if finish is not None:
        finish()


def _against(records, against, keep, text_field, key_field, options, on_removed, stats, batch_size, spill_dir,
             finish) -> Iterator[Any]:
    """A dedup against a collection, read only (:class:`simdb.dataset.greedy.BatchEngine`'s ``read_only``)."""
    engine = BatchEngine(against, options, False, on_removed, stats, read_only=True)
    pairs = ((x, _as_record(x, n, text_field, key_field, against.max_text_bytes)) for n, x in enumerate(records, 1))
    yield from _in_order(pairs, keep, engine, batch_size, spill_dir)
    if finish is not None:
        finish()


def _in_order(pairs, keep: str, engine: Batcher, batch_size: int, spill_dir: str | None) -> Iterator[Any]:
    """The kept records, decided in ``keep``'s priority order."""
    if keep == "first":
        return streamed(pairs, engine, batch_size)
    return prioritised(pairs, keep, engine, batch_size, spill_dir)


def _run(records, index, collection, database, keep, text_field, key_field, options, on_removed, stats,
         batch_size, spill_dir, finish) -> Iterator[Any]:
    temporary = index is None and collection is None
    own = index is None
    if own:
        name = collection if collection is not None else temporary_collection_name()
        # a temporary collection follows the definition asked for: k alone is the Hamming rule
        # (a Hamming-only collection); otherwise the default (verified) definition
        verify = False if (temporary and set(options) == {"k"}) else None
        index = SimhashIndex(database, collection=name, verify=verify)
    journal, finished = None, False
    try:
        if not temporary:  # an earlier run killed outright (SIGKILL) is undone first: see simdb.dataset.undo
            stats.recovered, stats.unrestored = undo_abandoned(index)
        before = len(index) if not temporary else 0
        journal = None if temporary else RunJournal(index, spill_dir)
        engine = BatchEngine(index, options, temporary, on_removed, stats, journal)
        pairs = ((x, _as_record(x, n, text_field, key_field, index.max_text_bytes)) for n, x in enumerate(records, 1))
        yield from _in_order(pairs, keep, engine, batch_size, spill_dir)
        if not temporary:
            stats.replaced = max(before + stats.kept - len(index), 0)
        if finish is not None:
            finish()
        finished = True
    finally:
        undone = finished
        try:
            if journal is not None and not finished:  # all or nothing: see simdb.dataset.undo
                stats.undone = journal.undo()
                stats.unrestored += journal.unrestored
                undone = True
        finally:
            try:
                if temporary:
                    index.drop()
            finally:
                if journal is not None:
                    journal.close(keep=not undone)  # an undo that failed: the next run undoes it
                if own:
                    index.close()


# --------------------------------------------------------------------------- the order of the records


class Batcher(Protocol):
    """What decides a batch: ``queries`` prepares (in a helper thread), ``batch`` decides (kept flags)."""

    def queries(self, items: list[tuple[int, Record]]) -> list: ...

    def batch(self, items: list[tuple[int, Record]], queries: list | None = None) -> list[bool]: ...


def chunks(it: Iterable, size: int, chars: int | None = None, text_of: Callable[[Any], str] | None = None
           ) -> Iterator[list]:
    """Lists of ``size`` items (the last one shorter) from any iterable; with ``chars``, a list also ends
    once the texts of its items (``text_of(item)``) hold that many characters."""
    chunk = []
    held = 0
    for x in it:
        chunk.append(x)
        if chars is not None and text_of is not None:
            held += len(text_of(x))
        if len(chunk) >= size or (chars is not None and held >= chars):
            yield chunk
            chunk = []
            held = 0
    if chunk:
        yield chunk


def _pair_text(pair: tuple[Any, Record]) -> str:
    return pair[1].text


class Spill:
    """Records on a temporary file, read back by position (keep='last'/'longest').

    Each entry: 8-byte length, then a pickle. A JSONL record's fields are re-parsed
    from its raw line (half the spill); Parquet schemas are kept once, by number."""

    def __init__(self, spill_dir: str | None):
        self.fh = tempfile.TemporaryFile(prefix="simdb-dedup-spill-", dir=spill_dir)
        self.offsets = array("q")
        self.lengths = array("q")
        self.schemas: list = []
        self._pos = 0

    def append(self, original: Any, rec: Record) -> None:
        schema = -1
        if rec.schema is not None:
            schema = next((n for n, s in enumerate(self.schemas) if s is rec.schema), -1)
            if schema < 0:
                self.schemas.append(rec.schema)
                schema = len(self.schemas) - 1
        fields = None if rec.raw is not None else rec.fields
        entry = (rec.key, rec.text, fields, rec.where, rec.raw, schema, None if original is rec else original)
        try:
            data = pickle.dumps(entry, pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # a lock, a generator, a local class...
            raise InputError(f"{rec.where}: keep='last' and 'longest' spill each record to a file and read it back, "
                             f"and this record cannot be pickled ({exc}); pass plain data or use keep='first'") from None
        self.offsets.append(self._pos)
        self.lengths.append(len(rec.text))
        self.fh.write(len(data).to_bytes(8, "little") + data)
        self._pos += 8 + len(data)

    def load(self, i: int) -> tuple[Any, Record]:
        fd = self.fh.fileno()
        at = self.offsets[i]
        size = int.from_bytes(os.pread(fd, 8, at), "little")
        key, text, fields, where, raw, schema, original = pickle.loads(os.pread(fd, size, at + 8))
        if fields is None:
            fields = json.loads(raw)
        rec = Record(key, text, fields, where, raw, self.schemas[schema] if schema >= 0 else None)
        return (rec if original is None else original), rec

    def close(self) -> None:
        self.fh.close()


def prioritised(records: Iterator[tuple[Any, Record]], keep: str, engine: Batcher, batch_size: int,
                 spill_dir: str | None) -> Iterator[Any]:
    """keep='last'/'longest': spill, decide in priority order, then yield the kept in input order."""
    spill = Spill(spill_dir)
    try:
        for original, rec in records:
            spill.append(original, rec)
        spill.fh.flush()
        n = len(spill.offsets)
        order: np.ndarray
        if keep == "last":
            order = np.arange(n - 1, -1, -1, dtype=np.int64)
        else:  # longest first; ties in input order (a stable sort)
            order = np.argsort(-np.frombuffer(spill.lengths, dtype=np.int64), kind="stable") if n else np.zeros(0)
        spill.lengths = array("q")
        kept = np.zeros(n, dtype=bool)
        loaded = ((int(i), spill.load(int(i))[1]) for i in order)
        for items in chunks(loaded, batch_size, BATCH_CHARS, _pair_text):
            for (i, _), flag in zip(items, engine.batch(items)):
                kept[i] = flag
        del order
        for i in np.flatnonzero(kept):
            yield spill.load(int(i))[0]
    finally:
        spill.close()


def streamed(pairs: Iterator[tuple[Any, Record]], engine: Batcher, batch_size: int) -> Iterator[Any]:
    """keep='first': one pass. A helper thread reads and fingerprints the next batch while this
    one waits on the database for the current one (the driver releases the GIL): the client's
    and the server's work overlap, one batch ahead (so memory stays at two batches)."""
    batches = chunks(pairs, batch_size, BATCH_CHARS, _pair_text)
    position = [0]

    def load():
        chunk = next(batches, None)
        if chunk is None:
            return None
        items = [(i, rec) for i, (_, rec) in enumerate(chunk, position[0])]
        position[0] += len(chunk)
        return chunk, items, engine.queries(items)

    pool = ThreadPoolExecutor(1, thread_name_prefix="simdb-dedup-read")
    try:
        ahead = pool.submit(load)
        while True:
            got = ahead.result()
            if got is None:
                return
            ahead = pool.submit(load)
            chunk, items, queries = got
            for (original, _), flag in zip(chunk, engine.batch(items, queries)):
                if flag:
                    yield original
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

