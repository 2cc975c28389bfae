"""Model rule 2's band keys on a Django model: the 14 indexed columns and the candidate condition.

A rule-2 row stores the 14 LSH band keys of its character 4-grams, and a row sharing at least
:data:`~simdb.core.model_verifier.MODEL_MIN_SHARED` (2) of them with the query is a candidate
whatever the distance (:mod:`simdb.core.model_verifier` says why); the verification (the sketch
Jaccard) decides as for any other candidate.

Why the condition is written as it is (:class:`SharedBands`): a count of equalities alone is no
index condition, so it is preceded by the OR of the 14 equalities, which PostgreSQL answers with a
``BitmapOr`` of the 14 btree indexes (together with the block indexes of the ``fp__near`` half of
the candidate condition); the count then filters the few rows that share one key by chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import F, Func

from simdb.core.model_verifier import BAND_COLUMNS, MODEL_MIN_SHARED, MODEL_RULE
from simdb.errors import InvalidArgumentError, InvalidTypeError

from ._common import text_band_keys

__all__ = ["SharedBands", "band_field", "band_values"]


def band_field() -> models.IntegerField:
    """One band-key column: a plain nullable ``int4`` with a btree index (Django's own field, so a
    project's migration needs no simdb import for it). NULL on rows without keys: rule 1, a model's
    own verifier, no text."""
    return models.IntegerField(null=True, blank=True, editable=False, db_index=True)


def band_values(rule: int, text: str | None) -> dict[str, int | None]:
    """The band columns of a row written under ``rule`` from ``text``: the keys for a rule-2 row with
    word characters, else NULL (only rule 2 has keys; a NULL never equals a query's key)."""
    keys = text_band_keys(text) if rule == MODEL_RULE else None
    return {name: None if keys is None else keys[i] for i, name in enumerate(BAND_COLUMNS)}


class SharedBands(Func):
    """True for the rows sharing at least ``min_shared`` of the query's band ``keys``, position by
    position (``simdb_band{i} = keys[i]``):

        (simdb_band0 = %s OR ... OR simdb_band13 = %s)
        AND (((simdb_band0 = %s) IS TRUE)::int + ... ) >= min_shared

    ``IS TRUE`` counts a NULL column (a row without keys) as no match, not as an unknown sum. A
    ``Func`` over the 14 columns: Django resolves and copies them; only the SQL is written here."""

    output_field = models.BooleanField()

    def __init__(self, keys: Sequence[int], min_shared: int = MODEL_MIN_SHARED) -> None:
        if not isinstance(keys, (list, tuple)) or not all(type(k) is int for k in keys):
            raise InvalidTypeError("keys must be a list of int (simdb.core.model_verifier.model_band_keys(text))")
        if len(keys) != len(BAND_COLUMNS):
            raise InvalidArgumentError(f"keys must hold {len(BAND_COLUMNS)} band keys, got {len(keys)}")
        super().__init__(*(F(name) for name in BAND_COLUMNS))
        self.keys, self.min_shared = list(keys), int(min_shared)

    def as_sql(self, compiler, connection, **extra_context):
        cols: list[str] = []
        col_params: list[list[Any]] = []
        for column in self.source_expressions:
            sql, params = compiler.compile(column)
            cols.append(sql)
            col_params.append(list(params))
        any_sql = " OR ".join(f"{c} = %s" for c in cols)
        count_sql = " + ".join(f"(({c} = %s) IS TRUE)::int" for c in cols)
        params: list[Any] = []
        for p, key in zip(col_params, self.keys):
            params += [*p, key]
        return f"(({any_sql}) AND ({count_sql}) >= %s)", [*params, *params, self.min_shared]
