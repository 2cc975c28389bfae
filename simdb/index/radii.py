"""The adaptive probe radii of an index's look-ups, from the table's bucket sizes (``pg_stats``).

Why: a fingerprint's four 16-bit blocks are probed to radii that add up to ``k``; when one block
value is shared by many rows (a heavy bucket), probing another block further reaches the same
answer with far fewer rows read (:func:`simdb.core.bits.choose_radii`). Only the amount of work
changes, never the answer. The statistics are read at most once a minute, and a query planned only
when a heavy bucket lies within reach of one of its probes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from simdb.core.bits import MASKS, MAX_RADIUS, BucketTable, block_values, choose_radii
from simdb.store import candidates as _candidates
from simdb.store import sql as _sql

__all__ = ["HEAVY_BUCKET_MIN", "AdaptiveRadii"]

#: a block value counts as heavy from this many rows (see AdaptiveRadii.bucket_sizes)
HEAVY_BUCKET_MIN = 100.0


class AdaptiveRadii:
    """``radii(fp, k)``: the probe radii of a query, or None for the even ones (not ``adaptive``, ``k``
    = 0, no statistics, or no heavy bucket within reach). ``connection()``: the connection that reads
    the statistics (the index's, of the calling thread)."""

    def __init__(self, connection: Callable[[], Any], adaptive: bool):
        self.connection = connection
        #: pick the radii per query (``SimhashIndex(adaptive=...)``)
        self.adaptive = adaptive
        self._stats: tuple[float, BucketTable | None, float] | None = None
        self._heavy_near: list[set[int]] = [set(), set(), set(), set()]

    def __call__(self, fp: int, k: int) -> tuple[int, ...] | None:
        if not self.adaptive or k == 0:
            return None
        sizes, default = self.bucket_sizes()
        if not sizes:
            return None
        if not any(b in heavy for b, heavy in zip(block_values(fp), self._heavy_near)):
            return None  # no heavy bucket within reach of any probe: the even radii
        return choose_radii(fp, k, sizes, default_size=default)

    def planned(self, k: int) -> bool:
        """Does a batch at radius ``k`` plan its queries' radii (adaptive, and statistics to plan by)?"""
        return self.adaptive and k > 0 and bool(self.bucket_sizes()[0])

    def bucket_sizes(self) -> tuple[BucketTable | None, float]:
        """Heavy block values from pg_stats (table-wide), refreshed at most once a minute."""
        now = time.monotonic()
        if self._stats is not None and now - self._stats[0] < 60.0:
            return self._stats[1], self._stats[2]
        sizes: BucketTable | None = None
        default = 1.0
        try:
            n, rows = _candidates.bucket_stats(self.connection())
            default = max(n / 65536.0, 1.0)
            found: list[dict[int, float]] = [dict() for _ in range(4)]
            # Only buckets far above what uniform fingerprints give (Poisson tail over
            # 65,536 buckets) and big enough to matter change the choice of radii.
            heavy = max(4.0 * default, default + 8.0 * default**0.5, HEAVY_BUCKET_MIN)
            for att, vals, freqs in rows:
                if not vals:
                    continue
                b = _sql.BLOCK_COLUMNS.index(att)
                for v, f in zip(vals, freqs):
                    est = f * n
                    if est >= heavy:
                        found[b][int(v)] = est
            if any(found):
                sizes = BucketTable(found, default)
                # block values within 2 bits of a heavy one (the farthest a probe reaches)
                self._heavy_near = [
                    {v ^ m for v in found[b] for m in MASKS[MAX_RADIUS]} for b in range(4)
                ]
        except Exception:  # statistics are an optimisation only
            sizes = None
        self._stats = (now, sizes, default)
        return sizes, default

    def refresh(self) -> None:
        """Forget the cached statistics (read again by the next look-up)."""
        self._stats = None
