"""``VerifiedSimhashModel``: Django models answering with simdb's verified near-duplicate rule.

The rule (docs/near-duplicates.md, issue 13): **near-duplicate = Jaccard of token 3-gram
shingles >= 0.8**. Candidates are the rows whose ``fp`` is within the candidate radius ``K``
(11) of the query's, found through the block indexes (the ``fp__near`` lookup); each is kept
when the bottom-384 sketch Jaccard of its ``simdb_sketch`` and the query's is >= the threshold,
computed in SQL by an inline expression (:mod:`simdb.store.sketch_sql`), so the project's
database needs none of simdb's functions or migrations.

Why a separate abstract model rather than a change to ``SimhashModel``: existing projects
generated their migrations from ``SimhashModel``; a new column and another fingerprinter
would change their schema and the meaning of their stored ``fp`` on upgrade. New models
should subclass this one (the docs say so); it adds one nullable ``int4[]`` column.

Why ``fp`` is computed by :func:`simdb.core.model_verifier.model_fingerprinter` (the candidate
Fingerprinter of verified collections, pinned) and ``simhash_fingerprinter`` cannot be
overridden: ``K = 11`` was measured for that Fingerprinter; with another one candidates would
be lost silently.

Rows without a sketch (``fp`` stored by hand, a text without word characters) and queries
by ``int`` fingerprint have nothing to verify with: they are answered by Hamming distance
``<= k`` (default 3) with ``jaccard = None``, as a verified collection answers them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Expression, F, Value

from simdb.core.model_verifier import MODEL_SKETCH_SIZE, check_model_verifier, model_fingerprinter, model_verifier
from simdb.core.sketch import Verifier, check_min_jaccard
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.store.sketch_sql import render_sketch_jaccard

from ._common import check_k, query_fingerprint
from .functions import HammingDistance
from .models import SimhashModel, SimhashQuerySet

__all__ = [
    "SketchField",
    "SketchJaccard",
    "VerifiedSimhashManager",
    "VerifiedSimhashModel",
    "VerifiedSimhashQuerySet",
]


class _CandidateFingerprinter:
    """``simhash_fingerprinter`` of a verified model, on the class and on its instances (the
    ``fp`` field and the ``fp__near`` lookup read it from either)."""

    def __get__(self, obj: Any, owner: Any = None):
        return model_fingerprinter()


class SketchField(ArrayField):
    """``int4[]``: the bottom-k sketch of the model's ``simhash_source`` text, recomputed on save
    (``None`` for no text or a text without word characters), as ``fp`` is."""

    description = "bottom-k sketch of a text's token 3-gram shingles (int4[])"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("base_field", models.IntegerField())
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance, add):
        source = getattr(model_instance, "simhash_source", None)
        if source:
            text = getattr(model_instance, source)
            verifier = getattr(model_instance, "simhash_verifier", None) or model_verifier()
            setattr(model_instance, self.attname, None if text is None else verifier.sketch(text))
        return super().pre_save(model_instance, add)


class SketchJaccard(Expression):
    """The bottom-``size`` Jaccard of a sketch field and a query sketch (a list of int), in SQL;
    NULL when either is NULL or empty. ``Post.objects.annotate(j=SketchJaccard("simdb_sketch", s))``."""

    output_field = models.FloatField()

    def __init__(self, field: Any, sketch: list[int], size: int = MODEL_SKETCH_SIZE) -> None:
        super().__init__()
        if not isinstance(sketch, (list, tuple)) or not all(type(v) is int for v in sketch):
            raise InvalidTypeError("sketch must be a list of int (simdb.core.sketch.sketch(text))")
        self.sketch_of = F(field) if isinstance(field, str) else field
        self.sketch = list(sketch)
        self.size = int(size)

    def get_source_expressions(self):
        return [self.sketch_of]

    def set_source_expressions(self, exprs):
        (self.sketch_of,) = exprs

    def as_sql(self, compiler, connection):
        a_sql, a_params = compiler.compile(self.sketch_of)
        return render_sketch_jaccard(
            {"a": (a_sql, list(a_params)), "b": ("%s::int4[]", [self.sketch]), "k": ("%s", [self.size])}
        )


class _Keep(Expression):
    """``COALESCE(jaccard >= t, distance <= k)``: the Jaccard decides where there is one, else the
    distance (one evaluation of the Jaccard per candidate row)."""

    output_field = models.BooleanField()

    def __init__(self, jaccard: Any, distance: Any, t: float, k: int) -> None:
        super().__init__()
        self.jaccard, self.distance, self.t, self.k = jaccard, distance, t, k

    def get_source_expressions(self):
        return [self.jaccard, self.distance]

    def set_source_expressions(self, exprs):
        self.jaccard, self.distance = exprs

    def as_sql(self, compiler, connection):
        j_sql, j_params = compiler.compile(self.jaccard)
        d_sql, d_params = compiler.compile(self.distance)
        return f"COALESCE(({j_sql}) >= %s, ({d_sql}) <= %s)", [*j_params, self.t, *d_params, self.k]


class VerifiedSimhashQuerySet(SimhashQuerySet):
    def near_duplicates(self, query: Any, k: int = 3, *, min_jaccard: float | None = None, field: str = "fp"):
        """The verified near-duplicates of ``query``, annotated with ``distance`` and ``jaccard``,
        ordered by jaccard (highest first, NULL last), distance, pk.

        ``query``: a text (candidates within ``K`` bits, kept when Jaccard >= ``min_jaccard``,
        default ``simhash_verifier.min_jaccard``), or an unsigned fingerprint (Hamming ``<= k``
        only: nothing to verify with). ``k``: the radius of rows and queries without a sketch."""
        verifier = self.model.simhash_verifier
        check_k(k)
        if k > verifier.k:
            raise InvalidArgumentError(f"k (the Hamming radius of rows without a sketch) must be <= {verifier.k}, got {k}")
        t = verifier.min_jaccard if min_jaccard is None else check_min_jaccard(min_jaccard)
        if isinstance(query, str):
            fp, sk = query_fingerprint(query, model_fingerprinter()), verifier.sketch(query)
        else:
            fp, sk = query_fingerprint(query), None
        if fp is None:
            return self.none()
        jaccard = SketchJaccard("simdb_sketch", sk, verifier.size) if sk else Value(None, output_field=models.FloatField())
        return (
            self.filter(**{f"{field}__near": (fp, verifier.k if sk else k)})
            .annotate(distance=HammingDistance(field, fp), jaccard=jaccard)
            .filter(_Keep(F("jaccard"), F("distance"), t, k))
            .order_by(F("jaccard").desc(nulls_last=True), "distance", "pk")
        )


VerifiedSimhashManager = models.Manager.from_queryset(VerifiedSimhashQuerySet)


class VerifiedSimhashModel(SimhashModel):
    """Abstract model: ``SimhashModel``'s ``fp`` and indexed ``b0..b3`` (``fp`` from the candidate
    Fingerprinter) plus ``simdb_sketch`` (:class:`SketchField`, nullable), both computed from
    ``simhash_source`` on save; ``objects.near_duplicates(text)`` answers by verified Jaccard.

    ``simhash_verifier``: a :class:`simdb.core.sketch.Verifier` (threshold 0.8, radius 11, sketch 384,
    shingle scheme; all pinned in :mod:`simdb.core.model_verifier`: see that module).
    """

    simhash_verifier: Verifier = model_verifier()
    simhash_fingerprinter: Any = _CandidateFingerprinter()

    simdb_sketch = SketchField(null=True, blank=True)

    objects = VerifiedSimhashManager()

    class Meta:
        abstract = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "simhash_fingerprinter" in cls.__dict__ and not isinstance(cls.__dict__["simhash_fingerprinter"], _CandidateFingerprinter):
            raise CollectionConfigError(
                f"{cls.__name__}: a VerifiedSimhashModel fingerprints with simdb's candidate Fingerprinter "
                "(its candidate radius K was measured for that one only); drop simhash_fingerprinter, "
                "or use SimhashModel for a Hamming-only model with your own Fingerprinter"
            )
        check_model_verifier(cls.simhash_verifier, f"{cls.__name__}.simhash_verifier")
        super().__init_subclass__(**kwargs)
