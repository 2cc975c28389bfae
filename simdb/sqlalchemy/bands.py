"""The band-key candidates of model rule 2 on a host table (:mod:`simdb.sqlalchemy.verified`).

A rule-2 row stores the 14 LSH band keys of its text's character 4-grams
(:func:`simdb.core.model_verifier.model_band_keys`) in the indexed ``int4`` columns
:data:`~simdb.core.model_verifier.BAND_COLUMNS`; it is a candidate of a query when it shares at
least :data:`~simdb.core.model_verifier.MODEL_MIN_SHARED` (2) of them, key ``i`` with key ``i``.
Why, next to the ``K = 11`` block probes: a short text's fingerprint moves more bits per edit than
a long one's, so ``K`` alone misses about 7 % of the one-typo copies of 12-15-word comments that
are well inside the rule (12-14 bits apart at Jaccard 0.81-0.91); the keys' S-curve depends on the
Jaccard only (two shared keys at Jaccard 0.85: probability 0.998).

Kept apart from the mixin so that the SQL shape, which decides the plan, is in one place:

* a query's clause is ``(b0 = :k0 OR ... OR b13 = :k13) AND (b0 = :k0)::int + ... >= 2``: the
  first part is what PostgreSQL turns into a ``BitmapOr`` of the 14 btrees (a fixed number of
  index probes whatever the table's size); the count only filters the rows they return;
* the pairs are 14 self-equi-joins, one per band column (each a hash or merge join on one
  btree-ordered column), counted per pair: a pair sharing two keys appears in two of them.

Rows other than rule 2 (rule 1: ``simdb_rule`` NULL, or a model's own verifier: 0) are never band
candidates, even if a stale key were left on them: their sketches are of another scheme, and the
keys were measured for rule 2's Jaccard only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, Select, and_, cast, func, or_, select, union_all
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from simdb.core.model_verifier import BAND_COLUMNS, MODEL_MIN_SHARED, MODEL_RULE, RULE_COLUMN
from simdb.core.sketch.bands import BANDS
from simdb.errors import InvalidTypeError

__all__ = ["BandKeysMixin", "band_clause", "band_pairs", "band_values", "check_band_keys"]


def _band_column(cls: Any) -> Mapped[int | None]:
    """One band key: nullable (only rule-2 rows with word characters have keys) and indexed (the
    query's ``BitmapOr``); the default index name ``ix_<table>_simdb_band<i>`` is the one
    :mod:`simdb.alembic.verified` creates, so autogenerate finds nothing to change."""
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
    or bind parameters: :func:`simdb.sqlalchemy.near_statement.near_statement` binds them per query).

    Sent as parameters, not rendered into the statement: session 12 had rendered them
    (``literal_execute``) because parameters measured slower, but that was with the block probes
    sent as 548 ``IN`` parameters, which made every statement's text different. With the probes as
    arrays and one statement per shape, parameters are the faster of the two
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
