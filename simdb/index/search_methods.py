"""``SimhashIndex``'s search: ``near`` and ``near_many`` (Hamming and verified), the adaptive probe radii from the table's statistics,
and the checks and fingerprints of queries.

A mixin of :class:`simdb.index.SimhashIndex` (it works on the index's connections, fingerprinter
and rule), kept apart so that the facade stays a page long; like the facade it holds no SQL:
the statements run in :mod:`simdb.store.candidates`. What differs between a Hamming, a verified and a
banded collection (features, candidate stage) is the collection's rule
(:mod:`simdb.index.rules`), chosen when it was opened: no method here tests a flag for it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from simdb.core import probes as _probes
from simdb.core import validate as _validate
from simdb.core.bits import block_values
from simdb.errors import InvalidArgumentError
from simdb.index import rules as _rules
from simdb.index import within as _within
from simdb.index.feature_memo import FeatureMemoMixin
from simdb.index.rules import NEEDS_VERIFIED
from simdb.results import Match
from simdb.store import candidates as _candidates
from simdb.store import sql as _sql
from simdb.store.connect import ThreadConnections

__all__ = ["HEAVY_BUCKET_MIN", "NEAR_MANY_CHUNK", "NEAR_MANY_PARALLEL_MIN", "NEAR_MANY_WORKERS",
           "NEEDS_VERIFIED", "SearchMixin", "at_current_rule", "by_current_rule"]

_check_fp = _validate.check_fp
_check_limit = _validate.check_limit

#: adaptive radii: a block value counts as heavy from this many rows (see _bucket_sizes)
HEAVY_BUCKET_MIN = 100.0
#: near_many: queries per statement
NEAR_MANY_CHUNK = 20_000
#: near_many splits a batch of at least NEAR_MANY_PARALLEL_MIN queries over this many
#: connections, one thread each: the lookups are server-bound, so a 2-core server answers
#: about twice as many per second (measured: 35k -> 58k q/s at 1M rows)
NEAR_MANY_WORKERS = 2
NEAR_MANY_PARALLEL_MIN = 500


F = TypeVar("F", bound=Callable[..., Any])


def by_current_rule(read: F) -> F:
    """A read answered by the collection's current rule (:mod:`simdb.index.config_methods`): a change
    announced before it is followed first; one announced while its statements ran (the announcement
    arrives with a statement's result) means they may have seen the new rows with the old rule, so
    the read is asked again. Here, not in config_methods: the check is two flag reads on every call."""

    @functools.wraps(read)
    def following(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._rule_changed.is_set():
            self._follow_config()
        out = read(self, *args, **kwargs)
        if self._rule_changed.is_set():
            self._follow_config()
            out = read(self, *args, **kwargs)
        return out

    return following  # type: ignore[return-value]


def at_current_rule(read: F) -> F:
    """A streamed or in-memory read (``pairs``, ``clusters``, ``near_within``) started under the current
    rule: a change announced before it starts is followed first (a stream under way cannot be redone)."""

    @functools.wraps(read)
    def following(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._rule_changed.is_set():
            self._follow_config()
        return read(self, *args, **kwargs)

    return following  # type: ignore[return-value]


class SearchMixin(FeatureMemoMixin):
    """The search methods of :class:`simdb.index.SimhashIndex` (see the module docstring)."""

    # set by SimhashIndex.__init__
    collection: str
    collection_id: int
    fingerprinter: Any
    max_text_bytes: int
    adaptive: bool
    rule: _rules.HammingRule
    _connections: ThreadConnections
    _stats: tuple[float, _probes.BucketTable | None, float] | None
    _heavy_near: list[set[int]]

    def connection(self) -> Any:
        """This thread's psycopg connection (autocommit, serial generic plans)."""
        return self._connections.get()

    def _check_open(self) -> None:
        """IndexClosedError once closed; called first by the methods that could answer without a
        connection of this index (a featureless query, the features of texts, pairs' own pool)."""
        self._connections.check_open()

    def _radii(self, fp: int, k: int) -> tuple[int, ...] | None:
        if not self.adaptive or k == 0:
            return None
        sizes, default = self._bucket_sizes()
        if not sizes:
            return None
        near = self._heavy_near
        if not any(b in heavy for b, heavy in zip(block_values(fp), near)):
            return None  # no heavy bucket within reach of any probe: the even radii
        return _probes.choose_radii(fp, k, sizes, default_size=default)

    def _bucket_sizes(self) -> tuple[_probes.BucketTable | None, float]:
        """Heavy block values from pg_stats (table-wide), refreshed at most once a minute."""
        now = time.monotonic()
        if self._stats is not None and now - self._stats[0] < 60.0:
            return self._stats[1], self._stats[2]
        sizes: _probes.BucketTable | None = None
        default = 1.0
        try:
            n, rows = _candidates.bucket_stats(self.connection())
            default = max(n / 65536.0, 1.0)
            found: list[dict[int, float]] = [dict() for _ in range(4)]
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
                sizes = _probes.BucketTable(found, default)
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
    @by_current_rule
    def near(
        self, query: str | int, k: int | None = None, limit: int | None = None, *, min_jaccard: float | None = None,
        verify: bool | None = None,
    ) -> list[Match]:
        """Near-duplicates of a text or an unsigned fingerprint.

        **Verified collection** (the default for new collections), text query: the rows whose
        Jaccard similarity of shingles (the collection's scheme) with the text is >= ``min_jaccard``
        (default: the collection's, 0.8), found among the candidates (the rows sharing two band keys
        in a banded collection, one in an older band scheme; else the rows within the collection's radius K); sorted by Jaccard
        (highest first), then distance, key; each :class:`Match` carries ``jaccard`` and
        ``distance``. Rows stored by fingerprint (no sketch) match by distance <= ``k``
        (default 3). ``verify=False``, or a fingerprint query: Hamming distance only.

        **Plain collection**: rows within Hamming distance ``k`` (0..11, default 3),
        sorted by distance then key. A text with no features has no near-duplicates: []."""
        conn = self.connection()  # IndexClosedError first, once closed
        query, limit = _validate.check_query(query, limit, self.max_text_bytes)
        return self.rule.near(conn, self.collection_id, self.fingerprinter, query, k, limit, min_jaccard, verify,
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
        limit = _check_limit(limit)
        k, params = self.rule.near_many_args(k, min_jaccard, verify, self.collection)  # texts: verified?
        verified = params is not None
        if workers is None:
            workers = NEAR_MANY_WORKERS
        elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgumentError(f"workers must be an int >= 1, got {workers!r}")
        queries = _validate.check_queries(queries, max_bytes=self.max_text_bytes)  # and each text
        fps, text_pos = self._many_fps(queries, verified)
        live = [i for i, fp in enumerate(fps) if fp is not None]
        if not verified:
            pieces, workers = self._pieces(live, workers)
            return _rules.hamming_answers(len(queries), live, pieces, self._lookup(fps, pieces, k, False, workers), limit)
        # Texts go through verification (candidates within the radius K); fingerprint queries are
        # answered by Hamming distance <= k, so they are looked up at k, not at K (548 probes at K=11).
        texts = set(text_pos)
        by_fp = [i for i in live if i not in texts]
        out: list[list[Match]] = [[] for _ in queries]
        if by_fp:
            pieces, n = self._pieces(by_fp, workers)
            hamming = _rules.hamming_answers(len(queries), by_fp, pieces, self._lookup(fps, pieces, k, False, n), limit)
            for i in by_fp:
                out[i] = hamming[i]
        by_text = [i for i in live if i in texts]
        if by_text:
            assert params is not None
            self._near_many_verified(queries, fps, by_text, params, limit, workers, out)
        return out

    @at_current_rule
    def near_within(
        self, texts: list[str], keys: list[str], *, metas: list[Any] | None = None, k: int | None = 3,
        min_jaccard: float | None = None,
    ) -> list[list[Match]]:
        """For each text, the *other* texts of the list that are its near-duplicates by this banded
        collection's rule, as :meth:`near` would answer if they were stored under ``keys`` (with
        ``metas``) -- found in memory, without the store (:mod:`simdb.index.within`). ``simdb
        dedup`` decides a batch's survivors among themselves with it. Needs a banded collection."""
        self._check_open()
        if not self.rule.banded:
            raise InvalidArgumentError("near_within needs a banded collection (the default)")
        ck, hk, t = self.rule.verify_params(k, min_jaccard, self.collection)
        self.rule.check_reach(t, "near_within (simdb dedup)")
        texts = [_validate.check_text(text, f"texts[{i}]", self.max_text_bytes)
                 for i, text in enumerate(_validate.check_queries(texts, "texts"))]
        if len(keys) != len(texts) or (metas is not None and len(metas) != len(texts)):
            raise InvalidArgumentError(f"near_within: {len(texts)} texts, {len(keys)} keys"
                                       + ("" if metas is None else f", {len(metas)} metas") + ": give one each")
        feats = self._text_features(texts)
        return _within.near_within(feats, keys, metas if metas is not None else [None] * len(texts),
                                   self.rule.verifier, t, hk, self.rule.shared)

    def _near_many_verified(
        self, queries: list, fps: list, by_text: list[int], params: tuple[int, int, float], limit: int | None,
        workers: int, out: list[list[Match]],
    ) -> None:
        """The verified half of near_many: the text queries ``by_text``, answers into ``out``.

        The sketches and band keys come from :meth:`_text_features` (computed with the
        fingerprints, or kept from the previous call); the rule answers them
        (:meth:`simdb.index.rules.HammingRule.near_many_texts`), through ``lookup``: the pieces of the
        batch looked up in parallel on this index's worker connections."""
        feats = dict(zip(by_text, self._text_features([queries[i] for i in by_text])))

        def lookup(radius: int) -> tuple[list[list[int]], Iterable[list[tuple]]]:
            pieces, n = self._pieces(by_text, workers)
            return pieces, self._lookup(fps, pieces, radius, True, n, feats)

        found = self.rule.near_many_texts(self.connection(), self.collection_id, feats, by_text, params, limit,
                                          self._radii, lookup)
        for i, matches in found.items():
            out[i] = matches

    def _many_fps(self, queries: list, verified: bool = False) -> tuple[list[int | None], list[int]]:
        """(fingerprint per query, None: no features; the positions of the text queries);
        ``verified``: the texts' sketches and band keys are computed with them (:meth:`_text_features`)."""
        text_pos = [i for i, q in enumerate(queries) if isinstance(q, str)]
        fps: list[int | None] = _rules.query_fps(queries) if len(text_pos) < len(queries) else [None] * len(queries)
        if text_pos:
            texts = [queries[i] for i in text_pos]
            got = [f[0] for f in self._text_features(texts)] if verified else self.fingerprinter.many(texts, empty=None)
            for i, fp in zip(text_pos, got):
                fps[i] = fp
        return fps, text_pos

    def _pieces(self, live: list[int], workers: int) -> tuple[list[list[int]], int]:
        """The live queries split into one piece per worker (at most NEAR_MANY_CHUNK each); one
        worker below NEAR_MANY_PARALLEL_MIN or inside a transaction (others would not see its rows)."""
        if len(live) < NEAR_MANY_PARALLEL_MIN or self.connection().info.transaction_status != 0:  # 0: idle
            workers = 1
        n_pieces = max(workers, -(-len(live) // NEAR_MANY_CHUNK)) if live else 0
        size = -(-len(live) // n_pieces) if n_pieces else 0
        return ([live[s: s + size] for s in range(0, len(live), size)] if size else []), workers

    def _lookup(
        self, fps: list, pieces: list[list[int]], k: int, verified: bool, workers: int, feats: Any = None,
    ) -> Iterable[list[tuple]]:
        """The rows of each piece's batched query, in the order of ``pieces``; ``verified``: the
        candidates of the rule (:meth:`simdb.index.rules.HammingRule.candidates_many`, given
        the texts' ``feats``), on the worker's connection so that the pieces run in parallel."""
        plan = self.adaptive and k > 0 and (self.rule.adaptive_radii or not verified)
        adaptive = plan and bool(self._bucket_sizes()[0])

        def lookup(piece: list[int]) -> list[tuple]:
            cfps = [fps[i] for i in piece]
            radii = [self._radii(fp, k) or _probes.even_radii(k) for fp in cfps] if adaptive else None
            params = _candidates.near_many_params(self.collection_id, cfps, k, radii)
            if verified:
                keys = [feats[i][2] for i in piece]
                return self.rule.candidates_many(self.connection(), self.collection_id, params, cfps, keys)
            return _candidates.near_many_rows(self.connection(), params)

        return self._worker_pool(workers).map(lookup, pieces) if workers > 1 else map(lookup, pieces)

    def _worker_pool(self, workers: int):
        """near_many's threads, kept between calls (each keeps its connection; closed by :meth:`close`)."""
        return self._connections.worker_pool(workers)
