"""PostgreSQL's binary formats for simdb's rows and sketches: rows of ``simdb_fingerprints``
(key, fp, meta, shingles[, bands[, text_z]]) for COPY, and the ``array_send`` bytes of stored sketches read back.

Why binary and not COPY's text format: a verified row carries a sketch of up to 384 int4
values. As text, PostgreSQL parses every value with ``int4in`` (measured: ~27 us a row, more
than the rest of the row's load) and Python formats every value with ``str`` (~20 us); in
the binary format the values go from the numpy array to the wire in one ``tobytes`` and the
server copies them (~7 us). A plain row costs the same either way.

Pure (no connection): chunks are encoded in worker processes (:mod:`simdb.store.encode`);
the loader (:mod:`simdb.store.bulk`) sends :data:`HEADER` once before them and :data:`TRAILER`
after. Format: https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from simdb.core.sketch.compare import SketchRows

__all__ = ["COPY_OPTIONS", "HEADER", "TRAILER", "band_fields", "decode_sketches", "encode_rows", "sketch_fields"]

#: the COPY options of these rows (FORMAT binary)
COPY_OPTIONS = "FORMAT binary"
#: signature, flags (no OIDs), header extension length 0
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
#: the end of the data: a field count of -1
TRAILER = struct.pack(">h", -1)

_INT4_OID = 23
_NULL = struct.pack(">i", -1)
_KEY_HEAD = struct.Struct(">hi").pack  # the field count (4, 5 with bands, 6 with kept texts), then the key's length
_LEN = struct.Struct(">i").pack  # a bytea field's length
_FP = struct.Struct(">iq").pack  # length 8, int8
_JSONB_HEAD = struct.Struct(">ib").pack  # length, jsonb format version 1
_ARRAY_HEAD = struct.Struct(">iiiiii").pack  # length, ndim 1, no NULLs, element oid, dim, lower bound 1


def sketch_fields(rows: SketchRows) -> list[bytes | None]:
    """Each sketch as the binary field of an ``int4[]`` (its length word included); None for
    an empty row (stored as NULL: nothing to verify with).

    Every element is a length (4) and a big-endian value: built for all rows in one array."""
    body = np.empty((len(rows.values), 2), dtype=">i4")
    body[:, 0] = 4
    body[:, 1] = rows.values
    data = body.tobytes()
    out: list[bytes | None] = []
    for a, b in zip(rows.offsets.tolist(), rows.offsets[1:].tolist()):
        n = b - a
        out.append(_ARRAY_HEAD(20 + 8 * n, 1, 0, _INT4_OID, n, 1) + data[8 * a : 8 * b] if n else None)
    return out


def band_fields(keys: Sequence[np.ndarray | None]) -> list[bytes | None]:
    """Each row's band keys (:mod:`simdb.core.sketch.bands`) as the binary field of an ``int4[]``; None: NULL."""
    live = [k for k in keys if k is not None]
    lens = np.fromiter((0 if k is None else len(k) for k in keys), dtype=np.int64, count=len(keys))
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.concatenate(live).astype(np.int32) if live else np.zeros(0, np.int32)
    return sketch_fields(SketchRows.from_csr(values, offsets))


def encode_rows(
    keys: Sequence[str], fps: Sequence[int | None], metas: Sequence[str | None], sketches: Sequence[bytes | None],
    bands: Sequence[bytes | None] | None = None, texts: Sequence[bytes | None] | None = None,
) -> bytes:
    """The binary COPY rows (no header or trailer) of (key, signed fp or None, meta JSON text or
    None, :func:`sketch_fields` value or None[, :func:`band_fields` value or None[, kept text
    compressed or None]]: five columns when ``bands`` is given, six when ``texts`` is too). Keys and
    metas are valid UTF-8 strings without NUL (the caller's checks name the item otherwise)."""
    fields = 4 if bands is None else 5 if texts is None else 6
    keyed = _keys_and_fps(keys, fps, metas, sketches, bands, texts, fields)
    if keyed is not None:
        return keyed
    out = bytearray()
    for i, (key, fp, meta, sketch) in enumerate(zip(keys, fps, metas, sketches)):
        kb = key.encode()
        out += _KEY_HEAD(fields, len(kb))
        out += kb
        out += _NULL if fp is None else _FP(8, fp)
        if meta is None:
            out += _NULL
        else:
            mb = meta.encode()
            out += _JSONB_HEAD(len(mb) + 1, 1)
            out += mb
        out += _NULL if sketch is None else sketch
        if bands is not None:
            field = bands[i]
            out += _NULL if field is None else field
            if texts is not None:
                tz = texts[i]
                out += _NULL if tz is None else _LEN(len(tz)) + tz
    return bytes(out)


#: the (field count, key length) head of a row, as a numpy record (:func:`_keys_and_fps`)
_HEAD_DTYPE = np.dtype([("fields", ">i2"), ("key_len", ">i4")])


def _keys_and_fps(
    keys: Sequence[str], fps: Sequence[int | None], metas: Sequence[str | None], sketches: Sequence[bytes | None],
    bands: Sequence[bytes | None] | None, texts: Sequence[bytes | None] | None, fields: int,
) -> bytes | None:
    """:func:`encode_rows` of rows that are an ASCII key and a fingerprint only (every other field
    NULL: a plain collection's rows, or any load of items given by fp), built for all rows in a few
    array operations; None when the rows are not all of that shape (then the row-by-row loop).

    Why: row by row, the loop's ``bytearray`` appends and ``struct`` packs are ~0.9 us a row, a
    third of a plain fingerprint load's client time at 1M rows; here a row costs its key's bytes."""
    n = len(keys)
    if not n or any(m is not None for m in metas) or any(x is not None for x in sketches):
        return None
    for column in (bands, texts):
        if column is not None and any(x is not None for x in column):
            return None
    if any(fp is None for fp in fps):
        return None
    joined = "".join(keys)
    if not joined.isascii():
        return None
    key_bytes = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    tail = np.dtype([("len", ">i4"), ("fp", ">i8"), ("nulls", ">i4", (fields - 2,))])
    head = np.empty(n, dtype=_HEAD_DTYPE)
    head["fields"], head["key_len"] = fields, lens
    rest = np.empty(n, dtype=tail)
    rest["len"], rest["fp"], rest["nulls"] = 8, np.asarray(fps, dtype=np.int64), -1
    hs, ts = _HEAD_DTYPE.itemsize, tail.itemsize
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens + (hs + ts), out=starts[1:])
    out = np.empty(int(starts[-1]), dtype=np.uint8)
    row = starts[:-1]
    out[(row[:, None] + np.arange(hs)).ravel()] = head.view(np.uint8)
    key_at = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=key_at[1:])
    out[np.repeat(row + hs - key_at, lens) + np.arange(len(key_bytes))] = key_bytes
    out[((row + hs + lens)[:, None] + np.arange(ts)).ravel()] = rest.view(np.uint8)
    return out.tobytes()


def decode_sketches(ids: np.ndarray, got_ids: list[int], blobs: list[bytes], size: int) -> SketchRows:
    """:class:`SketchRows` of ``ids`` (sorted, unique) from the ``array_send`` bytes of the rows
    found (``got_ids[i]``'s sketch is ``blobs[i]``, any order); rows not found, and empty
    arrays, are empty rows. Each sketch is cut at ``size`` values.

    ``array_send`` of a one-dimensional int4[]: ndim, flags, element type, length, lower bound,
    then a (4, value) pair of big-endian int4 per element; of an empty array: ndim 0 and no more."""
    n = len(ids)
    lens = np.zeros(n, dtype=np.int64)
    parts: list[np.ndarray] = []
    where: list[int] = []
    for row_id, blob in sorted(zip(got_ids, blobs), key=lambda r: r[0]):
        if len(blob) > 20:  # a one-dimensional array: its (length, value) pairs after the header
            parts.append(np.frombuffer(blob, dtype=">i4", offset=20)[1 : 2 * size : 2])
            where.append(row_id)
    if parts:
        at = np.searchsorted(ids, np.asarray(where, dtype=np.int64))
        lens[at] = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    return SketchRows.from_csr(values, offsets)
