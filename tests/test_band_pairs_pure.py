"""The client side of a banded collection's pairs (simdb.store.pairs), against plain Python."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.store.pairs import first_of_pairs_shared, group_pairs


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=80), st.integers(1, 4))
def test_pairs_shared_enough_times_once_each(pairs, shared):
    a = np.array([min(p) for p in pairs], dtype=np.int64)
    b = np.array([max(p) for p in pairs], dtype=np.int64)
    got = first_of_pairs_shared(a, b, shared)
    seen: dict[tuple[int, int], list[int]] = {}
    for i, p in enumerate(zip(a.tolist(), b.tolist())):
        seen.setdefault(p, []).append(i)
    want = [at[0] for _, at in sorted(seen.items()) if len(at) >= shared]
    assert got.tolist() == want  # first occurrences, in pair order


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_group_pairs_are_every_pair_inside_each_group(sizes, rng):
    total = sum(sizes)
    ids = np.array(rng.sample(range(10_000), total), dtype=np.int64)
    fps = np.array([rng.getrandbits(64) for _ in range(total)], dtype=np.uint64)
    a, b, d = group_pairs(np.array(sizes, dtype=np.int64), ids, fps)
    want, start = [], 0
    for n in sizes:
        g = list(range(start, start + n))
        want += [(min(ids[x], ids[y]), max(ids[x], ids[y]), int(fps[x] ^ fps[y]).bit_count())
                 for i, x in enumerate(g) for y in g[i + 1:]]
        start += n
    assert sorted(zip(a.tolist(), b.tolist(), d.tolist())) == sorted(want)
