"""add_many's items -> COPY rows: validation of each item (errors name it), fingerprints and
sketches computed per chunk, written in PostgreSQL's binary COPY format; and that format's sketches read
back (:func:`decode_sketches`, for ``pairs``).

Pure Python (no connection): the chunks are encoded in worker processes (:mod:`simdb.util.parallel`)
while the store's COPY pipeline (:mod:`simdb.store.bulk`) streams earlier ones; it sends :data:`HEADER`
once before them and :data:`TRAILER` after. Format:
https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4

Why binary and not COPY's text format: a verified row carries a sketch of up to 384 int4
values. As text, PostgreSQL parses every value with ``int4in`` (measured: ~27 us a row, more
than the rest of the row's load) and Python formats every value with ``str`` (~20 us); in
the binary format the values go from the numpy array to the wire in one ``tobytes`` and the
server copies them (~7 us). A plain row costs the same either way.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, cast

import numpy as np

from simdb.core import validate as _validate
from simdb.core.bits import MASK64, to_signed
from simdb.core.kept_texts import compress_text
from simdb.core.sketch import bands as _bands
from simdb.core.sketch.compare import SketchRows
from simdb.core.sketch.features import fingerprints_and_sketches
from simdb.errors import InvalidArgumentError, InvalidTypeError, SimdbError
from simdb.util import parallel as _parallel

__all__ = [
    "CHUNK_ROWS", "COLUMNS", "COPY_OPTIONS", "HEADER", "STAGE_COLUMNS", "POOL_TASK_ROWS", "TRAILER", "band_fields", "decode_sketches", "encode_chunk",
    "encode_rows", "item_error", "iter_chunks", "sketch_fields",
]

#: add_many: rows per COPY chunk / fingerprinting batch (an input of at most this many items
#: is encoded in this process, whatever ``workers`` says)
CHUNK_ROWS = 20_000

#: add_many: a chunk (and a pool task) also ends once its texts hold this many characters. Why: a
#: chunk of 20,000 items is ~10 MB of ordinary posts, but 800 records of 2 MiB each were one chunk
#: of 1.6 GB held at once (``simdb add`` of a 1.65 MB ``.jsonl.gz`` peaked at 3.4 GB). A text
#: larger than this is a chunk by itself
CHUNK_CHARS = 8 << 20

#: add_many on the process pool: items per worker task (a chunk is cut into tasks of this size).
#: Why smaller than a chunk: 100,000 texts in 20,000-item tasks are five tasks for two workers,
#: so one worker idles through the last round, and each task's ~20 MB of results is memory
#: the kernel maps fresh; 5,000-item tasks loaded 100,000 English paragraphs 1.10-1.13x faster
#: (plain and verified collections, best of 3, same run).
POOL_TASK_ROWS = 5_000
#: and characters of text per worker task, at most (the tasks in flight are held, pickled, twice)
POOL_TASK_CHARS = CHUNK_CHARS // 4


# ------------------------------------------------------------ the binary COPY format
#: the columns of these rows, in order, and their types (those of the load's stage: :mod:`simdb.store.bulk`)
COLUMNS = "key, fp, meta, shingles, bands, text_z"
_FIELDS = len(COLUMNS.split(", "))  # a row's field count
STAGE_COLUMNS = "key text COLLATE \"C\" NOT NULL, fp bigint, meta jsonb, shingles int4[], bands int4[], text_z bytea"
#: the COPY options of these rows (FORMAT binary)
COPY_OPTIONS = "FORMAT binary"
#: signature, flags (no OIDs), header extension length 0
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
#: the end of the data: a field count of -1
TRAILER = struct.pack(">h", -1)

_INT4_OID = 23
_NULL = struct.pack(">i", -1)
_KEY_HEAD = struct.Struct(">hi").pack  # the field count, then the key's length
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
    bands: Sequence[bytes | None], texts: Sequence[bytes | None],
) -> bytes:
    """The binary COPY rows (no header or trailer) of the :data:`COLUMNS` (key, signed fp or None,
    meta JSON text or None, :func:`sketch_fields` value or None, :func:`band_fields` value or None,
    kept text compressed or None). Keys and metas are valid UTF-8 strings without NUL (the caller's
    checks name the item otherwise)."""
    keyed = _keys_and_fps(keys, fps, metas, sketches, bands, texts)
    if keyed is not None:
        return keyed
    out = bytearray()
    for key, fp, meta, sketch, field, tz in zip(keys, fps, metas, sketches, bands, texts):
        kb = key.encode()
        out += _KEY_HEAD(_FIELDS, len(kb))
        out += kb
        out += _NULL if fp is None else _FP(8, fp)
        if meta is None:
            out += _NULL
        else:
            mb = meta.encode()
            out += _JSONB_HEAD(len(mb) + 1, 1)
            out += mb
        out += _NULL if sketch is None else sketch
        out += _NULL if field is None else field
        out += _NULL if tz is None else _LEN(len(tz)) + tz
    return bytes(out)


#: the (field count, key length) head of a row, as a numpy record (:func:`_keys_and_fps`)
_HEAD_DTYPE = np.dtype([("fields", ">i2"), ("key_len", ">i4")])


def _keys_and_fps(
    keys: Sequence[str], fps: Sequence[int | None], metas: Sequence[str | None], sketches: Sequence[bytes | None],
    bands: Sequence[bytes | None], texts: Sequence[bytes | None],
) -> bytes | None:
    """:func:`encode_rows` of rows that are an ASCII key and a fingerprint only (every other field
    NULL: a plain collection's rows, or any load of items given by fp), built for all rows in a few
    array operations; None when the rows are not all of that shape (then the row-by-row loop).

    Why: row by row, the loop's ``bytearray`` appends and ``struct`` packs are ~0.9 us a row, a
    third of a plain fingerprint load's client time at 1M rows; here a row costs its key's bytes."""
    n = len(keys)
    for column in (metas, sketches, bands, texts):
        if any(x is not None for x in column):
            return None
    if not n or any(fp is None for fp in fps):
        return None
    joined = "".join(keys)
    if not joined.isascii():
        return None
    key_bytes = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    tail = np.dtype([("len", ">i4"), ("fp", ">i8"), ("nulls", ">i4", (_FIELDS - 2,))])
    head = np.empty(n, dtype=_HEAD_DTYPE)
    head["fields"], head["key_len"] = _FIELDS, lens
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


# ------------------------------------------------------------ items -> rows
def item_error(exc: Exception, message: str) -> Exception:
    """``exc`` re-raised with ``message`` (naming the item) as simdb's typed error of the same kind."""
    if isinstance(exc, SimdbError):
        return type(exc)(message)
    return InvalidTypeError(message) if isinstance(exc, TypeError) else InvalidArgumentError(message)


def _describe(i: int, item: Any) -> str:
    key = None
    if isinstance(item, Mapping):
        key = item.get("key")
    elif isinstance(item, (tuple, list)) and item:
        key = item[0]
    r = repr(key)
    if len(r) > 80:
        r = r[:77] + "..."
    return f"item {i} (key {r})" if key is not None else f"item {i}"


_TWO64, _MAX63 = 1 << 64, (1 << 63) - 1  # unsigned -> signed int8 (simdb.core.bits.to_signed, inline)
_ITEM_FIELDS = frozenset({"key", "text", "fp", "meta"})
_MISSING: Any = object()


def _parse_item(item: Any) -> tuple[Any, Any, Any, Any]:
    """(key, text, fp, meta) of one add_many item (slow path: any Mapping / sequence)."""
    if isinstance(item, Mapping):
        extra = set(item) - _ITEM_FIELDS
        if extra:
            raise ValueError(f"unknown field(s) {sorted(map(str, extra))}; use key, text, fp, meta")
        if "key" not in item:
            raise ValueError("missing 'key'")
        return item["key"], item.get("text"), item.get("fp"), item.get("meta")
    if isinstance(item, (tuple, list)):
        if len(item) != 2:
            raise ValueError(f"expected a (key, text) pair, got a sequence of length {len(item)}")
        return item[0], item[1], None, None
    raise TypeError(f"expected a (key, text) pair or a mapping, got {type(item).__name__}")


def _fields(item: Any) -> tuple[Any, Any, Any, Any]:
    """(key, text, fp, meta) of one item: the two common shapes inline, the rest by _parse_item."""
    if type(item) is dict and (len(item) <= 2 or item.keys() <= _ITEM_FIELDS):
        key = item.get("key", _MISSING)
        if key is _MISSING:
            raise ValueError("missing 'key'")
        return key, item.get("text"), item.get("fp"), item.get("meta")
    if type(item) is tuple and len(item) == 2:
        return item[0], item[1], None, None
    return _parse_item(item)


def _signed_fp(fp: Any) -> int:
    if type(fp) is int and 0 <= fp <= MASK64:
        return to_signed(fp)
    return _validate.check_fp(fp)


def _neither_message(item: Any) -> str:
    """Why an item with neither text nor fp is refused (a two-field dict may have misspelt one)."""
    if type(item) is dict and len(item) == 2 and not item.keys() <= _ITEM_FIELDS:
        return f"unknown field(s) {sorted(map(str, set(item) - _ITEM_FIELDS))}; use key, text, fp, meta"
    return "give text or fp"


def _parse_chunk(chunk: Sequence[Any], base: int, limit: int) -> tuple[list, list, list, list[int], list[str]]:
    """(keys, signed fps, metas as JSON text, positions of the texts, the texts) of a chunk."""
    n = len(chunk)
    keys: list[Any] = [None] * n
    fps: list[Any] = [None] * n
    metas: list[Any] = [None] * n
    text_pos: list[int] = []
    texts: list[str] = []
    for j, item in enumerate(chunk):
        if type(item) is dict and len(item) == 2:  # {"key": str, "fp": int}: a fingerprint load's rows, inline
            key, fp = item.get("key"), item.get("fp")
            if type(key) is str and key and type(fp) is int and 0 <= fp <= MASK64:
                keys[j], fps[j] = key, fp - _TWO64 if fp > _MAX63 else fp
                continue
        try:
            key, text, fp, meta = _fields(item)
            keys[j] = key if type(key) is str and key else _validate.check_new_key(key)
            if fp is not None:
                fps[j] = _signed_fp(fp)
            elif text is not None:
                if type(text) is not str or len(text) * 4 > limit:
                    _validate.check_text(text, "text", limit)
                text_pos.append(j)
                texts.append(text)
            else:
                raise ValueError(_neither_message(item))
            if meta is not None:
                metas[j] = cast(str, _validate.dump_meta(meta))  # not None: meta is not None
        except (TypeError, ValueError) as exc:
            raise item_error(exc, f"add_many: {_describe(base + j, item)}: {exc}") from None
    return keys, fps, metas, text_pos, texts


def _fill_texts(
    fps: list, sketches: list, text_pos: list[int], texts: list[str], fingerprinter, verifier,
    bands: list, band_scheme: str | None = None, known: Mapping[str, tuple] | None = None,
) -> None:
    """Fingerprints (together: ``Fingerprinter.many``) and verification sketches (as COPY fields)
    of the texts (in one pass: :func:`simdb.core.sketch.features.fingerprints_and_sketches`), and their
    ``band_scheme`` keys into ``bands`` when given (a banded collection), from the grams the sketches
    hash (:class:`simdb.core.sketch.bands.BlockBandKeys`: no second tokenization of a text).

    ``known``: text -> (unsigned fp, sketch, band keys) already computed for this collection (a
    verified index's memo of its last ``near_many``: ``simdb dedup`` stores the survivors of the
    batch it just asked about), taken as they are instead of featurizing those texts again."""
    if known and verifier is not None:
        hit = [n for n, t in enumerate(texts) if t in known]
        if hit:
            _fill_known(fps, sketches, bands, [text_pos[n] for n in hit], [known[texts[n]] for n in hit])
            rest = [n for n, t in enumerate(texts) if t not in known]
            text_pos, texts = [text_pos[n] for n in rest], [texts[n] for n in rest]
            if not texts:
                return
    if verifier is None:
        for j, fp in zip(text_pos, fingerprinter.many(texts, empty=None)):
            if fp is not None:
                fps[j] = fp - _TWO64 if fp > _MAX63 else fp
        return
    hook = _bands.block_band_keys(len(texts), band_scheme, verifier.scheme)  # None: not banded
    got_fps, got_sketches = fingerprints_and_sketches(texts, fingerprinter, verifier, hook)
    for j, fp, sk in zip(text_pos, got_fps, sketch_fields(got_sketches)):
        if fp is not None:
            fps[j] = fp - _TWO64 if fp > _MAX63 else fp  # to_signed, inline (a hot loop)
        sketches[j] = sk
    if hook is not None:
        for j, field in zip(text_pos, band_fields(hook.keys())):
            bands[j] = field


def _fill_known(fps: list, sketches: list, bands: list, pos: list[int], feats: list[tuple]) -> None:
    """:func:`_fill_texts` of texts whose (fp, sketch, band keys) are at hand."""
    got = sketch_fields(SketchRows.from_arrays([None if f[1] is None else np.asarray(f[1]) for f in feats]))
    for j, (fp, _, _), sk, bk in zip(pos, feats, got, band_fields([f[2] for f in feats])):
        if fp is not None:
            fps[j] = to_signed(fp)
        sketches[j] = sk
        bands[j] = bk


def _check_keys(keys: list, chunk: Sequence[Any], base: int) -> None:
    """Lone surrogates and NULs in keys: name the item, not a COPY buffer offset."""
    for j, key in enumerate(keys):
        try:
            _validate.check_key(key)
        except (TypeError, ValueError) as exc:
            raise item_error(exc, f"add_many: {_describe(base + j, chunk[j])}: {exc}") from None


def encode_chunk(
    chunk: Sequence[Any], base: int, fingerprinter, max_text_bytes: int | None = None, verifier=None,
    band_scheme: str | None = None, keep_texts: bool = False, known: Mapping[str, tuple] | None = None,
) -> bytes:
    """Binary COPY rows (columns key, fp, meta, shingles, bands, text_z; :func:`encode_rows`,
    without its header and trailer) for a chunk of add_many items.

    ``verifier`` (a verified collection's :class:`simdb.core.sketch.Verifier`): each text's
    bottom-k sketch goes into ``shingles`` (NULL otherwise, and for items given by fp);
    ``band_scheme`` (a banded verified collection's, :data:`simdb.core.sketch.bands.SCHEMES`): its band keys
    into ``bands`` (NULL otherwise). ``keep_texts`` (a collection that keeps texts,
    :mod:`simdb.core.kept_texts`): each text compressed into ``text_z`` (NULL otherwise, and for items
    given by fp). ``known``: features already computed (:func:`_fill_texts`).

    Items are ``(key, text)`` pairs or mappings with ``key`` and ``text`` and/or
    ``fp`` (unsigned int; wins over text) and optional ``meta`` (JSON-able).
    Texts are fingerprinted together (``Fingerprinter.many``); a text with no
    features gets fp NULL. Errors name the item (``base`` + position).
    """
    limit = _validate.max_text_bytes(max_text_bytes)
    keys, fps, metas, text_pos, texts = _parse_chunk(chunk, base, limit)
    sketches: list[bytes | None] = [None] * len(chunk)
    bands: list[bytes | None] = [None] * len(chunk)
    if texts:
        _fill_texts(fps, sketches, text_pos, texts, fingerprinter, verifier, bands, band_scheme, known)
    joined = "".join(keys)
    if not joined.isascii() or "\x00" in joined:
        _check_keys(keys, chunk, base)
    kept: list[bytes | None] = [None] * len(chunk)
    if keep_texts:  # the items given by their text (an item with fp has none to keep)
        for j, text in zip(text_pos, texts):
            try:
                kept[j] = compress_text(text)
            except InvalidArgumentError as exc:
                raise item_error(exc, f"add_many: {_describe(base + j, chunk[j])}: {exc}") from None
    return encode_rows(keys, fps, metas, sketches, bands, kept)


def _text_chars(item: Any) -> int:
    """The length of an item's text, for cutting chunks (0 when it has none, or a malformed one:
    that is reported when the chunk is encoded, with the item's position)."""
    if type(item) is tuple and len(item) == 2:
        text = item[1]
    elif isinstance(item, Mapping):
        text = item.get("text")
    elif isinstance(item, (tuple, list)) and len(item) == 2:
        text = item[1]
    else:
        return 0
    return len(text) if isinstance(text, str) else 0


def _cut(items: Iterable[Any], rows: int, chars: int) -> Iterator[list]:
    """``items`` in lists of at most ``rows`` items whose texts hold at most ``chars`` characters
    (a single item above that is a list by itself)."""
    chunk: list = []
    size = 0
    for item in items:
        n = _text_chars(item)
        if chunk and (len(chunk) >= rows or size + n > chars):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += n
    if chunk:
        yield chunk


def _numbered_chunks(items: Iterable[Any], chunk_rows: int, chunk_chars: int = CHUNK_CHARS) -> Iterator[tuple[int, list]]:
    """(position of the first item, items) per chunk of ``chunk_rows`` items, or fewer holding
    ``chunk_chars`` characters of text (:data:`CHUNK_CHARS`)."""
    base = 0
    for chunk in _cut(items, chunk_rows, chunk_chars):
        yield base, chunk
        base += len(chunk)


def _encode_numbered(
    fingerprinter, max_text_bytes: int | None, verifier, band_scheme: str | None, keep_texts: bool,
    known: Mapping[str, tuple] | None, numbered: tuple[int, list],
) -> tuple[int, bytes]:
    base, chunk = numbered
    return len(chunk), encode_chunk(chunk, base, fingerprinter, max_text_bytes, verifier, band_scheme, keep_texts, known)


def iter_chunks(
    items: Iterable[Any], fingerprinter, chunk_rows: int = CHUNK_ROWS, workers: int = 1,
    max_text_bytes: int | None = None, verifier=None, ahead: int | None = None, band_scheme: str | None = None,
    keep_texts: bool = False, known: Mapping[str, tuple] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """(row count, binary COPY rows) per chunk of ``chunk_rows`` items, in order; memory stays bounded.

    With ``workers >= 2`` the chunks are validated and fingerprinted on the shared
    process pool (:mod:`simdb.util.parallel`) in tasks of at most :data:`POOL_TASK_ROWS` items
    (at most ``ahead`` tasks in flight, default ``2 * workers``; yielded as they are: a "chunk"
    is then a task)
    while the caller streams earlier ones; an input of one chunk stays in process.
    ``max_text_bytes``: the largest text (None: :func:`simdb.core.validate.max_text_bytes`).
    ``verifier``: a verified collection's sketches go into the chunks too (:func:`encode_chunk`);
    ``band_scheme``: and the band keys of a banded one; ``keep_texts``: the texts, compressed.
    ``known``: features already computed, used in this process only (``workers == 1``: a memo is not
    worth shipping to the pool). Rows have six columns (key, fp, meta, shingles, bands, text_z).
    """
    numbered = _numbered_chunks(items, chunk_rows)
    first = next(numbered, None)
    if first is None:
        return
    second = next(numbered, None) if workers > 1 else None
    if second is None:  # one worker, or an input of one chunk: encoded here, no pool
        known = known if workers <= 1 else None
        for base, chunk in itertools.chain((first,), numbered):
            yield len(chunk), encode_chunk(chunk, base, fingerprinter, max_text_bytes, verifier, band_scheme,
                                           keep_texts, known)
        return
    encode = partial(_encode_numbered, fingerprinter, max_text_bytes, verifier, band_scheme, keep_texts, None)
    tasks = _pool_tasks(itertools.chain((first, second), numbered), POOL_TASK_ROWS, POOL_TASK_CHARS)
    yield from _parallel.imap(encode, tasks, workers, ahead)


def _pool_tasks(numbered: Iterator[tuple[int, list]], task_rows: int,
                task_chars: int = POOL_TASK_CHARS) -> Iterator[tuple[int, list]]:
    """The chunks cut into tasks of at most ``task_rows`` items and ``task_chars`` characters of text
    (positions kept, in order), for the process pool."""
    for base, chunk in numbered:
        for task in _cut(chunk, task_rows, task_chars):
            yield base, task
            base += len(task)

