"""The band scheme through PostgreSQL: a load stores the features ``near_many`` computed, and a
candidate shares two band keys on every surface (:data:`simdb.core.sketch.bands.BAND_SCHEME`)."""

from __future__ import annotations

import random
import uuid

from sqlalchemy import text

from simdb.core.sketch import Verifier
from simdb.core.sketch import bands as B
from simdb.index import SimhashIndex

# a rule pair (Jaccard >= 0.8 of character 4-grams)
FAR_A = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 orange40"
FAR_B = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 zz492"
OTHER = "an unrelated sentence about the weather in the mountains this week"


def _rows(ix: SimhashIndex) -> dict[str, list]:
    with ix.engine.connect() as c:
        return dict(c.execute(text("SELECT key, ARRAY[fp::text, shingles::text, bands::text] FROM simdb_fingerprints "
                                   "WHERE collection_id = :c"), {"c": ix.collection_id}).all())


def test_add_many_after_near_many_stores_the_features_it_computed(database_url, monkeypatch):
    """``simdb dedup`` asks about a batch, then stores its survivors: the store takes the features
    near_many computed (the same values as computing them) and featurizes only the other texts."""
    from simdb.store import encode

    asked = [FAR_A, OTHER]
    items = [(f"k{i}", t) for i, t in enumerate([*asked, "a text nobody asked about before it was stored"])]
    with SimhashIndex(database_url, "computed-" + uuid.uuid4().hex[:8]) as ix:
        ix.add_many(items, workers=1)
        want = _rows(ix)
    real = encode.fingerprints_and_sketches
    featurized: list[list[str]] = []
    monkeypatch.setattr(encode, "fingerprints_and_sketches", lambda t, *a, **k: featurized.append(list(t)) or real(t, *a, **k))
    with SimhashIndex(database_url, "memo-" + uuid.uuid4().hex[:8]) as ix:
        ix.near_many(asked)
        ix.add_many(items, workers=1)
        assert featurized == [[items[2][1]]]
        assert _rows(ix) == want and want["k0"][2] is not None


def _one_key_pair(seed: int = 5) -> tuple[str, str]:
    """Two texts at Jaccard >= 0.8 (the rule, above every scheme's reach) that share the key of exactly one
    band (found by a seeded search: about 3 % of the pairs at 0.8 do)."""
    rng = random.Random(seed)
    words = [f"w{i}x" for i in range(3000)]
    verifier = Verifier()
    for _ in range(5000):
        a = [rng.choice(words) for _ in range(rng.randint(14, 24))]
        b = list(a)
        for i in rng.sample(range(len(a)), rng.randint(1, 3)):
            b[i] = rng.choice(words)
        ta, tb = " ".join(a), " ".join(b)
        ka, kb = B.text_band_keys([ta, tb])
        if int((ka == kb).sum()) == 1 and (verifier.similarity(verifier.sketch(ta), verifier.sketch(tb)) or 0) >= 0.8:
            return ta, tb
    raise AssertionError("no pair sharing one key")


def _sql_answers(ix: SimhashIndex, name: str) -> tuple[list, list]:
    with ix.engine.connect() as c:
        near = c.execute(text("SELECT key FROM simdb_near_key(:n, 'b', 3, 0.8)"), {"n": name}).scalars().all()
        pairs = c.execute(text("SELECT key_a, key_b FROM simdb_pairs(:n, 3, 0.8)"), {"n": name}).all()
    return list(near), [tuple(p) for p in pairs]


def test_candidates_share_two_keys(database_url):
    """A pair sharing one band key is a candidate on no surface (near, near_many, add_if_unique, pairs,
    the SQL functions): candidates share two keys of 14."""
    a, b = _one_key_pair()
    assert B.min_shared(B.BAND_SCHEME) == 2
    with SimhashIndex(database_url, "sh-" + uuid.uuid4().hex[:8]) as ix:
        assert ix.band_scheme == B.BAND_SCHEME
        ix.add("a", a)
        res = ix.add_if_unique("probe", b, min_jaccard=0.8)
        ix.remove("probe")
        ix.add("b", b)
        assert [m.key for m in ix.near(b, min_jaccard=0.8)] == ["b"]
        assert [m.key for m in ix.near_many([b], min_jaccard=0.8)[0]] == ["b"]
        assert res.inserted and not list(ix.pairs(min_jaccard=0.8))
        assert _sql_answers(ix, ix.collection) == ([], [])
        ix.drop()
