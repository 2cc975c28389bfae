"""``SimhashIndex``: near-duplicate search over fingerprints stored in PostgreSQL.

Layout of this module (so that other workflows can reuse the pieces):

- connections: each thread gets its own psycopg connection, detached from the
  SQLAlchemy pool, in autocommit mode, with serial generic plans
  (:meth:`SimhashIndex.connection`, :meth:`SimhashIndex.transaction`);
- query building: :func:`simdb.store.candidates.near_params` / ``near_many_params`` turn query
  fingerprints into the bound parameters of ``simdb.store.sql.NEAR_SQL`` /
  ``NEAR_MANY_SQL`` (probe arrays per block, see :mod:`simdb.core.probes`);
- bulk loading: :func:`simdb.store.encode.iter_chunks` validates and fingerprints items in
  chunks, :mod:`simdb.store.bulk` streams them through ``COPY``.

Every value travels as a bound parameter or through COPY; no value is ever
spliced into SQL text.
"""

from __future__ import annotations

import json
import threading
import warnings
from contextlib import contextmanager
from typing import Any

from simdb.core import probes as _probes
from simdb.core import sketch as _sketch
from simdb.core import validate as _validate
from simdb.core.bits import to_unsigned
from simdb.core.fingerprint import Fingerprinter
from simdb.core.kept_texts import TEXTS_KEY, keeps_texts, texts_config
from simdb.core.sketch import bands as _bands
from simdb.core.sketch import features as _verified
from simdb.database import resolve_engine
from simdb.errors import CollectionChangedError, CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.index import rules as _rules
from simdb.index.load_methods import LoadMixin
from simdb.index.search_methods import by_current_rule
from simdb.results import Entry, Match
from simdb.store import collections as _collections
from simdb.store import connect as _connect
from simdb.store import rows as _rows
from simdb.store import sql as _sql

__all__ = ["Entry", "Match", "SimhashIndex"]

# the table names, as simdb 0.1.0's simdb.index had them (released code may build SQL on them); their
# home is simdb.store.sql
FINGERPRINTS = _sql.FINGERPRINTS
COLLECTIONS = _sql.COLLECTIONS
_UNSET: Any = object()

#: store options recorded in every collection's config (next to the Fingerprinter's)
STORE_OPTIONS = {"blocks": 4, "block_bits": 16, "fp": "bigint two's complement of the unsigned 64-bit SimHash"}

#: what ``jaccard=True`` answers now that the legacy store is removed
LEGACY_JACCARD_GONE = (
    "jaccard=True: the legacy MinHash-band collections were removed; a collection is verified by "
    "default (near-duplicate = Jaccard of character 4-grams >= 0.8; any threshold with near(..., min_jaccard=...)): "
    "drop jaccard=True. Existing legacy collections were converted by migration simdb_0009 (Hamming-only until "
    "their sketches are rebuilt from stored texts: simdb convert -c NAME; docs/near-duplicates.md)"
)

# Validation helpers: the checks live in simdb.core.validate (shared with dedup, jaccard and the CLI).
_check_key = _validate.check_key
_check_fp = _validate.check_fp
_dump_meta = _validate.dump_meta


class SimhashIndex(LoadMixin):
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

    ``verify`` (issue 13, :mod:`simdb.core.sketch`, docs/near-duplicates.md): a new collection
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
        _check_fingerprinter(fingerprinter)  # before any connection: not an AttributeError from deep inside
        for name, flag in (("migrate", migrate), ("adaptive", adaptive)):
            if not isinstance(flag, bool):  # migrate="no" would be true
                raise InvalidTypeError(f"{name} must be a bool, got {type(flag).__name__}")
        self.adaptive = adaptive
        self.engine, self._owns_engine = resolve_engine(database)
        self._rule_changed = threading.Event()  # set by _on_rule_change (simdb.index.config_methods)
        self._connections = _connect.ThreadConnections(self.engine, self._on_rule_change)
        self._stats: tuple[float, _probes.BucketTable | None, float] | None = None
        self._heavy_near: list[set[int]] = [set(), set(), set(), set()]
        #: what the last add_many did: rows, whether it rebuilt the indexes, seconds per phase
        self.last_load: dict[str, Any] | None = None
        # --- jaccard=True asked for the legacy MinHash-band store (issue 8), retired by issue 28:
        # an error that names the replacement and the conversion, not a silent verified collection
        if jaccard is not None and not isinstance(jaccard, bool):
            raise InvalidTypeError(f"jaccard must be a bool or None, got {type(jaccard).__name__}")
        if jaccard:
            raise InvalidArgumentError(LEGACY_JACCARD_GONE)
        # --- verification (issue 13, simdb.core.sketch): None = as recorded; for a new collection,
        # verified unless a Fingerprinter is given (the candidate radius K is calibrated for
        # the candidate Fingerprinter)
        if verify is not None and not isinstance(verify, bool):
            raise InvalidTypeError(f"verify must be a bool or None, got {type(verify).__name__}")
        self._want_verify, self._want_texts = verify, store_texts
        #: how this collection finds and judges near-duplicates (simdb.index.rules), set by _open_collection
        self.rule: _rules.HammingRule = _rules.HammingRule()
        try:
            if migrate:
                self._ensure_schema()
            with _connect.key_size_errors(f"collection {collection[:60]!r}"):
                self.fingerprinter, self.collection_id, self.config = self._open_collection(fingerprinter)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ connections (connection(): SearchMixin's)
    @property
    def _closed(self) -> bool:
        return self._connections.closed

    @property
    def _pool(self):
        """near_many's worker threads (None: not started, or closed)."""
        return self._connections.pool

    @property
    def _conns(self) -> list[Any]:
        return self._connections.connections

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

    # ------------------------------------------------------------ schema / collection
    def _ensure_schema(self) -> None:
        _collections.ensure_schema(self.connection(), self.engine)

    @staticmethod
    def _normalise(d: Any) -> Any:
        return json.loads(json.dumps(d, sort_keys=True))

    def _open_collection(self, fingerprinter):
        conn = self.connection()
        row = _collections.find_collection(conn, self.collection)
        #: whether this index created its collection (it did not exist when the index was opened)
        self.created = False
        if row is None:
            verified = self._want_verify
            if verified is None:
                verified = fingerprinter is None
            if fingerprinter is None:  # verified collections: fp is the candidate fingerprint
                fingerprinter = _verified.candidate_fingerprinter() if verified else Fingerprinter()
            config = {"fingerprinter": self._normalise(fingerprinter.to_dict()), "store": dict(STORE_OPTIONS)}
            if verified:
                config[_rules.VERIFY_KEY] = _sketch.Verifier().to_dict()
                config[_rules.BANDS_KEY] = _bands.BAND_SCHEME
            config.update({TEXTS_KEY: texts_config()} if self._want_texts else {})
            cid, stored, self.created = _collections.create_collection(conn, self.collection, config)
        else:
            cid, stored = row
        _collections.open_texts_option(conn, cid, self.collection, stored, self._want_texts)
        # the config and its version read together: every write carries the version, and is refused
        # once a conversion (another process's included) has changed the rule (simdb.store.collection_guard)
        stored, self.config_version = self._current_config(conn, cid)
        self.store_texts = keeps_texts(stored)
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
                candidate = self._normalise(_verified.candidate_fingerprinter().to_dict())
                raise CollectionConfigError(
                    f"collection {self.collection!r} was created with a different Fingerprinter "
                    f"(differs in {', '.join(diff) or 'its layout'})"
                    + (", as a verified collection (the default: its fingerprints come from "
                       "Fingerprinter.preset('verified'), not Fingerprinter())" if stored_fp == candidate else "")
                    + ". Its fingerprints are not comparable with this one's: omit fingerprinter= (or pass None) "
                    "to open it with its stored configuration, or use another collection. "
                    f"Stored {json.dumps(stored_fp, sort_keys=True)}, given {json.dumps(mine, sort_keys=True)}"
                )
        self.rule = _rules.open_rule(self.collection, stored, self._want_verify)
        if isinstance(stored, dict) and stored.get(_collections.LEGACY_KEY) and self.verifier is None:
            warnings.warn(
                f"collection {self.collection!r} was a legacy MinHash-band (jaccard=True) collection, converted by "
                "migration simdb_0009 without its texts: it answers by Hamming distance only. Rebuild its sketches "
                f"from stored texts (meta.text) with: simdb convert -c {self.collection} (docs/near-duplicates.md)",
                UserWarning, stacklevel=3,
            )
        return fingerprinter, cid, stored

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
            return _rules.fp_row(_check_fp(fp))
        if text is None:
            raise InvalidArgumentError("give text or fp")
        return self.rule.row_of(self.fingerprinter, _validate.check_text(text, "text", self.max_text_bytes),
                                self.store_texts)

    def add(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = None) -> int | None:
        """Store ``key``'s fingerprint (from ``text``, or ``fp`` given directly) and ``meta``.

        Re-adding an existing key replaces its fingerprint and metadata. Returns the
        unsigned fingerprint, or None for a text with no features (stored, never matched).
        """
        with _connect.key_size_errors(key=key):
            key = _validate.check_new_key(key)
            meta_json = _dump_meta(meta)
            try:
                return self._upsert(key, text, fp, meta_json)
            except CollectionChangedError:  # the rule changed since this index read it: nothing was stored
                self._follow_config()
                return self._upsert(key, text, fp, meta_json)

    def _upsert(self, key: str, text: Any, fp: Any, meta_json: str | None) -> int | None:
        row = self._row(text, fp)  # computed by the rule of this attempt
        _rows.upsert_row(self._connections.get(), self.collection_id, key, row.signed, meta_json, row.sketch,
                          row.bands, row.text_z, version=self.config_version)
        return row.fp

    def update(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = _UNSET) -> int | None:
        """Change an existing key's fingerprint (and ``meta``, if given). KeyNotFoundError (a KeyError) if absent."""
        with _connect.key_size_errors(key=key):
            key = _validate.check_new_key(key)
            with_meta = meta is not _UNSET
            meta_json = _dump_meta(meta) if with_meta else None
            try:
                return self._update(key, text, fp, meta_json, with_meta)
            except CollectionChangedError:  # as add
                self._follow_config()
                return self._update(key, text, fp, meta_json, with_meta)

    def _update(self, key: str, text: Any, fp: Any, meta_json: str | None, with_meta: bool) -> int | None:
        row = self._row(text, fp)
        if not _rows.update_row(self._connections.get(), self.collection_id, key, row.signed, row.sketch, meta_json,
                                 with_meta, row.bands, row.text_z, version=self.config_version):
            raise _validate.key_not_found(key, self.collection)
        return row.fp

    @by_current_rule  # these answer from the collection's rows: a dropped collection is said, not 0 / None
    def get(self, key: str, default: Any = None) -> Entry | Any:
        """The stored entry for ``key`` (``default`` if there is none)."""
        key = _check_key(key)
        row = _rows.get_row(self.connection(), self.collection_id, key)
        if row is None:
            return default
        return Entry(row[0], None if row[1] is None else to_unsigned(row[1]), row[2], row[3])

    @by_current_rule
    def remove(self, key: str) -> bool:
        """Delete ``key``; True if it existed."""
        key = _check_key(key)
        return _rows.delete_row(self.connection(), self.collection_id, key)

    @by_current_rule
    def __contains__(self, key: object) -> bool:
        try:
            key = _check_key(key)
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


def _check_fingerprinter(fingerprinter: Any) -> None:
    """A Fingerprinter or None; a preset's name gets the call that makes it (a common first guess)."""
    if fingerprinter is None or isinstance(fingerprinter, Fingerprinter):
        return
    hint = f": use Fingerprinter.preset({fingerprinter!r})" if isinstance(fingerprinter, str) else ""
    raise InvalidTypeError(
        "fingerprinter must be a simdb.Fingerprinter, or None for the collection's stored one (a new "
        f"collection's default), got {type(fingerprinter).__name__}{hint}"
    )


# ---------------------------------------------------------------------------
