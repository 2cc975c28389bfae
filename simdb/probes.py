"""Which block values to look up for an exact Hamming search (generalized pigeonhole).

A 64-bit fingerprint is stored as four 16-bit blocks b0..b3 (b0 = most
significant), each with a btree. Give block i a radius t_i in {-1, 0, 1, 2}
with sum(t_i) = k - 3 (t_i = -1: do not probe the block). If a row matches no
probe, block i differs from the query's block in at least t_i + 1 bits, so the
whole fingerprint differs in at least sum(t_i + 1) = k + 1 bits: every row
within distance k shares at least one probed value. Probing a block with
radius t means looking up every 16-bit value within t bits of the query's
block: 1, 17 or 137 values (Qin et al., "GPH: Similarity Search in Hamming
Space", ICDE 2018; multi-index hashing, Norouzi et al., CVPR 2012).

Radii are spread evenly by default (k=0: 1 probe, 3: 4, 4: 20, 6: 52, 7: 68,
8: 188, 11: 548). Given estimates of bucket sizes (how many rows hold a block
value), :func:`choose_radii` instead picks the assignment with the fewest
expected candidates, e.g. skipping a block whose value is shared by many rows.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Mapping, Sequence

from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "BLOCKS",
    "MAX_K",
    "MAX_RADIUS",
    "ball",
    "check_k",
    "choose_radii",
    "even_radii",
    "probe_count",
    "probes",
    "radii_options",
]

BLOCKS = 4
BLOCK_BITS = 16
BLOCK_MASK = (1 << BLOCK_BITS) - 1
MAX_RADIUS = 2
#: the largest k the four 16-bit blocks answer exactly: sum(t_i) <= 4 * MAX_RADIUS
MAX_K = BLOCKS * MAX_RADIUS + BLOCKS - 1  # 11

# MASKS[t]: every 16-bit mask with at most t bits set (t = 0, 1, 2), smallest popcount first
_M1 = [1 << i for i in range(BLOCK_BITS)]
_M2 = [(1 << i) | (1 << j) for i in range(BLOCK_BITS) for j in range(i + 1, BLOCK_BITS)]
MASKS: dict[int, tuple[int, ...]] = {
    -1: (),
    0: (0,),
    1: (0, *_M1),
    2: (0, *_M1, *_M2),
}
BALL_SIZE = {t: len(m) for t, m in MASKS.items()}  # -1: 0, 0: 1, 1: 17, 2: 137


def check_k(k: object) -> int:
    """Validate a Hamming radius for the block search; the error says what to do instead."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise InvalidTypeError(f"k must be an int (a Hamming distance 0..{MAX_K}), got {type(k).__name__}")
    k = int(k)
    if k < 0:
        raise InvalidArgumentError(f"k must be >= 0 (a Hamming distance), got {k}")
    if k > MAX_K:
        raise InvalidArgumentError(
            f"k={k} is too large: the four 16-bit block indexes answer Hamming distances up to "
            f"{MAX_K} exactly. For k > {MAX_K}, scan the collection in SQL "
            "(WHERE collection_id = ... AND simdb_hamming(fp, q) <= k, a sequential scan), or search by "
            "Jaccard similarity on shingles (min_jaccard=...) for looser near-duplicates"
        )
    return k


def even_radii(k: int) -> tuple[int, int, int, int]:
    """Radii spread as evenly as possible over the four blocks, summing to k - 3."""
    k = check_k(k)
    s = k - 3
    if s < 0:  # k + 1 blocks probed exactly, the others skipped
        return tuple(0 if i <= k else -1 for i in range(BLOCKS))  # type: ignore[return-value]
    base, extra = divmod(s, BLOCKS)
    return tuple(base + (1 if i < extra else 0) for i in range(BLOCKS))  # type: ignore[return-value]


_OPTIONS: dict[int, tuple[tuple[int, ...], ...]] = {}


def radii_options(k: int) -> tuple[tuple[int, ...], ...]:
    """Every exact radius assignment for k (each t_i in -1..2, sum = k - 3)."""
    k = check_k(k)
    opts = _OPTIONS.get(k)
    if opts is None:
        rng = range(-1, MAX_RADIUS + 1)
        opts = tuple(t for t in itertools.product(rng, repeat=BLOCKS) if sum(t) == k - 3)
        _OPTIONS[k] = opts
    return opts


def probe_count(radii: Sequence[int]) -> int:
    return sum(BALL_SIZE[t] for t in radii)


def ball(value: int, radius: int) -> list[int]:
    """Every 16-bit value within ``radius`` bits of ``value`` (empty for radius -1)."""
    return [value ^ m for m in MASKS[radius]]


def _blocks(fp: int) -> tuple[int, int, int, int]:
    return (fp >> 48) & BLOCK_MASK, (fp >> 32) & BLOCK_MASK, (fp >> 16) & BLOCK_MASK, fp & BLOCK_MASK


BucketSizes = Sequence[Mapping[int, float]]


def choose_radii(
    fp: int,
    k: int,
    bucket_sizes: BucketSizes | None = None,
    default_size: float = 1.0,
    descent_cost: float = 2.0,
) -> tuple[int, ...]:
    """The radius assignment with the fewest expected candidates for this query.

    ``bucket_sizes[i]`` maps block values of block i to their (estimated) row counts;
    values not listed count ``default_size``; every probe adds ``descent_cost``
    (an index descent costs about as much as a couple of candidates). Without estimates (or when no listed
    value is near the query) this is :func:`even_radii`. Any assignment returned
    is exact; only the amount of work differs.
    """
    k = check_k(k)
    if not bucket_sizes or not any(bucket_sizes):
        return even_radii(k)
    qb = _blocks(fp)
    # cost[i][t]: expected candidates from probing block i with radius t
    cost: list[dict[int, float]] = []
    heavy = False
    for i in range(BLOCKS):
        sizes = bucket_sizes[i] if i < len(bucket_sizes) else {}
        c = {-1: 0.0}
        total = 0.0
        prev = 0
        for t in range(0, MAX_RADIUS + 1):
            for m in MASKS[t][prev:]:
                n = sizes.get(qb[i] ^ m) if sizes else None
                if n is None:
                    total += default_size
                else:
                    total += n
                    heavy = True
            prev = len(MASKS[t])
            c[t] = total
        cost.append(c)
    if not heavy:
        return even_radii(k)

    def plan_cost(opt: Sequence[int]) -> float:
        # each probe also costs an index descent, even when its bucket is empty
        return sum(cost[i][t] for i, t in enumerate(opt)) + descent_cost * probe_count(opt)

    best: tuple[int, ...] = even_radii(k)
    best_cost = plan_cost(best)
    for opt in radii_options(k):
        opt_cost = plan_cost(opt)
        if opt_cost < best_cost - 1e-9:
            best, best_cost = opt, opt_cost
    return best


def probes(
    fp: int,
    k: int,
    radii: Sequence[int] | None = None,
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per block, the list of block values to look up (empty for a skipped block).

    ``fp`` is the unsigned query fingerprint; ``radii`` defaults to :func:`even_radii`.
    """
    if radii is None:
        radii = even_radii(k)
    elif sum(radii) != check_k(k) - 3 or len(radii) != BLOCKS or any(t not in MASKS for t in radii):
        raise ValueError(f"radii {tuple(radii)} do not make an exact search for k={k}: need 4 values in -1..2 summing to k-3")
    qb = _blocks(fp)
    return tuple(ball(qb[i], radii[i]) for i in range(BLOCKS))  # type: ignore[return-value]
