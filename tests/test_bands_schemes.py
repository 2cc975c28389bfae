"""Band schemes through PostgreSQL: a collection banded with ``minhash-b14r5-v1`` keeps computing
its keys and answering; ``convert`` moves it to :data:`simdb.core.sketch.bands.BAND_SCHEME`."""

from __future__ import annotations

import json
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


def _keys(ix: SimhashIndex) -> dict[str, list[int] | None]:
    with ix.engine.connect() as c:
        rows = c.execute(text("SELECT key, bands FROM simdb_fingerprints WHERE collection_id = :c"),
                         {"c": ix.collection_id}).all()
    return dict(rows)


def _want(t: str, scheme: str) -> list[int]:
    k = B.text_band_keys([t], band_scheme=scheme)[0]
    assert k is not None
    return k.tolist()


def _v1_collection(database_url: str) -> str:
    """A banded collection as created before one-permutation hashing (its config names v1)."""
    name = "v1-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as ix:
        assert ix.band_scheme == B.BAND_SCHEME
        with ix.engine.begin() as c:
            c.execute(text("UPDATE simdb_collections SET config = jsonb_set(config, '{bands}', :s) WHERE id = :c"),
                      {"s": json.dumps(B.MINHASH_SCHEME), "c": ix.collection_id})
    return name


def test_a_v1_collection_keeps_its_keys_and_answers(database_url):
    name = _v1_collection(database_url)
    with SimhashIndex(database_url, name) as ix:
        assert ix.bands and ix.band_scheme == B.MINHASH_SCHEME
        ix.add("a", FAR_A)
        ix.add_many([("o", OTHER)])
        got = _keys(ix)
        assert got["a"] == _want(FAR_A, B.MINHASH_SCHEME) != _want(FAR_A, B.BAND_SCHEME)
        assert got["o"] == _want(OTHER, B.MINHASH_SCHEME)
        assert [m.key for m in ix.near(FAR_B)] == ["a"]
        assert [[m.key for m in ms] for ms in ix.near_many([FAR_B, OTHER])] == [["a"], ["o"]]
        res = ix.add_if_unique("b", FAR_B)
        assert not res.inserted and [m.key for m in res.matches] == ["a"]
        ix.add("b", FAR_B)
        assert _keys(ix)["b"] == _want(FAR_B, B.MINHASH_SCHEME)
        assert [(p.key_a, p.key_b) for p in ix.pairs()] == [("a", "b")]


def test_convert_moves_a_v1_collection_to_the_current_scheme(database_url):
    name = _v1_collection(database_url)
    with SimhashIndex(database_url, name) as ix:
        ix.add_many([("a", FAR_A), ("o", OTHER)])
        ix.add("fp", fp=7)
        assert ix.convert_to_verified() == 3
        assert ix.band_scheme == B.BAND_SCHEME and ix.config["bands"] == B.BAND_SCHEME
        assert ix.convert_to_verified() == 0
    with SimhashIndex(database_url, name) as ix:
        assert ix.band_scheme == B.BAND_SCHEME
        got = _keys(ix)
        assert got["a"] == _want(FAR_A, B.BAND_SCHEME) and got["o"] == _want(OTHER, B.BAND_SCHEME)
        assert got["fp"] is None
        assert [m.key for m in ix.near(FAR_B)] == ["a"]


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


def test_v3_candidates_share_two_keys_v2_ones_one_and_convert_moves_v2_by_its_config(database_url):
    """A pair sharing one band key is a candidate in a v2 collection, on every surface (near, near_many,
    add_if_unique, pairs, the SQL functions), and in none of them in a v3 one; ``convert`` moves v2
    to v3 without rewriting a row (the keys are the same)."""
    a, b = _one_key_pair()
    assert B.key_scheme(B.BAND_SCHEME) == B.OPH_SCHEME and B.min_shared(B.BAND_SCHEME) == 2
    assert B.min_shared(B.OPH_SCHEME) == B.min_shared(B.MINHASH_SCHEME) == 1
    answers = {}
    for scheme in (B.OPH_SCHEME, B.BAND_SCHEME):
        name = "sh-" + uuid.uuid4().hex[:8]
        with SimhashIndex(database_url, name) as ix, ix.engine.begin() as c:
            c.execute(text("UPDATE simdb_collections SET config = jsonb_set(config, '{bands}', :s) WHERE id = :c"),
                      {"s": json.dumps(scheme), "c": ix.collection_id})
        with SimhashIndex(database_url, name) as ix:
            assert ix.band_scheme == scheme
            ix.add("a", a)
            res = ix.add_if_unique("probe", b, min_jaccard=0.8)
            ix.remove("probe")
            ix.add("b", b)
            answers[scheme] = ([m.key for m in ix.near(b, min_jaccard=0.8)],
                               [m.key for m in ix.near_many([b], min_jaccard=0.8)[0]],
                               not res.inserted,
                               [(p.key_a, p.key_b) for p in ix.pairs(min_jaccard=0.8)],
                               _sql_answers(ix, name))
            if scheme == B.OPH_SCHEME:
                before = _keys(ix)
                assert ix.convert_to_verified() == 0 and ix.band_scheme == B.BAND_SCHEME
                assert _keys(ix) == before
                assert [m.key for m in ix.near(b, min_jaccard=0.8)] == ["b"] and _sql_answers(ix, name) == ([], [])
    assert answers[B.OPH_SCHEME] == (["b", "a"], ["b", "a"], True, [("a", "b")], (["a"], [("a", "b")]))
    assert answers[B.BAND_SCHEME] == (["b"], ["b"], False, [], ([], []))
