"""Deduplicate a stream of records: keep one record per group of near-duplicates.

:func:`dedup_records` is what ``simdb dedup`` runs. It is built only on
:class:`~simdb.SimhashIndex`'s public API (``near_many``/``near``, ``add_many``,
``remove``), so "near-duplicate" means exactly what it means for the collection
everywhere else (its default, or the ``k`` / ``min_jaccard`` the caller gives):
when the collection's default definition changes, dedup follows.

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

The engine of batches (how a batch is decided, exactly as one record at a time would be) is
:mod:`simdb.dataset.greedy`.

Memory: ``keep="first"`` streams (one batch of records in memory; the store holds
the rest). ``"last"`` and ``"longest"`` need the whole priority order first: the
records are spilled to a temporary file (about the size of the input) and
``np``-arrays of 25 bytes per record hold offsets, lengths, order and the kept
flags (250 MB for 10M records); the output is then written in input order.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from simdb.core.validate import check_items, check_key, check_text
from simdb.dataset.defaults import BATCH, KEEP, MAX_BATCH
from simdb.dataset.greedy import BatchEngine, DedupStats, Removal
from simdb.dataset.order import prioritised, streamed
from simdb.dataset.readers import Record, record_text
from simdb.dataset.undo import RunJournal, undo_abandoned
from simdb.errors import InputError, InvalidArgumentError
from simdb.index import SimhashIndex

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
    - neither: a temporary collection on ``database`` (default: ``SIMDB_DATABASE_URL``,
      else the embedded server), created with the default options and dropped at the
      end, also when the caller stops early or on Ctrl-C.

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
    if index is not None and collection is not None:
        raise InvalidArgumentError("give index or collection, not both")
    options = {name: v for name, v in (("k", k), ("min_jaccard", min_jaccard)) if v is not None}
    stats = stats if stats is not None else DedupStats()
    return _run(records, index, collection, database, keep, text_field, key_field, options, on_removed, stats,
                batch_size, spill_dir, finish)


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
        if keep == "first":
            yield from streamed(pairs, engine, batch_size)
        else:
            yield from prioritised(pairs, keep, engine, batch_size, spill_dir)
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
