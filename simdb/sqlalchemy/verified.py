"""Verified near-duplicates on an application's own SQLAlchemy models, in two stages.

:class:`VerifiedSimhashMixin` is :class:`simdb.sqlalchemy.SimhashMixin` plus the nullable columns
``simdb_sketch int4[]``, ``simdb_rule smallint`` and ``simdb_band0..13 int4``, and its queries answer
with the model rules versioned in :mod:`simdb.core.model_verifier` (which says why a rule is recorded
per row, and why rule-2 rows have band keys; docs/verified-models.md). New rows are written under
rule 2; rows with ``simdb_rule`` NULL are answered by rule 1 until
:meth:`VerifiedSimhashMixin.recompute_sketches` moves them.

1. *Candidates*: rows whose ``fp`` is within the candidate radius ``K`` (11, the same for every
   rule) of the query's fingerprint, by the same block-index probes as ``near_clause``; **or**
   rule-2 rows sharing at least 2 of the query's 14 band keys.
2. *Verification*: the bottom-k sketch Jaccard of the row's ``simdb_sketch`` and the query's
   sketch **under the row's own rule** (the query is sketched under each rule), computed inline in
   SQL (:class:`sketch_jaccard`, :func:`simdb.store.sql.render_sketch_jaccard`: the host database needs no function
   of simdb's), must be >= ``min_jaccard``.

Why a separate, opt-in mixin rather than changing ``SimhashMixin``: the mixin describes the
columns of *existing* host tables (their migrations were generated from it); new columns and a
new fingerprinter would change every user's schema and the meaning of every stored ``fp`` on
upgrade. Why ``fp`` comes from :func:`simdb.core.model_verifier.model_fingerprinter` and cannot
be set: the radius ``K = 11`` was measured for that Fingerprinter only; with another one the
candidate stage would lose pairs without saying so.

Rows without a sketch (``fp`` set by hand, a text with no word characters), rows of a rule the
query has no sketch for, and queries without a sketch (an ``int`` fingerprint) have nothing to
verify with: they are answered by Hamming distance ``<= k`` (default 3) and carry ``jaccard =
None``, exactly as a verified collection answers them (:meth:`simdb.core.sketch.Verifier.judge`).

**The SQL shape of the band keys**, which decides the plan (:func:`band_clause`, :func:`band_pairs`):

* a query's clause is ``(b0 = :k0 OR ... OR b13 = :k13) AND (b0 = :k0)::int + ... >= 2``: the
  first part is what PostgreSQL turns into a ``BitmapOr`` of the 14 btrees (a fixed number of
  index probes whatever the table's size); the count only filters the rows they return;
* the pairs are 14 self-equi-joins, one per band column (each a hash or merge join on one
  btree-ordered column), counted per pair: a pair sharing two keys appears in two of them.

Rows other than rule 2 are never band candidates, even if a stale key were left on them: their
sketches are of another scheme, and the keys were measured for rule 2's Jaccard only.

**The near-duplicates statement: built once per shape, bound to each query's values.**

Why: building the SQLAlchemy expression of one verified query (four block-probe lists, a Jaccard
``CASE`` per rule, 14 band-key tests) took 2.3-3.9 ms of Python, as long as PostgreSQL took to answer
it on a 7,300-row table (``benchmarks/bench_model_bands.py``, 2026-11-27). The statement's *shape*
depends only on the model, the rules the query brings sketches under and whether it brings band
keys, so :func:`near_statement` builds each shape once (cached) with named bind parameters, and
:meth:`VerifiedSimhashMixin.near_duplicates_of` binds a query's values
(:func:`near_values`) with ``Select.params``: still a plain ``Select`` to add ``.where()`` to.

The block probes are one array per block (``b0 = ANY(:probes0) OR ...``), not ``IN`` lists: an
``IN`` of the 548 probes of ``K = 11`` is 548 parameters, and their rendering and psycopg's
conversion of the long statement took more time than the server (15.4 against 6.8 ms p50 a query,
same answers). With one statement text per shape, SQLAlchemy's compiled cache and psycopg's
automatic prepared statements (after 5 executions on a connection) apply too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import (
    Boolean,
    Double,
    Integer,
    Select,
    SmallInteger,
    and_,
    any_,
    bindparam,
    case,
    cast,
    event,
    false,
    func,
    inspect,
    literal,
    null,
    or_,
    select,
    union,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Mapped, aliased, declared_attr, mapped_column
from sqlalchemy.sql.functions import FunctionElement

from simdb.core.bits import probes, to_unsigned
from simdb.core.fingerprint import query_fingerprint
from simdb.core.model_verifier import (
    BAND_COLUMNS,
    MODEL_MIN_SHARED,
    MODEL_RULE,
    MODEL_RULES,
    OWN_RULE,
    RULE_COLUMN,
    check_model_verifier,
    model_band_keys,
    model_fingerprinter,
    model_verifier,
    rule_of,
)
from simdb.core.sketch import Verifier, check_min_jaccard
from simdb.core.sketch.bands import BANDS
from simdb.core.validate import check_fp, check_k
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy import BLOCK_NAMES, Fingerprint, SimhashMixin, hamming_distance
from simdb.store.sql import render_sketch_jaccard

__all__ = ["QuerySignature", "VerifiedSimhashMixin", "sketch_jaccard"]


class sketch_jaccard(FunctionElement):
    """``sketch_jaccard(a, b, size)``: the bottom-``size`` Jaccard of two int4[] sketches as an
    inline SQL expression (no database function needed; NULL when either side is NULL/empty).

    ``a`` and ``b`` are columns or expressions; a Python list is sent as ``int4[]``.
    """

    type = Double()
    name = "sketch_jaccard"
    inherit_cache = True

    def __init__(self, a: Any, b: Any, size: int) -> None:
        super().__init__(_sketch_expr(a), _sketch_expr(b), literal(int(size), Integer))


def _sketch_expr(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return literal(list(value), ARRAY(Integer))
    return value


@compiles(sketch_jaccard)
def _compile_sketch_jaccard(element: sketch_jaccard, compiler: Any, **kw: Any) -> str:
    a, b, k = element.clauses.clauses
    sql, _ = render_sketch_jaccard(
        {"a": (compiler.process(a, **kw), []), "b": (compiler.process(b, **kw), []), "k": (compiler.process(k, **kw), [])}
    )
    return sql


def _band_column(cls: Any) -> Mapped[int | None]:
    """One band key: nullable (only rule-2 rows with word characters have keys) and indexed (the
    query's ``BitmapOr``); the default index name ``ix_<table>_simdb_band<i>`` is the one
    :mod:`simdb.alembic` creates, so autogenerate finds nothing to change."""
    return mapped_column(Integer, nullable=True, index=True)


class BandKeysMixin:
    """The 14 band-key columns of model rule 2 (:data:`BAND_COLUMNS`, declared below from the names:
    one declaration for 14 columns, so a change of :data:`BANDS` cannot leave one behind)."""


for _name in BAND_COLUMNS:
    setattr(BandKeysMixin, _name, declared_attr(_band_column))


def check_band_keys(keys: object) -> list[int] | None:
    """``keys`` as a list of :data:`BANDS` ints, or None (no band candidates)."""
    if keys is None:
        return None
    if not isinstance(keys, (list, tuple)) or len(keys) != BANDS or not all(type(k) is int for k in keys):
        raise InvalidTypeError(
            f"band_keys must be None or a list of {BANDS} ints (Model.query_signature(text).band_keys), got {keys!r:.80}"
        )
    return list(keys)


def band_values(keys: Sequence[int] | None) -> dict[str, int | None]:
    """``{"simdb_band0": key0, ...}``: what a row stores for ``keys`` (all NULL for None)."""
    return dict(zip(BAND_COLUMNS, keys if keys is not None else [None] * BANDS))


def _rule_two(row: Any) -> Any:
    return getattr(row, RULE_COLUMN) == MODEL_RULE


def band_clause(row: Any, keys: Sequence[Any]) -> Any:
    """The rows of ``row`` (the model or an alias) sharing at least two keys with ``keys`` (ints,
    or bind parameters: :func:`near_statement` binds them per query).

    Bound as parameters rather than rendered into the statement: with the probes as arrays and one
    statement per shape, parameters are the faster of the two
    (``benchmarks/bench_model_bands.py``: p50 9.9-10.0 against 11.7-13.1 ms)."""
    hits = [getattr(row, name) == key for name, key in zip(BAND_COLUMNS, keys)]
    shared = sum((cast(h, Integer) for h in hits[1:]), cast(hits[0], Integer))
    return and_(or_(*hits), shared >= MODEL_MIN_SHARED, _rule_two(row))


def band_pairs(a: Any, b: Any, a_id: Any, b_id: Any) -> Select:
    """``SELECT left_id, right_id`` of the rule-2 pairs (``left_id < right_id``) sharing at least
    two keys; ``a``, ``b``: two aliases of the model, ``a_id``, ``b_id``: their primary keys.
    Rows without a fingerprint are left out, as from every candidate stage (nothing to order by)."""
    joins = [
        select(a_id.label("left_id"), b_id.label("right_id"))
        .select_from(a)
        .join(b, getattr(b, name) == getattr(a, name))
        .where(a_id < b_id, _rule_two(a), _rule_two(b), a.fp.is_not(None), b.fp.is_not(None))
        for name in BAND_COLUMNS
    ]
    hits = union_all(*joins).subquery("band_hits")
    return (
        select(hits.c.left_id, hits.c.right_id)
        .group_by(hits.c.left_id, hits.c.right_id)
        .having(func.count() >= MODEL_MIN_SHARED)
    )


#: the statements built so far, by shape: a handful per model (a dict, not an LRU: the shapes are few)
_STATEMENTS: dict[tuple[Any, tuple[int, ...], bool], Select] = {}


def near_statement(model: Any, rules: tuple[int, ...], banded: bool) -> Select:
    """``SELECT <model>, distance, jaccard`` of ``model`` for a query with sketches under ``rules``
    (sorted) and, if ``banded``, band keys, built on first use; its values are bound by
    :func:`near_values`. (Two threads building one shape at once build two equal statements, and
    one of them is kept: harmless.)

    Candidates: ``fp`` within ``:simdb_radius`` bits through the block indexes, or (``banded``) two
    band keys shared; kept when the Jaccard under the row's rule is ``>= :simdb_min_jaccard`` or,
    with nothing to compare, the distance ``<= :simdb_k``. Ordered by jaccard (NULL last), distance,
    primary key."""
    key = (model, rules, banded)
    if key in _STATEMENTS:
        return _STATEMENTS[key]
    fp = bindparam("simdb_fp", type_=Fingerprint())
    distance = hamming_distance(model.fp, fp)
    jaccard = model._jaccard(model, {n: bindparam(f"simdb_sketch{n}", type_=ARRAY(Integer)) for n in rules})
    keep = func.coalesce(
        jaccard >= bindparam("simdb_min_jaccard", type_=Double),
        distance <= bindparam("simdb_k", type_=Integer),
        type_=Boolean,
    )
    blocks = or_(*(getattr(model, b) == any_(bindparam(f"simdb_probes{i}", type_=ARRAY(Integer))) for i, b in enumerate(BLOCK_NAMES)))
    candidates: Any = blocks & (distance <= bindparam("simdb_radius", type_=Integer))
    if banded:
        candidates = or_(candidates, band_clause(model, [bindparam(f"simdb_key{i}", type_=Integer) for i in range(BANDS)]))
    d, j = distance.label("distance"), jaccard.label("jaccard")
    statement = select(model, d, j).where(candidates, keep).order_by(j.desc().nulls_last(), d, *inspect(model).primary_key)
    _STATEMENTS[key] = statement
    return statement


def near_values(fp: int, sketches: dict[int, list[int] | None], keys: list[int] | None, k: int, min_jaccard: float, radius: int) -> dict[str, Any]:
    """The bind values of :func:`near_statement` for one query (all already checked by the caller):
    ``radius`` is the candidate radius (``K`` with sketches, else ``k``)."""
    values: dict[str, Any] = {"simdb_fp": fp, "simdb_k": k, "simdb_min_jaccard": min_jaccard, "simdb_radius": radius}
    values.update({f"simdb_probes{i}": block for i, block in enumerate(probes(fp, radius))})
    values.update({f"simdb_sketch{n}": sketch for n, sketch in sketches.items()})
    if keys is not None:
        values.update({f"simdb_key{i}": key for i, key in enumerate(keys)})
    return values


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
        check_k(k, default=None)
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
        pairs sharing 2 band keys (:func:`band_pairs`), kept when
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
