"""The new-user audit of the Python API: every misuse gets a typed simdb error naming the argument
(and still the built-in it refines), never a bare TypeError/AttributeError/RuntimeError or a silent
answer; a closed index refuses every method, sync, async and compat."""

from __future__ import annotations

import asyncio

import pytest

import simdb
from simdb import AsyncSimhashIndex, Fingerprinter, SimhashIndex
from simdb.compat.simhash import Simhash
from simdb.compat.simhash import SimhashIndex as CompatIndex
from simdb.dataset.dedup import dedup_records
from simdb.errors import (
    IndexClosedError,
    InputError,
    InvalidArgumentError,
    InvalidTypeError,
    KeyNotFoundError,
    SimdbError,
)


@pytest.fixture
def ix(database_url, collection_name):
    with SimhashIndex(database_url, collection_name) as index:
        yield index


# --------------------------------------------------------------------------- items 1-2: a closed index


def _closed_calls(ix):
    """One call of every public method of SimhashIndex (and the dunders a user reaches)."""
    return {
        "pairs": lambda: list(ix.pairs()),
        "pairs(verify=False)": lambda: list(ix.pairs(verify=False)),
        "clusters": lambda: list(ix.clusters()),
        "clusters(verify=False)": lambda: list(ix.clusters(verify=False)),
        "near": lambda: ix.near("the quick brown fox"),
        "near(featureless)": lambda: ix.near(""),
        "near(fp)": lambda: ix.near(5),
        "near_many": lambda: ix.near_many(["the quick brown fox"]),
        "near_many([])": lambda: ix.near_many([]),
        "near_key": lambda: ix.near_key("a"),
        "text_features": lambda: ix.text_features(["a b c"]),
        "prepare": lambda: ix.prepare(["a b c"]),
        "add": lambda: ix.add("b", "some text"),
        "add(featureless)": lambda: ix.add("b", ""),
        "add_many": lambda: ix.add_many([("c", "text")]),
        "add_if_unique": lambda: ix.add_if_unique("d", "text here"),
        "add_if_unique(fp)": lambda: ix.add_if_unique("d", fp=1),
        "update": lambda: ix.update("a", "new text"),
        "get": lambda: ix.get("a"),
        "text": lambda: ix.text("a"),
        "remove": lambda: ix.remove("a"),
        "remove_many": lambda: ix.remove_many(["a"]),
        "len": lambda: len(ix),
        "contains": lambda: "a" in ix,
        "clear": lambda: ix.clear(),
        "drop": lambda: ix.drop(),
        "convert_to_verified": lambda: ix.convert_to_verified(),
        "transaction": lambda: ix.transaction().__enter__(),
        "connection": lambda: ix.connection(),
    }


def test_closed_index_refuses_every_method(database_url, collection_name):
    ix = SimhashIndex(database_url, collection_name)
    ix.add_many([("a", "the quick brown fox jumps"), ("b", "the quick brown fox jumped")])
    ix.close()
    for name, call in _closed_calls(ix).items():
        with pytest.raises(IndexClosedError, match="^SimhashIndex is closed") as caught:
            call()
        assert isinstance(caught.value, RuntimeError) and isinstance(caught.value, SimdbError), name
    ix.close()  # closing twice is fine


def test_closed_async_index_refuses_and_names_itself(database_url, collection_name):
    async def main():
        a = await AsyncSimhashIndex.open(database_url, collection_name)
        await a.add("a", "the quick brown fox jumps")
        await a.close()
        calls = {
            "count": a.count, "near": lambda: a.near("the quick brown fox"), "near(fp)": lambda: a.near(5),
            "near_many": lambda: a.near_many(["x y"]), "add": lambda: a.add("b", "x y"),
            "add(fp)": lambda: a.add("b", fp=3), "update": lambda: a.update("a", "x y"),
            "get": lambda: a.get("a"), "text": lambda: a.text("a"), "remove": lambda: a.remove("a"),
            "add_many": lambda: a.add_many([("c", "x")]), "add_if_unique": lambda: a.add_if_unique("d", "x y"),
            "near_key": lambda: a.near_key("a"),
        }
        for name, call in calls.items():
            with pytest.raises(IndexClosedError, match="^AsyncSimhashIndex is closed"):
                await call()
        for stream in (a.pairs(), a.clusters()):
            with pytest.raises(IndexClosedError, match="^AsyncSimhashIndex is closed"):
                [p async for p in stream]
        with pytest.raises(IndexClosedError, match="AsyncSimhashIndex is not open"):
            await AsyncSimhashIndex(database_url, collection_name).count()

    asyncio.run(main())


def test_closed_compat_index_refuses(database_url, collection_name):
    c = CompatIndex([("1", Simhash("the quick brown fox"))], database=database_url, collection=collection_name)
    c.close()
    for call in (lambda: c.get_near_dups(Simhash("x")), lambda: c.add("2", Simhash("y")),
                 lambda: c.delete("1", Simhash("x")), lambda: c.get_keys(Simhash("x")), c.bucket_size):
        with pytest.raises(IndexClosedError, match="SimhashIndex is closed"):
            call()


def test_closed_error_is_exported():
    assert simdb.IndexClosedError is IndexClosedError and "IndexClosedError" in simdb.__all__
    assert issubclass(IndexClosedError, RuntimeError)


# --------------------------------------------------------------------------- item 3: fingerprinter=


def test_fingerprinter_must_be_a_fingerprinter(database_url, collection_name):
    with pytest.raises(InvalidTypeError, match=r"fingerprinter must be a simdb.Fingerprinter.*got str: use "
                                               r"Fingerprinter.preset\('default'\)"):
        SimhashIndex(database_url, collection_name, fingerprinter="default")
    with pytest.raises(InvalidTypeError, match="fingerprinter must be.*got dict"):
        SimhashIndex(database_url, collection_name, fingerprinter={"ngram": 3})


@pytest.mark.parametrize("flag", ["migrate", "adaptive"])
def test_index_flags_must_be_bools(database_url, collection_name, flag):
    """migrate="no" was taken as true (a non-empty string)."""
    with pytest.raises(InvalidTypeError, match=f"{flag} must be a bool, got str"):
        SimhashIndex(database_url, collection_name, **{flag: "no"})


# --------------------------------------------------------------------------- item 4: untyped errors


def test_batches_must_be_iterables(ix, database_url):
    for bad in (None, 5, "one text"):
        with pytest.raises(InvalidTypeError, match="items must be an iterable"):
            ix.add_many(bad)
        with pytest.raises(InvalidTypeError, match="records must be an iterable"):
            dedup_records(bad, database=database_url)

    async def main():
        async with AsyncSimhashIndex(database_url, ix.collection) as a:
            with pytest.raises(InvalidTypeError, match="items must be an iterable.*got NoneType"):
                await a.add_many(None)

    asyncio.run(main())
    assert len(ix) == 0


def test_async_pool_size(database_url, collection_name):
    with pytest.raises(InvalidArgumentError, match="pool_size must be an int >= 1, got 0"):
        AsyncSimhashIndex(database_url, collection_name, pool_size=0)
    with pytest.raises(InvalidTypeError, match="pool_size must be an int >= 1, got float 2.5"):
        AsyncSimhashIndex(database_url, collection_name, pool_size=2.5)


def test_compat_simhash_types():
    with pytest.raises(InvalidTypeError, match="value must be a str.*got bytes"):
        Simhash(b"x")
    with pytest.raises(InvalidTypeError, match=r"features\[0\] must be a str or a \(str, weight\) pair"):
        Simhash([b"x"])
    with pytest.raises(InvalidTypeError, match="distance: another must be a Simhash.*got NoneType"):
        Simhash("x").distance(None)
    with pytest.raises(InvalidTypeError, match="another must be a Simhash.*got int"):
        Simhash("x").distance(5)
    assert Simhash("x").distance(Simhash("x")) == 0


# --------------------------------------------------------------------------- item 5: the core's errors


def test_core_functions_raise_simdb_errors():
    for call, error, match in [
        (lambda: simdb.simhash(b"x"), InvalidTypeError, "got bytes"),
        (lambda: simdb.simhash(None), InvalidTypeError, "got NoneType"),
        (lambda: simdb.hamming(1.5, 2), InvalidTypeError, "a must be an int fingerprint, got float"),
        (lambda: simdb.hamming(-1, 2), InvalidArgumentError, "a must be an unsigned 64-bit fingerprint"),
        (lambda: Fingerprinter(tokenizer="x"), InvalidArgumentError, "tokenizer must be one of"),
        (lambda: Fingerprinter(tokenizer=3), InvalidTypeError, "tokenizer must be str"),
        (lambda: Fingerprinter().fingerprint(b"x"), InvalidTypeError, "text must be str, got bytes"),
        (lambda: Fingerprinter.preset("nope"), InvalidArgumentError, "name must be one of"),
    ]:
        with pytest.raises(error, match=match) as caught:
            call()
        assert isinstance(caught.value, SimdbError)
        assert isinstance(caught.value, TypeError if error is InvalidTypeError else ValueError)


# --------------------------------------------------------------------------- item 6: silent acceptances


def test_empty_key_is_refused_by_every_writer(ix, database_url):
    for call in (lambda: ix.add("", "some text"), lambda: ix.add("", fp=1), lambda: ix.update("", "x y"),
                 lambda: ix.add_if_unique("", "some text"), lambda: ix.add_if_unique("", fp=1),
                 lambda: ix.add_many([("a", "one text"), ("", "two text")])):
        with pytest.raises(InvalidArgumentError, match="key must be a non-empty str"):
            call()
    assert len(ix) == 0 and ix.get("") is None and "" not in ix  # readers still take ""

    async def main():
        async with AsyncSimhashIndex(database_url, ix.collection) as a:
            for call in (lambda: a.add("", "x y"), lambda: a.update("", fp=2), lambda: a.add_if_unique("", "x y"),
                         lambda: a.add_if_unique("", fp=3)):
                with pytest.raises(InvalidArgumentError, match="key must be a non-empty str"):
                    await call()

    asyncio.run(main())
    assert len(ix) == 0


def test_include_singletons_must_be_a_bool(ix):
    ix.add("a", "the quick brown fox jumps")
    for verify in (None, False):
        with pytest.raises(InvalidTypeError, match="include_singletons must be a bool, got str"):
            ix.clusters(include_singletons="no", verify=verify)
    assert [c.keys for c in ix.clusters(include_singletons=True)] == [["a"]]


def test_text_and_fp_together_are_refused(ix, database_url):
    for call in (lambda: ix.add("k", "the quick brown fox", fp=5), lambda: ix.update("k", "x y", fp=5),
                 lambda: ix.add_if_unique("k", "the quick brown fox", fp=5)):
        with pytest.raises(InvalidArgumentError, match="give text or fp, not both"):
            call()
    assert len(ix) == 0

    async def main():
        async with AsyncSimhashIndex(database_url, ix.collection) as a:
            for call in (lambda: a.add("k", "x y", fp=5), lambda: a.add_if_unique("k", "x y", fp=5)):
                with pytest.raises(InvalidArgumentError, match="give text or fp, not both"):
                    await call()

    asyncio.run(main())
    assert len(ix) == 0


def test_null_text_record_is_an_empty_text_as_in_the_cli(database_url):
    kept = list(dedup_records([{"id": 1, "text": None}, {"id": 2, "text": "the quick brown fox"}],
                              database=database_url))
    assert [r["id"] for r in kept] == [1, 2]
    with pytest.raises(InputError, match="record 1: field 'text' is not a string"):
        list(dedup_records([{"id": 1, "text": b"x"}], database=database_url))


def test_missing_key_is_key_not_found(ix, database_url):
    for call in (lambda: ix.update("nope", "x y"), lambda: ix.near_key("nope")):
        with pytest.raises(KeyNotFoundError, match=f"key 'nope' is not in collection '{ix.collection}'") as caught:
            call()
        assert isinstance(caught.value, KeyError) and isinstance(caught.value, SimdbError)

    async def main():
        async with AsyncSimhashIndex(database_url, ix.collection) as a:
            for call in (lambda: a.update("nope", fp=1), lambda: a.near_key("nope")):
                with pytest.raises(KeyNotFoundError, match="key 'nope' is not in collection"):
                    await call()

    asyncio.run(main())
    assert simdb.KeyNotFoundError is KeyNotFoundError
