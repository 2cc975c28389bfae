"""Exact Jaccard answers (issue 8) against a real PostgreSQL: SQL functions equal Python sets."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from simdb.bits import hamming, to_signed
from simdb.jaccard import MIN_THRESHOLD, THRESHOLD_K, jaccard, k_for_threshold
from simdb.minhash import MinHasher

MH = MinHasher()
INT4 = st.integers(-(2**31), 2**31 - 1)


def _py_jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else None


# ---------------------------------------------------------------- pure SQL
@given(st.lists(INT4, max_size=80), st.lists(INT4, max_size=80))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_sql_jaccard_equals_python_sets(engine, a, b):
    with engine.connect() as c:
        got = c.execute(
            text("SELECT simdb_jaccard(CAST(:a AS int4[]), CAST(:b AS int4[]))"),
            {"a": sorted(set(a)), "b": sorted(set(b))},
        ).scalar()
    want = _py_jaccard(a, b)
    assert (got is None and want is None) or got == pytest.approx(want, abs=1e-12)
    assert jaccard(a, b) == want


def test_sql_jaccard_nulls(engine):
    with engine.connect() as c:
        assert c.execute(text("SELECT simdb_jaccard(NULL, '{1}')")).scalar() is None
        assert c.execute(text("SELECT simdb_jaccard('{}', '{}')")).scalar() is None
        assert c.execute(text("SELECT simdb_jaccard('{}', '{1,2}')")).scalar() == 0.0


def test_threshold_table_same_in_sql_and_python(engine):
    with engine.connect() as c:
        for t in [0.7, 0.75, 0.8, 0.85, 0.9, 0.93, 0.95, 0.99, 1.0]:
            assert c.execute(text("SELECT simdb_jaccard_k(:t)"), {"t": t}).scalar() == k_for_threshold(t)
    assert MIN_THRESHOLD == 0.7 and max(THRESHOLD_K.values()) <= 11
    with pytest.raises(ValueError, match="below"):
        k_for_threshold(0.5)
    with pytest.raises(ValueError, match="min_jaccard"):
        k_for_threshold(1.5)
    with pytest.raises(TypeError, match="min_jaccard"):
        k_for_threshold("0.8")  # type: ignore[arg-type]
    for bad in (0.5, 0.0, 1.5):
        with engine.connect() as c, pytest.raises(Exception, match="min_jaccard"):
            c.execute(text("SELECT simdb_jaccard_k(:t)"), {"t": bad})


# ------------------------------------------------------- a collection in SQL
def _family(rng: random.Random, n_fam: int, size: int = 60):
    """Random base sets and variants with Jaccard spread over 0.5..1."""
    rows, fam = [], []
    for f in range(n_fam):
        base = {rng.randrange(-(2**31), 2**31) for _ in range(size)}
        rows.append(sorted(base))
        fam.append(f)
        for _ in range(rng.randint(0, 3)):
            v = set(base)
            for _ in range(rng.choice([0, 1, 2, 4, 8, 16])):
                if v and rng.random() < 0.5:
                    v.discard(rng.choice(sorted(v)))
                else:
                    v.add(rng.randrange(-(2**31), 2**31))
            rows.append(sorted(v))
            fam.append(f)
    return rows, fam


def _load(engine, name: str, sets, fps):
    with engine.begin() as c:
        cid = c.execute(
            text("INSERT INTO simdb_collections(name, config) VALUES (:n, CAST(:c AS jsonb)) RETURNING id"),
            {"n": name, "c": json.dumps({"jaccard": {"minhash": MH.to_dict()}})},
        ).scalar_one()
        for i, (s, fp) in enumerate(zip(sets, fps)):
            rid = c.execute(
                text(
                    "INSERT INTO simdb_fingerprints(collection_id, key, fp, shingles) "
                    "VALUES (:c, :k, :fp, CAST(:s AS int4[])) RETURNING id"
                ),
                {"c": cid, "k": f"r{i:04d}", "fp": to_signed(fp), "s": s or None},
            ).scalar_one()
            if s:
                c.execute(
                    text("INSERT INTO simdb_minhash_bands VALUES (:id, :c, CAST(:b AS int4[]))"),
                    {"id": rid, "c": cid, "b": MH.keys_for(s)},
                )
    return cid


@pytest.fixture(scope="module")
def planted(database_url):
    from sqlalchemy import create_engine

    eng = create_engine(database_url)
    rng = random.Random(8)
    sets, fam = _family(rng, 40)
    sets.append([])
    fam.append(-1)
    # fingerprints: family members within 0..12 bits of their family's base, families random
    base = {}
    fps = []
    for f in fam:
        if f not in base:
            base[f] = rng.getrandbits(64)
            fps.append(base[f])
            continue
        fp = base[f]
        for b in rng.sample(range(64), rng.randint(0, 12)):
            fp ^= 1 << b
        fps.append(fp)
    name = "jaccard-planted"
    _load(eng, name, sets, fps)
    yield eng, name, sets, fps
    eng.dispose()


def _bands_model(sets, q, t):
    qk = set(MH.keys_for(q)) if q else set()
    out = {}
    for i, s in enumerate(sets):
        if not s or not q:
            continue
        j = _py_jaccard(s, q)
        if j >= t and qk & set(MH.keys_for(s)):
            out[f"r{i:04d}"] = j
    return out


@pytest.mark.parametrize("t", [0.5, 0.8, 0.95])
def test_near_bands_equals_python(planted, t):
    eng, name, sets, _ = planted
    with eng.connect() as c:
        for i in range(0, len(sets), 3):
            q = sets[i]
            got = dict(
                c.execute(
                    text(
                        "SELECT key, jaccard FROM simdb_near_jaccard_bands(:n, CAST(:b AS int4[]), "
                        "CAST(:q AS int4[]), :t)"
                    ),
                    {"n": name, "b": MH.keys_for(q) or None, "q": q, "t": t},
                ).all()
            )
            want = _bands_model(sets, q, t)
            assert got.keys() == want.keys()
            for k in got:
                assert got[k] == pytest.approx(want[k], abs=1e-12)
            # the planted pairs are far above the LSH threshold: nothing is missed at all
            brute = {f"r{x:04d}" for x, s in enumerate(sets) if s and q and _py_jaccard(s, q) >= max(t, 0.8)}
            assert brute <= got.keys()


def test_near_simhash_equals_python(planted):
    eng, name, sets, fps = planted
    checked = 0
    with eng.connect() as c:
        for i in range(0, len(sets), 2):
            for k, t in ((11, 0.5), (3, 0.8)):
                got = {
                    r[0]: r[3]
                    for r in c.execute(
                        text("SELECT * FROM simdb_near_jaccard(:n, :fp, CAST(:q AS int4[]), :k, :t)"),
                        {"n": name, "fp": to_signed(fps[i]), "q": sets[i], "k": k, "t": t},
                    )
                }
                want = {
                    f"r{x:04d}": _py_jaccard(s, sets[i])
                    for x, s in enumerate(sets)
                    if s and sets[i] and hamming(fps[x], fps[i]) <= k and _py_jaccard(s, sets[i]) >= t
                }
                assert got.keys() == want.keys()
                checked += len(want)
    assert checked > 20


def test_pairs_sql_equals_python(planted):
    eng, name, sets, _ = planted
    t = 0.6
    with eng.connect() as c:
        got = {(a, b): j for a, b, j in c.execute(text("SELECT * FROM simdb_jaccard_pairs(:n, :t)"), {"n": name, "t": t})}
    keys = [MH.keys_for(s) if s else [] for s in sets]
    want = {}
    for x in range(len(sets)):
        for y in range(x + 1, len(sets)):
            # LSH candidates: equal keys in the same band
            if sets[x] and sets[y] and any(a == b for a, b in zip(keys[x], keys[y])):
                j = _py_jaccard(sets[x], sets[y])
                if j >= t:
                    want[(f"r{x:04d}", f"r{y:04d}")] = j
    assert got.keys() == want.keys()
    assert all(got[p] == pytest.approx(want[p]) for p in got)


def test_sql_errors(planted):
    eng, name, sets, _ = planted
    with eng.connect() as c, pytest.raises(Exception, match="no collection"):
        c.execute(text("SELECT * FROM simdb_jaccard_pairs('no-such-collection', 0.8)")).all()
    with eng.connect() as c, pytest.raises(Exception, match="min_jaccard"):
        c.execute(text("SELECT * FROM simdb_jaccard_pairs(:n, 0)"), {"n": name}).all()
    with eng.connect() as c:
        # empty query sets have no near-duplicates
        assert c.execute(
            text("SELECT * FROM simdb_near_jaccard_bands(:n, NULL, '{}', 0.8)"), {"n": name}
        ).all() == []


# ------------------------------------------- store integration (simdb.jaccard)
def _words(rng, n):
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 8))) for _ in range(n)]


def _variant_texts(rng, n_fam, members, size=60):
    """Families of texts: members differ from the base by one word (J >= ~0.9)."""
    fams = []
    for _ in range(n_fam):
        base = _words(rng, size)
        texts = [" ".join(base)]
        for _ in range(members - 1):
            w = list(base)
            w[rng.randrange(len(w))] = _words(rng, 1)[0]
            texts.append(" ".join(w))
        fams.append(texts)
    return fams


def _new_collection(engine, name):
    from simdb.jaccard import collection_config

    with engine.begin() as c:
        return c.execute(
            text("INSERT INTO simdb_collections(name, config) VALUES (:n, CAST(:c AS jsonb)) RETURNING id"),
            {"n": name, "c": json.dumps({"jaccard": collection_config()})},
        ).scalar_one()


def test_layer_add_near_pairs_clusters(engine, collection_name):
    from simdb import jaccard as J
    from simdb.jaccard import candidate_fingerprinter, prepare

    cid = _new_collection(engine, collection_name)
    rng = random.Random(3)
    fams = _variant_texts(rng, 6, 3)
    fper = candidate_fingerprinter()
    added = []
    for f, texts in enumerate(fams):
        for m, t in enumerate(texts):
            sh, b = prepare(t, MH)
            with engine.begin() as c:
                r = J.add_if_unique(c, cid, f"f{f}m{m}", fper.fingerprint(t, empty=None), sh, b, 0.99)
            added.append((f"f{f}m{m}", sh))
            assert r.inserted  # J < 0.99 between members
    # near: exact values for every row with J >= 0.5 that shares a band (here: the family)
    for _key, sh in added:
        with engine.connect() as c:
            rows = J.near_rows(c, cid, None, sh, MH.keys_for(sh), 0.5)
        want = {k: _py_jaccard(s, sh) for k, s in added if _py_jaccard(s, sh) >= 0.5}
        assert {r[0]: r[3] for r in rows} == pytest.approx(want)
        assert [r[3] for r in rows] == sorted((r[3] for r in rows), reverse=True)
    pairs = list(J.iter_pairs(engine, cid, 0.5))
    want = {
        (a, b)
        for i, (a, sa) in enumerate(added)
        for (b, sb) in added[i + 1 :]
        if _py_jaccard(sa, sb) >= 0.5
    }
    assert {(p.key_a, p.key_b) for p in pairs} == want
    clusters = list(J.iter_clusters(engine, cid, 0.5))
    assert sorted(c.keys for c in clusters) == sorted([f"f{f}m{m}" for m in range(3)] for f in range(6))
    # a duplicate is refused and reported with its Jaccard
    sh, b = prepare(fams[0][0] + " extra", MH)
    with engine.begin() as c:
        r = J.add_if_unique(c, cid, "dup", None, sh, b, 0.8)
    assert not r.inserted and r.matches[0][0] == "f0m0" and r.matches[0][3] >= 0.8


def _writer(url, cid, texts, rounds_seed, min_j):
    from sqlalchemy import create_engine

    from simdb import jaccard as J

    eng = create_engine(url, poolclass=__import__("sqlalchemy").pool.NullPool)
    rng = random.Random(rounds_seed)
    items = list(texts)
    rng.shuffle(items)
    inserted = []
    for key, t in items:
        sh, b = J.prepare(t, MH)
        with eng.begin() as c:
            if J.add_if_unique(c, cid, key, None, sh, b, min_j).inserted:
                inserted.append(key)
    eng.dispose()
    return inserted


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_layer_add_if_unique_concurrent_one_per_family(database_url, engine, collection_name, mode):
    import concurrent.futures as cf
    import multiprocessing

    rng = random.Random(11 if mode == "threads" else 12)
    for rnd in range(3):
        cid = _new_collection(engine, f"{collection_name}-{rnd}")
        fams = _variant_texts(rng, 12, 4)
        texts = [(f"f{f}m{m}-{w}", t) for f, ts in enumerate(fams) for m, t in enumerate(ts) for w in range(2)]
        # writers race on the same texts (each key twice, under two names)
        if mode == "threads":
            ex = cf.ThreadPoolExecutor(6)
        else:
            ex = cf.ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn"))
        with ex:
            futs = [ex.submit(_writer, database_url, cid, texts, rnd * 100 + w, 0.8) for w in range(6 if mode == "threads" else 4)]
            [f.result() for f in futs]
        with engine.connect() as c:
            stored = [r[0] for r in c.execute(text("SELECT key FROM simdb_fingerprints WHERE collection_id = :c"), {"c": cid})]
        per_family = {}
        for k in stored:
            per_family.setdefault(k.split("m")[0], []).append(k)
        assert sorted(per_family) == sorted(f"f{f}" for f in range(12)), stored
        assert all(len(v) == 1 for v in per_family.values()), per_family


# ------------------------------------------------ the public API: SimhashIndex(jaccard=True)
from simdb.shingles import shingles as _sh  # noqa: E402

VOCAB = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def _index(database_url, name, **kw):
    from simdb import SimhashIndex

    return SimhashIndex(database_url, collection=name, jaccard=True, **kw)


def _model(index_texts: dict, q: str, t: float, mh: MinHasher, k=None, fper=None):
    """Python: keys whose exact Jaccard with q is >= t, among the candidates of the generator."""
    qs = _sh(q)
    if not qs:
        return {}
    qk = set(mh.keys_for(qs))
    out = {}
    for key, txt in index_texts.items():
        s = _sh(txt)
        if not s:
            continue
        j = _py_jaccard(s, qs)
        if j < t:
            continue
        if k is None:
            if not qk & set(mh.keys_for(s)):
                continue
        else:
            a, b = fper.fingerprint(txt, empty=None), fper.fingerprint(q, empty=None)
            if a is None or b is None or hamming(a, b) > k:
                continue
        out[key] = j
    return out


@st.composite
def _corpus(draw):
    base = draw(st.lists(st.sampled_from(VOCAB), min_size=3, max_size=25))
    texts = {}
    for i in range(draw(st.integers(2, 8))):
        w = list(base)
        for _ in range(draw(st.integers(0, 4))):
            op = draw(st.integers(0, 2))
            pos = draw(st.integers(0, max(0, len(w) - 1)))
            if op == 0 and w:
                w[pos] = draw(st.sampled_from(VOCAB))
            elif op == 1:
                w.insert(pos, draw(st.sampled_from(VOCAB)))
            elif w:
                del w[pos]
        texts[f"k{i}"] = " ".join(w)
    q = draw(st.sampled_from(sorted(texts.values())))
    return texts, q


@given(_corpus(), st.sampled_from([0.3, 0.5, 0.8, 1.0]), st.sampled_from([None, 11]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_index_near_min_jaccard_equals_python_sets(database_url, corpus, t, k):
    texts, q = corpus
    import uuid

    with _index(database_url, "hyp-" + uuid.uuid4().hex[:10]) as ix:
        if len(texts) % 2:
            for key, txt in texts.items():
                ix.add(key, txt)
        else:
            ix.add_many(texts.items())
        got = {m.key: m.jaccard for m in ix.near(q, min_jaccard=t, k=k)}
        want = _model(texts, q, t, ix.minhasher, k, ix.fingerprinter)
        assert got.keys() == want.keys()
        for key in got:
            assert got[key] == pytest.approx(want[key], abs=1e-12)
        ms = ix.near(q, min_jaccard=t, k=k)
        assert [(-m.jaccard, m.key) for m in ms] == sorted((-m.jaccard, m.key) for m in ms)


def test_index_jaccard_config_and_errors(database_url, collection_name):
    from simdb import SimhashIndex
    from simdb.jaccard import candidate_fingerprinter
    from simdb.store import CollectionConfigError

    with _index(database_url, collection_name) as ix:
        assert ix.config["jaccard"]["scheme"] == "w3c5-xxh32-v1"
        assert ix.fingerprinter == candidate_fingerprinter()
        ix.add("a", "one two three four five")
        with pytest.raises(ValueError, match="min_jaccard"):
            ix.near("one two", min_jaccard=0)
        with pytest.raises(ValueError, match="min_jaccard"):
            ix.near("one two", min_jaccard=1.2)
        with pytest.raises(TypeError, match="text"):
            ix.near(12345, min_jaccard=0.8)
        with pytest.raises(ValueError, match="k"):
            ix.near("one two", min_jaccard=0.8, k=12)
        assert ix.near("", min_jaccard=0.5) == []
        assert ix.near("one two three four five", k=0)[0].key == "a"  # Hamming search still works
    with SimhashIndex(database_url, collection=collection_name) as again:  # recorded: reopened as Jaccard
        assert again.minhasher == MH
        assert [m.key for m in again.near("one two three four five", min_jaccard=1.0)] == ["a"]
    with pytest.raises(CollectionConfigError, match="Jaccard collection"):
        SimhashIndex(database_url, collection=collection_name, jaccard=False)
    with SimhashIndex(database_url, collection=collection_name + "-plain", verify=False) as plain:
        with pytest.raises(ValueError, match="jaccard=True"):
            plain.near("x y z", min_jaccard=0.8)
        with pytest.raises(ValueError, match="jaccard=True"):
            list(plain.pairs(min_jaccard=0.8))
        with pytest.raises(ValueError, match="jaccard=True"):
            plain.add_if_unique("k", "x y z", min_jaccard=0.8)
    with pytest.raises(CollectionConfigError, match="without jaccard=True"):
        SimhashIndex(database_url, collection=collection_name + "-plain", jaccard=True)


def test_index_update_remove_add_many_keep_bands_in_step(database_url, collection_name):
    with _index(database_url, collection_name) as ix:
        a = "the cat sat on the mat and looked at the dog for a while"
        ix.add("x", a)
        assert [m.key for m in ix.near(a, min_jaccard=0.9)] == ["x"]
        ix.update("x", "entirely other words are here now, nothing shared")
        assert ix.near(a, min_jaccard=0.5) == []
        ix.add("x", a)  # re-add replaces
        ix.remove("x")
        assert ix.near(a, min_jaccard=0.5) == []
        with engine_of(ix) as c:
            assert c.execute(text("SELECT count(*) FROM simdb_minhash_bands WHERE collection_id = :c"),
                             {"c": ix.collection_id}).scalar() == 0
        # a batch with a bad item stores nothing
        with pytest.raises(TypeError, match="item 1"):
            ix.add_many([("p", a), ("q", 42)])
        assert len(ix) == 0
        # last one wins within a batch; meta and fp-only rows
        n = ix.add_many([("p", "zzz"), {"key": "p", "text": a, "meta": {"m": 1}}, {"key": "r", "fp": 5}])
        assert n == 3 and len(ix) == 2
        got = ix.near(a, min_jaccard=0.99)
        assert [(m.key, m.meta, m.jaccard) for m in got] == [("p", {"m": 1}, 1.0)]


def engine_of(ix):
    return ix.engine.connect()


def _api_writer(url, name, texts, seed, min_j):
    from simdb import SimhashIndex

    rng = random.Random(seed)
    items = list(texts)
    rng.shuffle(items)
    with SimhashIndex(url, collection=name) as ix:
        return [key for key, t in items if ix.add_if_unique(key, t, min_jaccard=min_j).inserted]


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_index_add_if_unique_concurrent_one_per_family(database_url, collection_name, mode):
    import concurrent.futures as cf
    import multiprocessing

    rng = random.Random(21 if mode == "threads" else 22)
    for rnd in range(3):
        name = f"{collection_name}-{rnd}"
        with _index(database_url, name):
            pass
        fams = _variant_texts(rng, 10, 4)
        texts = [(f"f{f}m{m}-{w}", t) for f, ts in enumerate(fams) for m, t in enumerate(ts) for w in range(2)]
        if mode == "threads":
            ex = cf.ThreadPoolExecutor(6)
        else:
            ex = cf.ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn"))
        with ex:
            n = 6 if mode == "threads" else 4
            results = [f.result() for f in [ex.submit(_api_writer, database_url, name, texts, rnd * 10 + w, 0.8) for w in range(n)]]
        inserted = [k for r in results for k in r]
        from simdb import SimhashIndex

        with SimhashIndex(database_url, collection=name) as ix:
            assert len(ix) == len(inserted) == 10  # never a text inserted twice, never lost
            fams_stored = sorted(k.split("m")[0] for k in inserted)
            assert fams_stored == sorted(f"f{f}" for f in range(10))


def test_index_add_many_bulk_path_through_gin_pending_list(database_url, collection_name, monkeypatch):
    from simdb.store import jaccard_write

    monkeypatch.setattr(jaccard_write, "BULK_BANDS_ROWS", 5)
    rng = random.Random(5)
    fams = _variant_texts(rng, 4, 3)
    items = {f"f{f}m{m}": t for f, ts in enumerate(fams) for m, t in enumerate(ts)}
    with _index(database_url, collection_name) as ix:
        assert ix.add_many(items.items()) == len(items)
        for _key, t in items.items():
            got = {m.key: m.jaccard for m in ix.near(t, min_jaccard=0.5)}
            assert got == pytest.approx(_model(items, t, 0.5, ix.minhasher))
        with ix.engine.connect() as c:
            assert c.execute(
                text("SELECT reloptions FROM pg_class WHERE relname = 'simdb_minhash_bands_gin'")
            ).scalar() == ["fastupdate=off"]
