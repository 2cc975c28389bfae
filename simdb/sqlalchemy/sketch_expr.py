"""``sketch_jaccard(a, b, size)`` as a SQLAlchemy expression: the verification stage of the verified
model helpers (:mod:`simdb.sqlalchemy.verified`, re-exported there), computed inline in SQL
(:mod:`simdb.store.sketch_sql`) so that a host database needs no function of simdb's installed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Double, Integer, literal
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from simdb.store.sketch_sql import render_sketch_jaccard

__all__ = ["sketch_jaccard"]


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
