"""The bottom-k sketch Jaccard as an inline SQL expression, for tables simdb does not own.

Why inline and not ``simdb_sketch_jaccard(a, b, k)``: that function is created by simdb's
own migration ``simdb_0006_verified``, which a host application's database (a Django or
SQLAlchemy project keeping fingerprints in its own tables) usually never runs. A verified
model helper (:mod:`simdb.sqlalchemy.verified`, :mod:`simdb.django.verified`) that called the
function would fail there with "function does not exist", or, worse, silently depend on
whichever version someone installed by hand. The expression below is the body of that
function with ``a``, ``b`` and ``k`` substituted, so it is the same maths
(:func:`simdb.core.sketch.sketch_jaccard`: of the ``k`` smallest values of ``a | b``, the share
present in both; NULL when either side is NULL or empty), needs nothing installed, and is
checked against the Python by a property test (tests/test_model_verified.py).

Its cost: a correlated scalar subquery per row it is evaluated on. The helpers evaluate it
only on candidate rows (those already within the candidate radius by the block indexes),
a handful per query.

The derived tables are named ``simdb_sj_*`` so that a host table aliased ``t`` or ``u``
cannot be shadowed by them inside the expression.
"""

from __future__ import annotations

import re

__all__ = ["SKETCH_JACCARD_TEMPLATE", "render_sketch_jaccard"]

#: ``{a}``, ``{b}``: int4[] expressions (sorted or not; duplicates are ignored); ``{k}``: the
#: sketch size. Each placeholder may occur more than once (see :func:`render_sketch_jaccard`).
SKETCH_JACCARD_TEMPLATE = (
    "(SELECT CASE WHEN count(*) = 0 THEN NULL"
    " ELSE (count(*) FILTER (WHERE simdb_sj_t.n = 2))::float8 / count(*) END"
    " FROM (SELECT simdb_sj_u.v, count(*) AS n FROM ("
    "SELECT DISTINCT simdb_sj_x AS v FROM unnest({a}) simdb_sj_x"
    " UNION ALL SELECT DISTINCT simdb_sj_y FROM unnest({b}) simdb_sj_y) simdb_sj_u"
    " GROUP BY simdb_sj_u.v ORDER BY simdb_sj_u.v LIMIT {k}) simdb_sj_t"
    " WHERE cardinality({a}) > 0 AND cardinality({b}) > 0)"
)

_PLACEHOLDER = re.compile(r"\{([abk])\}")


def render_sketch_jaccard(parts: dict[str, tuple[str, list]]) -> tuple[str, list]:
    """The expression with each placeholder replaced by ``parts[name][0]``, and the bound
    parameters in the order they occur in the text (``parts[name][1]`` once per occurrence).

    Why the parameter list: Django compiles to positional ``%s`` placeholders, and ``a`` and
    ``b`` each occur twice, so their parameters must be repeated in text order. SQLAlchemy's
    compiler binds by name and passes empty lists.
    """
    params: list = []

    def sub(m: re.Match) -> str:
        sql, p = parts[m.group(1)]
        params.extend(p)
        return sql

    return _PLACEHOLDER.sub(sub, SKETCH_JACCARD_TEMPLATE), params
