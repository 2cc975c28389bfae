"""Verified near-duplicates on an application's own SQLAlchemy models (issue 13's two stages).

:class:`VerifiedSimhashMixin` is :class:`simdb.sqlalchemy.SimhashMixin` plus two nullable columns,
``simdb_sketch int4[]`` and ``simdb_rule smallint``, and its queries answer with the model rules
versioned in :mod:`simdb.core.model_verifier` (docs/verified-models.md). New rows are written under
**rule 2: Jaccard of character 4-gram shingles >= 0.8** (256-value sketches); rows written before
the rule column existed (``simdb_rule`` NULL) hold rule 1's token 3-gram sketches (384 values) and
are answered by rule 1 until :meth:`VerifiedSimhashMixin.recompute_sketches` moves them.

1. *Candidates*: rows whose ``fp`` is within the candidate radius ``K`` (11, the same for every
   rule) of the query's fingerprint, by the same block-index probes as ``near_clause``; **or**
   rule-2 rows sharing at least 2 of the query's 14 band keys (``simdb_band0..13``, indexed:
   :mod:`simdb.sqlalchemy.bands`, which says why: ``K`` alone misses ~7 % of one-typo copies
   of short comments).
2. *Verification*: the bottom-k sketch Jaccard of the row's ``simdb_sketch`` and the query's
   sketch **under the row's own rule** (the query is sketched under each rule), computed in SQL
   (:mod:`simdb.store.sketch_sql`), must be >= ``min_jaccard``.

Why per row rather than one rule per table: a host table records no configuration, and comparing
a rule-2 query sketch with a rule-1 stored one gives a Jaccard near 0 (different hash values for
the same text): every near-duplicate would be lost without an error until the whole table was
rewritten. A model with its own ``__simdb_verifier__`` (``model_verifier(1)`` to stay on rule 1)
owns that choice: it writes ``simdb_rule = 0`` and every row is compared under its verifier.

Why a separate, opt-in mixin rather than changing ``SimhashMixin``: the mixin describes the
columns of *existing* host tables (their Alembic/Django migrations were generated from it).
New columns and a new fingerprinter would change every user's schema and the meaning of
every stored ``fp`` on upgrade. New models should use this mixin (the docs say so).

Why ``fp`` comes from :func:`simdb.core.model_verifier.model_fingerprinter` (the candidate
Fingerprinter of verified collections, pinned) and cannot be set: the radius ``K = 11`` was
measured for that Fingerprinter only; with another one the candidate stage would lose pairs
without saying so.

Rows without a sketch (``fp`` set by hand, a text with no word characters), rows of a rule the
query has no sketch for, and queries without a sketch (an ``int`` fingerprint) have nothing to
verify with: they are answered by Hamming distance ``<= k`` (default 3) and carry ``jaccard =
None``, exactly as a verified collection answers them (:meth:`simdb.core.sketch.Verifier.judge`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import (
    Boolean,
    Double,
    Integer,
    Select,
    SmallInteger,
    bindparam,
    case,
    cast,
    event,
    false,
    func,
    inspect,
    null,
    or_,
    select,
    union,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, aliased, declared_attr, mapped_column

from simdb.core.bits import to_unsigned
from simdb.core.fingerprint import query_fingerprint
from simdb.core.model_verifier import (
    BAND_COLUMNS,
    MODEL_RULE,
    MODEL_RULES,
    OWN_RULE,
    check_model_verifier,
    model_band_keys,
    model_fingerprinter,
    model_verifier,
    rule_of,
)
from simdb.core.probes import check_k
from simdb.core.sketch import Verifier, check_min_jaccard
from simdb.core.validate import check_fp
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy import SimhashMixin, hamming_distance
from simdb.sqlalchemy.bands import BandKeysMixin, band_pairs, band_values, check_band_keys
from simdb.sqlalchemy.near_statement import near_statement, near_values
from simdb.sqlalchemy.sketch_expr import sketch_jaccard

__all__ = ["QuerySignature", "VerifiedSimhashMixin", "sketch_jaccard"]

#: a query's sketches, by the rule each was computed under (a value None: no shingles under it)
Sketches = dict[int, "list[int] | None"]


class QuerySignature(NamedTuple):
    """What a query needs besides SQL, computed once (off the event loop in the async helper):
    the fingerprint, the sketch under each rule the model's rows may hold, and the rule-2 band
    keys (None: an int query, a model with its own verifier, or no word characters). Pass it to
    :meth:`VerifiedSimhashMixin.near_duplicates_of` as ``(sig.fp, sig.sketches, band_keys=sig.band_keys)``."""

    fp: int | None
    sketches: Sketches | None
    band_keys: list[int] | None


def _is_sketch(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(type(v) is int for v in value)


class VerifiedSimhashMixin(SimhashMixin, BandKeysMixin):
    """``SimhashMixin`` + ``simdb_sketch`` (nullable ``int4[]``) + ``simdb_rule`` (nullable
    ``smallint``) + ``simdb_band0..13`` (nullable, indexed ``int4``: rule-2 rows' band keys),
    answering by verified Jaccard under each row's model rule.

    Class options: ``__simdb_text__`` (the text attribute ``fp``, ``simdb_sketch`` and
    ``simdb_rule`` are computed from on flush, as for ``SimhashMixin``) and ``__simdb_verifier__``
    (a :class:`simdb.core.sketch.Verifier`; default :func:`~simdb.core.model_verifier.model_verifier`,
    the current model rule (2): rows compared per rule. Any other verifier, ``model_verifier(1)``
    included, is the model's own: rows written with ``simdb_rule = 0``, all compared under it).
    ``__simdb_fingerprinter__`` is refused (see the module).
    """

    __simdb_verifier__: ClassVar[Verifier] = model_verifier()

    def __init_subclass__(cls, **kw: Any) -> None:
        if cls.__dict__.get("__simdb_fingerprinter__") is not None:
            raise CollectionConfigError(
                f"{cls.__name__}: a VerifiedSimhashMixin model fingerprints with simdb's candidate Fingerprinter "
                "(its candidate radius K was measured for that one only); drop __simdb_fingerprinter__, "
                "or use SimhashMixin for a Hamming-only model with your own Fingerprinter"
            )
        check_model_verifier(cls.__simdb_verifier__, f"{cls.__name__}.__simdb_verifier__")
        super().__init_subclass__(**kw)

    @declared_attr
    def simdb_sketch(cls) -> Mapped[list[int] | None]:
        return mapped_column(ARRAY(Integer), nullable=True)

    @declared_attr
    def simdb_rule(cls) -> Mapped[int | None]:
        return mapped_column(SmallInteger, nullable=True)

    # -- what is stored ------------------------------------------------------------------

    @classmethod
    def simdb_fingerprinter(cls):
        return model_fingerprinter()

    @classmethod
    def sketch_rule(cls) -> int:
        """The ``simdb_rule`` this model writes with its sketches (:func:`~simdb.core.model_verifier.rule_of`)."""
        return rule_of(cls.__simdb_verifier__)

    @classmethod
    def sketch_text(cls, text: str | None) -> list[int] | None:
        """The sketch this model stores for ``text`` now (None: no word characters, or no text)."""
        return None if text is None else cls.__simdb_verifier__.sketch(text)

    @classmethod
    def band_keys(cls, text: str | None) -> list[int] | None:
        """The band keys this model stores for ``text`` now: rule 2's 14 keys with the default
        verifier, None with its own (its rows are compared under it, never by rule 2's keys)."""
        return model_band_keys(text) if cls.sketch_rule() == MODEL_RULE else None

    @classmethod
    def simdb_values(cls, text: str | None) -> dict[str, Any]:
        """``{"fp", "simdb_sketch", "simdb_rule", "simdb_band0".."simdb_band13"}`` of ``text``: what
        the flush hook stores, for a Core ``insert()``/``update()`` (which runs no ORM hook).
        Forgetting ``simdb_rule`` there would leave NULL, which reads as rule 1: the row would be
        compared under the wrong rule; forgetting the keys, the row would be found within K bits only."""
        values = {"fp": cls.fingerprint_text(text), "simdb_sketch": cls.sketch_text(text), "simdb_rule": cls.sketch_rule()}
        return {**values, **band_values(cls.band_keys(text))}

    @classmethod
    def query_signature(cls, query: Any) -> QuerySignature:
        """:class:`QuerySignature` ``(fp, sketches, band_keys)`` of a query, for
        :meth:`near_duplicates_of`: a text gets its sketch under every rule this model's rows may
        hold (``{1: ..., 2: ...}`` with the default verifier, ``{0: ...}`` with its own) and its
        rule-2 band keys; an int fingerprint neither."""
        if not isinstance(query, str):
            return QuerySignature(query_fingerprint(query), None, None)
        if cls.sketch_rule() == OWN_RULE:
            return QuerySignature(cls.fingerprint_text(query), {OWN_RULE: cls.sketch_text(query)}, None)
        sketches: Sketches = {n: rule.verifier().sketch(query) for n, rule in MODEL_RULES.items()}
        return QuerySignature(cls.fingerprint_text(query), sketches, cls.band_keys(query))

    # -- queries ---------------------------------------------------------------------------

    @classmethod
    def _thresholds(cls, k: int, min_jaccard: float | None) -> tuple[int, float]:
        v = cls.__simdb_verifier__
        check_k(k)
        if k > v.k:
            raise InvalidArgumentError(f"k (the Hamming radius of rows without a sketch) must be <= {v.k}, got {k}")
        return k, v.min_jaccard if min_jaccard is None else check_min_jaccard(min_jaccard)

    @classmethod
    def _sketches(cls, sketch: Any) -> Sketches:
        """``sketch`` (None, one sketch: under the model's current rule, or ``{rule: sketch}``) as a dict."""
        own = cls.sketch_rule()
        if sketch is None:
            return {}
        if _is_sketch(sketch):
            return {own: list(sketch)} if sketch else {}
        if not isinstance(sketch, Mapping):
            raise InvalidTypeError(
                "sketch must be a list of int (Model.sketch_text(text)), a dict {rule: sketch} "
                f"(Model.query_signature(text)[1]) or None, got {type(sketch).__name__}"
            )
        allowed = {OWN_RULE} if own == OWN_RULE else set(MODEL_RULES)
        for rule, value in sketch.items():
            if rule not in allowed or isinstance(rule, bool):
                raise InvalidArgumentError(f"sketch: {cls.__name__} compares rows under the rules {sorted(allowed)}, got rule {rule!r}")
            if value is not None and not _is_sketch(value):
                raise InvalidTypeError(f"sketch[{rule}] must be a list of int or None")
        return {rule: list(value) for rule, value in sketch.items() if value}

    @classmethod
    def _jaccard(cls, row: Any, sketches: Sketches) -> Any:
        """The Jaccard of ``row``'s stored sketch and the query's sketch under the row's rule (NULL
        when the query has none under it): one ``CASE`` branch per rule, so each candidate is
        compared once, with its own rule's scheme and size."""
        if cls.sketch_rule() == OWN_RULE:
            sk = sketches.get(OWN_RULE)
            return sketch_jaccard(row.simdb_sketch, sk, cls.__simdb_verifier__.size) if sk is not None else cast(null(), Double)
        whens = [
            (func.coalesce(row.simdb_rule, 1) == n, sketch_jaccard(row.simdb_sketch, sketches[n], MODEL_RULES[n].size))
            for n in sorted(sketches)
        ]
        return case(*whens, else_=cast(null(), Double)) if whens else cast(null(), Double)

    @classmethod
    def near_duplicates(cls, query: Any, k: int = 3, *, min_jaccard: float | None = None) -> Select:
        """``SELECT <model>, distance, jaccard``: the verified near-duplicates of ``query``.

        ``query``: a text (both stages; each row verified under its own rule), or an unsigned
        fingerprint (Hamming ``<= k`` only: there is no sketch to verify with). ``k``: the Hamming
        radius for rows/queries without a comparable sketch (0..K). ``min_jaccard``: default
        ``__simdb_verifier__.min_jaccard``. Ordered by jaccard (highest first, NULL last),
        distance, primary key; a plain :class:`~sqlalchemy.Select` to add ``.where()``/``.limit()`` to.
        """
        sig = cls.query_signature(query)
        return cls.near_duplicates_of(sig.fp, sig.sketches, k, min_jaccard=min_jaccard, band_keys=sig.band_keys)

    @classmethod
    def near_duplicates_of(
        cls, fp: int | None, sketch: Any, k: int = 3, *, min_jaccard: float | None = None, band_keys: Any = None
    ) -> Select:
        """:meth:`near_duplicates` from a precomputed :meth:`query_signature` ``sig``:
        ``near_duplicates_of(sig.fp, sig.sketches, k, band_keys=sig.band_keys)``.

        ``sketch``: the dict ``{rule: sketch}`` it returns (each row compared with the sketch of
        its rule; rows of a rule missing from it: Hamming ``<= k``), a single sketch (a list: taken
        as the model's current rule, :meth:`sketch_rule`, the meaning it had before rules were
        versioned), or None (no verification). ``band_keys``: the 14 keys making rule-2 rows that
        share 2 of them candidates too, whatever their distance; None: candidates within K only
        (the near-duplicates more than 11 bits away are then missed)."""
        k, t = cls._thresholds(k, min_jaccard)
        if fp is not None:  # here, naming it: a bad one failed as a bare TypeError or at execution
            fp = to_unsigned(check_fp(fp, "fp"))
        sketches = cls._sketches(sketch)
        keys = check_band_keys(band_keys) if cls.sketch_rule() == MODEL_RULE else None
        if fp is None:  # no fingerprint: no candidates
            return select(cls, cast(null(), Integer).label("distance"), cast(null(), Double).label("jaccard")).where(false())
        radius = cls.__simdb_verifier__.k if sketches else k
        statement = near_statement(cls, tuple(sorted(sketches)), keys is not None)
        return statement.params(near_values(fp, sketches, keys, k, t, radius))

    @classmethod
    def near_pairs(cls, k: int = 3, *, min_jaccard: float | None = None) -> Select:
        """Every verified pair: ``SELECT left_id, right_id, distance, jaccard`` (``left_id <
        right_id``), the candidate pairs within ``K`` (``SimhashMixin.near_pairs``) and the rule-2
        pairs sharing 2 band keys (:func:`simdb.sqlalchemy.bands.band_pairs`), kept when
        their Jaccard is >= ``min_jaccard`` or, with no comparable sketches, their distance is
        <= ``k``. Two rows are comparable when both have a sketch under the same rule (with the
        default verifier; with its own, any two sketches). Ordered by jaccard (highest first,
        NULL last), distance, ids."""
        k, t = cls._thresholds(k, min_jaccard)
        within = super().near_pairs(cls.__simdb_verifier__.k).order_by(None).subquery("within_k")
        pk = list(inspect(cls).primary_key)
        pk_name = inspect(cls).get_property_by_column(pk[0]).key
        ids: Any = select(within.c.left_id, within.c.right_id)
        if cls.sketch_rule() == MODEL_RULE:
            x, y = aliased(cls, name="band_left"), aliased(cls, name="band_right")
            ids = union(ids, band_pairs(x, y, getattr(x, pk_name), getattr(y, pk_name)))
        cand = ids.subquery("candidates")
        a, b = aliased(cls, name="left_row"), aliased(cls, name="right_row")
        distance = hamming_distance(a.fp, b.fp)
        jaccard: Any
        if cls.sketch_rule() == OWN_RULE:
            jaccard = sketch_jaccard(a.simdb_sketch, b.simdb_sketch, cls.__simdb_verifier__.size)
        else:
            ra, rb = func.coalesce(a.simdb_rule, 1), func.coalesce(b.simdb_rule, 1)
            whens = [((ra == n) & (rb == n), sketch_jaccard(a.simdb_sketch, b.simdb_sketch, r.size)) for n, r in sorted(MODEL_RULES.items())]
            jaccard = case(*whens, else_=cast(null(), Double))
        keep = func.coalesce(jaccard >= t, distance <= k, type_=Boolean)
        d, j = distance.label("distance"), jaccard.label("jaccard")
        return (
            select(cand.c.left_id, cand.c.right_id, d, j)
            .join(a, getattr(a, pk_name) == cand.c.left_id)
            .join(b, getattr(b, pk_name) == cand.c.right_id)
            .where(keep)
            .order_by(j.desc().nulls_last(), d, cand.c.left_id, cand.c.right_id)
        )

    # -- moving rows to the model's rule ------------------------------------------------------

    @classmethod
    def recompute_sketches(cls, bind: Any, *, batch_size: int = 1000) -> int:
        """Recompute ``simdb_sketch`` and the band keys (and set ``simdb_rule``) from the text of
        every row whose ``simdb_rule`` is not the model's (:meth:`sketch_rule`): rows written under
        rule 1 move to rule 2; and of every rule-2 row with a sketch but no band keys (written
        before the keys existed, or by a Core insert without them), so this is how they are filled. ``bind``: a ``Session`` or ``Connection``; runs in its transaction, ``batch_size``
        rows at a time in primary-key order; returns the number of rows changed (0 once done).

        Core ``UPDATE`` s: objects already loaded in a Session keep their old values until
        expired or refreshed. ``fp`` is left as is (the candidate Fingerprinter is the same under
        every rule). Until it has run, old rows keep answering under rule 1, so it can run at
        any time, in pieces (each call's transaction committed apart)."""
        source = getattr(cls, "__simdb_text__", None)
        if not source:
            raise CollectionConfigError(f"{cls.__name__} has no __simdb_text__: no text to recompute sketches from")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an int >= 1, got {batch_size!r}")
        pk = list(inspect(cls).primary_key)
        if len(pk) != 1:
            raise InvalidArgumentError(f"recompute_sketches needs a single-column primary key, {cls.__name__} has {len(pk)}")
        table, rule = inspect(cls).local_table, cls.sketch_rule()
        text_col = inspect(cls).get_property(source).columns[0]
        todo = table.c.simdb_rule.is_distinct_from(rule)
        if rule == MODEL_RULE:  # a rule-2 sketch exists exactly when the text has band keys
            todo = or_(todo, table.c.simdb_band0.is_(None) & table.c.simdb_sketch.is_not(None))
        todo = select(pk[0], text_col).where(todo).order_by(pk[0]).limit(batch_size)
        bands = {name: bindparam(f"row_{name}", type_=Integer) for name in BAND_COLUMNS}
        write = (
            update(table)
            .where(pk[0] == bindparam("row_pk"))
            .values(simdb_sketch=bindparam("row_sketch", type_=ARRAY(Integer)), simdb_rule=rule, **bands)
        )
        changed, last = 0, None
        while True:
            rows = bind.execute(todo if last is None else todo.where(pk[0] > last)).all()
            if not rows:
                return changed
            bind.execute(write, [cls._recomputed(key, body) for key, body in rows])
            changed += len(rows)
            last = rows[-1][0]


    @classmethod
    def _recomputed(cls, key: Any, body: str | None) -> dict[str, Any]:
        keys = {f"row_{name}": value for name, value in band_values(cls.band_keys(body)).items()}
        return {"row_pk": key, "row_sketch": cls.sketch_text(body), **keys}


def _fill_sketch(mapper, connection, target) -> None:
    """Keep ``simdb_sketch`` in step with the text, as ``SimhashMixin`` keeps ``fp``: recomputed
    when the text changed (or on insert), unless the application set the sketch itself; and
    ``simdb_rule`` with it. Whenever the sketch is written (by this hook or by the application,
    e.g. from ``Model.sketch_text``), the rule is the model's (:meth:`~VerifiedSimhashMixin.sketch_rule`)
    unless the application set ``simdb_rule`` too: a sketch of another rule must say which. The band
    keys follow: the text's rule-2 keys on a rule-2 row, NULL on any other (unless set by the application)."""
    model = type(target)
    state = inspect(target)
    source = getattr(model, "__simdb_text__", None)
    sketch_set = bool(state.attrs.simdb_sketch.history.added)
    if source and not sketch_set and (state.pending or state.attrs[source].history.has_changes()):
        target.simdb_sketch = model.sketch_text(getattr(target, source))
        sketch_set = True
    if (sketch_set or state.pending) and not state.attrs.simdb_rule.history.added:
        target.simdb_rule = model.sketch_rule()
    if (sketch_set or state.pending) and not state.attrs[BAND_COLUMNS[0]].history.added:
        keys = model.band_keys(getattr(target, source)) if source and target.simdb_rule == MODEL_RULE else None
        for name, value in band_values(keys).items():
            setattr(target, name, value)


event.listen(VerifiedSimhashMixin, "before_insert", _fill_sketch, propagate=True)
event.listen(VerifiedSimhashMixin, "before_update", _fill_sketch, propagate=True)
