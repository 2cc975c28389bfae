"""Bit-level helpers for 64-bit fingerprints.

A fingerprint is an unsigned int in [0, 2**64). PostgreSQL has no unsigned
64-bit type, so the store keeps the two's-complement value in a ``bigint``;
``to_signed``/``to_unsigned`` convert between the two. ``blocks`` splits a
fingerprint into the four 16-bit blocks the search indexes (b0 = most
significant), the same values PostgreSQL derives in the ``b0..b3`` columns.
"""

from __future__ import annotations

import math
import numbers

from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "BITS",
    "BLOCK_BITS",
    "MASK64",
    "block_values",
    "blocks",
    "cosine_estimate",
    "hamming",
    "similarity",
    "to_signed",
    "to_unsigned",
]

BITS = 64
BLOCK_BITS = 16
MASK64 = (1 << BITS) - 1
_SIGN = 1 << (BITS - 1)
_TWO64 = 1 << BITS


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
    return (fp >> 48) & 0xFFFF, (fp >> 32) & 0xFFFF, (fp >> 16) & 0xFFFF, fp & 0xFFFF


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two unsigned fingerprints."""
    return (_check_unsigned(a, "a") ^ _check_unsigned(b, "b")).bit_count()


def similarity(a: int, b: int) -> float:
    """1 - hamming/64: the fraction of agreeing bits."""
    return 1.0 - hamming(a, b) / BITS


def cosine_estimate(a: int, b: int) -> float:
    """Charikar's estimate of the cosine between the feature vectors: cos(pi * d / 64)."""
    return math.cos(math.pi * hamming(a, b) / BITS)
