"""Records out: the kept records of a dedup written *unchanged* (a JSONL line byte for byte, a CSV row
with the input's columns, a Parquet row with the input's schema), and the removal log.

Pure record-level code (no database): ``simdb dedup`` opens one :class:`RecordWriter` per output
(:func:`open_writer`) and a :class:`RemovalLog`; reading is :mod:`simdb.dataset.records`'s.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any

from simdb.dataset.defaults import FORMATS
from simdb.dataset.records import PARQUET_BATCH, Record, pyarrow_module
from simdb.errors import InputError, InvalidArgumentError

__all__ = ["RecordWriter", "RemovalLog", "open_writer"]


def _json_default(value):
    """JSON for values JSONL cannot hold natively (from Parquet/CSV input): dates as ISO, bytes as hex."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


class RecordWriter:
    """Writes records to one output in one format; :meth:`close` finishes the file (as a context
    manager: on a clean exit only, so that an error is not followed by a half file's footer)."""

    def __init__(self, fh, fmt: str):
        self.fh = fh
        self.fmt = fmt
        self.count = 0
        self._csv: Any = None  # csv.writer, made on the first record
        self._columns: list[str] = []  # set from the first record (CSV)
        self._parquet: Any = None  # pyarrow.parquet.ParquetWriter, made on the first flush
        self._rows: list[Mapping[str, Any]] = []
        self._schema = None

    def write(self, rec: Record) -> None:
        self.count += 1
        if self.fmt == "jsonl":
            if rec.raw is not None:
                self.fh.write(rec.raw if rec.raw.endswith(b"\n") else rec.raw + b"\n")
            else:
                line = json.dumps(rec.fields, ensure_ascii=False, default=_json_default)
                self.fh.write(line.encode("utf-8") + b"\n")
        elif self.fmt == "csv":
            self._write_csv(rec)
        else:
            if self._schema is None:
                self._schema = rec.schema
            self._rows.append(rec.fields)
            if len(self._rows) >= PARQUET_BATCH:
                self._flush_parquet()

    def _write_csv(self, rec: Record) -> None:
        if self._csv is None:
            self._columns = list(rec.fields)
            self._text = io.TextIOWrapper(self.fh, encoding="utf-8", newline="", write_through=True)
            self._csv = csv.writer(self._text, lineterminator="\n")
            self._csv.writerow(self._columns)
        if list(rec.fields) != self._columns:
            missing = [c for c in self._columns if c not in rec.fields]
            extra = [c for c in rec.fields if c not in self._columns]
            if missing or extra:
                raise InputError(f"{rec.where}: fields differ from the first record's ({', '.join(self._columns)}): "
                                 "CSV output needs the same columns in every record")

        def cell(v):
            if v is None:
                return ""
            if isinstance(v, (dict, list)):
                return json.dumps(v, ensure_ascii=False, default=_json_default)
            return v

        self._csv.writerow([cell(rec.fields[c]) for c in self._columns])

    def _flush_parquet(self) -> None:
        if not self._rows:
            return
        pa = pyarrow_module()
        try:
            table = pa.Table.from_pylist(self._rows, schema=self._schema)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InputError(f"records do not fit one Parquet schema ({exc})") from None
        if self._parquet is None:
            self._schema = table.schema
            self._parquet = pa.parquet.ParquetWriter(self.fh, table.schema)
        self._parquet.write_table(table)
        self._rows = []

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()

    def close(self) -> None:
        """Finish the output (Parquet: the last row group and the footer)."""
        if self.fmt == "parquet":
            self._flush_parquet()
            if self._parquet is None:  # no record kept: still a valid, empty file
                pa = pyarrow_module()
                schema = self._schema if self._schema is not None else pa.schema([])
                self._parquet = pa.parquet.ParquetWriter(self.fh, schema)
            self._parquet.close()
        elif self._csv is not None:
            self._text.flush()
            self._text.detach()
        self.fh.flush()


class RemovalLog:
    """The removal log of a dedup: one JSON line per removed record (:meth:`simdb.results.Removal.to_dict`)
    on a binary file object."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, removal: Any) -> None:
        self.fh.write(json.dumps(removal.to_dict(), ensure_ascii=False).encode("utf-8") + b"\n")


def open_writer(fh, fmt: str) -> RecordWriter:
    """A :class:`RecordWriter` over a binary file object ``fh`` (Parquet checks pyarrow at once)."""
    if fmt not in FORMATS:
        raise InvalidArgumentError(f"unknown output format {fmt!r}: one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        pyarrow_module()
    return RecordWriter(fh, fmt)
