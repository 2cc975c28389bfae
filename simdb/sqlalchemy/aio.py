"""Async helpers for :class:`simdb.sqlalchemy.SimhashMixin` models with SQLAlchemy's ``AsyncSession``.

The mixin's queries are plain ``Select`` s, so ``await session.execute(Post.near_duplicates(fp))``
already works. What would block the event loop is fingerprinting the query *text*; these
helpers do that in the loop's executor first, then run the same ``Select`` on the session.

A :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin` model is recognised by its
``query_signature`` (duck typing: this module imports no model code): the text's fingerprint,
sketches (one per model rule its rows may hold) and band keys are computed off the loop and both
stages run (candidates within K bits or sharing two band keys), each row verified under its own rule, so the answers are
``(row, distance, jaccard)``; passing only the fingerprint would silently drop the
verification stage.
"""

from __future__ import annotations

import asyncio
from typing import Any

from simdb.core.validate import check_limit

__all__ = ["near_duplicates", "query_fingerprint"]


async def query_fingerprint(model: Any, query: Any) -> int | None:
    """``model.query_fingerprint(query)`` with texts fingerprinted off the event loop."""
    if isinstance(query, str):
        return await asyncio.get_running_loop().run_in_executor(None, model.fingerprint_text, query)
    return model.query_fingerprint(query)


async def near_duplicates(session: Any, model: Any, query: Any, k: int = 3, limit: int | None = None) -> list[tuple]:
    """``(row, distance)`` of ``model``'s rows within ``k`` bits of ``query`` (text or unsigned fp),
    nearest first (then primary key), through ``session`` (an ``AsyncSession``); ``limit`` rows at most.
    A text with no features matches nothing. For a verified model: ``(row, distance, jaccard)``,
    as ``model.near_duplicates(query, k)`` answers (``k``: the radius of rows without a sketch).

    ``limit`` is checked here, as ``AsyncSimhashIndex.near`` checks it (None or an int >= 1): sent
    as it came, a negative or non-int one failed in PostgreSQL and aborted the session's
    transaction, with the caller's pending writes in it."""
    limit = check_limit(limit)
    signature = getattr(model, "query_signature", None)
    if signature is not None:
        sig = await asyncio.get_running_loop().run_in_executor(None, signature, query)
        stmt = None if sig.fp is None else model.near_duplicates_of(sig.fp, sig.sketches, k, band_keys=sig.band_keys)
    else:
        fp = await query_fingerprint(model, query)
        stmt = None if fp is None else model.near_duplicates(fp, k)
    if stmt is None:
        return []
    if limit is not None:
        stmt = stmt.limit(limit)
    return [tuple(row) for row in (await session.execute(stmt)).all()]
