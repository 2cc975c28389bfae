"""Near-duplicate workflows of the facade: insert unless a near-duplicate is stored, all pairs, clusters.

Two doors to the same store code, each checking its arguments (``k``, the key, the fingerprint)
once, here, so that the store takes checked values:

- :class:`DuplicatesMixin`, the methods of :class:`simdb.index.SimhashIndex` (``add_if_unique``,
  ``reserve``, ``pairs``, ``clusters``, ``convert_to_verified``), which work on the index's engine,
  collection id, fingerprinter and verifier; kept apart so that the facade stays a page long;
- the functions on a connection (psycopg, or SQLAlchemy's from ``engine.begin()``) or an Engine and a
  collection id: :func:`add_if_unique`, :func:`run_add_if_unique`, :func:`add_if_unique_statements`,
  :func:`iter_pairs`, :func:`iter_clusters`, :func:`iter_id_pairs` (simdb 0.1's ``simdb.dedup``).

Like the facade this module holds no SQL; the code, constants and result types live in their rooms
(docs/architecture.md):

- :mod:`simdb.store.unique`: ``add_if_unique`` (advisory locks on the probed block
  values, then search, then insert, in one transaction; retried on deadlock);
- :mod:`simdb.store.pairs`: ``iter_pairs`` / ``iter_clusters`` (the rows out of
  PostgreSQL in one snapshot, Hamming or verified);
- :mod:`simdb.core.block_pairs`: the pure numpy comparison of block groups and union-find;
- :mod:`simdb.results`: :class:`AddResult`, :class:`Pair`, :class:`VerifiedPair`, :class:`Cluster`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simdb.core import validate as _validate
from simdb.core.bits import to_unsigned
from simdb.core.block_pairs import check_pairs_k
from simdb.core.probes import check_k
from simdb.errors import CollectionChangedError, InvalidTypeError
from simdb.index.config_methods import ConfigMixin
from simdb.index.reservation import Reservation, rolled_back
from simdb.index.search_methods import at_current_rule
from simdb.results import AddResult, Cluster, Pair
from simdb.store import connect as _connect
from simdb.store import convert as _convert
from simdb.store import pairs as _pairs
from simdb.store import unique as _store_unique

__all__ = [
    "DuplicatesMixin",
    "add_if_unique",
    "add_if_unique_statements",
    "iter_clusters",
    "iter_id_pairs",
    "iter_pairs",
    "run_add_if_unique",
]

#: a conversion that meets a deadlock is run again (its transaction rolled back) at most this many times
CONVERT_RETRIES = 3

_dump_meta = _validate.dump_meta


class DuplicatesMixin(ConfigMixin):
    """add_if_unique, reserve, pairs, clusters and convert_to_verified of :class:`simdb.index.SimhashIndex`."""

    engine: Any  # set by SimhashIndex.__init__
    config: Any

    # ------------------------------------------------------------ insert unless a near-duplicate is stored
    def add_if_unique(
        self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3, meta: Any = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ):
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
        """The rule's add_if_unique, end to end (:meth:`simdb.index.rules.HammingRule.add_if_unique`), once
        more under the new rule if the collection's configuration changed since this index read it
        (nothing of the refused attempt was stored: :mod:`simdb.store.collection_guard`)."""
        try:
            return self._rule_add_if_unique(conn, key, text, fp, k, meta, min_jaccard, verify)
        except CollectionChangedError:
            self._follow_config()
            return self._rule_add_if_unique(conn, key, text, fp, k, meta, min_jaccard, verify)

    def _rule_add_if_unique(self, conn: Any, key: Any, text: Any, fp: Any, k: Any, meta: Any, min_jaccard: Any,
                            verify: Any) -> AddResult:
        return self.rule.add_if_unique(
            conn, self.collection_id, self.fingerprinter, key, text, fp, k, meta, min_jaccard, verify,
            (self.max_text_bytes, self.store_texts, self.collection), self.config_version,
        )

    def reserve(
        self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3, meta: Any = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ) -> Reservation:
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
            return self._reserve(key, text, fp, k, meta, min_jaccard, verify)

    def _reserve(self, key: Any, text: Any, fp: Any, k: Any, meta: Any, min_jaccard: Any, verify: Any) -> Reservation:
        conn = self._connections.lend()
        try:
            conn.execute("BEGIN")  # the reservation's transaction: add_if_unique's own is a savepoint in it
            result = self._add_if_unique(conn, key, text, fp, k, meta, min_jaccard, verify)
        except BaseException:
            self._connections.give_back(conn, reusable=rolled_back(conn))
            raise
        if not result.inserted:  # refused: nothing to hold
            self._connections.give_back(conn, reusable=rolled_back(conn))
            return Reservation(str(key), result, None, self._connections.give_back)
        return Reservation(str(key), result, conn, self._connections.give_back)

    @at_current_rule
    def pairs(self, k: int = 3, *, min_jaccard: float | None = None, verify: bool | None = None):
        """Stream every near-duplicate pair once: :class:`simdb.results.Pair` (key_a, key_b, distance),
        ``key_a`` added before ``key_b``; k in 0..11 (k > 3 holds the collection's (id, fp) in memory,
        16 bytes a row).

        Verified collection (unless ``verify=False``): the candidate pairs (sharing two band keys in a
        banded collection, one in an older band scheme; else within the radius K) kept by Jaccard >= ``min_jaccard`` (default the
        collection's), as :class:`simdb.results.VerifiedPair`
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
        """Make this collection a verified collection of the current scheme (the default for new ones;
        an older verified scheme is re-sketched) from the texts stored in each row's ``meta.text``;
        all or nothing. A collection of the current scheme created before band keys gets them (from
        its sketches, else its texts), and one banded by an older band scheme gets the current one's; one
        whose threshold is below the band keys' reach (0.79) gets none (keeps its Hamming-radius candidates).
        See :mod:`simdb.store.convert`."""
        # one transaction, again on a deadlock: writers replacing rows lock the collection's row first, as the
        # conversion does, but a load holding the whole table (rebuild_indexes=True) cannot
        done = _connect.retried(lambda: _convert.convert_to_verified(
            self.connection(), self.collection_id, self.collection, self.config, self.rule.verifier, self.rule.band_scheme
        ), CONVERT_RETRIES)
        if done.config is not None:
            self._follow_config()  # its config, and the version every later write carries
        return done.rows


# ------------------------------------------------------------ the functions on a connection or an Engine
def _checked(key: Any, fp: Any, k: Any) -> tuple[str, int | None, int]:
    """(key, unsigned fp or None, k) checked by the one checker of each (:mod:`simdb.core.validate`,
    :func:`simdb.core.probes.check_k`)."""
    k = check_k(k)
    key = _validate.check_new_key(key)
    return key, None if fp is None else to_unsigned(_validate.check_fp(fp)), k


def add_if_unique(
    conn: Any, collection_id: int, key: str, fp: int | None, k: int = 3, meta: Any = None,
    shingles: list[int] | None = None, *, verify: tuple | None = None, text_z: bytes | None = None,
) -> AddResult:
    """Insert ``key`` with unsigned fingerprint ``fp`` unless a row within ``k`` exists, inside the
    caller's transaction on ``conn``: :func:`simdb.store.unique.add_if_unique`, arguments checked."""
    key, fp, k = _checked(key, fp, k)
    return _store_unique.add_if_unique(conn, collection_id, key, fp, k, _validate.dump_meta(meta), shingles,
                                      verify=verify, text_z=text_z)


def run_add_if_unique(
    engine: Any, collection_id: int, key: str, fp: int | None, k: int = 3, meta: Any = None,
    shingles: list[int] | None = None, *, retries: int = 5, verify: tuple | None = None,
    text_z: bytes | None = None,
) -> AddResult:
    """:func:`add_if_unique` in a transaction of its own on ``engine`` (an Engine or a psycopg
    connection), retried on deadlock: :func:`simdb.store.unique.run_add_if_unique`, arguments checked."""
    key, fp, k = _checked(key, fp, k)
    return _store_unique.run_add_if_unique(engine, collection_id, key, fp, k, _validate.dump_meta(meta), shingles,
                                          retries=retries, verify=verify, text_z=text_z)


def add_if_unique_statements(
    collection_id: int, key: str, fp: int | None, k: int = 3, meta_json: str | None = None,
    shingles: list[int] | None = None, text_z: bytes | None = None,
) -> list[tuple[str, dict]]:
    """The statements of :func:`add_if_unique` for front ends on another driver, arguments checked:
    :func:`simdb.store.unique.add_if_unique_statements`."""
    key, fp, k = _checked(key, fp, k)
    return _store_unique.add_if_unique_statements(collection_id, key, fp, k, meta_json, shingles, text_z)


def iter_pairs(engine: Any, collection_id: int, k: int = 3, **options: Any) -> Iterator[Pair]:
    """Every pair within ``k`` (0..11, checked here, when called): :func:`simdb.store.pairs.iter_pairs`."""
    return _pairs.iter_pairs(engine, collection_id, check_pairs_k(k), **options)


def iter_clusters(engine: Any, collection_id: int, k: int = 3, **options: Any) -> Iterator[Cluster]:
    """The clusters of the pairs within ``k`` (checked here): :func:`simdb.store.pairs.iter_clusters`."""
    return _pairs.iter_clusters(engine, collection_id, check_pairs_k(k), **options)


def iter_id_pairs(engine: Any, collection_id: int, k: int = 3, **options: Any) -> Iterator[tuple]:
    """Pairs of row ids within ``k`` (checked here) as numpy batches: :func:`simdb.store.pairs.iter_id_pairs`."""
    return _pairs.iter_id_pairs(engine, collection_id, check_pairs_k(k), **options)


#: names this module re-exported before each name had one home, and where each lives now
_MOVED = {
    "VerifiedPair": "simdb.results",
    **dict.fromkeys(("LOCK_SQL", "LOCK_TAG", "lock_keys"), "simdb.store.unique"),
    "UPSERT_SQL": "simdb.store.unique (as LOCKED_UPSERT_SQL)",
    **dict.fromkeys(("CHUNK_ROWS", "VERIFY_BATCH"), "simdb.store.pairs"),
    **dict.fromkeys(("CANDIDATE_LIMIT", "check_pairs_k", "components", "pairs_in_chunk"), "simdb.core.block_pairs"),
    "RETRY_SQLSTATES": "simdb.store.connect",
}


def __getattr__(name: str) -> Any:
    """Why: an old ``from simdb.dedup import LOCK_SQL`` gets an error naming the new home."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # ImportError, not AttributeError: ``from ... import`` would turn an AttributeError into a bare
    # "cannot import name" and lose the new home
    raise ImportError(f"{__name__}.{name} moved: import it from {home} (CHANGELOG, 'one home per name')")
