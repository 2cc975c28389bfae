"""``simdb dedup``: deduplicate JSONL / CSV / Parquet records into a new file.

A thin shell over :func:`simdb.dedup_records` (the rule and its memory bounds are
documented there and in ``docs/dedup.md``) and :mod:`simdb.dataset.records` (formats).
Registered by :mod:`simdb.cli.parser`; errors are :mod:`simdb.errors` types, which
:mod:`simdb.cli.main` maps to exit status 2 / 3.

Output files are written under a temporary name in the same directory and renamed
at the end, so an interrupted or failed run leaves no partial output (``-``,
stdout, is streamed and cannot be taken back).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Generator
from contextlib import ExitStack, nullcontext
from typing import cast

from simdb.cli.created import discard_if_new
from simdb.cli.output import err
from simdb.cli.session import refuse_rule_options
from simdb.cli.status import EXIT_DATABASE, PROG, CliError, Reported, Terminated
from simdb.dataset.dedup import BATCH, KEEP, DedupStats, dedup_records
from simdb.dataset.records import check_files, read_records
from simdb.dataset.writers import RemovalLog, open_writer
from simdb.errors import CollectionChangedError, InputError
from simdb.index import SimhashIndex
from simdb.util.atomic_file import atomic_file

__all__ = ["cmd_dedup", "KEEP", "BATCH"]


# --------------------------------------------------------------------------- output files


def _output(path: str | None):
    """A binary file for ``path`` as a context manager: renamed into place only if the run succeeds
    ('-': stdout, which cannot be taken back; None: no file)."""
    if path is None or path == "-":
        return nullcontext(None if path is None else sys.stdout.buffer)
    return atomic_file(path, "wb")


class _Progress:
    """Records decided (kept + removed), with a rate, on one stderr line (when asked for or on a terminal).

    Why decided, not read: the reader runs a batch ahead and a batch is counted as read before its
    records are decided, so "10,000 records ... kept 4,543 removed 457" added up to nothing; the
    numbers on the line are one count and its two parts."""

    def __init__(self, enabled: bool, stats):
        self.enabled = enabled
        self.stats = stats
        self.start = time.monotonic()
        self._last = 0.0
        self._shown = False

    def tick(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and (now - self._last < 0.5):
            return
        self._last = now
        s = self.stats
        decided = s.kept + s.removed
        rate = decided / max(now - self.start, 1e-9)
        sys.stderr.write(f"\rdedup {decided:,} records decided  {rate:,.0f}/s  kept {s.kept:,}  "
                         f"removed {s.removed:,}  {now - self.start:.1f}s\x1b[K")
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.tick(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._shown = False  # once


# --------------------------------------------------------------------------- the command


def _check_arguments(args) -> str:
    """Refuse, before reading anything, what would lose data or read stdin twice; the output's format."""
    if args.store_text and not (args.collection_given or args.collection != "default"):
        raise InputError("--store-text needs -c NAME: a plain dedup keeps no collection (it decides in memory)")
    if args.min_jaccard is not None and not 0.0 <= args.min_jaccard <= 1.0:
        raise InputError(f"invalid --min-jaccard {args.min_jaccard}: must be between 0 and 1")
    return check_files(args.inputs, args.output, args.removed, args.format, args.output_format, args.encoding,
                       args.stats)


def _write_kept(args, out_fmt: str, records, progress: _Progress, kwargs: dict) -> None:
    """Run the dedup and write the kept records (and the removal log), each file all-or-nothing.

    The files are renamed into place by the run itself (``finish``: the writer's close, then the
    renames), after its last batch is stored and before its journal is deleted: a run killed outright
    before then is undone by the next one, and one killed after has its files written
    (simdb.dataset.undo). The run calls back only into the writers (the dataset layer's), never
    into this command."""
    with ExitStack() as files:
        out = files.enter_context(_output(args.output))
        log = files.enter_context(_output(args.removed))
        writer = open_writer(out, out_fmt)
        files.push(writer)  # its exit first: the file finished (on success), then the files renamed
        on_removed = RemovalLog(log).write if log is not None else None
        kept = dedup_records(records, on_removed=on_removed, finish=files.close, **kwargs)
        try:
            for rec in kept:
                writer.write(rec)
                progress.tick()
        finally:
            cast(Generator, kept).close()  # ends the run now (undone into a collection), also on Ctrl-C


def _input_mb(inputs: list[str]) -> float | None:
    """The inputs' size in MB as stored (compressed files: compressed); None when one is stdin or not a file."""
    if any(path == "-" or not os.path.isfile(path) for path in inputs):
        return None
    return sum(os.path.getsize(path) for path in inputs) / 1e6


def _print_summary(args, stats: DedupStats, incremental: bool, seconds: float) -> None:
    mb = _input_mb(args.inputs)
    summary = {"read": stats.read, "kept": stats.kept, "removed": stats.removed, "output": args.output,
               "removed_log": args.removed, "keep": args.keep,
               "collection": args.collection if incremental else None, "against": args.against,
               "seconds": round(seconds, 3), "input_mb": None if mb is None else round(mb, 3),
               "mb_per_s": None if mb is None or seconds <= 0 else round(mb / seconds, 3)}
    if incremental:
        summary["replaced_keys"] = stats.replaced
        summary["same_key_matches"] = stats.same_key
        summary["recovered_keys"] = stats.recovered
    if args.stats is not None:  # written whole, as the outputs are
        with atomic_file(args.stats, "w") as fh:
            json.dump(summary, fh, indent=2)
            fh.write("\n")
    if args.json and args.output != "-" and args.removed != "-":
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not args.quiet:
        rate = f", {stats.read / seconds:,.0f} records/s" if seconds >= 0.5 else ""
        rate += f", {mb / seconds:,.1f} MB/s" if rate and mb is not None else ""
        where = f" (against collection '{args.collection}')" if incremental else (
            f" (against collection '{args.against}', read only)" if args.against else "")
        err(f"simdb: dedup kept {stats.kept:,} of {stats.read:,} records, removed {stats.removed:,}"
            f"{where} in {seconds:.1f} s{rate}")
        if incremental and stats.replaced:
            err(f"simdb: warning: {stats.replaced:,} kept records had a key already stored in "
                f"'{args.collection}' and replaced that row (keys should be unique)")
    if incremental and stats.recovered and not args.quiet:
        err(f"{PROG}: note: an earlier dedup run into '{args.collection}' was killed before it finished: the "
            f"{stats.recovered:,} records it had stored were taken out before this run began"
            + (f" ({stats.unrestored:,} rows it had replaced could not be put back)" if stats.unrestored else ""))
    if incremental and stats.same_key and not args.quiet:  # stderr: also with --json
        err(f"{PROG}: warning: {stats.same_key:,} records matched stored rows of the same key and were removed: "
            f"was this input deduplicated into '{args.collection}' before? (a stored record is a near-duplicate "
            "of itself; see docs/dedup.md)")


def _interrupted(args, session, index: SimhashIndex | None, stats: DedupStats) -> bool:
    """Say what an interrupted run left (its journal has taken out the rows it stored): the collection
    as it was, or none where this run created it (removed again, as ``simdb add`` does). False: nothing
    to say (no collection, or interrupted before the run began), the generic message is enough."""
    if index is None:
        return False
    undone = "" if not stats.undone else f"; the {stats.undone:,} records it had stored were taken out first"
    written = "" if args.output == "-" else f"; {args.output} was not written"
    if index.created:
        state = ("was removed (this run created it)" if discard_if_new(session.engine, index, 0) else
                 "was created by this run and kept (another writer is using it)")
        err(f"{PROG}: interrupted: collection '{args.collection}' {state}{undone}{written} "
            "(run the same command again)")
        return True
    if stats.undone is None:
        return False
    state = "is as it was before this run" if not stats.unrestored else "holds"
    err(f"{PROG}: interrupted: collection '{args.collection}' {state} ({len(index):,} "
        f"rows): the {stats.undone:,} records it had stored were taken out again{_unrestored(stats)}{written} "
        "(run the same command again)")
    return True


def _unrestored(stats: DedupStats) -> str:
    """What an undo could not put back, in words (nothing: empty)."""
    if not stats.unrestored:
        return ""
    return (f", but {stats.unrestored:,} rows it had replaced could not be put back: the collection's rule changed "
            "during the run and they kept no text to re-encode them from, so this run's rows stay under those keys")


def cmd_dedup(args, session) -> int:
    out_fmt = _check_arguments(args)
    incremental = bool(args.collection_given) or args.collection != "default"
    records = read_records(args.inputs, fmt=args.format, text_field=args.text_field, key_field=args.key_field,
                           encoding=args.encoding, root=args.root, max_text=args.max_text_bytes)
    stats = DedupStats()
    progress = _Progress(not args.quiet and (args.progress or sys.stderr.isatty()), stats)
    kwargs = {"k": args.k, "min_jaccard": args.min_jaccard, "keep": args.keep, "stats": stats,
              "batch_size": args.batch_size, "spill_dir": args.spill_dir}
    index = None
    if args.against is not None:  # read only: it must exist, and nothing is written to it
        if incremental:
            raise InputError("give -c NAME (dedup into NAME) or --against NAME (read NAME only), not both")
        args.collection = args.against
        session.require_collection()
        index = kwargs["against"] = SimhashIndex(session.engine, collection=args.against)
    elif incremental:
        index = kwargs["index"] = SimhashIndex(session.engine, collection=args.collection,
                                               store_texts=True if args.store_text else None)
    # without a collection the rule is decided in memory: the database is not opened (simdb.dataset.memory)
    started = time.monotonic()
    try:
        if args.min_jaccard is not None:  # against a Hamming-only collection, below the keys' reach: in the CLI's words
            refuse_rule_options(args, index)
        _write_kept(args, out_fmt, records, progress, kwargs)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: say what the collection holds now
        progress.close()
        if not _interrupted(args, session, index, stats):
            raise
        raise exc if isinstance(exc, Terminated) else Reported() from None
    except Exception as exc:
        if index is not None:  # the run's rows were taken out again (its journal): a new collection goes too
            discard_if_new(session.engine, index, 0)
            if isinstance(exc, CollectionChangedError) and stats.undone is not None:
                written = "" if args.output == "-" else f"; {args.output} was not written"
                raise CliError(f"{str(exc).splitlines()[0]} (the {stats.undone:,} records this run had stored were "
                               f"taken out again{_unrestored(stats)}{written})", EXIT_DATABASE) from exc
        raise
    finally:
        progress.close()
        if index is not None:
            index.close()
    _print_summary(args, stats, incremental, time.monotonic() - started)
    return 0
