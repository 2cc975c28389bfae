"""``SimhashIndex``: near-duplicate search over fingerprints stored in PostgreSQL.

The facade holds one collection and the collection's rule (:mod:`simdb.index.rules`: Hamming,
verified, banded), chosen when the collection is opened: each method checks its arguments and makes
one call to the rule (or to the store for what every rule does alike), which owns its use case end
to end; no method tests a flag for the rule. It holds no SQL: the statements run in
:mod:`simdb.store`, every value as a bound parameter or through COPY, never spliced into SQL text.
Each thread gets its own psycopg connection (autocommit, serial generic plans:
:class:`simdb.store.connect.ThreadConnections`).
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, TypeVar

from simdb.core import sketch as _sketch
from simdb.core import validate as _validate
from simdb.core.bits import even_radii, to_unsigned
from simdb.core.kept_texts import compress_text, keeps_texts
from simdb.database import resolve_engine
from simdb.errors import CollectionChangedError, InvalidArgumentError, InvalidTypeError
from simdb.index import reservation as _reservation
from simdb.index import rules as _rules
from simdb.index.radii import AdaptiveRadii
from simdb.results import AddResult, Entry, Match
from simdb.store import bulk as _bulk
from simdb.store import candidates as _candidates
from simdb.store import collection_guard as _guard
from simdb.store import collections as _collections
from simdb.store import connect as _connect
from simdb.store import convert as _convert
from simdb.store import pairs as _pairs
from simdb.store import rows as _rows
from simdb.store import sql as _sql
from simdb.store.encode import CHUNK_ROWS
from simdb.util import parallel as _parallel

__all__ = ["Entry", "Match", "SimhashIndex"]

# the table names and store options, as simdb 0.1.0's simdb.index had them (released code may build SQL
# on them); their homes are simdb.store.sql and simdb.index.rules
FINGERPRINTS = _sql.FINGERPRINTS
COLLECTIONS = _sql.COLLECTIONS
STORE_OPTIONS = _rules.STORE_OPTIONS
_UNSET: Any = object()

#: what ``jaccard=True`` answers now that the legacy store is removed
LEGACY_JACCARD_GONE = (
    "jaccard=True: the legacy MinHash-band collections were removed; a collection is verified by "
    "default (near-duplicate = Jaccard of character 4-grams >= 0.8; any threshold with near(..., min_jaccard=...)): "
    "drop jaccard=True. Existing legacy collections were converted by migration simdb_0009 (Hamming-only until "
    "their sketches are rebuilt from stored texts: simdb convert -c NAME; docs/near-duplicates.md)"
)
#: near_many: queries per statement
NEAR_MANY_CHUNK = 20_000
#: near_many splits a batch of at least NEAR_MANY_PARALLEL_MIN queries over this many
#: connections, one thread each: the lookups are server-bound, so a 2-core server answers
#: about twice as many per second (measured: 35k -> 58k q/s at 1M rows)
NEAR_MANY_WORKERS = 2
NEAR_MANY_PARALLEL_MIN = 500
#: near_many keeps the features of its last call's texts for the next when it had at most this
#: many (``simdb dedup`` asks about a batch of 5,000 and then about its survivors): ~1 kB a text
FEATURE_MEMO_MAX = 50_000
#: a conversion that meets a deadlock is run again (its transaction rolled back) at most this many times
CONVERT_RETRIES = 3

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def by_current_rule(read: F, again: bool = True) -> F:
    """A read answered by the collection's current rule: a change announced before it is followed
    first; one announced while its statements ran (the announcement arrives with a statement's
    result) means they may have seen the new rows with the old rule, so the read is asked ``again``.
    Why a decorator and no query: the check is two flag reads on every call."""

    @functools.wraps(read)
    def following(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._rule_changed.is_set():
            self._follow_config()
        out = read(self, *args, **kwargs)
        if again and self._rule_changed.is_set():
            self._follow_config()
            out = read(self, *args, **kwargs)
        return out

    return following  # type: ignore[return-value]


#: a streamed or in-memory read (``pairs``, ``clusters``) started under the current rule:
#: a change announced before it starts is followed first (a stream under way cannot be redone)
at_current_rule = functools.partial(by_current_rule, again=False)


class SimhashIndex:
    """Fingerprints of one collection in PostgreSQL, and near-duplicate search on them.

    What is exact: in a Hamming-only collection (``verify=False``), or with
    ``near(..., verify=False)``, the answer is every row within ``k`` bits, none missed. The default rule (Jaccard of character
    4-grams >= 0.8) is not exact at its threshold's edge: candidates share band keys (about 99.8 %
    of the true pairs do) and are kept by their stored sketches' Jaccard, exact for short texts and
    an estimate for long ones, so a pair near 0.8 can be missed or one just under it kept (README;
    docs/near-duplicates.md for the measured recall and precision).

    ``database``: a SQLAlchemy URL or Engine (None: ``SIMDB_DATABASE_URL``, then the
    embedded server). ``collection``: the collection's name; created on first use, its
    Fingerprinter's configuration stored with it. ``fingerprinter=None`` (the default) opens
    an existing collection with its stored configuration and creates a new one *verified*
    (below), fingerprinted by ``Fingerprinter.preset("verified")``, not ``Fingerprinter()``.
    Pass a Fingerprinter only for a new Hamming-only collection (or with ``verify=True``):
    opening an existing collection with a different one, ``Fingerprinter()`` on a collection
    created by default included, raises :class:`~simdb.store.CollectionConfigError`, since
    their fingerprints are not comparable. Missing tables are created by running
    the migrations (``migrate=False`` to require them). ``adaptive=True`` picks the
    probe radii per query from bucket sizes (``pg_stats``), which only changes the
    amount of work, never the answer. ``jaccard=True`` (the legacy MinHash-band
    collections, now retired) raises
    :class:`~simdb.errors.InvalidArgumentError` naming the conversion: a verified
    collection answers the same question in one store.

    ``verify`` (:mod:`simdb.core.sketch`, docs/near-duplicates.md): a new collection
    with no options is *verified*: near-duplicate = Jaccard similarity of character
    4-grams >= 0.8, found among the rows sharing two of the text's 14 band keys (band scheme
    ``oph-b14r5-m2-v3``), checked on a stored bottom-256 sketch; answers carry ``jaccard``
    and ``distance``. ``verify=False`` creates a Hamming-only collection (distance <= k);
    a new collection given a ``fingerprinter`` is Hamming-only unless ``verify=True``.
    ``verify=None`` opens a collection as it was created. ``store_texts=True``: the collection keeps
    each row's text, compressed (recorded in its config, honoured by every writer; :meth:`text`).
    ``created``: whether this index created its collection (so that a writer that fails before storing
    anything, ``simdb add``, can remove the empty collection it made).

    Thread-safe: each thread uses its own connection.
    """

    #: rows the last add_many committed (its transaction), even when it was interrupted after the commit
    last_load_committed: int = 0

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
        store_texts: bool | None = None,
    ):
        self.collection = _validate.check_collection(collection)
        #: the largest text (UTF-8 bytes) this index fingerprints; InputTooLargeError beyond it
        self.max_text_bytes = _validate.max_text_bytes(max_text_bytes)
        _rules.check_fingerprinter(fingerprinter)  # before any connection: not an AttributeError from deep inside
        for name, flag in (("migrate", migrate), ("adaptive", adaptive)):
            if not isinstance(flag, bool):  # migrate="no" would be true
                raise InvalidTypeError(f"{name} must be a bool, got {type(flag).__name__}")
        for name, maybe in (("jaccard", jaccard), ("verify", verify)):
            if maybe is not None and not isinstance(maybe, bool):
                raise InvalidTypeError(f"{name} must be a bool or None, got {type(maybe).__name__}")
        if jaccard:  # the legacy MinHash-band store, retired: an error naming the replacement and the conversion
            raise InvalidArgumentError(LEGACY_JACCARD_GONE)
        self.engine, self._owns_engine = resolve_engine(database)
        #: set when a change of this collection's rule is announced (simdb.store.collection_guard.listen)
        self._rule_changed = threading.Event()
        self._connections = _connect.ThreadConnections(self.engine, self._on_rule_change)
        #: the probe radii of each look-up (even ones unless ``adaptive``), from the table's bucket sizes
        self._radii = AdaptiveRadii(self.connection, adaptive)
        #: the last near_many call's text features, and the last two prepare calls' (see text_features)
        self._feature_memo: dict[str, _rules.Features] = {}
        self._prepared: tuple[dict[str, _rules.Features], ...] = ({}, {})
        #: what the last add_many did: rows, whether it rebuilt the indexes, seconds per phase
        self.last_load: dict[str, Any] | None = None
        #: how this collection finds and judges near-duplicates (simdb.index.rules), set by _open_collection
        self.rule: _rules.HammingRule = _rules.HammingRule()
        try:
            if migrate:
                _collections.ensure_schema(self.connection(), self.engine)
            with _connect.key_size_errors(f"collection {collection[:60]!r}"):
                self._open_collection(fingerprinter, verify, store_texts)
        except BaseException:
            self.close()
            raise

    @property
    def adaptive(self) -> bool:
        """Are the probe radii picked per query from bucket sizes (``adaptive=``)?"""
        return self._radii.adaptive

    # ------------------------------------------------------------ connections
    @property
    def _closed(self) -> bool:
        return self._connections.closed

    def connection(self) -> Any:
        """This thread's psycopg connection (autocommit, serial generic plans)."""
        return self._connections.get()

    def _check_open(self) -> None:
        """IndexClosedError once closed; called first by the methods that could answer without a
        connection of this index (a featureless query, the features of texts, pairs' own pool)."""
        self._connections.check_open()

    @contextmanager
    def transaction(self):
        """A transaction on this thread's connection (yields the connection)."""
        conn = self.connection()
        with conn.transaction():
            yield conn

    def close(self) -> None:
        """Close this index's connections (and its engine, if simdb created it)."""
        self._connections.close()
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SimhashIndex(collection={self.collection!r}, collection_id={getattr(self, 'collection_id', None)!r})"

    # ------------------------------------------------------------ the collection and its configuration
    def _open_collection(self, fingerprinter: Any, verify: bool | None, store_texts: bool | None) -> None:
        conn = self.connection()
        row = _collections.find_collection(conn, self.collection)
        #: whether this index created its collection (it did not exist when the index was opened)
        self.created = False
        if row is None:
            fingerprinter, config = _rules.new_config(fingerprinter, verify, store_texts)
            cid, stored, self.created = _collections.create_collection(conn, self.collection, config)
        else:
            cid, stored = row
        _collections.open_texts_option(conn, cid, self.collection, stored, store_texts)
        self.collection_id = cid
        self._take(*self._current_config(conn, cid), fingerprinter, verify)
        if isinstance(self.config, dict) and self.config.get(_collections.LEGACY_KEY) and self.verifier is None:
            warnings.warn(
                f"collection {self.collection!r} was a legacy MinHash-band (jaccard=True) collection, converted by "
                "migration simdb_0009 without its texts: it answers by Hamming distance only. Rebuild its sketches "
                f"from stored texts (meta.text) with: simdb convert -c {self.collection} (docs/near-duplicates.md)",
                UserWarning, stacklevel=3,
            )

    def _take(self, config: Any, version: str, fingerprinter: Any = None, verify: bool | None = None) -> None:
        """Take the collection's config and its version, read together: every write carries the version,
        and is refused once a conversion (another process's included) has changed the rule
        (:mod:`simdb.store.collection_guard`); the fingerprinter (``fingerprinter``, checked against
        it), the rule (``verify`` must agree) and the kept texts follow from it."""
        self.config, self.config_version = config, version
        self.store_texts = keeps_texts(config)
        self.fingerprinter = _rules.open_fingerprinter(self.collection, config, fingerprinter)
        self.rule = _rules.open_rule(self.collection, config, verify)

    def _current_config(self, conn: Any, cid: int) -> tuple[Any, str]:
        """(config, version) of the collection as stored now; CollectionChangedError if it is gone."""
        now = _guard.current(conn, cid)
        if now is None:
            raise CollectionChangedError(
                f"collection {self.collection!r} was dropped after this index opened it: open it again "
                "(a new SimhashIndex) to create it anew")
        return now

    def _on_rule_change(self, collection_id: int) -> None:
        """A collection's rule changed (announced on any of this index's connections): ours?"""
        if collection_id == getattr(self, "collection_id", None):
            self._rule_changed.set()

    def _follow_config(self) -> None:
        """Read the collection's configuration again and follow it (fingerprinter, rule, kept texts).

        Why: ``simdb convert`` (in this process or another) changes a collection's rule, and a write
        computed under the old one would store a row the new rule cannot find. The store refuses such a
        write (:mod:`simdb.store.collection_guard`); the index follows the new configuration here and
        the writer computes its row again (:meth:`_written`; ``add_many``: its next try). Reads follow
        it too (:func:`by_current_rule`), and so does this index after converting the collection itself."""
        self._rule_changed.clear()  # before reading: a change announced from now on is seen again
        try:
            config, version = self._current_config(self.connection(), self.collection_id)
        except CollectionChangedError:
            self._rule_changed.set()  # dropped: gone for good, and every later call says so
            raise
        self._take(config, version)
        self._feature_memo = {}  # features of the old settings: near_many's memo must not outlive them
        self._prepared = ({}, {})
        self.refresh_stats()

    def _written(self, write: Callable[[], T]) -> T:
        """``write()``, once more under the new rule if it was refused because the collection's rule changed
        since this index read it (nothing of the refused attempt was stored: :mod:`simdb.store.collection_guard`);
        ``write`` computes its row by the rule of its attempt."""
        try:
            return write()
        except CollectionChangedError:
            self._follow_config()
            return write()

    @property
    def verifier(self) -> _sketch.Verifier | None:
        """The verification settings of a verified collection (None: a Hamming collection)."""
        return self.rule.verifier

    @property
    def bands(self) -> bool:
        """Is this a banded verified collection (candidates by band keys, :mod:`simdb.core.sketch.bands`)?"""
        return self.rule.banded

    @property
    def band_scheme(self) -> str | None:
        """A banded collection's band scheme (:data:`simdb.core.sketch.bands.SCHEMES`); None if not banded."""
        return self.rule.band_scheme

    # ------------------------------------------------------------ single-row writes and reads
    def _row(self, text: Any, fp: Any) -> _rules.Row:
        """The row add/update store: a text's, built by the rule (:meth:`simdb.index.rules.HammingRule.row_of`:
        fingerprint, sketch and band keys in one pass, the kept text), or the row of a fingerprint given
        alone (no sketch: answered by Hamming distance)."""
        if fp is not None:
            _validate.check_text_or_fp(text, fp)
            return _rules.fp_row(_validate.check_fp(fp))
        if text is None:
            raise InvalidArgumentError("give text or fp")
        return self.rule.row_of(self.fingerprinter, _validate.check_text(text, "text", self.max_text_bytes),
                                self.store_texts)

    def _text_z(self, text: Any, fp: Any) -> bytes | None:
        """The compressed text a write stores with its row: only in a collection that keeps texts, and
        only for a row given by its text (a row given by ``fp`` has no text to keep)."""
        if not self.store_texts or fp is not None or not isinstance(text, str):
            return None
        return compress_text(text)

    def add(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = None) -> int | None:
        """Store ``key``'s fingerprint (from ``text``, or ``fp`` given directly) and ``meta``.

        Re-adding an existing key replaces its fingerprint and metadata. Returns the
        unsigned fingerprint, or None for a text with no features (stored, never matched).
        """
        with _connect.key_size_errors(key=key):
            key = _validate.check_new_key(key)
            meta_json = _validate.dump_meta(meta)

            def upsert() -> int | None:
                row = self._row(text, fp)
                _rows.upsert_row(self._connections.get(), self.collection_id, key, row.signed, meta_json, row.sketch,
                                  row.bands, row.text_z, version=self.config_version)
                return row.fp

            return self._written(upsert)

    def update(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = _UNSET) -> int | None:
        """Change an existing key's fingerprint (and ``meta``, if given). KeyNotFoundError (a KeyError) if absent."""
        with _connect.key_size_errors(key=key):
            key = _validate.check_new_key(key)
            with_meta = meta is not _UNSET
            meta_json = _validate.dump_meta(meta) if with_meta else None

            def update() -> int | None:
                row = self._row(text, fp)
                if not _rows.update_row(self._connections.get(), self.collection_id, key, row.signed, row.sketch,
                                         meta_json, with_meta, row.bands, row.text_z, version=self.config_version):
                    raise _validate.key_not_found(key, self.collection)
                return row.fp

            return self._written(update)

    @by_current_rule  # these answer from the collection's rows: a dropped collection is said, not 0 / None
    def get(self, key: str, default: Any = None) -> Entry | Any:
        """The stored entry for ``key`` (``default`` if there is none)."""
        key = _validate.check_key(key)
        row = _rows.get_row(self.connection(), self.collection_id, key)
        if row is None:
            return default
        return Entry(row[0], None if row[1] is None else to_unsigned(row[1]), row[2], row[3])

    @by_current_rule
    def text(self, key: str) -> str | None:
        """The text kept for ``key`` (a collection that keeps texts; or, for rows written before that
        option, the text in ``meta["text"]``), or None: no such key, or no text kept for it."""
        key = _validate.check_key(key)
        return _collections.kept_text(self.connection(), self.collection_id, key)

    @by_current_rule
    def remove(self, key: str) -> bool:
        """Delete ``key``; True if it existed."""
        key = _validate.check_key(key)
        return _rows.delete_row(self.connection(), self.collection_id, key)

    @by_current_rule
    def remove_many(self, keys: Iterable[str]) -> int:
        """Delete every key of ``keys`` in one statement (all of them or, on an error, none); how many
        existed. Why: deleting a dataset's records one by one costs a round trip and a commit each
        (10,000 keys: one statement instead of 10,000)."""
        _validate.check_items(keys, "keys", "keys (str)")
        checked = list(dict.fromkeys(_validate.check_key(key, f"keys[{i}]") for i, key in enumerate(keys)))
        return _rows.delete_rows(self.connection(), self.collection_id, checked) if checked else 0

    @by_current_rule
    def __contains__(self, key: object) -> bool:
        try:
            key = _validate.check_key(key)
        except (TypeError, ValueError):
            return False
        return _rows.has_key(self.connection(), self.collection_id, key)

    @by_current_rule
    def __len__(self) -> int:
        return _rows.count_rows(self.connection(), self.collection_id)

    def count(self) -> int:
        """The rows of the collection, ``len(index)``: the name ``AsyncSimhashIndex.count()`` has (a
        ``len()`` cannot be awaited), so that both facades have the same methods."""
        return len(self)

    @by_current_rule
    def clear(self) -> int:
        """Delete every row of this collection (the collection and its config stay). Returns the count."""
        return _rows.clear_rows(self.connection(), self.collection_id)

    def drop(self) -> bool:
        """Delete this collection, its configuration and all its rows (as ``simdb drop``); True if it
        existed. The index cannot be used afterwards (its collection id is gone)."""
        return _collections.drop_collection(self.connection(), self.collection_id)

    def record_file_root(self, path: str | os.PathLike[str]) -> str:
        """Record ``path`` (its real path: a folder, or a file named by itself) as a place this
        collection's text files come from, so that a report may read a row's file there (only there:
        :func:`simdb.util.confined_files.read_recorded`). ``simdb add`` does this; returns the recorded path."""
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError(f"path must be a file or directory path, got {type(path).__name__}")
        real = os.path.realpath(path)
        if not (os.path.isdir(real) or os.path.isfile(real)):
            raise InvalidArgumentError(f"path {os.fspath(path)!r} is not a directory or a regular file")
        config = _collections.record_file_root(self.connection(), self.collection_id, real)
        if config is not None:
            self.config = config
        return real

    # ------------------------------------------------------------ search
    @by_current_rule
    def near(
        self, query: str | int, k: int | None = None, limit: int | None = None, *, min_jaccard: float | None = None,
        verify: bool | None = None,
    ) -> list[Match]:
        """Near-duplicates of a text or an unsigned fingerprint.

        **Verified collection** (the default for new collections), text query: the rows whose
        Jaccard similarity of shingles (the collection's scheme) with the text is >= ``min_jaccard``
        (default: the collection's, 0.8), found among the candidates (the rows sharing two band keys);
        sorted by Jaccard (highest first), then distance, key; each :class:`Match` carries ``jaccard`` and
        ``distance``. Rows stored by fingerprint (no sketch) match by distance <= ``k``
        (default 3). ``verify=False``, or a fingerprint query: Hamming distance only.

        **Plain collection**: rows within Hamming distance ``k`` (0..11, default 3),
        sorted by distance then key. A text with no features has no near-duplicates: []."""
        conn = self.connection()  # IndexClosedError first, once closed
        query, limit = _validate.check_query(query, limit, self.max_text_bytes)
        return self.rule.near(conn, self.collection_id, self.fingerprinter, query, k, limit, min_jaccard, verify,
                              self._radii, self.collection)

    @by_current_rule
    def near_key(
        self, key: str, k: int | None = None, limit: int | None = None, *, min_jaccard: float | None = None,
        verify: bool | None = None,
    ) -> list[Match]:
        """The near-duplicates of the row stored under ``key`` (itself excluded): the answer of
        ``near(text)`` for the text stored under ``key``, less the key itself, computed from the
        stored row (no text needed).

        **Verified collection**: the stored sketch is verified against the candidates' stored
        sketches (Jaccard >= ``min_jaccard``, default the collection's), sorted by Jaccard (highest
        first), distance, key. ``verify=False``, or a row stored by fingerprint (no sketch): the
        rows within Hamming distance ``k`` (default 3), by distance then key. A row whose text
        had no features has no near-duplicates: []. Raises ``KeyNotFoundError`` (a ``KeyError``) for a key not stored.

        Why not the key's fingerprint looked up by Hamming distance: that answers another question (it
        keeps copies the rule excludes and misses the rule's pairs farther apart than k bits); the stored
        row goes through the rule's pipeline as a text query would (:meth:`simdb.index.rules.HammingRule.near_row`)."""
        key = _validate.check_key(key)
        limit = _validate.check_limit(limit)
        row = _rows.key_query_row(self.connection(), self.collection_id, key)
        if row is None:
            raise _validate.key_not_found(key, self.collection)
        return self.rule.near_row(self.connection(), self.collection_id, key, row, k, limit, min_jaccard, verify,
                                  self._radii, self.collection)

    @by_current_rule
    def near_many(
        self, queries: Iterable[str | int], k: int | None = 3, limit: int | None = None, *, workers: int | None = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ) -> list[list[Match]]:
        """``near`` for many queries at once; answers in the order of ``queries``.

        One statement per 20,000 queries. A batch of 500 or more is split over
        ``workers`` connections (default ``NEAR_MANY_WORKERS`` = 2) answered in
        parallel, except inside :meth:`transaction` (other connections would not
        see its uncommitted rows); ``workers=1`` keeps it on this thread's connection."""
        self._check_open()
        limit = _validate.check_limit(limit)
        k, params = self.rule.near_many_args(k, min_jaccard, verify, self.collection)  # texts: verified?
        if workers is None:
            workers = NEAR_MANY_WORKERS
        elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgumentError(f"workers must be an int >= 1, got {workers!r}")
        queries = _validate.check_queries(queries, max_bytes=self.max_text_bytes)  # and each text
        return self.rule.near_many(self.connection(), self.collection_id, self.fingerprinter, queries, k, params, limit,
                                   self._radii, self.text_features, functools.partial(self._lookup, workers=workers))

    def _lookup(
        self, positions: list[int], fps: list, k: int, keys: dict[int, Any] | None, workers: int,
    ) -> tuple[list[list[int]], Iterable[list[tuple]]]:
        """near_many's batched look-up (:data:`simdb.index.rules.Lookup`): the queries at ``positions`` split
        into one piece per worker (at most NEAR_MANY_CHUNK each; one worker below NEAR_MANY_PARALLEL_MIN or
        inside a transaction, whose rows the others would not see), and the rows of each piece's statement,
        in the order of the pieces, on the worker's connection so that the pieces run in parallel. ``keys``:
        the band keys of verified text queries, whose candidates the rule fetches
        (:meth:`simdb.index.rules.HammingRule.candidates_many`); None: the rows within ``k``."""
        if len(positions) < NEAR_MANY_PARALLEL_MIN or self.connection().info.transaction_status != 0:  # 0: idle
            workers = 1
        n_pieces = max(workers, -(-len(positions) // NEAR_MANY_CHUNK)) if positions else 0
        size = -(-len(positions) // n_pieces) if n_pieces else 0
        pieces = [positions[s: s + size] for s in range(0, len(positions), size)] if size else []
        # no adaptive radii for verified text look-ups (``keys``): their block probes find only the sketchless
        # rows, behind the server's gate (usually none); planning radii for them per query was a quarter of a
        # 1M-record dedup's client CPU
        adaptive = keys is None and self._radii.planned(k)

        def rows(piece: list[int]) -> list[tuple]:
            cfps = [fps[i] for i in piece]
            radii = [self._radii(fp, k) or even_radii(k) for fp in cfps] if adaptive else None
            params = _candidates.near_many_params(self.collection_id, cfps, k, radii)
            if keys is None:
                return _candidates.near_many_rows(self.connection(), params)
            return self.rule.candidates_many(self.connection(), self.collection_id, params, cfps,
                                             [keys[i] for i in piece])

        looked = self._connections.worker_pool(workers).map(rows, pieces) if workers > 1 else map(rows, pieces)
        return pieces, looked

    def text_features(self, texts: list[str]) -> list[_rules.Features]:
        """(fingerprint, sketch, band keys) of each (checked) text, as this collection's rule computes them
        (None: no features / no words / not banded), in the rule's one pass
        (:meth:`simdb.index.rules.HammingRule.texts_features`).

        Why the memo: ``simdb dedup`` asks about a batch (``near_many``), then decides it among itself in
        memory on the same features; the second call finds them here instead of tokenizing the texts
        again (and :meth:`prepare` computes them ahead, in another thread). The memo holds the last call's texts
        only (at most FEATURE_MEMO_MAX); features are a function of the text and of the collection's
        rule, so following a new rule empties it (:meth:`_follow_config`)."""
        self._check_open()
        known = [self._feature_memo, *self._prepared]
        missing = list(dict.fromkeys(t for t in texts if not any(t in d for d in known)))
        if missing:
            known.insert(0, dict(zip(missing, self.rule.texts_features(self.fingerprinter, missing))))
        out = [next(d[t] for d in known if t in d) for t in texts]
        self._feature_memo = dict(zip(texts, out)) if len(texts) <= FEATURE_MEMO_MAX else {}
        return out

    def prepare(self, texts: Iterable[str]) -> None:
        """Compute now, in the caller's thread, the features of texts that a coming ``near_many``,
        or ``add_many`` of this verified collection will be given, so that the call
        finds them ready (a Hamming collection has nothing to prepare). Why: ``simdb dedup``
        prepares its next batch in a helper thread while the server answers the current one (the
        driver releases the GIL while it waits), so the client's tokenizing and the server's
        look-ups overlap. Holds the last two calls' texts (at most FEATURE_MEMO_MAX each); a text
        that fails the checks is left for the call that will name it."""
        self._check_open()
        if self.rule.verifier is None:
            return
        ok = []
        for text in dict.fromkeys(_validate.check_queries(texts, "texts")):
            try:
                ok.append(_validate.check_text(text, "text", self.max_text_bytes))
            except (TypeError, ValueError):
                continue
        fresh = dict(zip(ok, self.rule.texts_features(self.fingerprinter, ok))) if len(ok) <= FEATURE_MEMO_MAX else {}
        self._prepared = (self._prepared[-1], fresh)

    def refresh_stats(self) -> None:
        """Forget the cached bucket-size statistics (re-read from pg_stats on next search)."""
        self._radii.refresh()

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
        transaction (:mod:`simdb.store.bulk`: never a deadlock, never a stall
        of other collections). ``rebuild_indexes=True/False`` forces or forbids that.
        ``vacuum`` (default: after a rebuild, and after any load of at least
        ``simdb.store.bulk.VACUUM_MIN_ROWS`` rows) runs VACUUM ANALYZE after the commit
        so that searches use index-only scans at once.

        ``workers``: processes that validate and fingerprint chunks while COPY streams
        earlier ones (:mod:`simdb.util.parallel`; default: the usable cores, at most 8, or 1
        when the main script is not guarded by ``if __name__ == "__main__":``). An
        input of one chunk is done in this process. Items must then be picklable.
        """
        _validate.check_items(items)
        workers = _parallel.check_workers(workers)

        self.last_load_committed = 0
        loads: list[_bulk.BulkLoad] = []  # one per try (simdb.store.bulk.attempts)
        try:
            with _connect.key_size_errors("add_many: a key"):
                for attempt in _connect.attempts(items):  # a new try after a transient error (a list: read again)
                    with attempt:
                        bulk = _bulk.BulkLoad(
                            self._connections.get(), self.collection_id, self.fingerprinter, chunk_rows,
                            rebuild_indexes, workers, verifier=self.rule.verifier, band_scheme=self.rule.band_scheme,
                            keep_texts=self.store_texts, known=self._feature_memo,
                            max_text_bytes=self.max_text_bytes, version=self.config_version,
                        )
                        loads.append(bulk)
                        try:
                            stats = bulk.run(items, vacuum)
                        except CollectionChangedError:
                            # refused before any row was written: follow the new rule; the items are loaded
                            # again under it if they can be read again, else the error says to run it again
                            self._follow_config()
                            raise
                        break  # loaded: no other try
        finally:
            # an interrupt after the commit (VACUUM, statistics) leaves the load stored: say so
            self.last_load_committed = (loads[-1].committed_rows or 0) if loads else 0
        self.last_load = dict(stats)
        if _bulk.stale_statistics(stats):
            self.refresh_stats()
        return stats["rows"]

    # ------------------------------------------------------------ insert unless a near-duplicate is stored
    def add_if_unique(
        self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3, meta: Any = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ) -> AddResult:
        """Insert ``key`` unless a stored row of another key is a near-duplicate of it by the collection's
        rule (the answer of ``near(text)``); atomic under concurrency. ``fp=...``, ``verify=False`` or a
        plain collection: unless such a row is within Hamming distance ``k`` (0..11). The row already
        stored under ``key`` is the text's earlier version, never a match: it is replaced, as by
        :meth:`add` (re-adding an edited text updates its row; :mod:`simdb.store.unique`).

        Returns :class:`simdb.results.AddResult` (``inserted``, ``matches``: the stored
        near-duplicates that prevented the insert, most similar first: Jaccard, then distance, then key).
        Writers serialise only on the block values they share (see :mod:`simdb.store.unique`).
        """
        with _connect.key_size_errors(key=key):
            conn = self._connections.get()  # refused once closed, before the text's features are computed
            if fp is not None:  # a fingerprint comes alone
                _validate.check_text_or_fp(text, fp)
            return self._add_if_unique(conn, key, text, fp, k, meta, min_jaccard, verify)

    def _add_if_unique(self, conn: Any, key: Any, text: Any, fp: Any, k: Any, meta: Any, min_jaccard: Any,
                       verify: Any) -> AddResult:
        """The rule's add_if_unique, end to end (:meth:`simdb.index.rules.HammingRule.add_if_unique`), on ``conn``."""
        return self._written(lambda: self.rule.add_if_unique(
            conn, self.collection_id, self.fingerprinter, key, text, fp, k, meta, min_jaccard, verify,
            (self.max_text_bytes, self.store_texts, self.collection), self.config_version,
        ))

    def reserve(
        self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3, meta: Any = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ) -> _reservation.Reservation:
        """:meth:`add_if_unique`, left uncommitted: a :class:`~simdb.index.reservation.Reservation` whose
        ``commit()`` stores the text and ``rollback()`` leaves nothing (``with index.reserve(...) as r:``
        commits unless the block raises). Arguments and answer (``inserted``, ``matches``) as
        :meth:`add_if_unique`; a refused text holds nothing.

        Why: a web request admits its text while it validates, but succeeds or fails only later (a CSRF
        check, another field, the view itself); a text committed at validation would outlive a failed
        request and refuse the user's own retry. Held, the inserted row keeps the advisory locks of
        :mod:`simdb.store.unique` until the end: a concurrent near-identical text waits for the commit and
        is then refused, or for the rollback and is then admitted, so exactly one of them is stored.
        The transaction runs on a connection of its own (not the thread's), so the request's other
        calls of this index run beside it; they do not see the held row until it is committed, and a
        held reservation must not be waited for by its own thread (an ``add_if_unique`` of a near text
        in the same request would wait for itself). Commit or roll back promptly: other writers of
        near texts wait meanwhile; a reservation dropped unfinished is rolled back when collected."""
        with _connect.key_size_errors(key=key):
            self._check_open()
            _validate.check_text_or_fp(text, fp)
            return _reservation.reserve(self._connections, str(key), lambda conn: self._add_if_unique(
                conn, key, text, fp, k, meta, min_jaccard, verify))

    # ------------------------------------------------------------ the whole collection
    @at_current_rule
    def pairs(self, k: int = 3, *, min_jaccard: float | None = None, verify: bool | None = None):
        """Stream every near-duplicate pair once: :class:`simdb.results.Pair` (key_a, key_b, distance),
        ``key_a`` added before ``key_b``; k in 0..11 (k > 3 holds the collection's (id, fp) in memory,
        16 bytes a row).

        Verified collection (unless ``verify=False``): the candidate pairs (sharing two band keys) kept by
        Jaccard >= ``min_jaccard`` (default the collection's), as :class:`simdb.results.VerifiedPair`
        (key_a, key_b, distance, jaccard); a row without a sketch pairs by distance <= ``k``.

        Refuses a closed index (IndexClosedError) here, not at the first pair: the pairs are read
        through the engine's pool, which would reopen after the index closed it."""
        self._check_open()
        radius, check = self.rule.pair_args(k, min_jaccard, verify, self.collection, "pairs()")
        return _pairs.iter_pairs(self.engine, self.collection_id, radius, verify=check)

    @at_current_rule
    def clusters(
        self, k: int = 3, *, include_singletons: bool = False, min_jaccard: float | None = None,
        verify: bool | None = None,
    ):
        """Stream the connected components of :meth:`pairs` as :class:`simdb.results.Cluster`
        (representative = earliest added), ordered by representative; singletons only if asked
        (``include_singletons``: a bool). A closed index refuses, as in :meth:`pairs`."""
        self._check_open()
        if not isinstance(include_singletons, bool):  # "no" would be true
            raise InvalidTypeError(f"include_singletons must be a bool, got {type(include_singletons).__name__}")
        radius, check = self.rule.pair_args(k, min_jaccard, verify, self.collection, "clusters()")
        return _pairs.iter_clusters(self.engine, self.collection_id, radius, include_singletons=include_singletons,
                                    verify=check)

    def convert_to_verified(self) -> int:
        """Make this collection a banded verified collection of the current scheme (the default for new
        ones; one of another sketch size is re-sketched) from the texts it keeps, else each row's
        ``meta.text``; all or nothing. See :mod:`simdb.store.convert`."""
        # one transaction, again on a deadlock: writers replacing rows lock the collection's row first, as the
        # conversion does, but a load holding the whole table (rebuild_indexes=True) cannot
        done = _connect.retried(lambda: _convert.convert_to_verified(
            self.connection(), self.collection_id, self.collection, self.config, self.rule.verifier
        ), CONVERT_RETRIES)
        if done.config is not None:
            self._follow_config()  # its config, and the version every later write carries
        return done.rows

