"""Table layouts for the exact all-pairs search: which bits each shuffle key covers.

Pigeonhole: two fingerprints within ``k`` agree on every bit of at least one table's
key, so joining on each table's key finds every pair. The layout (``k + 1`` blocks or
Manku's pairs of ``k + 2`` blocks) trades exploded rows against candidates; the cost
model picks the cheaper from measured per-row and per-candidate costs.
"""

from __future__ import annotations

import itertools

from simdb.core.bits import MASK64, to_signed
from simdb.errors import InvalidArgumentError
from simdb.spark.session import check_count, pyspark_functions

# Measured on 2 cores (pyspark 4.3, local[2]): one exploded row costs ~0.5 us
# (shuffle + sort + scan), one candidate comparison ~7 ns. Used by tables="auto".
ROW_COST_S = 0.5e-6
CANDIDATE_COST_S = 7e-9


def _block_ranges(m: int) -> list[tuple[int, int]]:
    """``m`` contiguous blocks over 64 bits, most significant first, as (shift, width)."""
    widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
    ranges, top = [], 64
    for w in widths:
        top -= w
        ranges.append((top, w))
    return ranges


def layout(k: int, scheme: str = "blocks") -> list[list[tuple[int, int]]]:
    """The tables used to find all pairs within ``k``: one list of (shift, width) bit ranges each.

    ``"blocks"``: ``k + 1`` blocks, one table per block (k=3: the store's four 16-bit
    blocks b0..b3). ``"manku"``: ``k + 2`` blocks, one table per pair of blocks
    (k=3: 10 tables keyed on 26 bits). Either way two fingerprints within ``k``
    agree on every bit of at least one table's key (pigeonhole), so the search is exact.
    """
    check_count(k, "k", 0, 62)
    if scheme == "blocks":
        return [[r] for r in _block_ranges(k + 1)]
    if scheme == "manku":
        blocks = _block_ranges(k + 2)
        return [[blocks[i], blocks[j]] for i, j in itertools.combinations(range(k + 2), 2)]
    raise InvalidArgumentError(f"tables (the scheme) must be 'blocks', 'manku' or 'auto', got {scheme!r}")


def _cost(n: int, tables: list) -> float:
    bits = min(sum(w for _, w in t) for t in tables)
    rows = n * len(tables)
    candidates = len(tables) * n * n / 2.0 / 2.0**bits
    return rows * ROW_COST_S + candidates * CANDIDATE_COST_S


def choose_scheme(n: int, k: int = 3) -> str:
    """``"blocks"`` or ``"manku"``: the cheaper for ``n`` uniform fingerprints by the measured costs."""
    return min(("blocks", "manku"), key=lambda s: _cost(n, layout(k, s)))


def _signed(u: int) -> int:
    return to_signed(u & MASK64)


def table_keys(tables):
    """Spark key expressions (one per table) and the fp-space masks, as signed ints."""
    F = pyspark_functions()
    fp = F.col("fp")
    ntab = len(tables)
    tbits = max(1, (ntab - 1).bit_length()) if ntab > 1 else 0
    keybits = max(sum(w for _, w in t) for t in tables)
    if keybits + tbits > 64:  # only k=0 ('blocks'): one table, the whole fingerprint
        raise AssertionError("layout does not fit in one 64-bit key")
    exprs, masks = [], []
    for t, ranges in enumerate(tables):
        expr, offset, mask = None, 0, 0
        for shift, width in reversed(ranges):
            mask |= ((1 << width) - 1) << shift
            if width == 64:
                part = fp
            else:
                part = F.shiftrightunsigned(fp, shift).bitwiseAND(F.lit((1 << width) - 1))
                if offset:
                    part = F.shiftleft(part, offset)
            expr = part if expr is None else expr.bitwiseOR(part)
            offset += width
        if tbits:
            expr = expr.bitwiseOR(F.lit(t << keybits))
        exprs.append(expr)
        masks.append(_signed(mask))
    return exprs, masks, keybits, tbits

