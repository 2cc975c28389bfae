"""simdb.compat.simhash against the real PyPI package (simhash==2.1.2), in the same run.

Behaviour tests written from the package's README and code: the same values for every input
kind, the same answers from the index for any sequence of add / delete / get_near_dups (the
package's index is exact too: k+1 chunks, pigeonhole), the same bucket counts after adds;
and what simdb adds: the entries survive a restart, f != 64 and k > 11 are clear errors.
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pkg = pytest.importorskip("simhash")  # the real package (test extra)

from simdb.compat import simhash as compat  # noqa: E402
from simdb.errors import InvalidArgumentError, InvalidTypeError  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "compat-simhash.md"

TEXTS = ["", "a", "How are you? I Am fine. blar blar blar blar blar Thanks.", "你好，世界！今天天气很好", "x" * 40 + "y" * 30]


def _outcome(make):
    try:
        sh = make()
    except Exception as exc:  # the package raises bare Exception / TypeError on bad input
        return "error", isinstance(exc, TypeError)
    return "value", sh.value, sh.f, sh.f_bytes, sh.reg


@pytest.mark.parametrize("value", [
    *TEXTS,
    ["aa", "bb", "cc", "aa"],
    [("aa", 3), ("bb", 1.5), ("dd", 70), "cc"],
    [("aa", 3), ("bb", 1.5), "cc"],  # a str item after a float weight: TypeError in both
    {"aa": 2, "bb": 100, "cc": -1},
    ["aa", 7],
    12345678901234567890,
    0,
])
def test_simhash_values_equal_the_package(value):
    assert _outcome(lambda: compat.Simhash(value)) == _outcome(lambda: pkg.Simhash(value))
    assert _outcome(lambda: compat.Simhash(iter(value) if isinstance(value, list) else value)) == _outcome(
        lambda: pkg.Simhash(iter(value) if isinstance(value, list) else value))
    if _outcome(lambda: pkg.Simhash(value))[0] == "value":
        assert compat.Simhash(compat.Simhash(value)).value == pkg.Simhash(pkg.Simhash(value)).value


@given(st.text(max_size=200), st.text(max_size=200))
@settings(max_examples=100, deadline=None)
def test_distance_and_equality_like_the_package(a, b):
    ma, mb, pa, pb = compat.Simhash(a), compat.Simhash(b), pkg.Simhash(a), pkg.Simhash(b)
    assert ma.distance(mb) == pa.distance(pb)
    assert (ma == mb) == (pa == pb)


def test_custom_reg_and_hash_functions():
    text = "Hello, World! hello again: 123 world"
    for reg in [r"\w", re.compile(r"[a-z]+")]:
        assert compat.Simhash(text, reg=reg).value == pkg.Simhash(text, reg=reg).value

    def sha1(x):
        return hashlib.sha1(x).digest()

    def int_hash(x):
        return int.from_bytes(hashlib.sha256(x).digest(), "big")  # more than 64 bits: truncated

    for h in [sha1, int_hash]:
        assert compat.Simhash(text, hashfunc=h).value == pkg.Simhash(text, hashfunc=h).value
        feats = [("ab", 2), "ef", ("cd", 0.5), ("gh", 90)]
        assert compat.Simhash(feats, hashfunc=h).value == pkg.Simhash(feats, hashfunc=h).value
    assert compat.Simhash(text, hashfunc=sha1).hashfunc_returns_int is False
    assert compat.Simhash(text, hashfunc=int_hash).hashfunc_returns_int is True


def test_what_cannot_be_kept_is_a_clear_error():
    assert pkg.Simhash("abc", f=128).f == 128  # the package has other widths; simdb stores 64 bits
    with pytest.raises(InvalidArgumentError, match="f=128 is not supported"):
        compat.Simhash("abc", f=128)
    with pytest.raises(Exception):
        pkg.Simhash(1.5)
    with pytest.raises(InvalidTypeError, match="Bad parameter"):
        compat.Simhash(1.5)
    with pytest.raises(TypeError):  # unhashable, like the package's
        hash(compat.Simhash("abc"))
    with pytest.raises(TypeError):
        hash(pkg.Simhash("abc"))


@pytest.fixture
def index_factory(database_url, collection_name):
    opened = []

    def make(objs=(), k=2, **kw):
        ix = compat.SimhashIndex(objs, k=k, database=database_url, collection=kw.pop("collection", collection_name), **kw)
        opened.append(ix)
        return ix

    yield make
    for ix in opened:
        ix.close()


def _near_values(rng, n, k):
    base = [rng.getrandbits(64) for _ in range(max(1, n // 4))]
    out = []
    for _ in range(n):
        v = rng.choice(base)
        for b in rng.sample(range(64), rng.randint(0, k + 2)):
            v ^= 1 << b
        out.append(v)
    return out


@pytest.mark.parametrize("k", [0, 2, 3, 6, 11])
def test_index_answers_like_the_package(index_factory, k):
    rng = random.Random(k)
    values = _near_values(rng, 120, k)
    objs = [(f"id{i}", pkg.Simhash(v)) for i, v in enumerate(values[:60])]
    theirs = pkg.SimhashIndex(objs, k=k)
    mine = index_factory([(i, compat.Simhash(s.value)) for i, s in objs], k=k)
    assert mine.bucket_size() == theirs.bucket_size()
    live = list(objs)
    for _step in range(150):
        op = rng.random()
        if op < 0.35:
            i = rng.randrange(len(values))
            obj_id = f"id{rng.randrange(80)}"  # the same id under several fingerprints happens
            theirs.add(obj_id, pkg.Simhash(values[i]))
            mine.add(obj_id, compat.Simhash(values[i]))
            live.append((obj_id, pkg.Simhash(values[i])))
        elif op < 0.5 and live:
            obj_id, s = live.pop(rng.randrange(len(live)))
            theirs.delete(obj_id, s)
            mine.delete(obj_id, compat.Simhash(s.value))
        else:
            q = values[rng.randrange(len(values))] ^ (1 << rng.randrange(64))
            assert sorted(mine.get_near_dups(compat.Simhash(q))) == sorted(theirs.get_near_dups(pkg.Simhash(q)))


def test_readme_example_of_the_package(index_factory):
    data = {
        1: "How are you? I Am fine. blar blar blar blar blar Thanks.",
        2: "How are you i am fine. blar blar blar blar blar than",
        3: "This is simhash test.",
    }
    theirs = pkg.SimhashIndex([(str(k), pkg.Simhash(v)) for k, v in data.items()], k=3)
    mine = index_factory([(str(k), compat.Simhash(v)) for k, v in data.items()], k=3)
    assert mine.bucket_size() == theirs.bucket_size()
    s1 = "How are you i am fine. blar blar blar blar blar thank"
    assert sorted(mine.get_near_dups(compat.Simhash(s1))) == sorted(theirs.get_near_dups(pkg.Simhash(s1)))
    mine.add("4", compat.Simhash(s1))
    theirs.add("4", pkg.Simhash(s1))
    assert sorted(mine.get_near_dups(compat.Simhash(s1))) == sorted(theirs.get_near_dups(pkg.Simhash(s1)))
    # a Simhash of the PyPI package works as a query too (its .value and .f are all that is read)
    assert sorted(mine.get_near_dups(pkg.Simhash(s1))) == sorted(theirs.get_near_dups(pkg.Simhash(s1)))
    assert list(mine.get_keys(compat.Simhash(s1))) == list(theirs.get_keys(pkg.Simhash(s1)))


def test_entries_survive_a_restart(index_factory, collection_name):
    first = index_factory([("a", compat.Simhash("the same old text about cats and dogs"))])
    first.close()
    again = index_factory(collection=collection_name)
    assert again.get_near_dups(compat.Simhash("the same old text about cats and dogs!")) == ["a"]


def test_index_errors(index_factory):
    with pytest.raises(InvalidArgumentError, match="k=12 is out of range"):
        index_factory(k=12)
    with pytest.raises(InvalidArgumentError, match="f=32 is not supported"):
        compat.SimhashIndex([], f=32)
    ix = index_factory()
    with pytest.raises(InvalidArgumentError, match="f=128"):
        ix.add("x", pkg.Simhash("abc", f=128))
    with pytest.raises(InvalidTypeError, match="must be a Simhash"):
        ix.get_near_dups("not a simhash")
    with pytest.raises(InvalidArgumentError, match=r"objs\[1\]"):
        index_factory([("a", compat.Simhash("x")), "oops"])


def test_doc_page_example_runs(fresh_database_url, monkeypatch):
    """docs/compat-simhash.md's example, as written (default collection on SIMDB_DATABASE_URL)."""
    monkeypatch.setenv("SIMDB_DATABASE_URL", fresh_database_url)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {})
