"""The order in which :func:`simdb.dedup_records` decides records, and the spill file that makes
``keep="last"``/``"longest"`` possible on inputs larger than memory.

``keep="first"`` streams: each batch is decided as it is read (one batch read ahead in a
thread). ``"last"`` and ``"longest"`` must see every record before deciding the first, so
records go to a temporary file (:class:`Spill`), are decided in priority order and are
yielded back in input order. The deciding itself (a :class:`Batcher`) is
:class:`simdb.dataset.greedy.BatchEngine`'s; this module only orders and stores.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from simdb.dataset.defaults import BATCH_CHARS
from simdb.dataset.records import Record
from simdb.errors import InputError


class Batcher(Protocol):
    """What decides a batch: ``queries`` prepares (in a helper thread), ``batch`` decides (kept flags)."""

    def queries(self, items: list[tuple[int, Record]]) -> list: ...

    def batch(self, items: list[tuple[int, Record]], queries: list | None = None) -> list[bool]: ...


def chunks(it: Iterable, size: int, chars: int | None = None, text_of: Callable[[Any], str] | None = None
           ) -> Iterator[list]:
    """Lists of ``size`` items (the last one shorter) from any iterable; with ``chars``, a list also ends
    once the texts of its items (``text_of(item)``) hold that many characters."""
    chunk = []
    held = 0
    for x in it:
        chunk.append(x)
        if chars is not None and text_of is not None:
            held += len(text_of(x))
        if len(chunk) >= size or (chars is not None and held >= chars):
            yield chunk
            chunk = []
            held = 0
    if chunk:
        yield chunk


def _pair_text(pair: tuple[Any, Record]) -> str:
    return pair[1].text


class Spill:
    """Records on a temporary file, read back by position (keep='last'/'longest').

    Each entry: 8-byte length, then a pickle. A JSONL record's fields are re-parsed
    from its raw line (half the spill); Parquet schemas are kept once, by number."""

    def __init__(self, spill_dir: str | None):
        self.fh = tempfile.TemporaryFile(prefix="simdb-dedup-spill-", dir=spill_dir)
        self.offsets = array("q")
        self.lengths = array("q")
        self.schemas: list = []
        self._pos = 0

    def append(self, original: Any, rec: Record) -> None:
        schema = -1
        if rec.schema is not None:
            schema = next((n for n, s in enumerate(self.schemas) if s is rec.schema), -1)
            if schema < 0:
                self.schemas.append(rec.schema)
                schema = len(self.schemas) - 1
        fields = None if rec.raw is not None else rec.fields
        entry = (rec.key, rec.text, fields, rec.where, rec.raw, schema, None if original is rec else original)
        try:
            data = pickle.dumps(entry, pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # a lock, a generator, a local class...
            raise InputError(f"{rec.where}: keep='last' and 'longest' spill each record to a file and read it back, "
                             f"and this record cannot be pickled ({exc}); pass plain data or use keep='first'") from None
        self.offsets.append(self._pos)
        self.lengths.append(len(rec.text))
        self.fh.write(len(data).to_bytes(8, "little") + data)
        self._pos += 8 + len(data)

    def load(self, i: int) -> tuple[Any, Record]:
        fd = self.fh.fileno()
        at = self.offsets[i]
        size = int.from_bytes(os.pread(fd, 8, at), "little")
        key, text, fields, where, raw, schema, original = pickle.loads(os.pread(fd, size, at + 8))
        if fields is None:
            fields = json.loads(raw)
        rec = Record(key, text, fields, where, raw, self.schemas[schema] if schema >= 0 else None)
        return (rec if original is None else original), rec

    def close(self) -> None:
        self.fh.close()


def prioritised(records: Iterator[tuple[Any, Record]], keep: str, engine: Batcher, batch_size: int,
                 spill_dir: str | None) -> Iterator[Any]:
    """keep='last'/'longest': spill, decide in priority order, then yield the kept in input order."""
    spill = Spill(spill_dir)
    try:
        for original, rec in records:
            spill.append(original, rec)
        spill.fh.flush()
        n = len(spill.offsets)
        order: np.ndarray
        if keep == "last":
            order = np.arange(n - 1, -1, -1, dtype=np.int64)
        else:  # longest first; ties in input order (a stable sort)
            order = np.argsort(-np.frombuffer(spill.lengths, dtype=np.int64), kind="stable") if n else np.zeros(0)
        spill.lengths = array("q")
        kept = np.zeros(n, dtype=bool)
        loaded = ((int(i), spill.load(int(i))[1]) for i in order)
        for items in chunks(loaded, batch_size, BATCH_CHARS, _pair_text):
            for (i, _), flag in zip(items, engine.batch(items)):
                kept[i] = flag
        del order
        for i in np.flatnonzero(kept):
            yield spill.load(int(i))[0]
    finally:
        spill.close()


def streamed(pairs: Iterator[tuple[Any, Record]], engine: Batcher, batch_size: int) -> Iterator[Any]:
    """keep='first': one pass. A helper thread reads and fingerprints the next batch while this
    one waits on the database for the current one (the driver releases the GIL): the client's
    and the server's work overlap, one batch ahead (so memory stays at two batches)."""
    batches = chunks(pairs, batch_size, BATCH_CHARS, _pair_text)
    position = [0]

    def load():
        chunk = next(batches, None)
        if chunk is None:
            return None
        items = [(i, rec) for i, (_, rec) in enumerate(chunk, position[0])]
        position[0] += len(chunk)
        return chunk, items, engine.queries(items)

    pool = ThreadPoolExecutor(1, thread_name_prefix="simdb-dedup-read")
    try:
        ahead = pool.submit(load)
        while True:
            got = ahead.result()
            if got is None:
                return
            ahead = pool.submit(load)
            chunk, items, queries = got
            for (original, _), flag in zip(chunk, engine.batch(items, queries)):
                if flag:
                    yield original
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

