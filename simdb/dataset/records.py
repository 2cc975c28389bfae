"""Records in: JSONL, CSV and Parquet files read as records, streamed, plus the rule for file keys.

Pure record-level code (no database): ``simdb dedup`` reads datasets with :func:`read_records` (and
writes the kept records *unchanged* with :mod:`simdb.dataset.writers`: each :class:`Record` keeps
what that needs); ``simdb add`` reads its JSONL and CSV with the same readers.

Formats are chosen by extension (``.jsonl``/``.ndjson``/``.json``, ``.csv``,
``.parquet``/``.pq``; ``.gz`` on JSONL/CSV is decompressed) or given explicitly.
``-`` is stdin/stdout (JSONL or CSV; Parquet needs a seekable file to read).
Parquet needs pyarrow: ``pip install 'simdb-postgres[parquet]'`` (also in ``simdb-postgres[spark]``).

File keys (:func:`file_key`): the key of a file is its path relative to a root
directory (default: the current directory), in ``/`` form, with ``.`` and ``..``
normalised; a file outside the root keys as its resolved absolute path.
So ``simdb add docs/`` from the repository root and ``simdb check
/abs/repo/docs/a.txt`` (or ``cd docs && simdb check --root .. a.txt``) agree on
``docs/a.txt``. :func:`is_same_file` is what ``check`` uses to never count a file
as a near-duplicate of itself, whichever directory or path form it is run with.

Reading (:func:`jsonl_records`, :func:`csv_records`): the one reader of JSONL and CSV, shared by
``simdb add`` and ``simdb dedup``, so that a file gets the same verdict from every command. Every
problem is an :class:`~simdb.errors.InputError` (exit status 2 in the CLI) naming the file and line:

- reads are bounded: a JSONL line longer than :func:`max_line_bytes` (the text limit,
  escaped, plus room for the other fields) is refused before it is read whole, and a CSV
  field longer than the text limit is refused by the csv module, so ``/dev/zero`` or a
  file without newlines never fills memory;
- JSON nested too deeply for the parser (``RecursionError``), an unknown encoding
  (``LookupError``), text not valid in the encoding: input errors, never internal ones;
- CSV is strict: an unterminated quote, and a row with more values than the header;
- a UTF-8 byte order mark (Excel writes one) starts the file, not its first column's name or
  its first JSON line: it is skipped where the encoding is UTF-8 (another ``--encoding`` is
  taken as given);
- a record is located by its first line (``FILE:LINE``, also in default keys): a CSV record
  whose quoted text spans lines 4-5 is line 4, as an editor shows it;
- a key is checked as the store checks it (no NUL, no lone surrogate) and a text against
  the text limit *here*, so the message names the line, not a batch position.

Callers open the files (``add`` refuses devices and FIFOs, ``dedup`` also reads stdin and ``.gz``)
and hand over binary file objects.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from simdb.core.validate import check_key, check_text, max_text_bytes
from simdb.dataset.defaults import FORMATS
from simdb.errors import InputError, InvalidArgumentError

__all__ = [
    "PARQUET_HINT",
    "Record",
    "check_encoding",
    "check_files",
    "check_input",
    "csv_records",
    "file_key",
    "format_of",
    "is_same_file",
    "jsonl_records",
    "make_record",
    "max_line_bytes",
    "pyarrow_module",
    "read_records",
    "record_text",
]

BOM = codecs.BOM_UTF8


@dataclass(slots=True)
class Record:
    """One input record: its key, its text, the fields as read, and where it came from.

    ``raw`` is the JSONL line as read (written back byte for byte to JSONL output);
    ``schema`` the Parquet schema it was read with (kept for Parquet output)."""

    key: str
    text: str
    fields: Mapping[str, Any]
    where: str
    raw: bytes | None = None
    schema: Any = None

    @property
    def nbytes(self) -> int:
        return len(self.raw) if self.raw is not None else len(self.text)


def check_encoding(encoding: str) -> str:
    """``encoding`` if Python knows it; else an InvalidArgumentError naming ``--encoding`` (not a LookupError)."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError, ValueError):
        raise InvalidArgumentError(f"unknown encoding {encoding!r} (--encoding)") from None
    return encoding


def _without_bom(encoding: str) -> str:
    """The codec that reads ``encoding`` and skips a leading UTF-8 byte order mark: ``utf-8-sig``
    for any spelling of UTF-8 (Excel's "CSV UTF-8" starts with one), else ``encoding`` itself."""
    return "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding


def _json_error(exc: ValueError) -> str:
    """A JSON parser's complaint with its position: the message of :class:`json.JSONDecodeError`
    ends in " at" (its ``str`` appends the position), so that alone reads "Invalid control
    character at"; the column (1-based, in characters) says where instead."""
    msg, column = getattr(exc, "msg", None), getattr(exc, "colno", None)
    if not isinstance(msg, str) or not isinstance(column, int):  # not the parser's (e.g. an int too long)
        return f"invalid JSON ({exc})"
    return f"invalid JSON at column {column}: {msg.removesuffix(' at')}"


def max_line_bytes(max_text: int | None = None) -> int:
    """The longest JSONL line read: a text of the limit escaped as ``\\uXXXX`` (6 bytes a byte) plus 1 MiB."""
    return 6 * max_text_bytes(max_text) + (1 << 20)


def record_text(obj: Mapping, where: str, text_field: str, hint: str = "") -> str:
    """The text of a record's ``text_field`` (None: the empty text); a missing field, or one that is
    not a string, is an :class:`~simdb.errors.InputError` naming ``where`` (``hint``: what to do)."""
    if text_field not in obj:
        raise InputError(f"{where}: no field {text_field!r}{hint}")
    text = obj[text_field]
    if text is None:
        return ""
    if not isinstance(text, str):
        raise InputError(f"{where}: field {text_field!r} is not a string")
    return text


def make_record(obj: Mapping, where: str, fallback_key: str, text_field: str, key_field: str | None,
                max_text: int | None, raw: bytes | None = None, schema: Any = None) -> Record:
    """The record of one parsed object: its key (``key_field``, else ``id`` when present, else
    ``fallback_key``) and text, both checked as the store will check them, errors naming ``where``."""
    text = record_text(obj, where, text_field, "; use --text-field")
    field = key_field or "id"
    key = obj.get(field)
    if key is None or key == "":
        if key_field is not None:
            raise InputError(f"{where}: no field {key_field!r}; use --key-field")
        key = fallback_key
    elif isinstance(key, (dict, list, bytes)):
        raise InputError(f"{where}: field {field!r} must be a string or number, not {type(key).__name__}")
    try:
        key = check_key(str(key), f"key {field!r}")
        check_text(text, f"field {text_field!r}", max_text)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return Record(key, text, obj, where, raw=raw, schema=schema)


def _lines(fh: BinaryIO, limit: int) -> Iterator[bytes]:
    return iter(lambda: fh.readline(limit + 1), b"")


def jsonl_records(fh: BinaryIO, path: str, label: str, text_field: str = "text", key_field: str | None = None,
                  encoding: str = "utf-8", max_text: int | None = None) -> Iterator[Record]:
    """The records of a JSONL stream (one object a line; blank lines skipped); ``label`` keys
    records without a key as ``LABEL:LINE``."""
    check_encoding(encoding)
    skip_bom = _without_bom(encoding) != encoding
    limit = max_line_bytes(max_text)
    for lineno, raw in enumerate(_lines(fh, limit), 1):
        where = f"{path}:{lineno}"
        if lineno == 1 and skip_bom and raw.startswith(BOM):
            raw = raw[len(BOM):]  # nor written back with the line: the output is not a file's start
        if len(raw) > limit:
            raise InputError(f"{where}: line longer than {limit:,} bytes (the maximum text size is "
                             f"{max_text_bytes(max_text):,} bytes; raise it with --max-text-bytes)")
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode(encoding))
        except UnicodeDecodeError:
            raise InputError(f"{where}: not valid {encoding} text; use --encoding") from None
        except RecursionError:
            raise InputError(f"{where}: invalid JSON (nested too deeply)") from None
        except ValueError as exc:
            raise InputError(f"{where}: {_json_error(exc)}") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object per line")
        yield make_record(obj, where, f"{label}:{lineno}", text_field, key_field, max_text, raw=raw)


def csv_records(fh: BinaryIO, path: str, label: str, text_field: str = "text", key_field: str | None = None,
                encoding: str = "utf-8", max_text: int | None = None,
                on_row: Callable[[], None] | None = None) -> Iterator[Record]:
    """The records of a CSV stream with a header row (strict: an unterminated quote or a row with
    more values than the header is an error); ``on_row`` is called before each record is made
    (``add`` counts the bytes read there). Rows become dicts as :class:`csv.DictReader` makes them
    (missing values None), read with :func:`csv.reader` to know where each record starts: the
    line after the previous row, blank rows included (``DictReader`` skips those unseen)."""
    check_encoding(encoding)
    csv.field_size_limit(max_text_bytes(max_text))  # a field is a text or a key: never more than the limit
    stream = io.TextIOWrapper(fh, encoding=_without_bom(encoding), newline="")
    reader = csv.reader(stream, strict=True)
    try:
        fields = next(reader, [])
        if text_field not in fields:
            raise InputError(f"{path}: no column {text_field!r} (columns: {', '.join(fields) or 'none'}); "
                             "use --text-field")
        if key_field is not None and key_field not in fields:
            raise InputError(f"{path}: no column {key_field!r} (columns: {', '.join(fields)}); use --key-field")
        first = reader.line_num + 1
        for values in reader:
            line, first = first, reader.line_num + 1
            if not values:
                continue  # a blank line
            where = f"{path}:{line}"
            if len(values) > len(fields):
                raise InputError(f"{where}: more values than columns ({len(fields)})")
            row: dict[str, Any] = dict(zip(fields, values))
            row.update((name, None) for name in fields[len(values):])
            if on_row is not None:
                on_row()
            yield make_record(row, where, f"{label}:{line}", text_field, key_field, max_text)
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid {encoding} text; use --encoding") from None
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: invalid CSV ({exc})") from None
    finally:
        stream.detach()


PARQUET_HINT = "Parquet needs pyarrow: pip install 'simdb-postgres[parquet]' (or 'simdb-postgres[spark]')"
#: rows per Parquet record batch read, and per row group written
PARQUET_BATCH = 8192


# --------------------------------------------------------------------------- file keys


def _resolved(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(path)).resolve()


def file_key(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """The stable key of a file: its path relative to ``root`` (default: the current directory)
    with ``/`` separators, or its resolved absolute path when it is outside ``root``.

    ``.`` and ``..`` are normalised; symlinks are kept as written (``examples/x.txt`` through a
    symlinked ``examples`` keys as ``examples/x.txt``) unless the path is outside the root as
    written, in which case both are resolved and compared again (``/tmp`` vs ``/private/tmp``)."""
    full = Path(os.path.normpath(os.path.abspath(path)))
    base = Path(os.path.normpath(os.path.abspath(root if root is not None else os.curdir)))
    try:
        return full.relative_to(base).as_posix()
    except ValueError:
        pass
    full, base = full.resolve(), base.resolve()
    try:
        return full.relative_to(base).as_posix()
    except ValueError:
        return full.as_posix()


def is_same_file(key: str, meta: Any, path: str | os.PathLike, root: str | os.PathLike | None = None) -> bool:
    """True if a stored row (``key``, ``meta``) is the file ``path`` itself.

    Three ways, so that collections keyed by older rules are recognised too: the key is
    the file's :func:`file_key`; the row's ``meta["path"]`` (the resolved absolute path
    ``simdb add`` records) is the file; or the key read as a path (absolute, or relative
    to ``root`` or to the current directory: the pre-``--root`` rule) is the file."""
    full = _resolved(path)
    if key == file_key(full, root):
        return True
    if isinstance(meta, Mapping) and isinstance(meta.get("path"), str) and _resolved(meta["path"]) == full:
        return True
    if not key or "\x00" in key:
        return False
    candidates = [Path(key)] if os.path.isabs(key) else [
        Path(root if root is not None else os.curdir) / key, Path(os.curdir) / key]
    try:
        return any(_resolved(c) == full for c in candidates)
    except (OSError, RuntimeError, ValueError):  # e.g. a key too long for a path, a symlink loop
        return False


# --------------------------------------------------------------------------- records


def format_of(path: str, given: str | None = None) -> str:
    """The format of ``path``: ``given`` if not None/"auto", else by extension (JSONL for ``-``)."""
    if given not in (None, "auto"):
        if given not in FORMATS:
            raise InvalidArgumentError(f"unknown format {given!r}: one of {', '.join(FORMATS)}")
        return given
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith((".jsonl", ".ndjson", ".json")) or path == "-":
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    raise InvalidArgumentError(
        f"cannot tell the format of {path!r} from its name: use --format jsonl|csv|parquet")


def check_input(path: str) -> None:
    """Refuse a directory as input before anything asks its format: its name has no format to
    tell, and the message that said so sent the user after --format instead."""
    if path != "-" and os.path.isdir(path):
        raise InputError(f"{path} is a directory: dedup reads JSONL, CSV or Parquet files "
                         f"(give the files in it, e.g. {os.path.join(path, '*.jsonl')})")


def check_files(inputs: list[str], output: str, removed: str | None, fmt: str | None = None,
                output_fmt: str = "auto", encoding: str = "utf-8", stats: str | None = None) -> str:
    """Refuse, before anything is read or written, the files of a dedup that would lose data or read
    stdin twice (an output that is an input or another output, a directory as input, an unknown
    encoding or format); the output's format: ``output_fmt``, else told by the output's name, else the
    inputs' one format, else JSONL."""
    check_encoding(encoding)
    outputs = [("--output", output), ("--removed", removed), ("--stats", stats)]
    for n, (option, target) in enumerate(outputs):
        for other, path in outputs[n + 1:]:
            if target is not None and path is not None and _same_file(target, path):
                raise InputError(f"{option} and {other} must be different files"
                                 + (" (both are stdout)" if target == "-" else ""))
    if inputs.count("-") > 1:
        raise InputError("stdin ('-') can be read only once")
    for path in inputs:
        check_input(path)  # a directory: before the output's format is told from the inputs' names
        for option, target in outputs:
            if path != "-" and target is not None and target != "-" and _same_file(path, target):
                raise InputError(f"{option} {target} is also an input")
    if output_fmt != "auto":
        return output_fmt
    if output != "-":
        try:
            return format_of(output)
        except ValueError:
            pass
    kinds = {format_of(i, fmt) for i in inputs}
    return kinds.pop() if len(kinds) == 1 else "jsonl"


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file, so that writing one would replace the other:
    the same inode where both exist (symlinks, hard links, ``./x`` and ``x``), else the same
    resolved path (a dangling symlink to the other); ``-`` (stdout) is the same as ``-`` only."""
    if a == "-" or b == "-":
        return a == b
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):  # an unreadable path: the open that follows says why
        return False


def pyarrow_module():
    """pyarrow (with its parquet module), or the InputError saying how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise InputError(PARQUET_HINT) from None
    return pyarrow


def _open_binary(path: str):
    if path == "-":
        return sys.stdin.buffer, False
    try:  # O_NONBLOCK: opening a FIFO must not wait for a writer; checked on the open file (no race)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"not a regular file: {path} (devices, FIFOs and sockets are not read; use '-' for a pipe)")
    os.set_blocking(fd, True)
    fh = os.fdopen(fd, "rb")
    if path.lower().endswith(".gz"):
        return gzip.GzipFile(fileobj=fh), True
    return fh, True


def read_records(
    paths: Iterable[str],
    *,
    fmt: str | None = None,
    text_field: str = "text",
    key_field: str | None = None,
    encoding: str = "utf-8",
    root: str | os.PathLike | None = None,
    max_text: int | None = None,
) -> Iterator[Record]:
    """Stream the records of JSONL, CSV or Parquet files (``-``: stdin) in order.

    A record's key is its ``key_field`` (default ``id`` when present), else
    ``FILE:LINE`` (``FILE:ROW`` for Parquet, 1-based) with FILE keyed by :func:`file_key`.
    Bad input raises :class:`~simdb.errors.InputError` naming the file and line; JSONL and
    CSV are parsed by :func:`jsonl_records` and :func:`csv_records` (the readers ``simdb add`` uses too), with
    reads bounded by ``max_text`` (default: :func:`simdb.core.validate.max_text_bytes`)."""
    for path in paths:
        path = os.fspath(path)
        check_input(path)
        kind = format_of(path, fmt)
        label = "-" if path == "-" else file_key(path, root)
        if kind == "parquet":
            yield from _parquet_records(path, label, text_field, key_field, max_text)
            continue
        if path != "-" and not os.path.exists(path):
            raise InputError(f"no such file: {path}")
        fh, close = _open_binary(path)
        try:
            if kind == "jsonl":
                yield from jsonl_records(fh, path, label, text_field, key_field, encoding, max_text)
            else:
                yield from csv_records(fh, path, label, text_field, key_field, encoding, max_text)
        except (OSError, EOFError, zlib.error) as exc:  # e.g. a truncated or corrupt .gz
            raise InputError(f"cannot read {path}: {exc}") from None
        finally:
            if close:
                fh.close()


def _parquet_records(path, label, text_field, key_field, max_text) -> Iterator[Record]:
    if path == "-":
        raise InputError("Parquet cannot be read from stdin (it needs a seekable file): give the file's path")
    pa = pyarrow_module()
    if not os.path.exists(path):
        raise InputError(f"no such file: {path}")
    try:
        pf = pa.parquet.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    schema = pf.schema_arrow
    if text_field not in schema.names:
        raise InputError(f"{path}: no column {text_field!r} (columns: {', '.join(schema.names)}); use --text-field")
    if key_field is not None and key_field not in schema.names:
        raise InputError(f"{path}: no column {key_field!r} (columns: {', '.join(schema.names)}); use --key-field")
    row = 0
    batches = pf.iter_batches(batch_size=PARQUET_BATCH)
    while True:
        try:  # a corrupt page fails here, after the footer read well: still the file's fault, not simdb's
            batch = next(batches, None)
            objs = [] if batch is None else batch.to_pylist()
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: row {row + 1}: not readable Parquet ({exc})") from None
        if batch is None:
            return
        for obj in objs:
            row += 1
            yield make_record(obj, f"{path}: row {row}", f"{label}:{row}", text_field, key_field, max_text,
                              schema=schema)
