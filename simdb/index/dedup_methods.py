"""``SimhashIndex``'s deduplication: ``add_if_unique`` (atomic under concurrency), ``pairs`` and
``clusters`` (Hamming and verified), and the
conversion of a collection to the verified default.

A mixin of :class:`simdb.index.SimhashIndex` (it works on the index's engine, collection id,
fingerprinter and verifier), kept apart so that the facade stays a page long; like the facade it
holds no SQL: the statements run in :mod:`simdb.store.dedup` and :mod:`simdb.store.pairs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simdb.core import validate as _validate
from simdb.core.bits import to_unsigned
from simdb.core.block_pairs import check_pairs_k
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.index.config_methods import ConfigMixin
from simdb.index.reservation import Reservation, rolled_back
from simdb.index.search_methods import NEEDS_VERIFIED, at_current_rule
from simdb.store import convert as _convert
from simdb.store import dedup as _store_dedup
from simdb.store import limits as _limits
from simdb.store import pairs as _pairs
from simdb.store.connect import retried as _retried

__all__ = ["CONVERT_RETRIES", "DedupMixin"]

#: a conversion that meets a deadlock is run again (its transaction rolled back) at most this many times
CONVERT_RETRIES = 3

_dump_meta = _validate.dump_meta


class DedupMixin(ConfigMixin):
    """add_if_unique, pairs, clusters and convert_to_verified of :class:`simdb.index.SimhashIndex`."""

    engine: Any  # set by SimhashIndex.__init__
    config: Any

    if TYPE_CHECKING:  # defined by SimhashIndex

        def _row_values(self, text: Any, fp: Any) -> tuple[int | None, list[int] | None, str | None]: ...

        def _text_values(self, text: Any, sketched: bool = True) -> Any: ...

        def _text_z(self, text: Any, fp: Any) -> bytes | None: ...

    # ------------------------------------------------------------ deduplication (simdb.index.dedup)
    @_limits.names_oversized_key
    def add_if_unique(
        self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3, meta: Any = None,
        min_jaccard: float | None = None, verify: bool | None = None,
    ):
        """Insert ``key`` unless a stored row of another key is a near-duplicate of it by the collection's
        rule (the answer of ``near(text)``); atomic under concurrency. ``fp=...``, ``verify=False`` or a
        plain collection: unless such a row is within Hamming distance ``k`` (0..11). The row already
        stored under ``key`` is the text's earlier version, never a match: it is replaced, as by
        :meth:`add` (re-adding an edited text updates its row; :mod:`simdb.store.dedup`).

        Returns :class:`simdb.results.AddResult` (``inserted``, ``matches``: the stored
        near-duplicates that prevented the insert, most similar first: Jaccard, then distance, then key).
        Writers serialise only on the block values they share (see :mod:`simdb.index.dedup`).
        """
        self._check_open()  # before the text's features are computed
        _validate.check_text_or_fp(text, fp)
        # under the collection's current rule: computed again if it changed since this index read it
        return self._under_current_rule(lambda: self._add_if_unique(key, text, fp, k, meta, min_jaccard, verify))

    def _add_if_unique(self, key: Any, text: Any, fp: Any, k: Any, meta: Any, min_jaccard: Any, verify: Any,
                       conn: Any = None):
        conn = self.connection() if conn is None else conn
        if fp is None and self.rule.verifies(text, verify, self.collection):  # verified collection: its candidates, then Jaccard
            key = _validate.check_new_key(key)
            params = self.rule.verify_params(k, min_jaccard, self.collection)
            self.rule.check_reach(params[2], "add_if_unique")
            features = self._text_values(text)  # one tokenization: fingerprint, sketch, band keys
            meta_json = _dump_meta(meta)
            return self.rule.add_if_unique(conn, self.collection_id, key, features, meta, meta_json, params,
                                           self._text_z(text, None), self.config_version)
        if min_jaccard is not None:
            raise InvalidArgumentError(NEEDS_VERIFIED)
        key = _validate.check_new_key(key)
        k = _validate.check_k(k)
        u = to_unsigned(_validate.check_fp(fp)) if fp is not None else self._text_values(text, sketched=False)[0]
        return _store_dedup.run_add_if_unique(conn, self.collection_id, key, u, k, _dump_meta(meta),
                                              text_z=self._text_z(text, fp), version=self.config_version)

    @_limits.names_oversized_key
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
        :mod:`simdb.store.dedup` until the end: a concurrent near-identical text waits for the commit and
        is then refused, or for the rollback and is then admitted, so exactly one of them is stored.
        The transaction runs on a connection of its own (not the thread's), so the request's other
        calls of this index run beside it; they do not see the held row until it is committed, and a
        held reservation must not be waited for by its own thread (an ``add_if_unique`` of a near text
        in the same request would wait for itself). Commit or roll back promptly: other writers of
        near texts wait meanwhile; a reservation dropped unfinished is rolled back when collected."""
        self._check_open()
        _validate.check_text_or_fp(text, fp)
        conn = self._connections.lend()
        try:
            conn.execute("BEGIN")  # the reservation's transaction: add_if_unique's own is a savepoint in it
            result = self._under_current_rule(
                lambda: self._add_if_unique(key, text, fp, k, meta, min_jaccard, verify, conn=conn))
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
        if self.rule.verifies("", verify, self.collection):
            ck, hk, t = self.rule.verify_params(k, min_jaccard, self.collection)
            self.rule.check_reach(t, "pairs()")
            return _pairs.iter_pairs(self.engine, self.collection_id, ck, verify=self.rule.pair_check(hk, t))
        if min_jaccard is not None:
            raise InvalidArgumentError(NEEDS_VERIFIED)
        return _pairs.iter_pairs(self.engine, self.collection_id, check_pairs_k(k))

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
        if self.rule.verifies("", verify, self.collection):
            ck, hk, t = self.rule.verify_params(k, min_jaccard, self.collection)
            self.rule.check_reach(t, "clusters()")
            return _pairs.iter_clusters(
                self.engine, self.collection_id, ck, include_singletons=include_singletons,
                verify=self.rule.pair_check(hk, t),
            )
        if min_jaccard is not None:
            raise InvalidArgumentError(NEEDS_VERIFIED)
        return _pairs.iter_clusters(
            self.engine, self.collection_id, check_pairs_k(k), include_singletons=include_singletons
        )

    def convert_to_verified(self) -> int:
        """Make this collection a verified collection of the current scheme (the default for new ones;
        an older verified scheme is re-sketched) from the texts stored in each row's ``meta.text``;
        all or nothing. A collection of the current scheme created before band keys gets them (from
        its sketches, else its texts), and one banded by an older band scheme gets the current one's; one
        whose threshold is below the band keys' reach (0.79) gets none (keeps its Hamming-radius candidates).
        See :mod:`simdb.store.convert`."""
        # one transaction, again on a deadlock: writers replacing rows lock the collection's row first, as the
        # conversion does, but a load holding the whole table (rebuild_indexes=True) cannot
        done = _retried(lambda: _convert.convert_to_verified(
            self.connection(), self.collection_id, self.collection, self.config, self.rule.verifier, self.rule.band_scheme
        ), CONVERT_RETRIES)
        if done.config is not None:
            self._follow_config()  # its config, and the version every later write carries
        return done.rows
