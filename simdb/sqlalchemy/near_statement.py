"""A verified model's near-duplicates statement: built once per shape, bound to each query's values.

Why: building the SQLAlchemy expression of one verified query (four block-probe lists, a Jaccard
``CASE`` per rule, 14 band-key tests) took 2.3-3.9 ms of Python, as long as PostgreSQL took to answer
it on a 7,300-row table (``benchmarks/bench_model_bands.py``, 2026-11-27). The statement's *shape*
depends only on the model, the rules the query brings sketches under and whether it brings band
keys, so :func:`near_statement` builds each shape once (cached) with named bind parameters, and
:meth:`simdb.sqlalchemy.verified.VerifiedSimhashMixin.near_duplicates_of` binds a query's values
(:func:`near_values`) with ``Select.params``: still a plain ``Select`` to add ``.where()`` to.

The block probes are one array per block (``b0 = ANY(:probes0) OR ...``), not ``IN`` lists: an
``IN`` of the 548 probes of ``K = 11`` is 548 parameters, and their rendering and psycopg's
conversion of the long statement took more time than the server (15.4 against 6.8 ms p50 a query,
same answers). With one statement text per shape, SQLAlchemy's compiled cache and psycopg's
automatic prepared statements (after 5 executions on a connection) apply too.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Double, Integer, Select, any_, bindparam, func, inspect, or_, select
from sqlalchemy.dialects.postgresql import ARRAY

from simdb.core.probes import probes
from simdb.core.sketch.bands import BANDS
from simdb.sqlalchemy import Fingerprint, hamming_distance
from simdb.sqlalchemy.bands import band_clause

__all__ = ["near_statement", "near_values"]

BLOCKS = ("b0", "b1", "b2", "b3")


#: the statements built so far, by shape: a handful per model (a dict, not an LRU: the shapes are few)
_STATEMENTS: dict[tuple[Any, tuple[int, ...], bool], Select] = {}


def near_statement(model: Any, rules: tuple[int, ...], banded: bool) -> Select:
    """``SELECT <model>, distance, jaccard`` of ``model`` for a query with sketches under ``rules``
    (sorted) and, if ``banded``, band keys, built on first use; its values are bound by
    :func:`near_values`. (Two threads building one shape at once build two equal statements, and
    one of them is kept: harmless.)"""
    key = (model, rules, banded)
    statement = _STATEMENTS.get(key)
    if statement is None:
        statement = _STATEMENTS[key] = _build(model, rules, banded)
    return statement


def _build(model: Any, rules: tuple[int, ...], banded: bool) -> Select:
    """The statement of :func:`near_statement`.

    Candidates: ``fp`` within ``:simdb_radius`` bits through the block indexes, or (``banded``) two
    band keys shared; kept when the Jaccard under the row's rule is ``>= :simdb_min_jaccard`` or,
    with nothing to compare, the distance ``<= :simdb_k``. Ordered by jaccard (NULL last), distance,
    primary key."""
    fp = bindparam("simdb_fp", type_=Fingerprint())
    distance = hamming_distance(model.fp, fp)
    jaccard = model._jaccard(model, {n: bindparam(f"simdb_sketch{n}", type_=ARRAY(Integer)) for n in rules})
    keep = func.coalesce(
        jaccard >= bindparam("simdb_min_jaccard", type_=Double),
        distance <= bindparam("simdb_k", type_=Integer),
        type_=Boolean,
    )
    blocks = or_(*(getattr(model, b) == any_(bindparam(f"simdb_probes{i}", type_=ARRAY(Integer))) for i, b in enumerate(BLOCKS)))
    candidates: Any = blocks & (distance <= bindparam("simdb_radius", type_=Integer))
    if banded:
        candidates = or_(candidates, band_clause(model, [bindparam(f"simdb_key{i}", type_=Integer) for i in range(BANDS)]))
    d, j = distance.label("distance"), jaccard.label("jaccard")
    return select(model, d, j).where(candidates, keep).order_by(j.desc().nulls_last(), d, *inspect(model).primary_key)


def near_values(fp: int, sketches: dict[int, list[int] | None], keys: list[int] | None, k: int, min_jaccard: float, radius: int) -> dict[str, Any]:
    """The bind values of :func:`near_statement` for one query (all already checked by the caller):
    ``radius`` is the candidate radius (``K`` with sketches, else ``k``)."""
    values: dict[str, Any] = {"simdb_fp": fp, "simdb_k": k, "simdb_min_jaccard": min_jaccard, "simdb_radius": radius}
    values.update({f"simdb_probes{i}": block for i, block in enumerate(probes(fp, radius))})
    values.update({f"simdb_sketch{n}": sketch for n, sketch in sketches.items()})
    if keys is not None:
        values.update({f"simdb_key{i}": key for i, key in enumerate(keys)})
    return values
