"""A collection's rule: how it finds and judges its near-duplicates, chosen once when it is opened.

One word for one concept: a collection answers by a **rule** (Hamming; verified with band keys), and the rule owns each search use case end to end: its argument rules (``k`` and
``min_jaccard``, checked once: :func:`simdb.core.validate.verified_args`), the features of a text
(of many), the candidates (:mod:`simdb.store.candidates`), and the verification into answers
(:func:`simdb.core.sketch.compare.candidate_jaccards`, made into Matches by
:func:`simdb.results.verified_matches`). The facade (``SimhashIndex``, and ``AsyncSimhashIndex`` for
everything but its awaited statements) checks the text and the limit and makes one call to its rule;
no method of it tests a flag for the rule. Adding a rule is a class here and a line in :func:`open_rule`.

- :class:`HammingRule`: no sketches; a text is its fingerprint, answers are the rows within ``k``.
- :class:`BandedRule`: each row keeps a bottom-k sketch and its band keys; a text query's candidates
  are the rows sharing two band keys (:mod:`simdb.core.sketch.bands`), plus the sketchless rows within
  the Hamming ``k``, kept by Jaccard of sketches.

The rules hold values (the verifier) and call the store with a connection and values; they never
see the facade. Each rule computes a text's features itself (:meth:`HammingRule.text_features`: the
fingerprint, the sketch and the band keys, the keys from the grams the sketch hashes).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from simdb.core import sketch as _sketch
from simdb.core import validate as _validate
from simdb.core.bits import BITS, to_signed, to_unsigned
from simdb.core.block_pairs import check_pairs_k
from simdb.core.fingerprint import Fingerprinter
from simdb.core.kept_texts import TEXTS_KEY, compress_text, texts_config
from simdb.core.sketch import bands as _bands
from simdb.core.sketch.chars import text_sketch
from simdb.core.sketch.compare import sketch_values
from simdb.core.sketch.features import candidate_fingerprinter, fingerprints_and_sketches
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.results import AddResult, Match, verified_matches, verified_matches_many
from simdb.store import candidates as _candidates
from simdb.store import unique as _store_unique
from simdb.store.encode import item_error

__all__ = [
    "BANDS_KEY", "NEEDS_VERIFIED", "STORE_OPTIONS", "VERIFY_KEY", "BandedRule", "Features", "HammingRule", "Row",
    "as_list", "check_fingerprinter", "fp_row", "hamming_answers", "new_config", "open_fingerprinter", "open_rule", "query_fp",
    "query_fps",
]

#: config key of a verified collection's settings (simdb.core.sketch.Verifier)
VERIFY_KEY = "verify"
#: config key of a banded verified collection's band scheme (simdb.core.sketch.bands.BAND_SCHEME)
BANDS_KEY = "bands"
#: store options recorded in every collection's config (next to the Fingerprinter's)
STORE_OPTIONS = {"blocks": 4, "block_bits": 16, "fp": "bigint two's complement of the unsigned 64-bit SimHash"}

#: a text's features: (unsigned fingerprint or None: no features, sketch or None, band keys or None)
Features = tuple[int | None, Any, Any]
#: ``min_jaccard`` on a Hamming collection (the legacy MinHash-band collections that took it are gone)
NEEDS_VERIFIED = "min_jaccard needs a verified collection (a Hamming collection keeps no sketches: simdb convert)"



class Row(NamedTuple):
    """What a single-row write (add, update) stores for one text or fingerprint, as the store binds it."""

    #: the unsigned fingerprint (what the write returns); None: a text without features (never matched)
    fp: int | None
    #: the same as PostgreSQL's signed bigint
    signed: int | None
    #: the verification sketch (a verified collection's text), or None
    sketch: list[int] | None
    #: the band keys (a banded collection's text), or None
    bands: list[int] | None
    #: the text, compressed, in a collection that keeps texts (:mod:`simdb.core.kept_texts`), or None
    text_z: bytes | None


def fp_row(signed: int) -> Row:
    """The row of a write given its (checked, signed) fingerprint: no sketch, no text; answered by Hamming
    distance whatever the collection's rule."""
    return Row(to_unsigned(signed), signed, None, None, None)


#: the facade's adaptive probe radii: (unsigned fp, k) -> radii or None (the even ones)
Radii = Callable[[int, int], Sequence[int] | None]
#: the facade's batched look-up of near_many: (positions, fps by position, radius, band keys by position or
#: None) -> (pieces of the positions, the rows of each piece)
Lookup = Callable[[list[int], list, int, Any], tuple[list[list[int]], Iterable[list[tuple]]]]


class HammingRule:
    """A collection without sketches: near-duplicates are the rows within Hamming distance ``k``.
    Its methods are what every rule answers (the verified rule overrides them)."""

    name = "hamming"
    verifier: _sketch.Verifier | None = None
    banded = False
    #: a banded collection's band scheme (:data:`simdb.core.sketch.bands.BAND_SCHEME`)
    band_scheme: str | None = None
    #: how many band keys a candidate shares with the query (:func:`simdb.core.sketch.bands.min_shared`; 0: no bands)
    shared = 0
    #: the async front end batches this rule's look-ups itself (the probe statements of simdb.store.sql)
    async_batched = True

    def verifies(self, query: object, verify: object, collection: str) -> bool:
        """Does this query go through the verification stage? A text in a verified collection, unless
        ``verify=False``; ``verify=True`` on a collection without sketches is an error. The sync and
        the async index both ask here, so that both read ``verify`` the same way."""
        if verify is not None and not isinstance(verify, bool):
            raise InvalidTypeError(f"verify must be a bool or None, got {type(verify).__name__}")
        if verify is False or self.verifier is None:
            if verify and self.verifier is None:
                raise InvalidArgumentError(
                    f"verify=True needs a verified collection; {collection!r} keeps no sketches "
                    "(convert it: simdb convert -c NAME)"
                )
            return False
        return isinstance(query, str)

    def verify_params(self, k: int | None, min_jaccard: Any, collection: str) -> tuple[int, int, float]:
        """(candidate radius, Hamming k for rows without a sketch, Jaccard threshold), ``k`` and
        ``min_jaccard`` checked once (:func:`simdb.core.validate.verified_args`)."""
        raise InvalidArgumentError(f"{collection!r} is not a verified collection")

    def near(
        self, conn: Any, collection_id: int, fingerprinter: Any, query: Any, k: int | None, limit: int | None,
        min_jaccard: Any, verify: bool | None, radii: Radii, collection: str,
    ) -> list[Match]:
        """``near(query)``, end to end: ``query`` a text (checked by the caller) or an unsigned
        fingerprint, ``limit`` checked; a text of a verified collection goes through its features (one
        pass), its candidates and the verification stage, anything else is answered by Hamming distance."""
        k, params = self.near_args(query, k, min_jaccard, verify, collection)
        if params is not None:
            features = self.text_features(fingerprinter, query)  # one tokenization for all
            if features[0] is None:
                return []
            out = self.verified_near(conn, collection_id, features, params, radii)
            return out if limit is None else out[:limit]
        fp = query_fp(fingerprinter, query)
        if fp is None:
            return []
        rows = _candidates.fetch_rows(conn, self.lookup_statement(collection_id, [fp], k, [radii(fp, k)], limit))
        return [Match(key, to_unsigned(f), d, 1.0 - d / BITS, None, meta) for key, f, d, meta in rows]

    def near_row(
        self, conn: Any, collection_id: int, key: str, row: tuple, k: int | None, limit: int | None,
        min_jaccard: Any, verify: bool | None, radii: Radii, collection: str,
    ) -> list[Match]:
        """``near_key(key)``, end to end, from the stored ``row`` (unsigned fp, sketch, band keys) of
        ``key`` (``limit`` checked): the answer of ``near(text)`` for its text, less the key itself.
        Verified when the row keeps a sketch (and ``verify`` is not False), else by Hamming distance."""
        fp, sketch, band_keys = row
        verified = self.verifies("", verify, collection) and sketch_values(sketch) is not None
        if min_jaccard is not None and not verified:
            raise InvalidArgumentError(
                f"min_jaccard needs the stored sketch of {key!r}: a verified collection, a row added "
                "with its text, and verify not False"
            )
        if fp is None:
            return []
        if not verified:
            found = self.near(conn, collection_id, None, fp, k, None if limit is None else limit + 1, None, None, radii,
                              collection)
            matches = [m for m in found if m.key != key]
        else:
            params = self.verify_params(k, min_jaccard, collection)
            matches = self.verified_near(conn, collection_id, (fp, sketch, band_keys), params, radii, exclude=key)
        return matches if limit is None else matches[:limit]

    def text_features(self, fingerprinter: Any, text: str) -> Features:
        """One text's features for a write or a query, in one pass."""
        return fingerprinter.fingerprint(text, empty=None), None, None

    def row_of(self, fingerprinter: Any, text: str, keep_text: bool) -> Row:
        """The row a single-row write stores for a checked text, by this rule: its features in one pass
        (:meth:`text_features`), as the store binds them, and the text compressed when the collection
        keeps texts (``keep_text``). Every single-row writer builds its row here (the bulk load's COPY
        rows: :func:`simdb.store.encode.encode_chunk`, from the same rule's verifier and band scheme)."""
        fp, sketch, keys = self.text_features(fingerprinter, text)
        return Row(fp, None if fp is None else to_signed(fp), as_list(sketch), as_list(keys),
                   compress_text(text) if keep_text else None)

    def texts_features(self, fingerprinter: Any, texts: list[str]) -> list[Features]:
        """:meth:`text_features` of many texts, batched (``Fingerprinter.many``)."""
        return [(fp, None, None) for fp in fingerprinter.many(texts, empty=None)]

    def candidates(self, conn: Any, collection_id: int, fp: int, keys: Any, ck: int, hk: int, radii: Radii) -> list:
        """The candidate rows (key, fp signed, distance, meta, sketch) of a verified text query."""
        raise InvalidArgumentError("a Hamming collection has no candidate stage (it keeps no sketches)")

    def verified_near(
        self, conn: Any, collection_id: int, features: Features, params: tuple[int, int, float], radii: Radii,
        exclude: str | None = None,
    ) -> list[Match]:
        """The verified answer for a text's (or a stored row's) features: candidates, then the
        verification stage (:func:`simdb.results.verified_matches`); ``exclude``: a key left out
        (near_key's own row)."""
        ck, hk, t = params
        fp, sketch, keys = features
        assert fp is not None and self.verifier is not None
        rows = self.candidates(conn, collection_id, fp, keys, ck, hk, radii)
        return verified_matches(rows, sketch, self.verifier, t, hk, exclude)

    def near_many(
        self, conn: Any, collection_id: int, fingerprinter: Any, queries: list, k: int,
        params: tuple[int, int, float] | None, limit: int | None, radii: Radii,
        features: Callable[[list[str]], list[Features]], lookup: Lookup,
    ) -> list[list[Match]]:
        """``near_many(queries)``, end to end, answers in the order of the (checked) ``queries``; ``k`` and
        ``params`` from :meth:`near_many_args`, ``limit`` checked. The texts of a verified search
        (``params``) get their features from ``features`` (the facade's, memoized), their candidates
        (:meth:`candidates_many`) and the verification stage, or are compared with every row below the
        band keys' reach (:meth:`scans`); the fingerprint queries, and the texts otherwise, are answered by
        Hamming distance <= ``k``, looked up at ``k``, not at the radius K (548 probes at K=11).
        ``lookup(positions, fps, radius, keys)``: the facade's batched look-up, (pieces of ``positions``,
        the rows of each), run in parallel on its worker connections; ``keys``: the band keys of the
        verified text queries by position (their candidates: :meth:`candidates_many`), None for the
        Hamming look-up."""
        text_pos = [i for i, q in enumerate(queries) if isinstance(q, str)]
        fps: list[int | None] = query_fps(queries) if len(text_pos) < len(queries) else [None] * len(queries)
        feats: dict[int, Features] = {}
        if text_pos:
            texts = [queries[i] for i in text_pos]
            if params is not None:  # the sketches and band keys computed with the fingerprints
                feats = dict(zip(text_pos, features(texts)))
            got = [f[0] for f in feats.values()] if feats else fingerprinter.many(texts, empty=None)
            for i, fp in zip(text_pos, got):
                fps[i] = fp
        live = [i for i, fp in enumerate(fps) if fp is not None]
        by_fp = [i for i in live if i not in feats]
        out: list[list[Match]] = [[] for _ in queries]
        if by_fp:
            pieces, looked = lookup(by_fp, fps, k, None)
            out = hamming_answers(len(queries), by_fp, pieces, looked, limit)
        by_text = [i for i in live if i in feats]
        if by_text and params is not None:
            ck, hk, t = params
            if self.scans(t):  # below the band keys' reach: each text compared with every row, as near() does
                for i in by_text:
                    every = self.verified_near(conn, collection_id, feats[i], params, radii)
                    out[i] = every if limit is None else every[:limit]
                return out
            # the Hamming look-up only finds the rows without a sketch (within hk); the band keys find the rest
            pieces, looked = lookup(by_text, fps, hk, {i: feats[i][2] for i in by_text})
            for piece, rows in zip(pieces, looked):  # each piece verified in one call
                found = verified_matches_many(rows, [feats[i][1] for i in piece], self.verifier, t, hk)
                for qi, matches in found.items():
                    out[piece[qi]] = matches if limit is None else matches[:limit]
        return out

    def scans(self, min_jaccard: float) -> bool:
        """Does a text query at ``min_jaccard`` compare every row (its threshold is below what this
        rule's candidate stage reaches: :meth:`BandedRule.scans`)? No in this rule."""
        return False

    def check_reach(self, min_jaccard: float, what: str) -> None:
        """Refuse ``min_jaccard`` where ``what`` (a whole-collection or per-insert operation) would
        silently miss pairs the rule names (:meth:`BandedRule.check_reach`); every threshold here."""

    def candidates_many(self, conn: Any, collection_id: int, params: dict, fps: list[int], keys: list) -> list:
        """The candidate rows of a batch of verified text queries (each led by its position in the
        batch), ``params`` the probes of their sketchless rows (:func:`simdb.store.candidates.near_many_params`)."""
        raise InvalidArgumentError("a Hamming collection has no candidate stage (it keeps no sketches)")

    # ------------------------------------------------------------ sans I/O: the steps, for a caller that
    # runs the statements itself (simdb.aio awaits them; the methods above run them on a psycopg connection)
    def near_args(
        self, query: object, k: Any, min_jaccard: Any, verify: object, collection: str,
    ) -> tuple[int, tuple[int, int, float] | None]:
        """``near(query)``'s arguments, checked once: (the Hamming ``k``; the verified search's
        (candidate radius, Hamming k, threshold), or None: ``query`` is answered by Hamming distance)."""
        if self.verifies(query, verify, collection):
            params = self.verify_params(k, min_jaccard, collection)
            return params[1], params
        if min_jaccard is not None:
            if self.verifier is not None:
                raise InvalidArgumentError("min_jaccard needs the query text (a fingerprint has no words to compare)")
            raise InvalidArgumentError(NEEDS_VERIFIED)
        return _validate.check_k(k), None

    def near_many_args(
        self, k: Any, min_jaccard: Any, verify: object, collection: str,
    ) -> tuple[int, tuple[int, int, float] | None]:
        """``near_many``'s arguments, checked once: (the Hamming ``k`` of its fingerprint queries (and of
        its texts when they are not verified); the texts' verified (candidate radius, Hamming k,
        threshold), or None)."""
        if self.verifies("", verify, collection):
            params = self.verify_params(k, min_jaccard, collection)
            return params[1], params
        if min_jaccard is not None:
            raise InvalidArgumentError("near_many(min_jaccard=...) needs a verified collection")
        return _validate.check_k(k), None

    def lookup_statement(
        self, collection_id: int, fps: Sequence[int], k: int, radii: Sequence[Any] | None = None,
        limit: int | None = None,
    ) -> _candidates.Statement:
        """The statement of the rows within ``k`` of the unsigned ``fps`` (one query: its rows, cut at
        ``limit``; several: each row led by its query's position), the Hamming answer's rows.
        ``radii``: each query's probe radii (None: even; one query's may be None too)."""
        if len(fps) == 1:
            return _candidates.near_statement(_candidates.near_params(collection_id, fps[0], k, radii[0] if radii else None,
                                                                      limit))
        return _candidates.near_many_statement(_candidates.near_many_params(collection_id, fps, k, radii))

    def add_if_unique(
        self, conn: Any, collection_id: int, fingerprinter: Any, key: Any, text: Any, fp: Any, k: Any,
        meta: Any, min_jaccard: Any, verify: Any, limits: tuple[int, bool, str], version: str,
    ) -> AddResult:
        """``add_if_unique``, end to end, on ``conn`` (this thread's psycopg connection, or a reservation's:
        a transaction, or a savepoint, of its own), atomic (:mod:`simdb.store.unique`): the arguments
        checked in the order they always were (the key, ``k`` and ``min_jaccard``, the text), the text's
        features in one pass, then the store's locks, candidates and upsert. A text of a verified
        collection goes through its candidate stage (:meth:`add_verified_if_unique`); a fingerprint, a
        Hamming collection or ``verify=False``: the rows within Hamming distance ``k``. ``limits`` =
        (largest text in UTF-8 bytes, whether the collection keeps texts, its name); ``version``: the
        configuration's version the row is computed by (:mod:`simdb.store.collection_guard`)."""
        max_text_bytes, keep_text, collection = limits
        if fp is None and self.verifies(text, verify, collection):
            key = _validate.check_new_key(key)
            params = self.verify_params(k, min_jaccard, collection)
            self.check_reach(params[2], "add_if_unique")
            features = self.text_features(fingerprinter, _validate.check_text(text, "text", max_text_bytes))
            text_z = compress_text(text) if keep_text else None
            return self.add_verified_if_unique(conn, collection_id, key, features, _meta_json(meta), params, text_z,
                                               version)
        if min_jaccard is not None:
            raise InvalidArgumentError(NEEDS_VERIFIED)
        key = _validate.check_new_key(key)
        k = _validate.check_k(k)
        if fp is not None:
            u, text_z = to_unsigned(_validate.check_fp(fp)), None
        elif text is None:
            raise InvalidArgumentError("give text or fp")
        else:
            u = fingerprinter.fingerprint(_validate.check_text(text, "text", max_text_bytes), empty=None)
            text_z = compress_text(text) if keep_text else None
        return _store_unique.run_add_if_unique(conn, collection_id, key, u, k, _meta_json(meta), text_z=text_z,
                                              version=version)

    def add_verified_if_unique(
        self, conn: Any, collection_id: int, key: str, features: Features, meta_json: str | None,
        params: tuple[int, int, float], text_z: bytes | None, version: str,
    ) -> AddResult:
        """A verified text's add_if_unique by this rule's candidate stage (checked values)."""
        raise InvalidArgumentError("a Hamming collection has no candidate stage (it keeps no sketches)")

    def pair_args(self, k: int, min_jaccard: Any, verify: object, collection: str, what: str) -> tuple[int, tuple | None]:
        """(candidate radius, ``verify`` of :func:`simdb.store.pairs.iter_pairs` or None) of ``pairs()`` /
        ``clusters()`` (``what``): every argument rule of an all-pairs run in one call. Verified: the
        collection's radius and (verifier, threshold, Hamming k, band keys a candidate pair shares: 0 if not
        banded), once the threshold is within the rule's reach; by Hamming distance: ``k`` as the pair search
        takes it, and ``min_jaccard`` refused."""
        if self.verifies("", verify, collection):
            ck, hk, t = self.verify_params(k, min_jaccard, collection)
            self.check_reach(t, what)
            return ck, (self.verifier, t, hk, self.shared)
        if min_jaccard is not None:
            raise InvalidArgumentError(NEEDS_VERIFIED)
        return check_pairs_k(k), None


class BandedRule(HammingRule):
    """A verified collection: each row keeps a sketch and band keys; candidates share band keys, ``shared``
    of them (sketchless rows: within ``k``), kept by Jaccard of sketches."""

    name = "banded"
    banded = True
    #: band candidates run on the sync index's code (the async statements carry no band keys)
    async_batched = False

    def __init__(self, verifier: _sketch.Verifier, band_scheme: str = _bands.BAND_SCHEME):
        self.verifier = verifier
        self.band_scheme = band_scheme
        self.shared = _bands.min_shared(band_scheme)
        #: the lowest threshold the band keys answer (:func:`simdb.core.sketch.bands.reliable_threshold`)
        self.reach = _bands.reliable_threshold(band_scheme)

    def verify_params(self, k: int | None, min_jaccard: Any, collection: str) -> tuple[int, int, float]:
        return _validate.verified_args(k, min_jaccard, self.verifier)

    def text_features(self, fingerprinter: Any, text: str) -> Features:
        """Fingerprint, sketch and band keys; the keys from the grams the sketch hashes (a
        one-permutation bin is a minimum: :class:`simdb.core.sketch.bands.BlockBandKeys`), so the text
        is read once for both."""
        assert self.verifier is not None
        keys = _bands.BlockBandKeys(1)
        sketch = text_sketch(text, self.verifier.size, keys)
        fp = fingerprinter.fingerprint(text, empty=None)
        if not len(sketch):
            return fp, None, None
        return fp, sketch, keys.keys()[0]

    def texts_features(self, fingerprinter: Any, texts: list[str]) -> list[Features]:
        """:meth:`text_features` of many texts, computed as a load computes them
        (:func:`simdb.core.sketch.features.fingerprints_and_sketches`)."""
        assert self.verifier is not None
        keys = _bands.BlockBandKeys(len(texts))
        fps, rows = fingerprints_and_sketches(texts, fingerprinter, self.verifier, keys)
        sketches = [rows.row(i) for i in range(len(texts))]
        return [(fp, sk, k) if len(sk) else (fp, None, None) for fp, sk, k in zip(fps, sketches, keys.keys())]

    def scans(self, min_jaccard: float) -> bool:
        """Below :attr:`reach` the keys would miss most pairs at the threshold: ``near`` compares every
        row instead (:mod:`simdb.store.candidates`: exact, and as slow as a sequential scan)."""
        return min_jaccard < self.reach

    def check_reach(self, min_jaccard: float, what: str) -> None:
        """``pairs``, ``clusters``, ``add_if_unique`` and a dedup compare through the band keys only (a
        scan per row would be quadratic), so below :attr:`reach` they say so instead of missing pairs."""
        if min_jaccard < self.reach:
            raise InvalidArgumentError(
                f"min_jaccard={min_jaccard:g} is below {self.reach:g}, the lowest threshold {what} answers "
                f"exactly in this collection: its candidates share {self.shared} of {_bands.BANDS} band keys "
                f"(scheme {self.band_scheme}), which only {_bands.s_curve(min_jaccard, shared=self.shared):.0%} "
                f"of the pairs at {min_jaccard:g} do. Use min_jaccard >= {self.reach:g} here; a query of one text "
                f"(near(), simdb query) at a lower threshold is answered exactly by comparing every row"
            )

    def verified_near(
        self, conn: Any, collection_id: int, features: Features, params: tuple[int, int, float], radii: Radii,
        exclude: str | None = None,
    ) -> list[Match]:
        ck, hk, t = params
        if not self.scans(t):
            return super().verified_near(conn, collection_id, features, params, radii, exclude)
        fp, sketch, _ = features
        assert fp is not None
        return _candidates.scan_verified(conn, collection_id, fp, sketch, self.verifier, t, hk, exclude)

    def candidates(self, conn: Any, collection_id: int, fp: int, keys: Any, ck: int, hk: int, radii: Radii) -> list:
        return _candidates.band_near(conn, collection_id, fp, keys, hk, self.shared)

    def candidates_many(self, conn: Any, collection_id: int, params: dict, fps: list[int], keys: list) -> list:
        """The rows without a sketch within the Hamming radius, and the band candidates, each row
        once per query (as ``near``: :data:`simdb.store.candidates.BAND_NEAR_SQL`)."""
        rows = _candidates.sketchless_rows_many(conn, params)
        live = [j for j, k in enumerate(keys) if k is not None]
        more = _candidates.band_rows_many(conn, collection_id, [fps[j] for j in live], [keys[j] for j in live],
                                           self.shared)
        seen = {(r[0], r[1]) for r in rows}
        return list(rows) + [(live[r[0]], *r[1:]) for r in more if (live[r[0]], r[1]) not in seen]

    def add_verified_if_unique(
        self, conn: Any, collection_id: int, key: str, features: Features, meta_json: str | None,
        params: tuple[int, int, float], text_z: bytes | None, version: str,
    ) -> AddResult:
        ck, hk, t = params
        fp, sketch, keys = features
        return _store_unique.run_add_if_unique_banded(
            conn, collection_id, key, fp, meta_json, as_list(sketch), keys, (self.verifier, t, hk), text_z,
            shared=self.shared, version=version,
        )


def _meta_json(meta: Any) -> str | None:
    """A row's metadata as the JSON text the store binds (:func:`simdb.core.validate.dump_meta`; none: NULL)."""
    return None if meta is None else _validate.dump_meta(meta)


def as_list(sketch: Any) -> list[int] | None:
    """A sketch (or band keys) as the list the store binds (features may hold numpy arrays)."""
    if sketch is None:
        return None
    return sketch.tolist() if hasattr(sketch, "tolist") else list(sketch)


def query_fp(fingerprinter: Any, query: Any) -> int | None:
    """The unsigned fingerprint of a query answered by Hamming distance: a (checked) text's, None for
    a text without features, or the checked fingerprint itself."""
    if isinstance(query, str):
        return fingerprinter.fingerprint(query, empty=None)
    if isinstance(query, bool) or not isinstance(query, numbers.Integral):
        raise InvalidTypeError(f"query must be a text (str) or an unsigned fingerprint (int), got {type(query).__name__}")
    _validate.check_fp(query, "query fingerprint")
    return int(query)


def query_fps(queries: list) -> list[int | None]:
    """The checked unsigned fingerprint of each fingerprint query of ``near_many`` (None for a text:
    its features are computed with the others'); the error names the query's position."""
    fps: list[int | None] = [None] * len(queries)
    for i, q in enumerate(queries):
        if not isinstance(q, str):
            try:
                fps[i] = query_fp(None, q)
            except (TypeError, ValueError) as exc:
                raise item_error(exc, f"queries[{i}]: {exc}") from None
    return fps


def hamming_answers(
    n: int, live: list[int], pieces: list[list[int]], results: Iterable[list[tuple]], limit: int | None
) -> list[list[Match]]:
    """Hamming answers of near_many: each query's rows (``NEAR_MANY_SQL``'s, per piece of queries, ``qi``
    the position in the piece) by distance then key, cut at ``limit``."""
    out: list[list[Match]] = [[] for _ in range(n)]
    for piece, rows in zip(pieces, results):
        for qi, key, f, d, meta in rows:
            out[piece[qi]].append(Match(key, to_unsigned(f), d, 1.0 - d / BITS, None, meta))
    for i in live:
        if out[i]:
            out[i].sort(key=lambda m: (m.distance, m.key))
            if limit is not None:
                del out[i][limit:]
    return out


def open_rule(collection: str, config: Any, want_verify: bool | None = None) -> HammingRule:
    """The rule of a collection from its stored ``config``; ``want_verify`` (the caller's
    ``verify=``) must agree with it. Raises :class:`~simdb.errors.CollectionConfigError` naming the
    collection for a mismatch, a bad verify config, or a shingle or band scheme this simdb does not read."""
    cfg = config.get(VERIFY_KEY) if isinstance(config, dict) else None
    if want_verify and cfg is None:
        raise CollectionConfigError(
            f"collection {collection!r} is not a verified collection (it keeps no sketches); "
            "open it with verify=None, or convert it: simdb convert -c NAME (docs/near-duplicates.md)"
        )
    if want_verify is False and cfg is not None:
        raise CollectionConfigError(
            f"collection {collection!r} is a verified collection; open it with verify=None "
            "(Hamming-only answers: near(..., verify=False) or query by fingerprint)"
        )
    verifier: _sketch.Verifier | None = None
    if cfg is not None:
        if isinstance(cfg, dict) and "scheme" in cfg:
            _check_read(collection, "shingle scheme", cfg["scheme"], _sketch.SCHEME)
        try:
            verifier = _sketch.Verifier.from_dict(cfg)
        except (KeyError, TypeError, ValueError) as exc:
            raise CollectionConfigError(f"collection {collection!r}: bad verify config {cfg!r}: {exc}") from None
    scheme = config.get(BANDS_KEY) if isinstance(config, dict) else None
    if verifier is None:
        if scheme is not None:
            raise CollectionConfigError(f"collection {collection!r}: band scheme {scheme!r} in a collection without sketches")
        return HammingRule()
    if scheme is None:
        raise _retired(collection, "is a verified collection without band keys")
    _check_read(collection, "band scheme", scheme, _bands.BAND_SCHEME)
    return BandedRule(verifier, str(scheme))


def _normalised(d: Any) -> Any:
    return json.loads(json.dumps(d, sort_keys=True))


def new_config(fingerprinter: Fingerprinter | None, verify: bool | None, keep_texts: bool | None) -> tuple[Fingerprinter, dict]:
    """A new collection's Fingerprinter and config. Verified unless ``verify`` is False, or None with a
    ``fingerprinter`` given: a verified collection's fingerprint is the candidate fingerprint
    (:func:`simdb.core.sketch.features.candidate_fingerprinter`), for which its radius K is calibrated.
    ``keep_texts``: the collection keeps its texts (:mod:`simdb.core.kept_texts`)."""
    verified = fingerprinter is None if verify is None else verify
    if fingerprinter is None:
        fingerprinter = candidate_fingerprinter() if verified else Fingerprinter()
    config = {"fingerprinter": _normalised(fingerprinter.to_dict()), "store": dict(STORE_OPTIONS)}
    if verified:
        config[VERIFY_KEY] = _sketch.Verifier().to_dict()
        config[BANDS_KEY] = _bands.BAND_SCHEME
    if keep_texts:
        config[TEXTS_KEY] = texts_config()
    return fingerprinter, config


def check_fingerprinter(fingerprinter: Any) -> None:
    """A Fingerprinter or None; a preset's name gets the call that makes it (a common first guess)."""
    if fingerprinter is None or isinstance(fingerprinter, Fingerprinter):
        return
    hint = f": use Fingerprinter.preset({fingerprinter!r})" if isinstance(fingerprinter, str) else ""
    raise InvalidTypeError(
        "fingerprinter must be a simdb.Fingerprinter, or None for the collection's stored one (a new "
        f"collection's default), got {type(fingerprinter).__name__}{hint}"
    )


def open_fingerprinter(collection: str, config: Any, given: Fingerprinter | None) -> Fingerprinter:
    """The Fingerprinter of a collection from its stored ``config``, or ``given`` (the caller's) when it is
    the same: fingerprints of another one are not comparable. Raises
    :class:`~simdb.errors.CollectionConfigError` naming the collection and what differs."""
    stored_fp = config.get("fingerprinter") if isinstance(config, dict) else None
    if given is None:
        if stored_fp is None:
            raise CollectionConfigError(
                f"collection {collection!r} has no Fingerprinter configuration in its config; pass fingerprinter=..."
            )
        return Fingerprinter.from_dict(stored_fp)
    mine = _normalised(given.to_dict())
    if mine != stored_fp:
        theirs = stored_fp or {}
        diff = sorted(k for k in set(mine) | set(theirs) if k not in theirs or k not in mine or theirs[k] != mine[k])
        default = stored_fp == _normalised(candidate_fingerprinter().to_dict())
        raise CollectionConfigError(
            f"collection {collection!r} was created with a different Fingerprinter "
            f"(differs in {', '.join(diff) or 'its layout'})"
            + (", as a verified collection (the default: its fingerprints come from "
               "Fingerprinter.preset('verified'), not Fingerprinter())" if default else "")
            + ". Its fingerprints are not comparable with this one's: omit fingerprinter= (or pass None) "
            "to open it with its stored configuration, or use another collection. "
            f"Stored {json.dumps(stored_fp, sort_keys=True)}, given {json.dumps(mine, sort_keys=True)}"
        )
    return given


def _check_read(collection: str, what: str, scheme: object, current: str) -> None:
    """Refuse a collection whose ``what`` is not ``current``: the schemes only development builds after
    0.1.0 wrote (``tok3-xxh64-v3``, ``tok3-xxh32-v2``, ``oph-b14r5-v2``, ``minhash-b14r5-v1``) are retired."""
    if scheme != current:
        raise _retired(collection, f"uses the {what} {scheme!r} (this simdb reads {current!r})")


def _retired(collection: str, what: str) -> CollectionConfigError:
    """The refusal of a collection in a form only development builds after 0.1.0 wrote (``what`` it is):
    it is re-created, since ``simdb convert``, which opens the collection, cannot rebuild it."""
    return CollectionConfigError(
        f"collection {collection!r} {what}: only development builds after 0.1.0 wrote such collections, and "
        f"this simdb does not read them. Re-create the collection: drop it (simdb drop -c {collection} --yes) "
        "and add its texts again (simdb add, SimhashIndex.add_many)"
    )
