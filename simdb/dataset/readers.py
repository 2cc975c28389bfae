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

__all__ = ["Record", "check_encoding", "csv_records", "jsonl_records", "make_record", "max_line_bytes"]


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


def max_line_bytes(max_text: int | None = None) -> int:
    """The longest JSONL line read: a text of the limit escaped as ``\\uXXXX`` (6 bytes a byte) plus 1 MiB."""
    return 6 * max_text_bytes(max_text) + (1 << 20)


def make_record(obj: Mapping, where: str, fallback_key: str, text_field: str, key_field: str | None,
                max_text: int | None, raw: bytes | None = None, schema: Any = None) -> Record:
    """The record of one parsed object: its key (``key_field``, else ``id`` when present, else
    ``fallback_key``) and text, both checked as the store will check them, errors naming ``where``."""
    if text_field not in obj:
        raise InputError(f"{where}: no field {text_field!r}; use --text-field")
    text = obj[text_field]
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InputError(f"{where}: field {text_field!r} is not a string")
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
    limit = max_line_bytes(max_text)
    for lineno, raw in enumerate(_lines(fh, limit), 1):
        where = f"{path}:{lineno}"
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
            raise InputError(f"{where}: invalid JSON ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object per line")
        yield make_record(obj, where, f"{label}:{lineno}", text_field, key_field, max_text, raw=raw)


def csv_records(fh: BinaryIO, path: str, label: str, text_field: str = "text", key_field: str | None = None,
                encoding: str = "utf-8", max_text: int | None = None,
                on_row: Callable[[], None] | None = None) -> Iterator[Record]:
    """The records of a CSV stream with a header row (strict: an unterminated quote or a row with
    more values than the header is an error); ``on_row`` is called before each record is made
    (``add`` counts the bytes read there)."""
    check_encoding(encoding)
    csv.field_size_limit(max_text_bytes(max_text))  # a field is a text or a key: never more than the limit
    stream = io.TextIOWrapper(fh, encoding=encoding, newline="")
    reader = csv.DictReader(stream, strict=True)
    try:
        fields = reader.fieldnames or []
        if text_field not in fields:
            raise InputError(f"{path}: no column {text_field!r} (columns: {', '.join(fields) or 'none'}); "
                             "use --text-field")
        if key_field is not None and key_field not in fields:
            raise InputError(f"{path}: no column {key_field!r} (columns: {', '.join(fields)}); use --key-field")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row:
                raise InputError(f"{where}: more values than columns ({len(fields)})")
            if on_row is not None:
                on_row()
            yield make_record(row, where, f"{label}:{reader.line_num}", text_field, key_field, max_text)
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid {encoding} text; use --encoding") from None
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: invalid CSV ({exc})") from None
    finally:
        stream.detach()
