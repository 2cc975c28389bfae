"""Verified near-duplicates on an application's own SQLAlchemy models (issue 13's two stages).

:class:`VerifiedSimhashMixin` is :class:`simdb.sqlalchemy.SimhashMixin` plus one nullable
``simdb_sketch int4[]`` column, and its queries answer with the model rule pinned in
:mod:`simdb.core.model_verifier` (docs/verified-models.md): **near-duplicate = Jaccard of token 3-gram
shingles >= 0.8**. That was simdb collections' default before their character-gram rule; a model
keeps it (its table's stored sketches were computed under it), so its answers are not a new
collection's.

1. *Candidates*: rows whose ``fp`` is within the candidate radius ``K`` (``__simdb_verifier__.k``,
   11) of the query's fingerprint, by the same block-index probes as ``near_clause``.
2. *Verification*: the bottom-384 sketch Jaccard of the row's ``simdb_sketch`` and the
   query's, computed in SQL (:mod:`simdb.store.sketch_sql`), must be >= ``min_jaccard``.

Why a separate, opt-in mixin rather than changing ``SimhashMixin``: the mixin describes the
columns of *existing* host tables (their Alembic/Django migrations were generated from it).
A new column and a new fingerprinter would change every user's schema and the meaning of
every stored ``fp`` on upgrade. New models should use this mixin (the docs say so).

Why ``fp`` comes from :func:`simdb.core.model_verifier.model_fingerprinter` (the candidate
Fingerprinter of verified collections, pinned) and cannot be set: the radius ``K = 11`` was
measured (candidate recall 0.99 at J >= 0.8) for that Fingerprinter only; with another one the
candidate stage would lose pairs without saying so.

Rows without a sketch (``fp`` set by hand, a text with no word characters) and queries
without one (an ``int`` fingerprint) have nothing to verify with: they are answered by
Hamming distance ``<= k`` (default 3) and carry ``jaccard = None``, exactly as a verified
collection answers them (:meth:`simdb.core.sketch.Verifier.judge`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import Boolean, Double, Integer, Select, cast, event, false, func, inspect, literal, null, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Mapped, aliased, declared_attr, mapped_column
from sqlalchemy.sql.functions import FunctionElement

from simdb.core.fingerprint.simhash_function import query_fingerprint
from simdb.core.model_verifier import check_model_verifier, model_fingerprinter, model_verifier
from simdb.core.probes import check_k
from simdb.core.sketch import Verifier, check_min_jaccard
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy import SimhashMixin, hamming_distance, near_clause
from simdb.store.sketch_sql import render_sketch_jaccard

__all__ = ["VerifiedSimhashMixin", "sketch_jaccard"]


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


class VerifiedSimhashMixin(SimhashMixin):
    """``SimhashMixin`` + ``simdb_sketch`` (nullable ``int4[]``), answering by verified Jaccard.

    Class options: ``__simdb_text__`` (the text attribute ``fp`` and ``simdb_sketch`` are
    computed from on flush, as for ``SimhashMixin``) and ``__simdb_verifier__`` (a
    :class:`simdb.core.sketch.Verifier`: the threshold ``min_jaccard`` (0.8), the radius ``k``
    (11), the sketch size (384) and the shingle scheme, all pinned in
    :mod:`simdb.core.model_verifier` so that no simdb upgrade changes what the stored sketches mean). ``__simdb_fingerprinter__`` is refused (see the module).
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

    # -- what is stored ------------------------------------------------------------------

    @classmethod
    def simdb_fingerprinter(cls):
        return model_fingerprinter()

    @classmethod
    def sketch_text(cls, text: str | None) -> list[int] | None:
        """The sketch this model stores for ``text`` (None: no word characters, or no text)."""
        return None if text is None else cls.__simdb_verifier__.sketch(text)

    @classmethod
    def query_signature(cls, query: Any) -> tuple[int | None, list[int] | None]:
        """``(fingerprint, sketch)`` of a query: a text gets both, an int fingerprint no sketch.
        (The async helper computes this off the event loop.)"""
        if isinstance(query, str):
            return cls.fingerprint_text(query), cls.sketch_text(query)
        return query_fingerprint(query), None

    # -- queries ---------------------------------------------------------------------------

    @classmethod
    def _thresholds(cls, k: int, min_jaccard: float | None) -> tuple[int, float]:
        v = cls.__simdb_verifier__
        check_k(k)
        if k > v.k:
            raise InvalidArgumentError(f"k (the Hamming radius of rows without a sketch) must be <= {v.k}, got {k}")
        return k, v.min_jaccard if min_jaccard is None else check_min_jaccard(min_jaccard)

    @classmethod
    def near_duplicates(cls, query: Any, k: int = 3, *, min_jaccard: float | None = None) -> Select:
        """``SELECT <model>, distance, jaccard``: the verified near-duplicates of ``query``.

        ``query``: a text (both stages), or an unsigned fingerprint (Hamming ``<= k`` only:
        there is no sketch to verify with). ``k``: the Hamming radius for rows/queries without
        a sketch (0..K). ``min_jaccard``: default ``__simdb_verifier__.min_jaccard``.
        Ordered by jaccard (highest first, NULL last), distance, primary key; a plain
        :class:`~sqlalchemy.Select` to add ``.where()``/``.limit()`` to.
        """
        fp, sk = cls.query_signature(query)
        return cls.near_duplicates_of(fp, sk, k, min_jaccard=min_jaccard)

    @classmethod
    def near_duplicates_of(
        cls, fp: int | None, sketch: list[int] | None, k: int = 3, *, min_jaccard: float | None = None
    ) -> Select:
        """:meth:`near_duplicates` from a precomputed ``(fingerprint, sketch)`` (:meth:`query_signature`)."""
        k, t = cls._thresholds(k, min_jaccard)
        if sketch is not None and (not isinstance(sketch, (list, tuple)) or not all(type(v) is int for v in sketch)):
            raise InvalidTypeError("sketch must be a list of int (simdb.core.sketch.sketch(text)) or None")
        pk = list(inspect(cls).primary_key)
        if fp is None:  # no fingerprint: no candidates
            return select(cls, cast(null(), Integer).label("distance"), cast(null(), Double).label("jaccard")).where(false())
        distance = hamming_distance(cls.fp, fp)
        jaccard = sketch_jaccard(cls.simdb_sketch, list(sketch), cls.__simdb_verifier__.size) if sketch else cast(null(), Double)
        radius = cls.__simdb_verifier__.k if sketch else k
        # coalesce: the Jaccard decides when there is one, else the distance (one evaluation per row)
        keep = func.coalesce(jaccard >= t, distance <= k, type_=Boolean)
        d, j = distance.label("distance"), jaccard.label("jaccard")
        return (
            select(cls, d, j)
            .where(near_clause(cls.fp, (cls.b0, cls.b1, cls.b2, cls.b3), fp, radius), keep)
            .order_by(j.desc().nulls_last(), d, *pk)
        )

    @classmethod
    def near_pairs(cls, k: int = 3, *, min_jaccard: float | None = None) -> Select:
        """Every verified pair: ``SELECT left_id, right_id, distance, jaccard`` (``left_id <
        right_id``), the candidate pairs within ``K`` (``SimhashMixin.near_pairs``) kept when
        their Jaccard is >= ``min_jaccard`` or, with a sketch missing on either side, their
        distance is <= ``k``. Ordered by jaccard (highest first, NULL last), distance, ids."""
        k, t = cls._thresholds(k, min_jaccard)
        cand = super().near_pairs(cls.__simdb_verifier__.k).order_by(None).subquery("candidates")
        pk = list(inspect(cls).primary_key)
        pk_name = inspect(cls).get_property_by_column(pk[0]).key
        a, b = aliased(cls, name="left_row"), aliased(cls, name="right_row")
        jaccard = sketch_jaccard(a.simdb_sketch, b.simdb_sketch, cls.__simdb_verifier__.size)
        keep = func.coalesce(jaccard >= t, cand.c.distance <= k, type_=Boolean)
        j = jaccard.label("jaccard")
        return (
            select(cand.c.left_id, cand.c.right_id, cand.c.distance, j)
            .join(a, getattr(a, pk_name) == cand.c.left_id)
            .join(b, getattr(b, pk_name) == cand.c.right_id)
            .where(keep)
            .order_by(j.desc().nulls_last(), cand.c.distance, cand.c.left_id, cand.c.right_id)
        )


def _fill_sketch(mapper, connection, target) -> None:
    """Keep ``simdb_sketch`` in step with the text, as ``SimhashMixin`` keeps ``fp``: recomputed
    when the text changed (or on insert), unless the application set the sketch itself."""
    source = getattr(type(target), "__simdb_text__", None)
    if not source:
        return
    state = inspect(target)
    if state.attrs.simdb_sketch.history.added:
        return
    if state.pending or state.attrs[source].history.has_changes():
        target.simdb_sketch = type(target).sketch_text(getattr(target, source))


event.listen(VerifiedSimhashMixin, "before_insert", _fill_sketch, propagate=True)
event.listen(VerifiedSimhashMixin, "before_update", _fill_sketch, propagate=True)
