"""``simdb add``: texts from files, folders, JSONL and CSV into a collection.

Plain adds go in batches of --batch-size texts, one transaction each (an interrupted
run keeps whole batches); --unique adds one text at a time with
:meth:`SimhashIndex.add_if_unique` (atomic per text). The steps are separate
functions so that each failure mode (nothing matched, Ctrl-C, a bad record after
some batches were committed) says exactly what was kept.

A batch is read into memory before it is loaded (a list; at most :data:`BATCH_BYTES` of text: a
batch ends there too). Why: another process may convert the collection (``simdb convert``) or have
it keep its texts (``--store-text``) while the add runs; the store then refuses a batch computed by
the old rule, and a batch that can be read again is loaded again by the new one
(:meth:`SimhashIndex.add_many`); a streamed batch could not be.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from simdb.cli.created import discard_if_new
from simdb.cli.inputs import InputFile, Record, format_of, iter_records, walk
from simdb.cli.output import Progress, counted, err, out, print_json, shown
from simdb.cli.results import criterion, k_of, match_dict, measures, most_similar_first
from simdb.cli.session import Session, database_error, refuse_rule_options
from simdb.cli.status import EXIT_OK, PROG, CliError, Reported, Terminated, first_line
from simdb.errors import CollectionChangedError
from simdb.store import collection_guard as _guard
from simdb.store.connect import in_transaction
from simdb.store.rows import keys_by_path

__all__ = ["cmd_add"]

#: how many keys of empty texts the note after an add names (the rest are counted)
EMPTY_NAMED = 3
#: a batch ends at --batch-size texts or at this many bytes of text, whichever comes first
BATCH_BYTES = 128 * 2**20


@dataclass
class AddOutcome:
    """What an add run did so far (also what an interrupted or failed run reports)."""

    added: int = 0
    rejected: list[dict] = field(default_factory=list)
    empty: int = 0  # texts read that are empty or whitespace: stored, with no fingerprint
    empty_keys: list[str] = field(default_factory=list)  # the first EMPTY_NAMED of them
    #: files already stored under another key (the same file named from another directory): (key, stored key)
    stored_elsewhere: list[tuple[str, str]] = field(default_factory=list)


def _stored_elsewhere(files: list[InputFile], index) -> dict[str, list[str]]:
    """The keys each text file about to be added is already stored under (by its absolute path, ``meta.path``)."""
    paths = sorted({Path(os.path.abspath(f)).resolve().as_posix() for f, _ in files})
    with in_transaction(index.connection()) as conn:
        return keys_by_path(conn, index.collection_id, paths)


def _noting(records: Iterable[Record], stored: dict[str, list[str]], skip: bool,
            outcome: AddOutcome) -> Iterator[Record]:
    """``records``, counting the empty (or whitespace-only) texts among them, and noting (with
    ``--skip-stored`` leaving out) each text file already stored under another key (``stored``).

    Why the empty ones: such a text is stored like any other (re-adding its key replaces it) but has no
    words, so no fingerprint: it is never a near-duplicate of anything (``simdb stats``: "without
    features"); the add says so. Why the stored ones: a file's key is its path relative to ``--root``
    (else absolute, as given), so the same files added from another working directory, or by another
    relative path, get new keys and would be stored twice, each its own exact duplicate, without a word."""
    for rec in records:
        if not rec.text.strip():
            outcome.empty += 1
            if len(outcome.empty_keys) < EMPTY_NAMED:
                outcome.empty_keys.append(rec.key)
        keys = stored.get(rec.path, ()) if rec.path is not None else ()
        if keys and rec.key not in keys:  # under its own key too, it only replaces its own row
            outcome.stored_elsewhere.append((rec.key, keys[0]))
            if skip:
                continue
        yield rec


def _note_stored_elsewhere(outcome: AddOutcome, skip: bool) -> None:
    """The stderr note of the files that were already stored under other keys."""
    n = len(outcome.stored_elsewhere)
    if not n:
        return
    key, other = outcome.stored_elsewhere[0]
    example = f"{shown(key)} is {shown(other)}" + (", ..." if n > 1 else "")
    if skip:
        err(f"{PROG}: note: skipped {counted(n, 'file')} already stored under another key ({example})")
    else:
        err(f"{PROG}: warning: {counted(n, 'file')} already stored under another key ({example}): added "
            "again, under new keys; --skip-stored leaves such files out, and --root DIR gives a file the same key "
            "from any directory")


def _batches(records: Iterable[Record], size: int, max_bytes: int = BATCH_BYTES) -> Iterator[list[Record]]:
    """Batches of at most ``size`` records, each ending once it holds ``max_bytes`` of text."""
    batch: list[Record] = []
    held = 0
    for rec in records:
        batch.append(rec)
        held += rec.nbytes
        if len(batch) >= size or held >= max_bytes:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _meta_for(rec: Record) -> dict | None:
    """A row's meta: a text file's absolute path (so that 'check' knows the file itself from any
    directory, simdb.dataset.records.is_same_file, and 'report' can read it inside a recorded folder). The
    text itself is kept by the collection when it keeps texts (--store-text), not in meta."""
    return {"path": rec.path} if rec.path is not None else None


def _record_roots(files: list[InputFile], args, index) -> None:
    """Record where the text files came from (each folder named, each file named by itself), so that
    'simdb report' shows them by default, reading only there (simdb.util.confined_files.read_recorded)."""
    roots = {str(f.folder) if f.folder is not None else str(f.path)
             for f in files if format_of(f.path, args.format) == "text"}
    for root in sorted(roots):
        index.record_file_root(root)


def _rejection(key: str, matches: list) -> dict:
    """The --unique report of a text kept out: its most similar stored near-duplicate, in the order
    every answer is listed (:func:`most_similar_first`: Jaccard, then distance)."""
    best = min(matches, key=lambda m: most_similar_first(match_dict(m))) if matches else None
    entry = {"key": key, "near": best.key if best else None, "distance": best.distance if best else None}
    if best is not None and getattr(best, "jaccard", None) is not None:
        entry["jaccard"] = round(float(best.jaccard), 4)
    return entry


def _add_unique(records: Iterable[Record], args, index, progress: Progress, outcome: AddOutcome) -> None:
    for rec in records:
        result = index.add_if_unique(rec.key, rec.text, k=k_of(args), meta=_meta_for(rec), min_jaccard=args.min_jaccard)
        progress.update(1, rec.nbytes)
        if result.inserted:
            outcome.added += 1
        else:
            outcome.rejected.append(_rejection(rec.key, result.matches))


def _add_batches(records: Iterable[Record], args, index, progress: Progress, outcome: AddOutcome) -> None:
    def counted_records():
        for rec in records:
            progress.update(1, rec.nbytes)
            yield rec

    # each batch read whole, into a list, before its load starts: loaded again by the new rule if the
    # collection's rule changes meanwhile (see the module doc), and an interrupt while reading comes before
    # this batch's add_many (whose last_load_committed still describes the previous batch)
    for batch in _batches(counted_records(), args.batch_size):
        rows = [(rec.key, rec.text) if rec.path is None else {"key": rec.key, "text": rec.text, "meta": _meta_for(rec)}
                for rec in batch]
        try:
            index.add_many(rows, workers=args.workers)
        except KeyboardInterrupt:
            if index.last_load_committed:  # interrupted after its commit (VACUUM, statistics): stored
                outcome.added += len(rows)
            raise
        outcome.added += len(rows)


def _interrupted(exc: KeyboardInterrupt, args, added: int) -> BaseException:
    """What to raise on Ctrl-C / SIGTERM: SIGTERM as is, Ctrl-C after saying what was kept."""
    if isinstance(exc, Terminated):
        return exc
    kept = ("added; nothing is half-written" if args.unique else "committed by finished batches; the batch in "
            "progress was rolled back (re-run to finish: re-adding a key replaces it)")
    err(f"{PROG}: interrupted: {counted(added, 'text')} {'was' if added == 1 else 'were'} {kept}")
    return Reported()


def _gone(index) -> bool:
    """Is the collection this add wrote to gone (dropped by another process: its rows went with it)?"""
    try:
        return _guard.current(index.connection(), index.collection_id) is None
    except Exception:  # the database cannot say: not known to be gone
        return False


def _failed(exc: Exception, args, session: Session, added: int, discarded: bool = False,
            index=None) -> CliError | None:
    """The error to raise instead of ``exc`` when texts were added before it, or when the collection
    this run created was removed again (``discarded``); None: re-raise ``exc``."""
    error = exc if isinstance(exc, CliError) else database_error(exc, session)
    if error is None and isinstance(exc, ValueError):
        error = CliError(first_line(exc))
    if error is not None and discarded:
        return CliError(f"{error} (nothing was added; collection '{args.collection}' was not created)", error.code)
    if error is None or not added:
        return None
    kept = ("texts were added before it" if args.unique
            else "texts from earlier batches were kept; the failing batch was rolled back")
    if isinstance(exc, CollectionChangedError) and index is not None and _gone(index):
        return CliError(f"{error} (the {added:,} texts this command had added went with it)", error.code)
    again = "; running the same command again is safe: re-adding a key replaces it" \
        if isinstance(exc, CollectionChangedError) else ""
    return CliError(f"{error} ({added:,} {kept}{again})", error.code)


def _print_summary(args, result: dict, progress: Progress, index) -> None:
    for s in result["skipped_files"]:
        err(f"{PROG}: skipped {s['reason']}")
    rejected = result.get("rejected", [])
    if args.unique and not args.quiet:
        for r in rejected:
            if r["near"] is not None:
                how = measures(r.get("jaccard"), r["distance"])
                out(f"kept out {shown(r['key'])}: near-duplicate of {shown(r['near'])} ({how})")
            else:
                out(f"kept out {shown(r['key'])}: near-duplicate already stored")
    if not args.quiet:
        elapsed = progress.elapsed
        rate = f", {progress.rate:,.0f} texts/s" if elapsed >= 0.5 else ""
        extra = f", {counted(len(rejected), 'near-duplicate')} kept out ({criterion(args, index)})" if args.unique else ""
        took = f"{elapsed:.1f} s" if elapsed >= 1 else f"{elapsed * 1000:.0f} ms"
        out(f"added {counted(result['added'], 'text')} to collection '{args.collection}'{extra} in {took}{rate}")


def _note_empty(outcome: AddOutcome) -> None:
    """The stderr note of the empty texts an add stored (named, up to EMPTY_NAMED)."""
    if not outcome.empty:
        return
    named = ", ".join(shown(k) for k in outcome.empty_keys) + (", ..." if outcome.empty > EMPTY_NAMED else "")
    were = "was" if outcome.empty == 1 else "were"
    err(f"{PROG}: note: {counted(outcome.empty, 'empty text')} ({named}) {were} stored with no fingerprint: "
        "an empty text is never a near-duplicate (see 'simdb stats', \"without features\")")


def cmd_add(args, session: Session) -> int:
    refuse_rule_options(args)  # usage errors first, before any file is read
    skipped: list[dict] = []
    files = walk(args.paths, args.glob, skipped)
    records = iter_records(files, args, skipped)
    first = next(records, None)  # before session.index: nothing readable must not create an empty collection
    if first is None:
        for s in skipped:
            err(f"{PROG}: skipped {s['reason']}")
        if not files:
            raise CliError(f"no files matched (paths: {' '.join(args.paths)}, --glob {args.glob!r})")
        raise CliError(f"nothing to add: no text could be read from {' '.join(args.paths)} "
                       f"({counted(len(skipped), 'file')} skipped); collection '{args.collection}' was not created")
    total_bytes = sum(f.stat().st_size for f, _ in files)
    outcome = AddOutcome()
    index = session.index
    records = _noting(itertools.chain([first], records), _stored_elsewhere(files, index), args.skip_stored, outcome)
    _record_roots(files, args, index)  # before the rows: an interrupted run's batches are shown too
    shown_here = not args.quiet and (args.progress or sys.stderr.isatty())  # on a terminal, or asked for
    progress = Progress(shown_here, "adding", total_bytes, always=bool(args.progress))
    try:
        (_add_unique if args.unique else _add_batches)(records, args, index, progress, outcome)
    except KeyboardInterrupt as exc:
        progress.close()
        discard_if_new(session.engine, index, outcome.added)  # a run that stored nothing leaves no collection
        raise _interrupted(exc, args, outcome.added) from None
    except Exception as exc:
        progress.close()
        error = _failed(exc, args, session, outcome.added, discard_if_new(session.engine, index, outcome.added), index)
        if error is None:
            raise
        raise error from exc
    progress.close()
    elapsed = progress.elapsed
    result = {
        "collection": args.collection,
        "added": outcome.added,
        "seconds": round(elapsed, 3),
        "rate": round(progress.items / elapsed, 1) if elapsed > 0 else None,
        "skipped_files": skipped,
        "empty_texts": outcome.empty,
    }
    if args.unique:
        result["rejected"] = outcome.rejected
    result["stored_elsewhere"] = [{"key": k, "stored_as": other} for k, other in outcome.stored_elsewhere]
    result["skipped_stored"] = bool(args.skip_stored)
    _note_empty(outcome)
    _note_stored_elsewhere(outcome, args.skip_stored)  # on stderr, with --json too (which counts them: "empty_texts")
    if args.json:
        print_json(result)
        return EXIT_OK
    _print_summary(args, result, progress, index)
    return EXIT_OK

