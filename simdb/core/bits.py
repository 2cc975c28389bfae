"""A fingerprint's 64 bits: its stored form, its four 16-bit blocks, Hamming distance, and the
block values an exact Hamming search looks up (generalized pigeonhole).

A fingerprint is an unsigned int in [0, 2**64). PostgreSQL has no unsigned
64-bit type, so the store keeps the two's-complement value in a ``bigint``;
``to_signed``/``to_unsigned`` convert between the two. ``blocks`` splits a
fingerprint into the four 16-bit blocks the search indexes (b0 = most
significant), the same values PostgreSQL derives in the ``b0..b3`` columns.

Each block has a btree. Give block i a radius t_i in {-1, 0, 1, 2}
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

``k`` is checked once, at the public API (:func:`simdb.core.validate.check_k`); the functions
here take a checked ``k`` (another value fails with a plain ``KeyError`` or ``ValueError``).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "BITS",
    "BLOCKS",
    "BLOCK_BITS",
    "BlockQuery",
    "BucketTable",
    "MASK64",
    "MAX_K",
    "MAX_RADIUS",
    "ball",
    "check_radii",
    "block_query",
    "block_values",
    "blocks",
    "choose_radii",
    "cosine_estimate",
    "even_radii",
    "hamming",
    "probe_count",
    "probes",
    "radii_options",
    "similarity",
    "to_signed",
    "to_unsigned",
]

BITS = 64
BLOCKS = 4
BLOCK_BITS = 16
BLOCK_MASK = (1 << BLOCK_BITS) - 1
MASK64 = (1 << BITS) - 1
_SIGN = 1 << (BITS - 1)
_TWO64 = 1 << BITS
MAX_RADIUS = 2
#: the largest k the four 16-bit blocks answer exactly: sum(t_i) <= 4 * MAX_RADIUS (the argument rule,
#: :func:`simdb.core.validate.check_k`, is what the blocks answer)
MAX_K = BLOCKS * MAX_RADIUS + BLOCKS - 1  # 11


def _check_unsigned(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an int fingerprint, got {type(value).__name__}")
    value = int(value)
    if not 0 <= value <= MASK64:
        raise InvalidArgumentError(f"{name} must be an unsigned 64-bit fingerprint in [0, 2**64), got {value}")
    return value


def to_signed(fp: int) -> int:
    """Unsigned fingerprint -> the signed value stored in a PostgreSQL ``bigint``.

    The one conversion of the package, on every stored row of a bulk load too: a plain ``int``
    in range takes the fast path (no ABC check, about as cheap as the expression written inline)."""
    if type(fp) is not int or not 0 <= fp <= MASK64:
        fp = _check_unsigned(fp, "fp")
    return fp - _TWO64 if fp & _SIGN else fp


def to_unsigned(value: int) -> int:
    """Signed ``bigint`` from PostgreSQL -> the unsigned fingerprint."""
    if type(value) is int and -_SIGN <= value < _SIGN:  # the fast path, as in to_signed
        return value & MASK64
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"value must be an int, got {type(value).__name__}")
    value = int(value)
    if not -_SIGN <= value < _SIGN:
        raise InvalidArgumentError(f"value must be a signed 64-bit integer, got {value}")
    return value & MASK64


def blocks(fp: int) -> tuple[int, int, int, int]:
    """The four 16-bit blocks of a fingerprint, most significant first (b0..b3)."""
    return block_values(_check_unsigned(fp, "fp"))


def block_values(fp: int) -> tuple[int, int, int, int]:
    """:func:`blocks` of an unsigned fingerprint already checked (a query's, inside the search): the one
    place the split is written in Python (the ``b0..b3`` columns' SQL expression is ``simdb.store.sql``'s)."""
    return (fp >> 48) & BLOCK_MASK, (fp >> 32) & BLOCK_MASK, (fp >> 16) & BLOCK_MASK, fp & BLOCK_MASK


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two unsigned fingerprints."""
    return (_check_unsigned(a, "a") ^ _check_unsigned(b, "b")).bit_count()


def similarity(a: int, b: int) -> float:
    """1 - hamming/64: the fraction of agreeing bits."""
    return 1.0 - hamming(a, b) / BITS


def cosine_estimate(a: int, b: int) -> float:
    """Charikar's estimate of the cosine between the feature vectors: cos(pi * d / 64)."""
    return math.cos(math.pi * hamming(a, b) / BITS)


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


def _even(k: int) -> tuple[int, int, int, int]:
    s = k - 3
    if s < 0:  # k + 1 blocks probed exactly, the others skipped
        return tuple(0 if i <= k else -1 for i in range(BLOCKS))  # type: ignore[return-value]
    base, extra = divmod(s, BLOCKS)
    return tuple(base + (1 if i < extra else 0) for i in range(BLOCKS))  # type: ignore[return-value]


#: k -> its even radii, for every k the blocks answer
EVEN_RADII: dict[int, tuple[int, int, int, int]] = {k: _even(k) for k in range(MAX_K + 1)}
#: k -> every exact radius assignment (each t_i in -1..2, sum = k - 3), even radii among them
RADII_OPTIONS: dict[int, tuple[tuple[int, ...], ...]] = {
    k: tuple(t for t in itertools.product(range(-1, MAX_RADIUS + 1), repeat=BLOCKS) if sum(t) == k - 3)
    for k in range(MAX_K + 1)
}


def even_radii(k: int) -> tuple[int, int, int, int]:
    """Radii spread as evenly as possible over the four blocks, summing to k - 3."""
    return EVEN_RADII[k]


def radii_options(k: int) -> tuple[tuple[int, ...], ...]:
    """Every exact radius assignment for k (each t_i in -1..2, sum = k - 3)."""
    return RADII_OPTIONS[k]


def check_radii(radii: Sequence[int], k: int) -> None:
    """Refuse ``radii`` unless they make an exact search for ``k``: 4 values in -1..2 summing to k - 3."""
    if len(radii) != BLOCKS or sum(radii) != k - 3 or any(t not in MASKS for t in radii):
        raise ValueError(f"radii {tuple(radii)} do not make an exact search for k={k}: need 4 values in -1..2 summing to k-3")


def probe_count(radii: Sequence[int]) -> int:
    return sum(BALL_SIZE[t] for t in radii)


def ball(value: int, radius: int) -> list[int]:
    """Every 16-bit value within ``radius`` bits of ``value`` (empty for radius -1)."""
    return [value ^ m for m in MASKS[radius]]


BucketSizes = Sequence[Mapping[int, float]]

_ALL_MASKS = np.array(MASKS[MAX_RADIUS], dtype=np.int64)  # MASKS[t] is a prefix of MASKS[t + 1]
_BALL_ENDS = [BALL_SIZE[t] - 1 for t in range(MAX_RADIUS + 1)]  # last position of each radius' ball
_BLOCK_ROWS = np.arange(BLOCKS)[:, None]


class BucketTable:
    """Bucket-size estimates as dense arrays, for :func:`choose_radii` on every query.

    Why dense: the choice sums the estimates of the 548 block values within two bits of the
    query's four blocks; from dicts that is 548 lookups in Python (~0.3 ms a query, more than
    the search it plans); from a (4, 65,536) array it is one gather and a cumulative sum.
    ``sizes[i][v]``: the estimate for value v of block i (``default_size`` when not listed);
    ``listed[i][v]``: whether it was listed (a plan changes only near a listed value)."""

    def __init__(self, bucket_sizes: BucketSizes, default_size: float = 1.0):
        self.sizes = np.full((BLOCKS, BLOCK_MASK + 1), float(default_size), dtype=np.float64)
        self.listed = np.zeros((BLOCKS, BLOCK_MASK + 1), dtype=bool)
        for i, sizes in enumerate(list(bucket_sizes)[:BLOCKS]):
            if sizes:
                values = np.fromiter(sizes.keys(), dtype=np.int64, count=len(sizes))
                self.sizes[i, values] = np.fromiter(sizes.values(), dtype=np.float64, count=len(sizes))
                self.listed[i, values] = True
        self.any_listed = bool(self.listed.any())

    def radius_costs(self, fp: int) -> list[list[float]] | None:
        """Per block, the expected candidates of radius -1, 0, 1, 2 around ``fp``'s block
        (sums in mask order, as a loop would add them); None when no listed value is near."""
        idx = np.array(block_values(fp), dtype=np.int64)[:, None] ^ _ALL_MASKS[None, :]
        if not self.listed[_BLOCK_ROWS, idx].any():
            return None
        sums = np.cumsum(self.sizes[_BLOCK_ROWS, idx], axis=1)[:, _BALL_ENDS]
        return [[0.0, *row] for row in sums.tolist()]


#: k -> its :data:`RADII_OPTIONS` as an (options, 4) array, and each option's probe count
_OPTION_ARRAYS: dict[int, tuple[np.ndarray, np.ndarray]] = {
    k: (np.array(opts, dtype=np.int64).reshape(-1, BLOCKS), np.array([probe_count(o) for o in opts], dtype=np.float64))
    for k, opts in RADII_OPTIONS.items()
}


def choose_radii(
    fp: int,
    k: int,
    bucket_sizes: BucketSizes | BucketTable | None = None,
    default_size: float = 1.0,
    descent_cost: float = 2.0,
) -> tuple[int, ...]:
    """The radius assignment with the fewest expected candidates for this query.

    ``bucket_sizes[i]`` maps block values of block i to their (estimated) row counts;
    values not listed count ``default_size``; every probe adds ``descent_cost``
    (an index descent costs about as much as a couple of candidates). Without estimates (or when no listed
    value is near the query) this is :func:`even_radii`. Any assignment returned
    is exact; only the amount of work differs. A :class:`BucketTable` (its own default
    size) is the fast form for a caller that plans many queries.
    """
    if not bucket_sizes:
        return even_radii(k)
    table = bucket_sizes if isinstance(bucket_sizes, BucketTable) else BucketTable(bucket_sizes, default_size)
    if not table.any_listed:
        return even_radii(k)
    # cost[i][t + 1]: expected candidates from probing block i with radius t
    cost = table.radius_costs(fp)
    if cost is None:
        return even_radii(k)

    # every option's cost at once (each probe also costs an index descent, even when its bucket
    # is empty), then the first option strictly cheaper than the best so far, from even radii
    opts, counts = _OPTION_ARRAYS[k]
    c = np.array(cost, dtype=np.float64)
    block_costs = [c[i, opts[:, i] + 1] for i in range(BLOCKS)]
    totals = (block_costs[0] + block_costs[1] + block_costs[2] + block_costs[3] + descent_cost * counts).tolist()
    best: tuple[int, ...] = even_radii(k)
    best_cost = sum(cost[i][t + 1] for i, t in enumerate(best)) + descent_cost * probe_count(best)
    for opt, opt_cost in zip(radii_options(k), totals):
        if opt_cost < best_cost - 1e-9:
            best, best_cost = opt, opt_cost
    return best


class BlockQuery(NamedTuple):
    """What an exact block search of one unsigned fingerprint sends and locks: its stored (signed)
    form, its four blocks, and per block the values to look up (empty for a skipped block).

    Why one answer: a search (:func:`simdb.store.candidates.near_params`) needs the probes and the
    signed value, a writer's advisory locks (:func:`simdb.store.unique.lock_keys`) the probes and the
    blocks; each asks once, so a write route enters this module by one call a stage (the route rule
    of tests/test_house_walks.py)."""

    signed: int
    blocks: tuple[int, int, int, int]
    probes: tuple[list[int], list[int], list[int], list[int]]


def block_query(fp: int, k: int, radii: Sequence[int] | None = None) -> BlockQuery:
    """The :class:`BlockQuery` of unsigned ``fp`` for a checked ``k``; ``radii`` defaults to
    :func:`even_radii` (any other assignment must be exact for ``k``)."""
    if radii is None:
        radii = even_radii(k)
    else:
        check_radii(radii, k)
    signed = to_signed(fp)
    qb = block_values(fp)
    return BlockQuery(signed, qb, tuple(ball(qb[i], radii[i]) for i in range(BLOCKS)))  # type: ignore[arg-type]


def probes(fp: int, k: int, radii: Sequence[int] | None = None) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per block, the list of block values to look up for unsigned ``fp`` (:attr:`BlockQuery.probes`)."""
    return block_query(fp, k, radii).probes
