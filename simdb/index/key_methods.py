"""``SimhashIndex.near_key``: the near-duplicates of a stored key, by the collection's rule.

Why a method of its own: a key's row already holds everything a text query computes (the
fingerprint, and in a verified collection the sketch and band keys), so a query by key needs
no text, yet it must give the answer ``near(text)`` gives for the text stored under the key.
Looking the key's fingerprint up by Hamming distance (what ``simdb query --key`` did) answers
another question: it keeps copies the rule excludes and misses the rule's pairs farther apart
than k bits. Here the stored sketch goes through the same pipeline as a text query: candidates
(the band keys in a banded collection, else the rows within the radius K), then the
verification stage (:func:`simdb.results.verified_matches`).

A mixin of :class:`simdb.index.SimhashIndex`, kept apart so that the facade stays a page long;
it holds no SQL (the statements run in :mod:`simdb.store`).
"""

from __future__ import annotations

from simdb.core import validate as _validate
from simdb.index.duplicates import DuplicatesMixin
from simdb.index.search_methods import by_current_rule
from simdb.results import Match
from simdb.store.rows import key_query_row

__all__ = ["KeySearchMixin"]


class KeySearchMixin(DuplicatesMixin):
    """near_key of :class:`simdb.index.SimhashIndex` (see the module docstring)."""

    @by_current_rule
    def near_key(
        self, key: str, k: int | None = None, limit: int | None = None, *, min_jaccard: float | None = None,
        verify: bool | None = None,
    ) -> list[Match]:
        """The near-duplicates of the row stored under ``key`` (itself excluded): the answer of
        ``near(text)`` for the text stored under ``key``, less the key itself, computed from the
        stored row (no text needed).

        **Verified collection**: the stored sketch is verified against the candidates' stored
        sketches (Jaccard >= ``min_jaccard``, default the collection's), sorted by Jaccard (highest
        first), distance, key. ``verify=False``, or a row stored by fingerprint (no sketch): the
        rows within Hamming distance ``k`` (default 3), by distance then key. A row whose text
        had no features has no near-duplicates: []. Raises ``KeyNotFoundError`` (a ``KeyError``) for a key not stored."""
        key = _validate.check_key(key)
        limit = _validate.check_limit(limit)
        row = key_query_row(self.connection(), self.collection_id, key)
        if row is None:
            raise _validate.key_not_found(key, self.collection)
        return self.rule.near_row(self.connection(), self.collection_id, key, row, k, limit, min_jaccard, verify,
                                  self._radii, self.collection)
