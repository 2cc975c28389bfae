"""The SQL functions analysts call answer by the collection's rule (migration simdb_0011_sql_rule):
``simdb_pairs`` is ``SimhashIndex.pairs()``, ``simdb_near_key`` is ``near_key``, and the Hamming
answer is ``simdb_pairs_hamming`` (``pairs(verify=False)``); in a banded collection and in a plain
collection, with rows stored by fingerprint beside texts.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, text

from simdb import SimhashIndex
from simdb.store import migrate as m
from tests.planted_support import pair_set, planted_texts

TEXTS = planted_texts()


def _fill(index: SimhashIndex) -> None:
    for key, value in TEXTS.items():
        index.add(key, value)
    index.add("by-fp", fp=index.get("para-60").fp ^ 0b101)  # no sketch: paired by Hamming distance
    index.add("empty", "!!! ???")  # no features: never a near-duplicate


@pytest.fixture(scope="module", params=["banded", "plain"])
def index(request, database_url):
    name = f"sqlrule-{request.param}-{uuid.uuid4().hex[:8]}"
    ix = SimhashIndex(database_url, name, verify=False if request.param == "plain" else None)
    _fill(ix)
    yield ix
    ix.drop()
    ix.close()


def sql(index: SimhashIndex, statement: str, **params) -> list[tuple]:
    with index.engine.connect() as c:
        return [tuple(r) for r in c.execute(text(statement), {"c": index.collection, **params})]


def rows_of(pairs) -> list[tuple]:
    return [(p.key_a, p.key_b, p.distance, None if getattr(p, "jaccard", None) is None else round(p.jaccard, 9))
            for p in pairs]


def rounded(rows: list[tuple]) -> list[tuple]:
    return [(*r[:-1], None if r[-1] is None else round(r[-1], 9)) for r in rows]


@pytest.mark.parametrize("k", [3, 5])
def test_simdb_pairs_is_the_api_pairs(index, k):
    got = rounded(sql(index, "SELECT key_a, key_b, distance, jaccard FROM simdb_pairs(:c, :k)", k=k))
    expected = rows_of(index.pairs(k))
    assert sorted(got) == sorted(expected) and got
    # most similar first: jaccard (rows judged by distance last), then distance, then keys
    assert got == sorted(got, key=lambda r: (r[3] is None, -(r[3] or 0), r[2], r[0], r[1]))


def test_simdb_pairs_hamming_is_the_hamming_answer(index):
    got = sql(index, "SELECT key_a, key_b, distance FROM simdb_pairs_hamming(:c, 3)")
    assert sorted(got) == sorted((p.key_a, p.key_b, p.distance) for p in index.pairs(verify=False))
    if index.verifier is not None:  # the planted collection tells the two answers apart
        assert pair_set(got) != pair_set(sql(index, "SELECT key_a, key_b FROM simdb_pairs(:c)"))


def test_simdb_pairs_min_jaccard(index):
    if index.verifier is None:
        with pytest.raises(Exception, match="not a verified collection"):
            sql(index, "SELECT * FROM simdb_pairs(:c, 3, 0.9)")
        return
    got = rounded(sql(index, "SELECT key_a, key_b, distance, jaccard FROM simdb_pairs(:c, 3, 0.9)"))
    assert sorted(got) == sorted(rows_of(index.pairs(min_jaccard=0.9)))


def test_simdb_near_key_is_near_key(index):
    keys = [*TEXTS, "by-fp", "empty"]
    for key in keys:
        got = rounded(sql(index, "SELECT key, distance, jaccard FROM simdb_near_key(:c, :key)", key=key))
        expected = [(m.key, m.distance, None if m.jaccard is None else round(m.jaccard, 9)) for m in index.near_key(key)]
        assert got == expected, key
    assert {frozenset((key, r[0])) for key in keys
            for r in sql(index, "SELECT key FROM simdb_near_key(:c, :key)", key=key)} == pair_set(rows_of(index.pairs()))


def test_simdb_near_key_errors(index):
    with pytest.raises(Exception, match="no key 'nope'"):
        sql(index, "SELECT * FROM simdb_near_key(:c, 'nope')")
    with pytest.raises(Exception, match="no collection named"):
        sql(index, "SELECT * FROM simdb_near_key('no such collection', 'x')")
    with pytest.raises(Exception, match="k must be between 0 and 11"):
        sql(index, "SELECT * FROM simdb_pairs(:c, 12)")


def test_downgrade_restores_the_hamming_simdb_pairs(fresh_database_url):
    """Down to simdb_0010 (the revision before it): simdb_pairs is revision 0005's (three columns), the new names are gone."""
    m.migrate(fresh_database_url)
    m.downgrade(fresh_database_url, "simdb_0010_kept_texts")
    engine = create_engine(fresh_database_url)
    try:
        with engine.connect() as c:
            found = dict(c.execute(text(
                "SELECT proname, pg_get_function_result(oid) FROM pg_proc "
                "WHERE proname IN ('simdb_pairs', 'simdb_pairs_hamming', 'simdb_near_key')")).all())
    finally:
        engine.dispose()
    assert found == {"simdb_pairs": "TABLE(key_a text, key_b text, distance integer)"}
