"""``VerifiedSimhashModel``: Django models answering with simdb's verified near-duplicate rule.

The model rules are :mod:`simdb.core.model_verifier`'s (which says why a rule is recorded per row,
and why rule-2 rows have band keys): rows written now answer by rule 2 (Jaccard of character
4-gram shingles >= 0.8), rows with ``simdb_rule`` NULL by rule 1 until :func:`recompute_sketches`
moves them. Candidates are the rows whose ``fp`` is within the candidate radius ``K`` (11) of the
query's, found through the block indexes (the ``fp__near`` lookup), or rule-2 rows sharing at least
two of the query's 14 band keys (:mod:`simdb.django.bands`); each is kept when the bottom-k sketch
Jaccard of its ``simdb_sketch`` and the query's sketch *under its row's rule* is >= the threshold,
computed in SQL by an inline expression (:func:`simdb.store.sql.render_sketch_jaccard`), so the project's database
needs none of simdb's functions or migrations.

Why a separate abstract model rather than a change to ``SimhashModel``: existing projects
generated their migrations from ``SimhashModel``; new columns and another fingerprinter
would change their schema and the meaning of their stored ``fp`` on upgrade. Why ``fp`` is
computed by :func:`simdb.core.model_verifier.model_fingerprinter` and ``simhash_fingerprinter``
cannot be overridden: ``K = 11`` was measured for that Fingerprinter; with another one candidates
would be lost silently.

Rows without a sketch (``fp`` stored by hand, a text without word characters) and queries
by ``int`` fingerprint have nothing to verify with: they are answered by Hamming distance
``<= k`` (default 3) with ``jaccard = None``, as a verified collection answers them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import FieldDoesNotExist
from django.db import models, router, transaction
from django.db.models import Expression, F, Func, Q, Value

from simdb.core.model_verifier import (
    BAND_COLUMNS,
    MODEL_RULE,
    MODEL_RULES,
    OWN_RULE,
    RULE_COLUMN,
    check_model_verifier,
    model_fingerprinter,
    model_verifier,
    rule_of,
)
from simdb.core.sketch import Verifier, check_min_jaccard
from simdb.core.validate import check_k
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.store.sql import render_sketch_jaccard

from ._common import int4_array, model_query, query_fingerprint, text_sketch
from .bands import SharedBands, band_field, band_values
from .fields import CheckedNear
from .functions import HammingDistance
from .models import SimhashModel, SimhashQuerySet

__all__ = [
    "SketchField",
    "SketchJaccard",
    "VerifiedSimhashManager",
    "VerifiedSimhashModel",
    "VerifiedSimhashQuerySet",
    "recompute_sketches",
]


#: :func:`rule_of` of each verifier a model has had, by the verifier object (``id`` -> (verifier, rule)):
#: a model's verifier is one object for the process, and comparing it field by field with the default
#: verifier (a new Verifier each time) cost calls into the core on every query and save
_RULES: dict[int, tuple[Verifier, int]] = {}


def _model_rule(verifier: Verifier) -> int:
    """:func:`rule_of` ``verifier``, computed once per verifier object."""
    known = _RULES.get(id(verifier))
    if known is None or known[0] is not verifier:
        if len(_RULES) > 64:  # verifiers made per call: keep the memo small
            _RULES.clear()
        known = _RULES[id(verifier)] = (verifier, rule_of(verifier))
    return known[1]


class _CandidateFingerprinter:
    """``simhash_fingerprinter`` of a verified model, on the class and on its instances (the
    ``fp`` field and the ``fp__near`` lookup read it from either)."""

    def __get__(self, obj: Any, owner: Any = None):
        return model_fingerprinter()


class SketchField(ArrayField):
    """``int4[]``: the bottom-k sketch of the model's ``simhash_source`` text, recomputed on save
    (``None`` for no text or a text without word characters), as ``fp`` is; on the same save, the
    instance's ``simdb_rule`` is set to the rule it was computed under (:func:`rule_of`) and its band
    columns to the text's keys under rule 2 (NULL under another), so a row's sketch, rule and keys
    never disagree. (``simdb_rule`` and the band columns come after this field in the model's fields,
    so the values set here are the ones written, by ``save()`` and ``bulk_create()`` alike.)"""

    description = "bottom-k sketch of a text's shingles (int4[])"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("base_field", models.IntegerField())
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance, add):
        source = getattr(model_instance, "simhash_source", None)
        if source:
            text = getattr(model_instance, source)
            verifier = getattr(model_instance, "simhash_verifier", None) or model_verifier()
            rule = _model_rule(verifier)
            setattr(model_instance, self.attname, None if text is None else text_sketch(verifier, text))
            setattr(model_instance, RULE_COLUMN, rule)
            for name, key in band_values(rule, text).items():
                setattr(model_instance, name, key)
        return super().pre_save(model_instance, add)


class SketchJaccard(Expression):
    """The bottom-``size`` Jaccard of a sketch field and a query sketch (a list of int), in SQL;
    NULL when either is NULL or empty. ``Post.objects.annotate(j=SketchJaccard("simdb_sketch", s))``.

    ``size``: the sketches' size, by default that of the rule new rows are written under (256); a
    row's sketch is comparable only with a query sketch of its own rule (its ``simdb_rule``)."""

    output_field = models.FloatField()

    def __init__(self, field: Any, sketch: list[int], size: int = MODEL_RULES[MODEL_RULE].size) -> None:
        super().__init__()
        if not isinstance(sketch, (list, tuple)) or not all(type(v) is int for v in sketch):
            raise InvalidTypeError("sketch must be a list of int (simdb.core.sketch.sketch(text))")
        self.sketch_of = F(field) if isinstance(field, str) else field
        self.sketch = list(sketch)
        self.size = int(size)
        self.literal = int4_array(self.sketch)  # once: the expression is copied and compiled per use

    def get_source_expressions(self):
        return [self.sketch_of]

    def set_source_expressions(self, exprs):
        (self.sketch_of,) = exprs

    def as_sql(self, compiler, connection):
        a_sql, a_params = compiler.compile(self.sketch_of)
        return render_sketch_jaccard(
            {"a": (a_sql, list(a_params)), "b": ("%s::int4[]", [self.literal]), "k": ("%s", [self.size])}
        )


class _Keep(Func):
    """``COALESCE(jaccard >= t, distance <= k)``: the Jaccard decides where there is one, else the
    distance (one evaluation of the Jaccard per candidate row).

    A ``Func`` (as :class:`_RuleJaccard` and :class:`~simdb.django.bands.SharedBands`) for Django's own
    handling of the source expressions: only the SQL is simdb's."""

    output_field = models.BooleanField()

    def __init__(self, jaccard: Any, distance: Any, t: float, k: int) -> None:
        super().__init__(jaccard, distance)
        self.t, self.k = t, k

    def as_sql(self, compiler, connection, **extra_context):
        jaccard, distance = self.source_expressions
        j_sql, j_params = compiler.compile(jaccard)
        d_sql, d_params = compiler.compile(distance)
        return f"COALESCE(({j_sql}) >= %s, ({d_sql}) <= %s)", [*j_params, self.t, *d_params, self.k]


#: the Jaccard of a row with nothing comparable (the distance decides, see :class:`_Keep`)
_NULL_JACCARD = Value(None, output_field=models.FloatField())


class _RuleJaccard(Func):
    """The Jaccard of a row's sketch with the query's sketch *under the row's rule*:

        CASE WHEN (simdb_rule = 1 OR simdb_rule IS NULL) THEN <Jaccard, rule 1's sketch>
             WHEN (simdb_rule = 2) THEN <Jaccard, rule 2's sketch> ELSE NULL END

    a ``WHEN`` for each rule under which the query has a sketch. ``sketches``: (rule, the sketch as
    :func:`int4_array` text, the rule's sketch size) each.

    Why one expression and not ``Case(When(Q(...), then=SketchJaccard(...)), ...)``, which writes
    the same SQL: Django copies and resolves every node of an expression tree each time the
    queryset uses it (the annotation, the filter on it, the ``ORDER BY``), and compares nodes by
    their constructor arguments, the sketches' 256 values; that tree cost about a millisecond of
    Python a query (``benchmarks/bench_django_verified.py``). Here two columns are resolved and the
    sketches compared as strings."""

    output_field = models.FloatField()

    def __init__(self, sketches: tuple[tuple[int, str, int], ...]) -> None:
        super().__init__(F(RULE_COLUMN), F("simdb_sketch"))
        self.sketches = sketches

    def as_sql(self, compiler, connection, **extra_context):
        rule, sketch_of = self.source_expressions
        r_sql, r_params = compiler.compile(rule)
        a_sql, a_params = compiler.compile(sketch_of)
        whens, params = [], []
        for number, literal, size in self.sketches:
            j_sql, j_params = render_sketch_jaccard({"a": (a_sql, list(a_params)), "b": ("%s::int4[]", [literal]), "k": ("%s", [size])})
            if number == 1:  # NULL: a row written before simdb_rule existed, under rule 1
                whens.append(f"WHEN ({r_sql} = %s OR {r_sql} IS NULL) THEN {j_sql}")
                params += [*r_params, number, *r_params, *j_params]
            else:
                whens.append(f"WHEN ({r_sql} = %s) THEN {j_sql}")
                params += [*r_params, number, *j_params]
        return f"CASE {' '.join(whens)} ELSE NULL END", params


def _text_query(verifier: Verifier, text: str) -> tuple[int | None, Any, bool, tuple[int, ...] | None]:
    """(the text's candidate fingerprint, the Jaccard expression of a candidate row with it, whether
    it has any sketch, its band keys or None).

    A model with the default verifier: :class:`_RuleJaccard`, each rule's rows compared with the
    query's sketch under that rule (NULL is rule 1); a row of another rule (0: written under a
    verifier the model no longer has) or a rule under which the query has no shingles gets NULL,
    nothing comparable, so the distance decides as for a sketchless row; rule-2 rows sharing two band
    keys are candidates too. A model with its own verifier: every row under that verifier, whatever
    its ``simdb_rule``, candidates within ``K`` bits only."""
    if _model_rule(verifier) == OWN_RULE:
        fp = query_fingerprint(text, model_fingerprinter())
        sk = text_sketch(verifier, text) if fp is not None else None
        return fp, (SketchJaccard("simdb_sketch", sk, verifier.size) if sk else _NULL_JACCARD), bool(sk), None
    fp, sketches, keys = model_query(text)
    return fp, (_RuleJaccard(sketches) if sketches else _NULL_JACCARD), bool(sketches), keys


class VerifiedSimhashQuerySet(SimhashQuerySet):
    def near_duplicates(self, query: Any, k: int = 3, *, min_jaccard: float | None = None, field: str = "fp"):
        """The verified near-duplicates of ``query``, annotated with ``distance`` and ``jaccard``,
        ordered by jaccard (highest first, NULL last), distance, pk.

        ``query``: a text (candidates within ``K`` bits or, under the default verifier, rule-2 rows
        sharing two of the text's 14 band keys; kept when Jaccard >= ``min_jaccard``,
        default ``simhash_verifier.min_jaccard``, each row compared under its own ``simdb_rule``),
        or an unsigned fingerprint (Hamming ``<= k`` only: nothing to verify with). ``k``: the
        radius of rows and queries without a sketch (or with none under the row's rule)."""
        verifier = self.model.simhash_verifier
        k = check_k(k, default=None)  # here only: the fp__near condition below takes it as checked
        if k > verifier.k:
            raise InvalidArgumentError(f"k (the Hamming radius of rows without a sketch) must be <= {verifier.k}, got {k}")
        t = verifier.min_jaccard if min_jaccard is None else check_min_jaccard(min_jaccard)
        if isinstance(query, str):
            fp, jaccard, sk, keys = _text_query(verifier, query)
        else:
            fp, jaccard, sk, keys = query_fingerprint(query), _NULL_JACCARD, False, None
        if fp is None:
            return self.none()
        candidates = Q(**{f"{field}__near": CheckedNear(fp, verifier.k if sk else k)})
        if keys is not None:
            candidates |= Q(SharedBands(keys))
        return (
            self.filter(candidates)
            .annotate(distance=HammingDistance(field, fp), jaccard=jaccard)
            .filter(_Keep(F("jaccard"), F("distance"), t, k))
            .order_by(F("jaccard").desc(nulls_last=True), "distance", "pk")
        )


VerifiedSimhashManager = models.Manager.from_queryset(VerifiedSimhashQuerySet)


class VerifiedSimhashModel(SimhashModel):
    """Abstract model: ``SimhashModel``'s ``fp`` and indexed ``b0..b3`` (``fp`` from the candidate
    Fingerprinter) plus ``simdb_sketch`` (:class:`SketchField`, nullable), both computed from
    ``simhash_source`` on save; ``objects.near_duplicates(text)`` answers by verified Jaccard.

    ``simdb_rule`` (nullable ``smallint``, set on save): the model rule of the row's sketch, NULL
    for rows written before the column (rule 1), 2 now, 0 for a model with its own verifier.

    ``simdb_band0..13`` (nullable ``int4``, each with a btree index, set on save): a rule-2 row's 14
    band keys (:func:`simdb.core.model_verifier.model_band_keys`), NULL on other rows; 14 plain
    ``IntegerField`` s (:func:`~simdb.django.bands.band_field`), added below from :data:`BAND_COLUMNS`.

    ``simhash_verifier``: a :class:`simdb.core.sketch.Verifier`; the default is model rule 2
    (threshold 0.8, radius 11, character 4-grams, sketch 256; pinned in
    :mod:`simdb.core.model_verifier`: see that module). Another one (``model_verifier(1)`` to stay
    on token 3-grams) makes every row compared under it.
    """

    simhash_verifier: Verifier = model_verifier()
    simhash_fingerprinter: Any = _CandidateFingerprinter()

    simdb_sketch = SketchField(null=True, blank=True)
    simdb_rule = models.SmallIntegerField(null=True, blank=True, editable=False)

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


# one field per band-key column, from the names (a change of BANDS cannot leave one behind); added
# before any subclass exists, so every concrete model inherits all 14 after simdb_rule
for _name in BAND_COLUMNS:
    VerifiedSimhashModel.add_to_class(_name, band_field())


def recompute_sketches(
    model: Any, *, source: str | None = None, batch_size: int = 1000, using: str | None = None, verifier: Verifier | None = None
) -> int:
    """Recompute ``simdb_sketch``, ``simdb_rule`` and the band columns of the rows of ``model``
    whose ``simdb_rule`` is not the model's (``IS DISTINCT FROM``: rows written before rule 2, NULL,
    are moved to it) and, under rule 2, of the rule-2 rows with a sketch but no band keys (written
    before the band columns existed: until then they are candidates within ``K`` bits only);
    returns how many rows were rewritten (0 when none is left). ``fp`` is the same under every
    rule, so it is left as it is.

    For a ``RunPython`` data migration, where ``apps.get_model(...)`` gives a historical model with
    the fields but none of the class attributes: ``source`` names the text field (default: the
    model's ``simhash_source``), ``verifier`` the model's verifier (default: its
    ``simhash_verifier``, else :func:`model_verifier`, rule 2; pass a model's own verifier here).
    Rows are read and written in primary-key batches of ``batch_size`` (``bulk_update``, no
    ``save()``: a historical model's save would not compute them), in one transaction on
    ``using`` (default: the router's database for writing ``model``), so a failure leaves no half.
    Why not at upgrade time: old rows stay answered correctly by rule 1 in the meantime, so this
    may run whenever the table's size allows (a second run finds nothing to do)."""
    is_model = isinstance(model, type) and issubclass(model, models.Model)  # a bool: ``model`` stays Any for mypy
    if not is_model:
        raise InvalidTypeError(f"model must be a Django model class, got {type(model).__name__}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise InvalidTypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
    source = getattr(model, "simhash_source", None) if source is None else source
    if not isinstance(source, str) or not source:
        raise InvalidArgumentError(f"source must name {model.__name__}'s text field (it has no simhash_source), got {source!r}")
    verifier = check_model_verifier(verifier or getattr(model, "simhash_verifier", None) or model_verifier(), "verifier")
    for name in (source, "simdb_sketch", RULE_COLUMN, *BAND_COLUMNS):
        try:
            model._meta.get_field(name)
        except FieldDoesNotExist:
            where = "source" if name == source else "model"
            raise InvalidArgumentError(
                f"{where}: {model.__name__} has no field {name!r}"
                + ("" if name == source else " (a VerifiedSimhashModel's: run makemigrations and migrate first)")
            ) from None
    rule = rule_of(verifier)
    db = using or router.db_for_write(model)
    stale = ~Q(**{RULE_COLUMN: rule})
    if rule == MODEL_RULE:  # a rule-2 row has keys iff it has a sketch (both need word characters)
        stale |= Q(**{RULE_COLUMN: rule, f"{BAND_COLUMNS[0]}__isnull": True, "simdb_sketch__isnull": False})
    todo = model._base_manager.using(db).filter(stale).order_by("pk")
    done, last = 0, None
    with transaction.atomic(using=db):
        while True:
            batch = todo if last is None else todo.filter(pk__gt=last)
            rows = list(batch.values_list("pk", source)[:batch_size])
            if not rows:
                return done
            objs = [
                model(pk=pk, simdb_sketch=None if text is None else verifier.sketch(text), **{RULE_COLUMN: rule},
                      **band_values(rule, text))
                for pk, text in rows
            ]
            model._base_manager.using(db).bulk_update(objs, ["simdb_sketch", RULE_COLUMN, *BAND_COLUMNS])
            done, last = done + len(rows), rows[-1][0]
