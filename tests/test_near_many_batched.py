"""near_many of a banded verified collection, batched (issue 26's dedup throughput): the same
answers as near() one query at a time, each text tokenized once per batch, and the whole
batch's candidates verified in one call."""

from __future__ import annotations

import random
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.core.bits import to_signed
from simdb.core.sketch import Verifier
from simdb.core.sketch import features as VF
from simdb.index import SimhashIndex
from simdb.results import verified_matches, verified_matches_many
from simdb.store import candidates as C
from simdb.store.candidates import array_text_params

SLOW = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
WORDS = [f"word{i}" for i in range(300)] + list("中文字词语句段落")


@pytest.fixture(scope="module")
def bix(database_url):
    ix = SimhashIndex(database_url, "batched-" + uuid.uuid4().hex[:8])
    assert ix.bands
    yield ix
    ix.close()


def _planted(rng: random.Random, n: int) -> list[str]:
    """Originals of 5-150 words (short ones below the sketch size, long ones above) and copies of
    them with 0-3 words replaced or dropped: rule pairs, pairs just below the rule, unrelated texts."""
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.4:
            words = rng.choice(out).split()
            for _ in range(rng.randint(0, 3)):
                i = rng.randrange(len(words))
                if rng.random() < 0.5 and len(words) > 1:
                    del words[i]
                else:
                    words[i] = rng.choice(WORDS)
            out.append(" ".join(words))
        else:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 150))))
    return out


@SLOW
@given(st.integers(0, 2**32), st.sampled_from([None, 0.6, 0.9]), st.sampled_from([None, 2]))
def test_near_many_equals_near_one_at_a_time(bix, seed, t, limit):
    bix.clear()
    texts = _planted(random.Random(seed), 120)  # seeded: a collection is more data than hypothesis draws
    bix.add_many((f"k{i}", x) for i, x in enumerate(texts[:90]))
    bix.add_many([{"key": "fp-row", "fp": bix.fingerprinter.fingerprint(texts[0])}])  # no sketch: Hamming
    queries = texts[:10] + texts[85:] + ["", "!!", texts[3]]
    opts = {} if t is None else {"min_jaccard": t}
    want = [bix.near(q, limit=limit, **opts) for q in queries]
    for workers in (1, 2):
        assert bix.near_many(queries, limit=limit, workers=workers, **opts) == want
        assert bix.near_many(queries, limit=limit, workers=workers, **opts) == want  # from the memo


def test_a_repeated_batch_is_not_tokenized_again(bix, monkeypatch):
    """simdb dedup asks about a batch, then about its survivors: the second call reuses the first's
    fingerprints, sketches and band keys."""
    bix.clear()
    texts = _planted(random.Random(7), 60)
    bix.add_many((f"k{i}", x) for i, x in enumerate(texts))
    first = bix.near_many(texts)
    calls = {"sets": 0, "fps": 0}
    sets, many = VF.grouped_sketches, type(bix.fingerprinter).many

    def count_sets(*a, **kw):
        calls["sets"] += 1
        return sets(*a, **kw)

    def count_fps(self, *a, **kw):
        calls["fps"] += 1
        return many(self, *a, **kw)

    monkeypatch.setattr(VF, "grouped_sketches", count_sets)
    monkeypatch.setattr(type(bix.fingerprinter), "many", count_fps)
    assert bix.near_many(texts[10:40]) == first[10:40]
    assert calls == {"sets": 0, "fps": 0}
    bix.near_many(["a text that was never asked about before"])
    assert calls == {"sets": 1, "fps": 1}


def test_verified_matches_many_equals_one_call_per_query():
    rng = random.Random(3)
    v = Verifier()
    texts = _planted(rng, 80)
    sketches = [v.sketch(x) for x in texts]
    rows = []
    for qi in range(20):
        for r in rng.sample(range(80), 15):
            sk = None if rng.random() < 0.1 else np.array(sketches[r], dtype=">i4")
            blob = None if sk is None else _array_send(sk)
            rows.append((qi, f"r{r}", rng.getrandbits(63), rng.randint(0, 12), None, blob))
    queries = [sketches[i] if i % 7 else None for i in range(20)]
    got = verified_matches_many(rows, queries, v, 0.5, 3)
    for qi in range(20):
        want = verified_matches([r[1:] for r in rows if r[0] == qi], queries[qi], v, 0.5, 3)
        assert got.get(qi, []) == want
    assert any(got.values())


def _array_send(values: np.ndarray) -> bytes:
    """PostgreSQL's array_send of a one-dimensional int4[] (what the candidate statements return)."""
    head = np.array([1, 0, 23, len(values), 1], dtype=">i4")
    body = np.empty(2 * len(values), dtype=">i4")
    body[0::2] = 4
    body[1::2] = values
    return head.tobytes() + body.tobytes()


def test_batched_band_candidates_probe_the_band_indexes(bix):
    """near_many's band statement probes each band's btree per key and fetches each hit by its
    primary key: left to itself, the planner hash-joined a batch's keys with 14 sequential scans
    of the table, a cost that grew with the collection (and a prepared generic plan kept it)."""
    bix.clear()
    texts = _planted(random.Random(11), 3000)
    bix.add_many((f"r{i}", x) for i, x in enumerate(texts))
    with bix.engine.connect() as c:
        c.exec_driver_sql("ANALYZE simdb_fingerprints")
    feats = bix.text_features(texts[:2500])
    qi = np.repeat(np.arange(2500), 14)
    params = array_text_params({"c": bix.collection_id, "qi": qi.tolist(), "bi": np.tile(np.arange(1, 15), 2500).tolist(),
                                "bk": np.concatenate([f[2] for f in feats]).tolist(),
                                "qfp": [to_signed(feats[i][0]) for i in qi.tolist()], "ms": bix.rule.shared})
    plan = "\n".join(r[0] for r in bix.connection().execute("EXPLAIN " + C.BAND_NEAR_MANY_SQL, params).fetchall())
    assert all(f"ix_simdb_fingerprints_band{i} " in plan for i in range(1, 15))
    assert "Seq Scan on simdb_fingerprints" not in plan
