"""Bit helpers: blocks, two's-complement conversions, Hamming distance and its estimates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import simdb
from simdb.core.bits import MASK64, blocks, cosine_estimate, hamming, similarity, to_signed, to_unsigned

U64 = st.integers(min_value=0, max_value=MASK64)
EDGES = [0, 1, 2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.parametrize("fp", EDGES)
def test_sign_round_trip_at_edges(fp):
    s = to_signed(fp)
    assert -(2**63) <= s < 2**63
    assert to_unsigned(s) == fp


def test_signed_values_at_edges():
    assert to_signed(0) == 0
    assert to_signed(2**63 - 1) == 2**63 - 1
    assert to_signed(2**63) == -(2**63)
    assert to_signed(2**64 - 1) == -1
    assert to_unsigned(-1) == 2**64 - 1
    assert to_unsigned(-(2**63)) == 2**63


@pytest.mark.parametrize("fp", EDGES)
def test_blocks_at_edges(fp):
    b = blocks(fp)
    assert len(b) == 4 and all(0 <= x <= 0xFFFF for x in b)
    assert (b[0] << 48) | (b[1] << 32) | (b[2] << 16) | b[3] == fp


def test_blocks_order_is_most_significant_first():
    assert blocks(0x0001_0002_0003_0004) == (1, 2, 3, 4)
    assert blocks(2**63) == (0x8000, 0, 0, 0)
    assert blocks(2**64 - 1) == (0xFFFF,) * 4


@given(U64)
def test_round_trips(fp):
    assert to_unsigned(to_signed(fp)) == fp
    b = blocks(fp)
    assert (b[0] << 48) | (b[1] << 32) | (b[2] << 16) | b[3] == fp
    # the signed form is what PostgreSQL's arithmetic shift sees: (fp >> 48) & 65535 == b0
    assert (to_signed(fp) >> 48) & 0xFFFF == b[0]


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_unsigned_round_trip(v):
    assert to_signed(to_unsigned(v)) == v


@given(U64, U64)
def test_hamming_similarity_cosine(a, b):
    d = hamming(a, b)
    assert d == bin(a ^ b).count("1") == hamming(b, a)
    assert similarity(a, b) == 1 - d / 64
    assert math.isclose(cosine_estimate(a, b), math.cos(math.pi * d / 64))
    assert hamming(a, a) == 0 and similarity(a, a) == 1.0 and cosine_estimate(a, a) == 1.0


def test_top_level_exports():
    assert simdb.hamming is hamming and simdb.blocks is blocks
    assert simdb.to_signed is to_signed and simdb.to_unsigned is to_unsigned
    assert hamming(0, 2**64 - 1) == 64 and cosine_estimate(0, 2**64 - 1) == -1.0


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: to_signed(-1), ValueError, "fp"),
        (lambda: to_signed(2**64), ValueError, "fp"),
        (lambda: to_signed("1"), TypeError, "fp"),
        (lambda: to_signed(True), TypeError, "fp"),
        (lambda: to_unsigned(2**63), ValueError, "value"),
        (lambda: to_unsigned(1.0), TypeError, "value"),
        (lambda: blocks(-5), ValueError, "fp"),
        (lambda: hamming(1, None), TypeError, "b"),
        (lambda: hamming(-1, 0), ValueError, "a"),
    ],
)
def test_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_numpy_integers_come_back_as_python_ints():
    """Values read from numpy arrays (np.uint64 / np.int64) convert exactly, to plain ints."""
    import numpy as np
    assert to_signed(np.uint64(MASK64)) == -1 and type(to_signed(np.uint64(MASK64))) is int
    assert to_signed(np.uint64(1 << 63)) == -(1 << 63)
    assert to_unsigned(np.int64(-1)) == MASK64 and type(to_unsigned(np.int64(-1))) is int
    assert to_unsigned(np.int64(-(1 << 63))) == 1 << 63
    assert blocks(np.uint64(0xFFFF_0000_0000_0001)) == (0xFFFF, 0, 0, 1)
    assert hamming(np.uint64(MASK64), 0) == 64


def test_block_geometry_constants():
    from simdb.core import bits

    assert bits.BITS == 64 and bits.BLOCK_BITS == 16 and bits.BITS % bits.BLOCK_BITS == 0
    assert bits.MASK64 == 0xFFFF_FFFF_FFFF_FFFF
