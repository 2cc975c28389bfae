"""Reading what the commands are given: files, folders, JSONL and CSV records, query text.

Every problem names the path (and line) it comes from and is a :class:`CliError`
or, for JSONL and CSV records, an :class:`~simdb.errors.InputError` (both exit status 2);
a text is never read past the text limit of the run (so a huge file, or ``/dev/zero``,
is refused, not read into memory). JSONL and CSV are parsed by :mod:`simdb.dataset.records`,
the reader ``simdb dedup`` uses too: one file, one verdict.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from simdb.cli.output import err
from simdb.cli.status import PROG, CliError
from simdb.core.validate import max_text_bytes, unicode_problem
from simdb.dataset.records import csv_records, file_key, jsonl_records
from simdb.errors import InputTooLargeError
from simdb.util.confined_files import NotInsideError, check_directory, open_inside

__all__ = [
    "InputFile", "Record", "walk", "format_of", "read_limited", "open_regular",
    "read_text", "file_records", "iter_records", "read_query_text",
]

@dataclass
class Record:
    key: str
    text: str
    nbytes: int = 0
    path: str | None = None  # a text file's resolved absolute path (kept in meta.path: see records.is_same_file)


def _undecodable(path: Path) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


class InputFile(NamedTuple):
    """A file to read: named on the command line (``folder`` None) or found in the named ``folder``
    (its real path), where it is read only from inside that folder (:func:`simdb.util.confined_files.open_inside`)."""

    path: Path
    folder: Path | None = None


def _skip(reason: str, skipped: list[dict] | None, key: str) -> None:
    if skipped is None:
        err(f"{PROG}: skipped {reason}")
    else:
        skipped.append({"key": key, "reason": reason})


def _matches(folder: Path, glob: str, skipped: list[dict] | None) -> Iterator[Path]:
    """What ``folder.rglob(glob)`` yields, except that a directory which cannot be listed is skipped
    and named (``skipped``) instead of ending the walk.

    Why (security audit): a subdirectory renamed or removed while ``simdb add DIR`` walked the tree
    made ``rglob`` raise, aborting the whole add; one without read permission vanished silently. Each
    directory is globbed on its own (as ``rglob`` does: every directory under ``folder``, linked ones
    not entered), so one failure costs that directory only. Hidden directories are not entered:
    nothing under them is read anyway."""
    seen: set[Path] = set()
    pending = [folder]
    while pending:
        here = pending.pop()
        try:
            with os.scandir(here) as listing:
                subdirs = [here / e.name for e in listing
                           if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
            matches = list(here.glob(glob))
        except OSError as exc:
            name = _undecodable(here)
            _skip(f"{name}: cannot read directory ({exc.strerror or exc})", skipped, name)
            continue
        pending += sorted(subdirs, reverse=True)
        for f in matches:
            if f not in seen:
                seen.add(f)
                yield f


def _files_in(folder: Path, raw: str, glob: str, skipped: list[dict] | None) -> list[InputFile]:
    """The regular, non-hidden files under ``folder`` matching ``glob``, sorted. Skipped with a
    warning (or recorded in ``skipped``): names that are not valid UTF-8, and anything that would
    be read from outside the folder (a symbolic link out of it) or is not a regular file."""
    if not os.access(folder, os.R_OK | os.X_OK):
        raise CliError(f"cannot read directory: {raw}")
    root = check_directory(folder, "directory")
    linked_dirs = "/" in glob or os.sep in glob  # a pattern's directory part may name a link: resolve each match
    found = []
    for f in _matches(folder, glob, skipped):
        rel = f.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue  # hidden files and directories (.git, .venv, ...)
        if unicode_problem(file_key(f)):
            name = _undecodable(f)
            _skip(f"{name}: file name is not valid UTF-8 (rename it to add it)", skipped, name)
            continue
        try:  # rglob walks no linked directory, so f leads elsewhere only if it is a link or the glob has a /
            mode = os.lstat(f).st_mode
            if stat.S_ISLNK(mode) or linked_dirs:
                real = os.path.realpath(f)
                if not _under(real, root):
                    _skip(f"{f}: symbolic link to {_undecodable(Path(real))}, outside {raw} (links are not "
                          "followed out of a named folder)", skipped, f.as_posix())
                    continue
                mode = os.stat(real).st_mode
        except OSError:
            continue  # a dangling link, or gone since the listing
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            _skip(f"{f}: not a regular file (devices, FIFOs and sockets are not read)", skipped, f.as_posix())
            continue
        found.append(InputFile(f, root))
    return sorted(found)


def _under(path: str, root: Path) -> bool:
    try:
        return os.path.commonpath([path, str(root)]) == str(root)
    except ValueError:
        return False


def walk(paths: list[str], glob: str, skipped: list[dict] | None = None) -> list[InputFile]:
    """Expand PATHs to files. Fails fast on a missing or unreadable path.

    A file inside a directory whose name is not valid UTF-8 (it could not be a key: PostgreSQL
    text is UTF-8), or that is a symbolic link leading out of the directory, or not a regular
    file, is skipped with a warning naming it (``skipped``), never aborting the folder. A file
    named explicitly is read even where it is a symbolic link: the user chose it."""
    files: list[InputFile] = []
    for raw in paths:
        if raw == "-":
            raise CliError("reading from stdin is not supported here: give files or directories")
        path = Path(raw)
        if not path.exists():
            raise CliError(f"no such file or directory: {raw}")
        if path.is_dir():
            files += _files_in(path, raw, glob, skipped)
        elif path.is_file():
            if not os.access(path, os.R_OK):
                raise CliError(f"cannot read file: {raw} (permission denied)")
            if unicode_problem(file_key(path)):
                raise CliError(f"{_undecodable(path)}: file name is not valid UTF-8 (rename it to add it)")
            files.append(InputFile(path))
        else:
            raise CliError(f"not a regular file or directory: {raw}")
    return files


def format_of(path: Path, fmt: str) -> str:
    """``fmt`` unless "auto"; else by extension, as ``simdb dedup`` reads it, a ``.gz`` decompressed:
    ``.jsonl``/``.ndjson`` and ``.csv`` are records, anything else one text. (``.json`` is one text
    here: ``add`` and ``check`` read files of a tree, where a ``.json`` is a JSON document; ``dedup``
    reads datasets and takes ``.json`` as JSON Lines, the form dataset tools write under that name.)"""
    if fmt != "auto":
        return fmt
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes[-1:] == [".gz"]:
        suffixes.pop()
    suffix = suffixes[-1] if suffixes else ""
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "text"


@contextlib.contextmanager
def _reading(path: Path, folder: Path | None) -> Iterator:
    """``path`` opened by :func:`open_regular`, a ``.gz`` file decompressed (read as far as asked only:
    the text limit bounds what a small archive may expand to); a read error, or a corrupt or truncated
    ``.gz``, raised as a CliError naming the path."""
    with open_regular(path, folder) as raw:
        gzipped = path.name.lower().endswith(".gz")
        with gzip.GzipFile(fileobj=raw) if gzipped else raw as fh:
            try:
                yield fh
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise CliError(f"cannot read {path}: not a complete gzip file ({exc})") from exc
            except OSError as exc:
                raise CliError(f"cannot read {path}: {exc.strerror or exc}") from exc


def read_limited(fh, limit: int, where: str) -> bytes:
    """At most ``limit`` bytes from ``fh``; more is an InputTooLargeError (never read to the end of /dev/zero)."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputTooLargeError(f"{where} is larger than the maximum text size of {limit:,} bytes "
                                 "(raise it with --max-text-bytes or $SIMDB_MAX_TEXT_BYTES)")
    return data


def open_regular(path: Path, folder: Path | None = None):
    """Open ``path`` for reading only if it is a regular file (not a FIFO, device or directory);
    with ``folder`` (a folder the user named, where the file was found), only from inside it."""
    if folder is not None:
        try:
            fd = open_inside(folder, os.path.abspath(path))
        except NotInsideError as exc:
            raise CliError(f"not read: {path}: {exc}") from None
        return os.fdopen(fd, "rb")
    try:  # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked on the open file: no race with a swap
        os.close(fd)
        raise CliError(f"not a regular file: {path} (devices, FIFOs and sockets are not read)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_text(path: Path, encoding: str, limit: int | None = None, folder: Path | None = None) -> tuple[str, int]:
    with _reading(path, folder) as fh:
        data = read_limited(fh, max_text_bytes(limit), str(path))
    if b"\x00" in data[:8192]:
        raise CliError(f"{path}: looks like a binary file, not text")
    try:
        return data.decode(encoding), len(data)
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not valid {encoding} text (byte {exc.start}); use --encoding") from exc
    except LookupError:
        raise CliError(f"unknown encoding {encoding!r}") from None


class _CountingReader(io.RawIOBase):
    """The bytes read so far, so that progress can be shown in bytes of the CSV file."""

    def __init__(self, fh):
        self.fh = fh
        self.count = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = self.fh.readinto(b)
        self.count += n or 0
        return n


def file_records(path: Path, folder: Path | None, args, skipped: list[dict] | None) -> Iterator[Record]:
    """The records of one file, by ``--format`` (else by extension): a JSONL or CSV file's, parsed by
    :mod:`simdb.dataset.records` (the reader ``dedup`` uses; a CSV record's ``nbytes`` counts the file's
    bytes read for its row: progress is shown in bytes of the file), or a text file as one record. A text
    file found in a directory that cannot be read as text (a binary file, say) is skipped and named in
    ``skipped`` (None: on stderr); one named explicitly is an error."""
    fmt = format_of(path, args.format)
    key = file_key(path, args.root)
    if fmt == "text":
        try:
            text, nbytes = read_text(path, args.encoding, args.max_text_bytes, folder)
        except (CliError, InputTooLargeError) as exc:
            if folder is None:
                raise
            _skip(str(exc), skipped, key)
            return
        yield Record(key, text, nbytes, Path(os.path.abspath(path)).resolve().as_posix())
        return
    fields = (args.text_field, args.key_field, args.encoding, args.max_text_bytes)
    with _reading(path, folder) as fh:
        if fmt == "jsonl":
            for rec in jsonl_records(fh, str(path), key, *fields):
                yield Record(rec.key, rec.text, rec.nbytes)
            return
        counter = _CountingReader(fh)
        before = 0
        for rec in csv_records(io.BufferedReader(counter), str(path), key, *fields):
            nbytes, before = counter.count - before, counter.count
            yield Record(rec.key, rec.text, nbytes)


def iter_records(files: list[InputFile], args, skipped: list[dict]) -> Iterator[Record]:
    """The records of ``files`` in order (:func:`file_records`)."""
    for path, folder in files:
        yield from file_records(path, folder, args, skipped)


def read_query_text(args) -> str | None:
    """The text of ``simdb query``: TEXT, --file or stdin (exactly one; None: --key, a stored text). An
    empty or whitespace-only text is a usage error from each of them alike, naming where it came from:
    it has no words, so it could only ever answer "no near-duplicates"."""
    sources = [s for s in (args.text not in (None, "-") and "TEXT", args.file and "--file", args.key and "--key") if s]
    if len(sources) > 1:
        raise CliError(f"give only one of TEXT, --file and --key (got {' and '.join(sources)})")
    if args.key is not None:
        return None
    if args.text not in (None, "-"):
        if not args.text.strip():  # the verdict of an empty stdin: nothing to search for is a usage error
            raise CliError("the query TEXT is empty: give the text to search for")
        return args.text
    if args.file:
        path = Path(args.file)
        if not path.exists():
            raise CliError(f"no such file: {args.file}")
        if path.is_dir():
            raise CliError(f"is a directory, not a file: {args.file}")
        text = read_text(path, args.encoding, args.max_text_bytes)[0]
        if not text.strip():  # as an empty TEXT or stdin: there is nothing to search for
            raise CliError(f"--file {args.file} is empty: give a file holding the text to search for")
        return text
    if args.text is None and sys.stdin.isatty():
        raise CliError("give TEXT, --file FILE or --key KEY, or pipe the text on stdin")
    data = read_limited(sys.stdin.buffer, max_text_bytes(args.max_text_bytes), "standard input")
    if not data.strip():
        raise CliError("standard input is empty: give the query text as TEXT, with --file FILE or on stdin")
    try:
        return data.decode(args.encoding)
    except UnicodeDecodeError:
        raise CliError(f"stdin is not valid {args.encoding} text; use --encoding") from None
