"""``SimhashIndex``: near-duplicate search over fingerprints stored in PostgreSQL.

Layout of this module (so that other workflows can reuse the pieces):

- connections: each thread gets its own psycopg connection, detached from the
  SQLAlchemy pool, in autocommit mode, with serial generic plans
  (:meth:`SimhashIndex.connection`, :meth:`SimhashIndex.transaction`);
- query building: :func:`near_params` / :func:`near_many_params` turn query
  fingerprints into the bound parameters of ``simdb.store.sql.NEAR_SQL`` /
  ``NEAR_MANY_SQL`` (probe arrays per block, see :mod:`simdb.probes`);
- bulk loading: :func:`iter_chunks` validates and fingerprints items in chunks,
  :class:`_CopyWriter` streams them through ``COPY``.

Every value travels as a bound parameter or through COPY; no value is ever
spliced into SQL text.
"""

from __future__ import annotations

import itertools
import json
import numbers
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np

from simdb import convert as _convert
from simdb import jaccard as _jaccard
from simdb import parallel as _parallel
from simdb import probes as _probes
from simdb import sketch as _sketch
from simdb import validate as _validate
from simdb.bits import BITS, MASK64
from simdb.errors import InvalidArgumentError, InvalidTypeError, SimdbError
from simdb.store import CollectionConfigError
from simdb.store import bulk_locks as _bulk_locks
from simdb.store import limits as _limits
from simdb.store import rows as _rows
from simdb.store import sql as _sql

__all__ = ["Entry", "Match", "SimhashIndex", "near_many_params", "near_params", "verified_matches"]

FINGERPRINTS = _sql.FINGERPRINTS
COLLECTIONS = _sql.COLLECTIONS
_SIGN = 1 << 63
_UNSET: Any = object()

#: store options recorded in every collection's config (next to the Fingerprinter's)
STORE_OPTIONS = {"blocks": 4, "block_bits": 16, "fp": "bigint two's complement of the unsigned 64-bit SimHash"}

#: add_many: rows per COPY chunk / fingerprinting batch
CHUNK_ROWS = 20_000
#: add_many: a load into an empty collection switches to "drop indexes, COPY, rebuild"
#: once this many rows are staged, if the table holds at most as many rows as are staged
BULK_MIN_ROWS = 200_000
#: adaptive radii: a block value counts as heavy from this many rows (see _bucket_sizes)
HEAVY_BUCKET_MIN = 100.0
#: near_many: queries per statement
NEAR_MANY_CHUNK = 20_000
#: near_many splits a batch of at least NEAR_MANY_PARALLEL_MIN queries over this many
#: connections, one thread each: the lookups are server-bound, so a 2-core server answers
#: about twice as many per second (measured: 35k -> 58k q/s at 1M rows)
NEAR_MANY_WORKERS = 2
NEAR_MANY_PARALLEL_MIN = 500

#: config key of a verified collection's settings (simdb.sketch.Verifier)
VERIFY_KEY = "verify"

#: advisory-lock namespace (first int4 key) for writers of one collection in add_many
_ADD_LOCK = _bulk_locks.ADD_LOCK  # "simd"


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Match:
    """One near-duplicate: its key, unsigned fingerprint, Hamming distance,
    similarity (1 - distance/64), exact Jaccard (when asked for) and metadata."""

    key: str
    fp: int
    distance: int
    similarity: float
    jaccard: float | None = None
    meta: Any = None


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored row as returned by :meth:`SimhashIndex.get` (``fp`` None: the text had no features)."""

    key: str
    fp: int | None
    meta: Any
    created_at: datetime


def verified_matches(rows: Iterable[tuple], query_sketch, verifier, min_jaccard: float, hamming_k: int) -> list[Match]:
    """The verification stage over candidate rows (key, fp signed, distance, meta, sketch):
    the kept ones as Matches, by Jaccard (highest first; rows judged by distance last), distance, key."""
    out = []
    for key, f, d, meta, stored in rows:
        ok, j = verifier.judge(stored, query_sketch, d, min_jaccard, hamming_k)
        if ok:
            out.append(Match(key, f & MASK64, d, 1.0 - d / BITS, j, meta))
    out.sort(key=lambda m: (m.jaccard is None, -(m.jaccard or 0.0), m.distance, m.key))
    return out


def _match(key: str, fp: int, distance: int, meta: Any = None) -> Match:
    return Match(key, fp & MASK64, distance, 1.0 - distance / BITS, None, meta)


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


# The checks live in simdb.validate (shared with dedup, jaccard and the CLI); these names stay
# for the modules that import them from here.
_check_key = _validate.check_key
_check_fp = _validate.check_fp
_check_limit = _validate.check_limit
_dump_meta = _validate.dump_meta


#: the validators under public names, for other front ends of the store (simdb.aio): same errors
check_key = _check_key
check_fp = _check_fp
check_limit = _check_limit
dump_meta = _dump_meta


# ---------------------------------------------------------------------------
# Query building (shared with simdb.dedup and friends)
# ---------------------------------------------------------------------------


def near_params(collection_id: int, fp: int, k: int, radii: Sequence[int] | None = None, limit: int | None = None) -> dict:
    """Bound parameters of ``NEAR_SQL`` for unsigned ``fp`` (k already checked)."""
    p = _probes.probes(fp, k, radii)
    return {
        "c": collection_id,
        "p0": p[0],
        "p1": p[1],
        "p2": p[2],
        "p3": p[3],
        "q": fp - (1 << 64) if fp & _SIGN else fp,
        "k": k,
        "limit": limit,
    }


_MASKS_NP = {t: np.array(m, dtype=np.int64) for t, m in _probes.MASKS.items() if t >= 0}


def near_many_params(
    collection_id: int, fps: Sequence[int], k: int, radii: Sequence[Sequence[int]] | None = None
) -> dict:
    """Bound parameters of ``NEAR_MANY_SQL`` for unsigned ``fps`` (query number = position).

    ``radii`` gives one radius assignment per query (default: even radii for all).
    Probes are sorted by (block, value) so each block index is walked in order.
    """
    n = len(fps)
    u = np.array(fps, dtype=np.uint64)
    signed = u.view(np.int64)
    shifts = np.array([48, 32, 16, 0], dtype=np.uint64)
    qb = ((u[:, None] >> shifts[None, :]) & np.uint64(0xFFFF)).astype(np.int64)  # n x 4
    qidx = np.arange(n, dtype=np.int64)
    groups: dict[tuple[int, ...], np.ndarray] = {}
    if radii is None:
        groups[tuple(_probes.even_radii(k))] = qidx
    else:
        keys = [tuple(r) for r in radii]
        for r in set(keys):
            groups[r] = np.array([i for i, kk in enumerate(keys) if kk == r], dtype=np.int64)
    parts_blk, parts_val, parts_qi = [], [], []
    for r, members in groups.items():
        for b, t in enumerate(r):
            if t < 0:
                continue
            masks = _MASKS_NP[t]
            vals = (qb[members, b][:, None] ^ masks[None, :]).ravel()
            parts_val.append(vals)
            parts_qi.append(np.repeat(members, len(masks)))
            parts_blk.append(np.full(vals.shape[0], b, dtype=np.int64))
    if parts_val:
        blk = np.concatenate(parts_blk)
        val = np.concatenate(parts_val)
        qi = np.concatenate(parts_qi)
        order = np.lexsort((qi, val, blk))
        blk, val, qi = blk[order], val[order], qi[order]
        qfp = signed[qi]
    else:
        blk = val = qi = qfp = np.zeros(0, dtype=np.int64)
    return {
        "c": collection_id,
        "k": k,
        "qi": qi.tolist(),
        "blk": blk.tolist(),
        "val": val.tolist(),
        "qfp": qfp.tolist(),
    }


# ---------------------------------------------------------------------------
# COPY text encoding and item parsing for add_many
# ---------------------------------------------------------------------------

_COPY_SPECIAL = re.compile(r"[\\\t\n\r]").search
_COPY_ESC = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(s: str) -> str:
    return s.translate(_COPY_ESC) if _COPY_SPECIAL(s) else s


def _item_error(exc: Exception, message: str) -> Exception:
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


_ITEM_FIELDS = frozenset({"key", "text", "fp", "meta"})
_MISSING: Any = object()
_NULL = "\\N"  # COPY text NULL
_COPY_BAD = re.compile(r"[\\\t\n\r\x00]").search


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


def encode_chunk(
    chunk: Sequence[Any], base: int, fingerprinter, max_text_bytes: int | None = None, verifier=None
) -> str:
    """COPY text (columns key, fp, meta, shingles) for a chunk of add_many items.

    ``verifier`` (a verified collection's :class:`simdb.sketch.Verifier`): each text's
    bottom-k sketch goes into ``shingles`` (NULL otherwise, and for items given by fp).

    Items are ``(key, text)`` pairs or mappings with ``key`` and ``text`` and/or
    ``fp`` (unsigned int; wins over text) and optional ``meta`` (JSON-able).
    Texts are fingerprinted together (``Fingerprinter.many``); a text with no
    features gets fp NULL. Errors name the item (``base`` + position).
    """
    limit = _validate.max_text_bytes(max_text_bytes)
    n = len(chunk)
    keys: list[Any] = [None] * n
    fps: list[Any] = [None] * n
    metas: list[Any] = [None] * n
    text_pos: list[int] = []
    texts: list[str] = []
    sketches: list[Any] = [_NULL] * n
    for j, item in enumerate(chunk):
        try:
            if type(item) is dict and (len(item) <= 2 or item.keys() <= _ITEM_FIELDS):
                key = item.get("key", _MISSING)
                if key is _MISSING:
                    raise ValueError("missing 'key'")
                text = item.get("text")
                fp = item.get("fp")
                meta = item.get("meta")
            elif type(item) is tuple and len(item) == 2:
                key, text = item
                fp = meta = None
            else:
                key, text, fp, meta = _parse_item(item)
            if type(key) is not str:
                key = _check_key(key)
            keys[j] = key
            if fp is not None:
                if type(fp) is int and 0 <= fp <= MASK64:
                    fps[j] = fp - (1 << 64) if fp & _SIGN else fp
                else:
                    fps[j] = _check_fp(fp)
            elif text is not None:
                if type(text) is not str or len(text) * 4 > limit:
                    _validate.check_text(text, "text", limit)
                text_pos.append(j)
                texts.append(text)
            elif fp is None and text is None and type(item) is dict and len(item) == 2 and not item.keys() <= _ITEM_FIELDS:
                raise ValueError(f"unknown field(s) {sorted(map(str, set(item) - _ITEM_FIELDS))}; use key, text, fp, meta")
            else:
                raise ValueError("give text or fp")
            if meta is not None:
                metas[j] = _copy_text(_dump_meta(meta))
        except (TypeError, ValueError) as exc:
            raise _item_error(exc, f"add_many: {_describe(base + j, item)}: {exc}") from None
    if texts:
        for j, fp in zip(text_pos, fingerprinter.many(texts, empty=None)):
            if fp is not None:
                fps[j] = fp - (1 << 64) if fp & _SIGN else fp
        if verifier is not None:
            for j, t in zip(text_pos, texts):
                sk = verifier.sketch(t)
                if sk:
                    sketches[j] = "{" + ",".join(map(str, sk)) + "}"
    joined = "".join(keys)
    if not joined.isascii() or "\x00" in joined:
        # lone surrogates and NULs: name the item, not a COPY buffer offset
        for j, key in enumerate(keys):
            try:
                _check_key(key)
            except (TypeError, ValueError) as exc:
                raise _item_error(exc, f"add_many: {_describe(base + j, chunk[j])}: {exc}") from None
    if _COPY_BAD(joined):
        keys = [_copy_text(key) for key in keys]
    return "".join(
        [
            f"{k}\t{_NULL if f is None else f}\t{_NULL if m is None else m}\t{s}\n"
            for k, f, m, s in zip(keys, fps, metas, sketches)
        ]
    )


def _numbered_chunks(items: Iterable[Any], chunk_rows: int) -> Iterator[tuple[int, list]]:
    """(position of the first item, items) per chunk of ``chunk_rows`` items."""
    it = iter(items)
    base = 0
    while True:
        chunk = list(itertools.islice(it, chunk_rows))
        if not chunk:
            return
        yield base, chunk
        base += len(chunk)


def _encode_numbered(fingerprinter, max_text_bytes: int | None, verifier, numbered: tuple[int, list]) -> tuple[int, str]:
    base, chunk = numbered
    return len(chunk), encode_chunk(chunk, base, fingerprinter, max_text_bytes, verifier)


def iter_chunks(
    items: Iterable[Any], fingerprinter, chunk_rows: int = CHUNK_ROWS, workers: int = 1,
    max_text_bytes: int | None = None, verifier=None,
) -> Iterator[tuple[int, str]]:
    """(row count, COPY text) per chunk of ``chunk_rows`` items, in order; memory stays bounded.

    With ``workers >= 2`` the chunks are validated and fingerprinted on the shared
    process pool (:mod:`simdb.parallel`, at most ``2 * workers`` chunks in flight)
    while the caller streams earlier ones; an input of one chunk stays in process.
    ``max_text_bytes``: the largest text (None: :func:`simdb.validate.max_text_bytes`).
    ``verifier``: a verified collection's sketches go into the chunks too (:func:`encode_chunk`).
    """
    encode = partial(_encode_numbered, fingerprinter, max_text_bytes, verifier)
    return _parallel.imap(encode, _numbered_chunks(items, chunk_rows), workers)


# ---------------------------------------------------------------------------
# The index
# ---------------------------------------------------------------------------


class SimhashIndex:
    """Fingerprints of one collection in PostgreSQL, with exact near-duplicate search.

    ``database``: a SQLAlchemy URL or Engine (None: ``SIMDB_DATABASE_URL``, then the
    embedded server). ``collection``: the collection's name; created on first use with
    ``fingerprinter``'s configuration (default ``Fingerprinter()``). Opening an
    existing collection with a different Fingerprinter raises
    :class:`~simdb.store.CollectionConfigError`; with ``fingerprinter=None`` the
    collection's own configuration is used. Missing tables are created by running
    the migrations (``migrate=False`` to require them). ``adaptive=True`` picks the
    probe radii per query from bucket sizes (``pg_stats``), which only changes the
    amount of work, never the answer. ``jaccard=True`` creates a Jaccard collection
    (issue 8, :mod:`simdb.jaccard`): it also keeps each text's shingle set and MinHash
    band keys, its ``fp`` uses the candidate Fingerprinter (stopwords kept) unless one is
    given, and ``near/pairs/clusters/add_if_unique`` accept ``min_jaccard=``;
    ``jaccard=None`` opens a collection as it was created.

    ``verify`` (issue 13, :mod:`simdb.sketch`, docs/near-duplicates.md): a new collection
    with no options is *verified*: near-duplicate = Jaccard similarity of token 3-gram
    shingles >= 0.8, found among the rows within the candidate radius K = 11 of the
    candidate fingerprint, checked on a stored bottom-256 sketch; answers carry ``jaccard``
    and ``distance``. ``verify=False`` creates a Hamming-only collection (distance <= k);
    a new collection given a ``fingerprinter`` is Hamming-only unless ``verify=True``.
    ``verify=None`` opens a collection as it was created.

    Thread-safe: each thread uses its own connection.
    """

    def __init__(
        self,
        database=None,
        collection: str = "default",
        fingerprinter=None,
        *,
        migrate: bool = True,
        adaptive: bool = True,
        jaccard: bool | None = None,
        max_text_bytes: int | None = None,
        verify: bool | None = None,
    ):
        from simdb.database import resolve_engine

        self.collection = _validate.check_collection(collection)
        #: the largest text (UTF-8 bytes) this index fingerprints; InputTooLargeError beyond it
        self.max_text_bytes = _validate.max_text_bytes(max_text_bytes)
        self.adaptive = adaptive
        self.engine, self._owns_engine = resolve_engine(database)
        self._local = threading.local()
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        self._pool = None  # near_many's worker threads (each with its own connection)
        self._pid = os.getpid()
        self._closed = False
        self._stats: tuple[float, list[dict[int, float]], float] | None = None
        self._heavy_near: list[set[int]] = [set(), set(), set(), set()]
        #: what the last add_many did: rows, whether it rebuilt the indexes, seconds per phase
        self.last_load: dict[str, Any] | None = None
        # --- Jaccard (issue 8, simdb.jaccard): see _open_collection; None = as recorded
        if jaccard is not None and not isinstance(jaccard, bool):
            raise InvalidTypeError(f"jaccard must be a bool or None, got {type(jaccard).__name__}")
        self._want_jaccard = jaccard
        self.minhasher = None
        # --- verification (issue 13, simdb.sketch): None = as recorded; for a new collection,
        # verified unless a Fingerprinter is given (the candidate radius K is calibrated for
        # the candidate Fingerprinter) or jaccard=True (a legacy MinHash collection)
        if verify is not None and not isinstance(verify, bool):
            raise InvalidTypeError(f"verify must be a bool or None, got {type(verify).__name__}")
        if verify and jaccard:
            raise InvalidArgumentError("verify=True and jaccard=True exclude each other: verified collections "
                             "replace the MinHash (jaccard=True) collections; pass one of them")
        self._want_verify = verify
        self.verifier: _sketch.Verifier | None = None
        try:
            if migrate:
                self._ensure_schema()
            with _limits.key_size_errors(f"collection {collection[:60]!r}"):
                self.fingerprinter, self.collection_id, self.config = self._open_collection(fingerprinter)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ connections
    def connection(self):
        """This thread's psycopg connection (autocommit, serial generic plans)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and self._pid == os.getpid():
            return conn
        if self._closed:
            raise RuntimeError("SimhashIndex is closed")
        if self._pid != os.getpid():  # forked: never touch the parent's sockets
            self._pid = os.getpid()
            with self._conns_lock:
                self._conns = []
        conn = self._new_connection()
        self._local.conn = conn
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _new_connection(self):
        fairy = self.engine.raw_connection()
        conn = fairy.driver_connection
        fairy.detach()
        if conn.info.transaction_status != 0:  # IDLE
            conn.rollback()
        conn.autocommit = True
        # Probe lookups must stay serial (parallel Gathers cost milliseconds) and
        # use the generic plan of the prepared statements (no per-call planning).
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        return conn

    @contextmanager
    def transaction(self):
        """A transaction on this thread's connection (yields the connection)."""
        conn = self.connection()
        with conn.transaction():
            yield conn

    def close(self) -> None:
        """Close this index's connections (and its engine, if simdb created it)."""
        self._closed = True
        with self._conns_lock:
            conns, self._conns = self._conns, []
            pool, self._pool = self._pool, None
        if pool is not None and pool[1] == os.getpid():
            pool[2].shutdown(wait=True)
        if self._pid == os.getpid():
            for conn in conns:
                try:
                    conn.close()
                except Exception:
                    pass
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SimhashIndex(collection={self.collection!r}, collection_id={getattr(self, 'collection_id', None)!r})"

    # ------------------------------------------------------------ schema / collection
    def _ensure_schema(self) -> None:
        from simdb.store.migrate import HEAD, migrate, schema_revision

        conn = self.connection()
        # simdb's own version table, or a host application's history that includes simdb's revisions
        revision, _table = schema_revision(lambda sql: conn.execute(sql).fetchall())
        if revision == HEAD:
            return
        migrate(self.engine)

    @staticmethod
    def _normalise(d: Any) -> Any:
        return json.loads(json.dumps(d, sort_keys=True))

    def _open_collection(self, fingerprinter):
        from simdb.fingerprint import Fingerprinter

        conn = self.connection()
        row = conn.execute(f"SELECT id, config FROM {COLLECTIONS} WHERE name = %s", (self.collection,)).fetchone()
        if row is None:
            verified = self._want_verify
            if verified is None:
                verified = fingerprinter is None and not self._want_jaccard
            if fingerprinter is None:  # Jaccard / verified collections: fp is the candidate fingerprint
                fingerprinter = (
                    _jaccard.candidate_fingerprinter() if self._want_jaccard or verified else Fingerprinter()
                )
            config = {"fingerprinter": self._normalise(fingerprinter.to_dict()), "store": dict(STORE_OPTIONS)}
            if self._want_jaccard:
                config[_jaccard.CONFIG_KEY] = _jaccard.collection_config()
            if verified:
                config[VERIFY_KEY] = _sketch.Verifier().to_dict()
            conn.execute(
                f"INSERT INTO {COLLECTIONS} (name, config) VALUES (%s, %s::jsonb) ON CONFLICT (name) DO NOTHING",
                (self.collection, json.dumps(config)),
            )
            row = conn.execute(f"SELECT id, config FROM {COLLECTIONS} WHERE name = %s", (self.collection,)).fetchone()
        cid, stored = row
        stored_fp = stored.get("fingerprinter") if isinstance(stored, dict) else None
        if fingerprinter is None:
            if stored_fp is None:
                raise CollectionConfigError(
                    f"collection {self.collection!r} has no Fingerprinter configuration in its config; "
                    "pass fingerprinter=..."
                )
            fingerprinter = Fingerprinter.from_dict(stored_fp)
        else:
            mine = self._normalise(fingerprinter.to_dict())
            if mine != stored_fp:
                diff = sorted(
                    k for k in set(mine) | set(stored_fp or {}) if (stored_fp or {}).get(k, _UNSET) != mine.get(k, _UNSET)
                )
                raise CollectionConfigError(
                    f"collection {self.collection!r} was created with a different Fingerprinter "
                    f"(differs in {', '.join(diff) or 'its layout'}): stored {json.dumps(stored_fp, sort_keys=True)}, "
                    f"given {json.dumps(mine, sort_keys=True)}. Its fingerprints are not comparable with "
                    "this one's: open it with fingerprinter=None (uses the stored config) or use another collection"
                )
        self.minhasher = _jaccard.minhasher_for(self.collection, stored, self._want_jaccard)
        self.verifier = self._verifier_of(stored)
        return fingerprinter, cid, stored

    def _verifier_of(self, stored: Any) -> _sketch.Verifier | None:
        cfg = stored.get(VERIFY_KEY) if isinstance(stored, dict) else None
        if self._want_verify and cfg is None:
            raise CollectionConfigError(
                f"collection {self.collection!r} is not a verified collection (it keeps no sketches); "
                "open it with verify=None, or convert it: simdb convert -c NAME (docs/near-duplicates.md)"
            )
        if self._want_verify is False and cfg is not None:
            raise CollectionConfigError(
                f"collection {self.collection!r} is a verified collection; open it with verify=None "
                "(Hamming-only answers: near(..., verify=False) or query by fingerprint)"
            )
        if cfg is None:
            return None
        try:
            return _sketch.Verifier.from_dict(cfg)
        except (KeyError, TypeError, ValueError) as exc:
            raise CollectionConfigError(f"collection {self.collection!r}: bad verify config {cfg!r}: {exc}") from None

    # ------------------------------------------------------------ fingerprints of queries
    def _query_fp(self, query: Any) -> int | None:
        if isinstance(query, str):
            return self.fingerprinter.fingerprint(_validate.check_text(query, "query", self.max_text_bytes), empty=None)
        if isinstance(query, bool) or not isinstance(query, numbers.Integral):
            raise InvalidTypeError(f"query must be a text (str) or an unsigned fingerprint (int), got {type(query).__name__}")
        _check_fp(query, "query fingerprint")
        return int(query)

    def _radii(self, fp: int, k: int) -> tuple[int, ...] | None:
        if not self.adaptive or k == 0:
            return None
        sizes, default = self._bucket_sizes()
        if not sizes:
            return None
        near = self._heavy_near
        if not (
            (fp >> 48) & 0xFFFF in near[0]
            or (fp >> 32) & 0xFFFF in near[1]
            or (fp >> 16) & 0xFFFF in near[2]
            or fp & 0xFFFF in near[3]
        ):
            return None  # no heavy bucket within reach of any probe: the even radii
        return _probes.choose_radii(fp, k, sizes, default_size=default)

    def _bucket_sizes(self) -> tuple[list[dict[int, float]] | None, float]:
        """Heavy block values from pg_stats (table-wide), refreshed at most once a minute."""
        now = time.monotonic()
        if self._stats is not None and now - self._stats[0] < 60.0:
            return self._stats[1], self._stats[2]
        sizes: list[dict[int, float]] | None = None
        default = 1.0
        try:
            conn = self.connection()
            reltuples = conn.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (FINGERPRINTS,)
            ).fetchone()
            n = max(float(reltuples[0]) if reltuples else 0.0, 0.0)
            default = max(n / 65536.0, 1.0)
            rows = conn.execute(
                "SELECT attname, most_common_vals::text::int[], most_common_freqs FROM pg_stats "
                "WHERE tablename = %s AND attname = ANY(%s) AND schemaname = ANY(current_schemas(false))",
                (FINGERPRINTS, list(_sql.BLOCK_COLUMNS)),
            ).fetchall()
            found = [dict() for _ in range(4)]
            # Only buckets far above what uniform fingerprints give (Poisson tail over
            # 65,536 buckets) and big enough to matter change the choice of radii.
            heavy = max(4.0 * default, default + 8.0 * default**0.5, HEAVY_BUCKET_MIN)
            for att, vals, freqs in rows:
                if not vals:
                    continue
                b = _sql.BLOCK_COLUMNS.index(att)
                for v, f in zip(vals, freqs):
                    est = f * n
                    if est >= heavy:
                        found[b][int(v)] = est
            if any(found):
                sizes = found
                # block values within 2 bits of a heavy one (the farthest a probe reaches)
                self._heavy_near = [
                    {v ^ m for v in found[b] for m in _probes.MASKS[_probes.MAX_RADIUS]} for b in range(4)
                ]
        except Exception:  # statistics are an optimisation only
            sizes = None
        self._stats = (now, sizes, default)
        return sizes, default

    def refresh_stats(self) -> None:
        """Forget the cached bucket-size statistics (re-read from pg_stats on next search)."""
        self._stats = None

    # ------------------------------------------------------------ search
    def _verifies(self, query: Any, verify: bool | None) -> bool:
        """Does this query go through the verification stage? (a text in a verified collection)"""
        if verify is not None and not isinstance(verify, bool):
            raise InvalidTypeError(f"verify must be a bool or None, got {type(verify).__name__}")
        if verify is False or self.verifier is None:
            if verify and self.verifier is None:
                raise InvalidArgumentError(
                    f"verify=True needs a verified collection; {self.collection!r} keeps no sketches "
                    "(convert it: simdb convert -c NAME)"
                )
            return False
        return isinstance(query, str)

    def _verify_params(self, k: int | None, min_jaccard: Any) -> tuple[int, int, float]:
        """(candidate radius, Hamming k for rows without a sketch, Jaccard threshold)."""
        hk = _probes.check_k(3 if k is None else k)
        t = self.verifier.min_jaccard if min_jaccard is None else _sketch.check_min_jaccard(min_jaccard)
        return max(self.verifier.k, hk), hk, t

    def _near_verified(self, text: str, k: int | None, limit: int | None, min_jaccard: Any) -> list[Match]:
        """Candidates within the collection's radius K, kept by the verification stage."""
        ck, hk, t = self._verify_params(k, min_jaccard)
        limit = _check_limit(limit)
        fp = self._query_fp(text)
        if fp is None:
            return []
        q = self.verifier.sketch(text)
        params = near_params(self.collection_id, fp, ck, self._radii(fp, ck), None)
        rows = self.connection().execute(_sql.NEAR_VERIFY_SQL, params, prepare=True).fetchall()
        out = verified_matches(rows, q, self.verifier, t, hk)
        return out if limit is None else out[:limit]

    def near(
        self, query: str | int, k: int | None = None, limit: int | None = None, *, min_jaccard: float | None = None,
        verify: bool | None = None,
    ) -> list[Match]:
        """Near-duplicates of a text or an unsigned fingerprint.

        **Verified collection** (the default for new collections), text query: the rows whose
        Jaccard similarity of token 3-gram shingles with the text is >= ``min_jaccard``
        (default: the collection's, 0.8), found among the rows within the collection's
        candidate radius K (Hamming distance on the candidate fingerprint); sorted by Jaccard
        (highest first), then distance, key; each :class:`Match` carries ``jaccard`` and
        ``distance``. Rows stored by fingerprint (no sketch) match by distance <= ``k``
        (default 3). ``verify=False``, or a fingerprint query: Hamming distance only.

        **Plain collection**: rows within Hamming distance ``k`` (0..11, default 3),
        sorted by distance then key. A text with no features has no near-duplicates: [].

        ``min_jaccard`` (Jaccard collections): the rows whose exact Jaccard similarity of
        shingle sets with the text is at least that, highest first (``Match.jaccard``);
        candidates come from the MinHash bands, or from SimHash within ``k`` if given."""
        if self._verifies(query, verify):
            return self._near_verified(query, k, limit, min_jaccard)
        if min_jaccard is not None:
            if self.verifier is not None:
                raise InvalidArgumentError(
                    "min_jaccard needs the query text (a fingerprint has no words to compare)"
                )
            return _jaccard.near(self, query, min_jaccard, k, limit)
        k = _validate.check_k(k)
        limit = _check_limit(limit)
        fp = self._query_fp(query)
        if fp is None:
            return []
        params = near_params(self.collection_id, fp, k, self._radii(fp, k), limit)
        rows = self.connection().execute(_sql.NEAR_SQL, params, prepare=True).fetchall()
        return [Match(key, f & MASK64, d, 1.0 - d / BITS, None, meta) for key, f, d, meta in rows]

    def near_many(
        self, queries: Iterable[str | int], k: int | None = 3, limit: int | None = None, *, workers: int | None = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ) -> list[list[Match]]:
        """``near`` for many queries at once; answers in the order of ``queries``.

        One statement per 20,000 queries. A batch of 500 or more is split over
        ``workers`` connections (default ``NEAR_MANY_WORKERS`` = 2) answered in
        parallel, except inside :meth:`transaction` (other connections would not
        see its uncommitted rows); ``workers=1`` keeps it on this thread's connection."""
        k = _validate.check_k(k)
        limit = _check_limit(limit)
        verified = self._verifies("", verify)  # texts of a verified collection go through verification
        if verified:
            ck, hk, t = self._verify_params(k, min_jaccard)
        elif min_jaccard is not None:
            raise InvalidArgumentError("near_many(min_jaccard=...) needs a verified collection")
        if workers is None:
            workers = NEAR_MANY_WORKERS
        elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgumentError(f"workers must be an int >= 1, got {workers!r}")
        queries = _validate.check_queries(queries)
        fps: list[int | None] = [None] * len(queries)
        text_pos = [i for i, q in enumerate(queries) if isinstance(q, str)]
        for i in text_pos:
            _validate.check_text(queries[i], f"queries[{i}]", self.max_text_bytes)
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                try:
                    fps[i] = self._query_fp(q)
                except (TypeError, ValueError) as exc:
                    raise _item_error(exc, f"queries[{i}]: {exc}") from None
        if text_pos:
            got = self.fingerprinter.many([queries[i] for i in text_pos], empty=None)
            for i, fp in zip(text_pos, got):
                fps[i] = fp
        out: list[list[Match]] = [[] for _ in queries]
        live = [i for i, fp in enumerate(fps) if fp is not None]
        conn = self.connection()
        if len(live) < NEAR_MANY_PARALLEL_MIN or conn.info.transaction_status != 0:  # 0: idle, no transaction
            workers = 1
        n_pieces = max(workers, -(-len(live) // NEAR_MANY_CHUNK)) if live else 0
        size = -(-len(live) // n_pieces) if n_pieces else 0
        pieces = [live[s: s + size] for s in range(0, len(live), size)] if size else []
        sk = k
        sketches: dict[int, list[int] | None] = {}
        if verified:
            sk = ck
            sketches = {i: self.verifier.sketch(queries[i]) for i in text_pos}
        adaptive = self.adaptive and sk > 0 and bool(self._bucket_sizes()[0])
        statement = _sql.NEAR_MANY_VERIFY_SQL if verified else _sql.NEAR_MANY_SQL

        def lookup(piece: list[int]) -> list[tuple]:
            cfps = [fps[i] for i in piece]
            radii = [self._radii(fp, sk) or _probes.even_radii(sk) for fp in cfps] if adaptive else None
            params = near_many_params(self.collection_id, cfps, sk, radii)
            return self.connection().execute(statement, params, prepare=True).fetchall()

        results = self._worker_pool(workers).map(lookup, pieces) if workers > 1 else map(lookup, pieces)
        if verified:
            grouped: dict[int, list[tuple]] = {}
            for piece, rows in zip(pieces, results):
                for qi, *row in rows:
                    grouped.setdefault(piece[qi], []).append(row)
            for i, rows in grouped.items():
                if i in sketches:
                    out[i] = verified_matches(rows, sketches[i], self.verifier, t, hk)
                else:  # a fingerprint query: Hamming distance <= k only
                    out[i] = sorted(
                        (Match(kk, f & MASK64, d, 1.0 - d / BITS, None, m) for kk, f, d, m, _ in rows if d <= k),
                        key=lambda m: (m.distance, m.key),
                    )
                if limit is not None:
                    del out[i][limit:]
            return out
        for piece, rows in zip(pieces, results):
            for qi, key, f, d, meta in rows:
                out[piece[qi]].append(Match(key, f & MASK64, d, 1.0 - d / BITS, None, meta))
        for i in live:
            if out[i]:
                out[i].sort(key=lambda m: (m.distance, m.key))
                if limit is not None:
                    del out[i][limit:]
        return out

    def _worker_pool(self, workers: int):
        """near_many's threads, kept between calls (each keeps its connection; closed by :meth:`close`)."""
        from concurrent.futures import ThreadPoolExecutor

        with self._conns_lock:
            pool = self._pool
            if pool is None or pool[0] != workers or pool[1] != os.getpid():
                if pool is not None and pool[1] == os.getpid():
                    pool[2].shutdown(wait=False)
                pool = (workers, os.getpid(), ThreadPoolExecutor(workers, thread_name_prefix="simdb-near-many"))
                self._pool = pool
        return pool[2]

    # ------------------------------------------------------------ single-row writes and reads
    def _fp_for(self, text: Any, fp: Any) -> int | None:
        """Signed bigint (or None: featureless) for add/update."""
        if fp is not None:
            return _check_fp(fp)
        if text is None:
            raise InvalidArgumentError("give text or fp")
        _validate.check_text(text, "text", self.max_text_bytes)
        u = self.fingerprinter.fingerprint(text, empty=None)
        return None if u is None else (u - (1 << 64) if u & _SIGN else u)

    def _sketch_for(self, text: Any, fp: Any) -> list[int] | None:
        """The verification sketch stored with a row: only for a text in a verified collection
        (a row given by ``fp`` has none and is answered by Hamming distance)."""
        if self.verifier is None or fp is not None or not isinstance(text, str):
            return None
        return self.verifier.sketch(text)

    @_limits.names_oversized_key
    def add(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = None) -> int | None:
        """Store ``key``'s fingerprint (from ``text``, or ``fp`` given directly) and ``meta``.

        Re-adding an existing key replaces its fingerprint and metadata. Returns the
        unsigned fingerprint, or None for a text with no features (stored, never matched).
        """
        if self.minhasher is not None:  # Jaccard collection: also its shingle set and band keys
            return _jaccard.add(self, key, text, fp, meta)
        key = _check_key(key)
        signed = self._fp_for(text, fp)
        meta_json = _dump_meta(meta)
        self.connection().execute(
            _rows.UPSERT_SQL,
            {"c": self.collection_id, "key": key, "fp": signed, "meta": meta_json, "sh": self._sketch_for(text, fp)},
            prepare=True,
        )
        return None if signed is None else signed & MASK64

    @_limits.names_oversized_key
    def update(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = _UNSET) -> int | None:
        """Change an existing key's fingerprint (and ``meta``, if given). KeyError if absent."""
        if self.minhasher is not None:  # Jaccard collection: also its shingle set and band keys
            return _jaccard.update(self, key, text, fp, meta, _UNSET)
        key = _check_key(key)
        signed = self._fp_for(text, fp)
        params = {"c": self.collection_id, "key": key, "fp": signed, "sh": self._sketch_for(text, fp)}
        if meta is not _UNSET:
            params["meta"] = _dump_meta(meta)
        cur = self.connection().execute(_rows.update_sql(meta is not _UNSET), params)
        if cur.rowcount == 0:
            raise KeyError(key)
        return None if signed is None else signed & MASK64

    def get(self, key: str, default: Any = None) -> Entry | Any:
        """The stored entry for ``key`` (``default`` if there is none)."""
        key = _check_key(key)
        row = self.connection().execute(
            _rows.GET_SQL, {"c": self.collection_id, "key": key}, prepare=True
        ).fetchone()
        if row is None:
            return default
        return Entry(row[0], None if row[1] is None else row[1] & MASK64, row[2], row[3])

    def remove(self, key: str) -> bool:
        """Delete ``key``; True if it existed."""
        key = _check_key(key)
        cur = self.connection().execute(_rows.DELETE_SQL, {"c": self.collection_id, "key": key})
        return cur.rowcount > 0

    def __contains__(self, key: object) -> bool:
        try:
            key = _check_key(key)
        except (TypeError, ValueError):
            return False
        return (
            self.connection()
            .execute(
                f"SELECT 1 FROM {FINGERPRINTS} WHERE collection_id = %s::int4 AND key = %s", (self.collection_id, key)
            )
            .fetchone()
            is not None
        )

    def __len__(self) -> int:
        return self.connection().execute(
            f"SELECT count(*) FROM {FINGERPRINTS} WHERE collection_id = %s::int4", (self.collection_id,)
        ).fetchone()[0]

    def clear(self) -> int:
        """Delete every row of this collection (the collection and its config stay). Returns the count."""
        return self.connection().execute(
            f"DELETE FROM {FINGERPRINTS} WHERE collection_id = %s::int4", (self.collection_id,)
        ).rowcount

    def drop(self) -> bool:
        """Delete this collection, its configuration and all its rows (as ``simdb drop``); True if it
        existed. The index cannot be used afterwards (its collection id is gone)."""
        from simdb.store.collections import drop_collection

        return drop_collection(self.connection(), self.collection_id)

    # ------------------------------------------------------------ deduplication (simdb.dedup)
    @_limits.names_oversized_key
    def add_if_unique(
        self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3, meta: Any = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ):
        """Insert ``key`` unless a stored row is within ``k`` (0..11); atomic under concurrency.

        Returns :class:`simdb.dedup.AddResult` (``inserted``, ``matches``: the stored
        near-duplicates that prevented the insert, sorted by distance then key).
        Writers serialise only on the block values they share (see :mod:`simdb.dedup`).
        """
        from simdb import dedup

        if fp is None and self._verifies(text, verify):  # verified collection: candidates within K, then Jaccard
            key = _check_key(key)
            ck, hk, t = self._verify_params(k, min_jaccard)
            signed = self._fp_for(text, None)
            _dump_meta(meta)
            if self._closed:
                raise RuntimeError("SimhashIndex is closed")
            return dedup.run_add_if_unique(
                self.engine, self.collection_id, key, None if signed is None else signed & MASK64, ck, meta,
                self.verifier.sketch(text), verify=(self.verifier, t, hk),
            )
        if min_jaccard is not None:  # exact Jaccard >= min_jaccard, serialised on band keys (simdb.jaccard)
            return _jaccard.index_add_if_unique(self, key, text, fp, meta, min_jaccard)
        key = _check_key(key)
        k = _probes.check_k(k)
        signed = self._fp_for(text, fp)
        _dump_meta(meta)  # validate before taking locks
        if self._closed:
            raise RuntimeError("SimhashIndex is closed")
        return dedup.run_add_if_unique(
            self.engine, self.collection_id, key, None if signed is None else signed & MASK64, k, meta
        )

    def pairs(self, k: int = 3, *, min_jaccard: float | None = None, verify: bool | None = None):
        """Stream every near-duplicate pair once: :class:`simdb.dedup.Pair` (key_a, key_b, distance),
        ``key_a`` added before ``key_b``; k in 0..11 (k > 3 holds the collection's (id, fp) in memory,
        16 bytes a row). With ``min_jaccard``: pairs by exact Jaccard.

        Verified collection (unless ``verify=False``): pairs within the candidate radius K kept
        by Jaccard >= ``min_jaccard`` (default the collection's), as :class:`simdb.dedup.VerifiedPair`
        (key_a, key_b, distance, jaccard); a row without a sketch pairs by distance <= ``k``."""
        if self._verifies("", verify):
            from simdb import dedup

            ck, hk, t = self._verify_params(k, min_jaccard)
            return dedup.iter_pairs(self.engine, self.collection_id, ck, verify=(self.verifier, t, hk))
        if min_jaccard is not None:
            from simdb import jaccard

            return jaccard.iter_pairs(self.engine, self.collection_id, min_jaccard)
        from simdb import dedup

        return dedup.iter_pairs(self.engine, self.collection_id, dedup.check_pairs_k(k))

    def clusters(
        self, k: int = 3, *, include_singletons: bool = False, min_jaccard: float | None = None,
        verify: bool | None = None,
    ):
        """Stream the connected components of :meth:`pairs` as :class:`simdb.dedup.Cluster`
        (representative = earliest added), ordered by representative; singletons only if asked."""
        if self._verifies("", verify):
            from simdb import dedup

            ck, hk, t = self._verify_params(k, min_jaccard)
            return dedup.iter_clusters(
                self.engine, self.collection_id, ck, include_singletons=include_singletons,
                verify=(self.verifier, t, hk),
            )
        if min_jaccard is not None:
            from simdb import jaccard

            return jaccard.iter_clusters(
                self.engine, self.collection_id, min_jaccard, include_singletons=include_singletons
            )
        from simdb import dedup

        return dedup.iter_clusters(
            self.engine, self.collection_id, dedup.check_pairs_k(k), include_singletons=include_singletons
        )

    def convert_to_verified(self) -> int:
        """Make this collection a verified collection (the default for new ones) from the texts
        stored in each row's ``meta.text``; all or nothing. See :mod:`simdb.convert`."""
        return _convert.convert_to_verified(self)

    def report(self, path, **options):
        """Write the self-contained HTML review report of this collection's clusters to ``path``;
        ``options`` as :func:`simdb.report.write_report` takes them (k, min_jaccard, keys, texts ...)."""
        from simdb.report import write_report

        return write_report(self, path, **options)

    # ------------------------------------------------------------ bulk load
    def add_many(
        self,
        items: Iterable[Any],
        *,
        chunk_rows: int = CHUNK_ROWS,
        rebuild_indexes: bool | None = None,
        vacuum: bool | None = None,
        workers: int | None = None,
    ) -> int:
        """Load many items through COPY, all or nothing; returns the number of items.

        Items are ``(key, text)`` pairs or mappings with ``key``, ``text`` and/or ``fp``
        (unsigned; wins over text) and ``meta``. Streaming: memory stays bounded by
        ``chunk_rows``. Keys already in the collection are replaced, and so is an
        earlier item with the same key in the same call (the last one wins). A bad
        item aborts the whole call with an error naming it (nothing is stored).

        Loading into a table where no other collection has rows (e.g. the first
        import into a new database), and if no one else uses the table at that
        moment, simdb drops the block indexes, the key constraint and the foreign
        key, COPYs straight into the table and rebuilds them, inside the same
        transaction (:mod:`simdb.store.bulk_locks`: never a deadlock, never a stall
        of other collections). ``rebuild_indexes=True/False`` forces or forbids that.
        ``vacuum`` (default: after a rebuild) runs VACUUM ANALYZE after the commit so
        that searches use index-only scans at once.

        ``workers``: processes that validate and fingerprint chunks while COPY streams
        earlier ones (:mod:`simdb.parallel`; default: the usable cores, at most 8, or 1
        when the main script is not guarded by ``if __name__ == "__main__":``). An
        input of one chunk is done in this process. Items must then be picklable.
        """
        workers = _parallel.check_workers(workers)
        with _limits.key_size_errors("add_many: a key"):
            if self.minhasher is not None:  # Jaccard collection: shingle sets and band keys too
                return _jaccard.add_many(self, items, chunk_rows=chunk_rows)
            return _bulk_locks.retry_transient(
                items, lambda: _BulkLoad(self, chunk_rows, rebuild_indexes, workers).run(items, vacuum)
            )


# ---------------------------------------------------------------------------
# add_many machinery
# ---------------------------------------------------------------------------

_STAGE = "simdb_stage_v2"  # v2: with the shingles (sketch) column of verified collections
_STAGE_DDL = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (key text COLLATE \"C\" NOT NULL, fp bigint, meta jsonb, shingles int4[])"
)
_DROP_FOR_BULK = [
    *(f"DROP INDEX {name}" for name in _sql.BLOCK_INDEXES),
    f"ALTER TABLE {FINGERPRINTS} DROP CONSTRAINT {_sql.UNIQUE_KEY}",
    f"ALTER TABLE {FINGERPRINTS} DROP CONSTRAINT {_sql.COLLECTION_FK}",
]


def _rebuild_ddl() -> list[str]:
    return [
        *(f"CREATE INDEX {name} ON {FINGERPRINTS} ({', '.join(cols)})" for name, cols in _sql.BLOCK_INDEXES.items()),
        f"ALTER TABLE {FINGERPRINTS} ADD CONSTRAINT {_sql.COLLECTION_FK} FOREIGN KEY (collection_id) "
        f"REFERENCES {COLLECTIONS} (id) ON DELETE CASCADE",
    ]


class _BulkLoad:
    def __init__(self, index: SimhashIndex, chunk_rows: int, rebuild: bool | None, workers: int | None = None):
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise InvalidArgumentError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
        self.workers = workers if workers is not None else _parallel.default_workers()
        self.index = index
        self.chunk_rows = chunk_rows
        self.rebuild = rebuild
        self.cid = index.collection_id
        self.timings: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def _mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.timings[phase] = self.timings.get(phase, 0.0) + now - self._t0
        self._t0 = now

    def run(self, items: Iterable[Any], vacuum: bool | None) -> int:
        index = self.index
        conn = index.connection()
        chunks = iter_chunks(items, index.fingerprinter, self.chunk_rows, self.workers, index.max_text_bytes,
                             index.verifier)
        total = 0
        rebuilt = frozen = False
        with conn.transaction():
            # the collection's writers serialise; the table lock only when it blocks nobody
            # (simdb.store.bulk_locks: asked first, NOWAIT, kept only if no other collection has rows)
            _bulk_locks.lock_collection(conn, self.cid)
            self.exclusive = self.rebuild is not False and _bulk_locks.try_exclusive(
                conn, FINGERPRINTS, self.cid, force=self.rebuild is True
            )
            if self.exclusive:
                # First load into an empty table: no staging, COPY FREEZE, build indexes after.
                if self._table_is_empty(conn):
                    frozen = self._truncate_for_freeze(conn)
                    self._drop(conn)
                    self._mark("prepare")
                    total = self._copy_direct(conn, chunks, freeze=frozen)
                    self._rebuild(conn)
                    conn.execute(f"ANALYZE {FINGERPRINTS}")
                    self._mark("analyze")
                    rebuilt = True
            if not rebuilt:
                total, rebuilt = self._staged(conn, chunks)
            if self._staging_used:
                conn.execute(f"TRUNCATE {_STAGE}")
        self._mark("commit")
        if vacuum or (vacuum is None and rebuilt and not frozen):
            conn.execute(f"VACUUM (ANALYZE) {FINGERPRINTS}")
            self._mark("vacuum")
        if rebuilt or total >= BULK_MIN_ROWS:
            index.refresh_stats()
        index.last_load = {"rows": total, "rebuilt": rebuilt, "frozen": frozen, "seconds": dict(self.timings)}
        return total

    _staging_used = False
    exclusive = False  # whether this load holds the table's ACCESS EXCLUSIVE lock (bulk_locks.try_exclusive)

    def _staged(self, conn, chunks: Iterator[tuple[int, str]]) -> tuple[int, bool]:
        """COPY into a temp staging table; merge, or switch to drop/COPY/rebuild for big loads."""
        self._staging_used = True
        empty = conn.execute(
            f"SELECT NOT EXISTS (SELECT 1 FROM {FINGERPRINTS} WHERE collection_id = %s::int4)", (self.cid,)
        ).fetchone()[0]
        table_rows = self._table_rows(conn) if empty and self.rebuild is None else 0.0
        conn.execute(_STAGE_DDL)
        conn.execute(f"TRUNCATE {_STAGE}")
        self._mark("prepare")
        staged = 0
        bulk = False
        with conn.cursor() as cur:
            with cur.copy(f"COPY {_STAGE} (key, fp, meta, shingles) FROM STDIN", writer=_copy_writer(cur)) as cp:
                for n, data in chunks:
                    cp.write(data)
                    staged += n
                    if self._go_bulk(empty, table_rows, staged):
                        bulk = True
                        break
        self._mark("copy_stage")
        if not bulk:
            self._merge(conn, empty)
            return staged, False
        self._drop(conn)  # self.exclusive: the table lock is already held (see _go_bulk)
        self._dedupe_stage(conn)
        conn.execute(
            f"INSERT INTO {FINGERPRINTS} (collection_id, key, fp, meta, shingles) "
            f"SELECT %s::int4, key, fp, meta, shingles FROM {_STAGE}",
            (self.cid,),
        )
        self._mark("move_stage")
        staged += self._copy_direct(conn, chunks, freeze=False)
        self._rebuild(conn)
        return staged, True

    @staticmethod
    def _table_is_empty(conn) -> bool:
        return conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {FINGERPRINTS})").fetchone()[0]

    def _truncate_for_freeze(self, conn) -> bool:
        """TRUNCATE the (empty) table so that COPY FREEZE may write frozen, all-visible rows.

        Tables referencing it by foreign key are truncated with it only if they are
        empty too (they must be listed in the same TRUNCATE); otherwise no FREEZE.
        """
        refs = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT conrelid::regclass::text FROM pg_constraint "
                "WHERE contype = 'f' AND confrelid = to_regclass(%s) AND conrelid <> confrelid",
                (FINGERPRINTS,),
            ).fetchall()
        ]
        for ref in refs:  # catalog-provided, already quoted names
            if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {ref})").fetchone()[0]:
                return False
        try:
            with conn.transaction():
                conn.execute(f"TRUNCATE {', '.join([FINGERPRINTS, *refs])}")
        except Exception:  # e.g. no TRUNCATE privilege on a referencing table: no FREEZE then
            return False
        return True

    def _drop(self, conn) -> None:
        for ddl in _DROP_FOR_BULK:
            conn.execute(ddl)
        # the chunks carry (key, fp, meta); collection_id comes from a temporary default
        # (DDL cannot take bound parameters; the id is an int from our own catalog row)
        conn.execute(f"ALTER TABLE {FINGERPRINTS} ALTER COLUMN collection_id SET DEFAULT {int(self.cid)}")

    def _copy_direct(self, conn, chunks: Iterator[tuple[int, str]], freeze: bool) -> int:
        total = 0
        opts = " WITH (FREEZE)" if freeze else ""
        with conn.cursor() as cur:
            with cur.copy(f"COPY {FINGERPRINTS} (key, fp, meta, shingles) FROM STDIN{opts}", writer=_copy_writer(cur)) as cp:
                for n, data in chunks:
                    cp.write(data)
                    total += n
        conn.execute(f"ALTER TABLE {FINGERPRINTS} ALTER COLUMN collection_id DROP DEFAULT")
        self._mark("copy_direct")
        return total

    def _rebuild(self, conn) -> None:
        add_unique = f"ALTER TABLE {FINGERPRINTS} ADD CONSTRAINT {_sql.UNIQUE_KEY} UNIQUE (collection_id, key)"
        try:
            with conn.transaction():
                conn.execute(add_unique)
        except _unique_violation():
            # the same key more than once in this load: the last one (highest id) wins
            conn.execute(
                f"DELETE FROM {FINGERPRINTS} a USING {FINGERPRINTS} b WHERE a.collection_id = %s::int4 "
                "AND b.collection_id = a.collection_id AND a.key = b.key AND a.id < b.id",
                (self.cid,),
            )
            conn.execute(add_unique)
        self._mark("rebuild_unique")
        for ddl in _rebuild_ddl():
            conn.execute(ddl)
            self._mark("rebuild_" + ddl.split()[2])

    def _table_rows(self, conn) -> float:
        """Rows in the whole table: the planner's estimate, or a count capped at 1M when it has none."""
        est = conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (FINGERPRINTS,)).fetchone()
        counted = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {FINGERPRINTS} LIMIT 1000000) t").fetchone()[0]
        return max(float(est[0]) if est and est[0] is not None else 0.0, float(counted))

    def _go_bulk(self, empty: bool, table_rows: float, staged: int) -> bool:
        """Switch to drop-COPY-rebuild? (no queries here: the COPY is in progress)"""
        if not self.exclusive or self.rebuild is False or staged < BULK_MIN_ROWS:
            return False
        if self.rebuild is True:
            return True
        return empty and table_rows <= staged

    def _merge(self, conn, empty: bool) -> None:
        """Stage -> table: replace existing keys, last item wins within the call."""
        if not empty:
            conn.execute(
                f"DELETE FROM {FINGERPRINTS} f USING {_STAGE} s WHERE f.collection_id = %s::int4 AND f.key = s.key",
                (self.cid,),
            )
            self._mark("delete_replaced")
        insert = (
            f"INSERT INTO {FINGERPRINTS} (collection_id, key, fp, meta, shingles) "
            f"SELECT %s::int4, key, fp, meta, shingles FROM {_STAGE}"
        )
        try:
            with conn.transaction():  # savepoint
                conn.execute(insert, (self.cid,))
        except _unique_violation():
            self._dedupe_stage(conn)
            conn.execute(insert, (self.cid,))
        self._mark("insert")

    def _dedupe_stage(self, conn) -> None:
        # COPY appends in order, so the physical order (ctid) is the order of the items
        conn.execute(f"DELETE FROM {_STAGE} a USING {_STAGE} b WHERE a.key = b.key AND a.ctid < b.ctid")


def _copy_writer(cur):
    """A COPY writer that sends from a background thread, so that the next chunk is encoded
    (Python, holding the GIL) while PostgreSQL parses the previous one (the default writer
    blocks until each chunk is sent). Errors still surface at the end of the COPY block."""
    from psycopg.copy import QueuedLibpqWriter

    return QueuedLibpqWriter(cur)


def _unique_violation():
    import psycopg.errors

    return (psycopg.errors.UniqueViolation, psycopg.errors.CardinalityViolation)
