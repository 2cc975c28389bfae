"""The one reader of JSONL and CSV records, shared by ``simdb add`` and ``simdb dedup``.

Why one module: the same file must get the same verdict from every command (issue 31).
Before, ``add`` and ``dedup`` each had a parser and they disagreed: ``add`` dropped the
extra values of a CSV row that ``dedup`` refused, ``dedup`` accepted an unterminated
quote that ``add`` refused, and only ``add`` bounded its reads. Here every rule lives
once, and every problem is an :class:`~simdb.errors.InputError` (exit status 2 in the
CLI) naming the file and line:

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

Pure: no database, no CLI; callers open the files (``add`` refuses devices and FIFOs,
``dedup`` also reads stdin and ``.gz``) and hand over binary file objects.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from simdb.core.validate import check_key, check_text, max_text_bytes
from simdb.errors import InputError, InvalidArgumentError

__all__ = ["Record", "check_encoding", "csv_records", "jsonl_records", "make_record", "max_line_bytes", "record_text"]

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
