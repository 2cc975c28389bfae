"""``simdb convert`` (``SimhashIndex.convert_to_verified``) of a verified collection of another sketch size
and a threshold below the band keys' reach: re-sketched, it keeps answering its own pairs without band keys."""

from __future__ import annotations

import json
import subprocess
import uuid

from cli_support import base_env, simdb_argv
from sqlalchemy import text as sql

from simdb.core import sketch as S
from simdb.index import SimhashIndex

BASE = "I really enjoyed reading this article about database indexing and will try these ideas in my own project soon"
TYPO = BASE.replace("article", "artcile")


def _make_low(url: str, name: str) -> None:
    """A verified collection of 384-value sketches with its own threshold (0.7, below the band keys'
    reach) and radius."""
    with SimhashIndex(url, name) as ix, ix.engine.begin() as c:
        verify = {"scheme": S.SCHEME, "sketch": 384, "k": 9, "min_jaccard": 0.7}
        c.execute(sql("UPDATE simdb_collections SET config = jsonb_set(config, '{verify}', CAST(:v AS jsonb)) "
                      "WHERE name = :n"), {"v": json.dumps(verify), "n": name})


def _unband(ix: SimhashIndex) -> None:
    """As a release before band keys left a collection: no ``bands`` in its config, none in its rows."""
    with ix.engine.begin() as c:
        c.execute(sql("UPDATE simdb_collections SET config = config - 'bands' WHERE name = :n"), {"n": ix.collection})
        c.execute(sql("UPDATE simdb_fingerprints SET bands = NULL WHERE collection_id = :c"), {"c": ix.collection_id})


def test_a_collection_below_the_band_keys_reach_keeps_answering_its_pairs(database_url):
    # a collection at threshold 0.7 answers pairs() from its Hamming-radius candidates; converting it
    # must not give it band keys that make pairs(), clusters(), dups and report refuse 0.7
    name = "low-" + uuid.uuid4().hex[:8]
    _make_low(database_url, name)
    with SimhashIndex(database_url, name) as ix:
        ix.add("a", BASE, meta={"text": BASE})
        ix.add("b", TYPO, meta={"text": TYPO})
        _unband(ix)
    with SimhashIndex(database_url, name) as ix:
        before = [(p.key_a, p.key_b) for p in ix.pairs()]
        assert before == [("a", "b")]
        assert ix.convert_to_verified() == 2
        assert ix.verifier == S.Verifier(k=9, min_jaccard=0.7) and ix.band_scheme is None
        (p,) = ix.pairs()
        assert (p.key_a, p.key_b) == ("a", "b") and p.jaccard >= 0.7
        assert [c.keys for c in ix.clusters()] == [["a", "b"]]
        assert ix.convert_to_verified() == 0  # nothing left to do
        with ix.engine.connect() as c:
            assert c.execute(sql("SELECT key_a, key_b FROM simdb_pairs(:n)"), {"n": name}).all() == [("a", "b")]
        ix.drop()


def test_convert_removes_band_keys_short_of_the_threshold(database_url):
    # a collection left banded below its threshold (by convert before this fix) refuses every pairs();
    # convert removes those keys, and says so
    name = "short-" + uuid.uuid4().hex[:8]
    _make_low(database_url, name)
    with SimhashIndex(database_url, name) as ix:
        ix.add("a", BASE, meta={"text": BASE})
        ix.add("b", TYPO, meta={"text": TYPO})
        _unband(ix)
        assert ix.convert_to_verified() == 2
    with SimhashIndex(database_url, name) as ix, ix.engine.begin() as c:  # as the old convert left it
        c.execute(sql("UPDATE simdb_collections SET config = jsonb_set(config, '{bands}', '\"oph-b14r5-m2-v3\"') "
                      "WHERE name = :n"), {"n": name})
    with SimhashIndex(database_url, name) as ix:
        assert ix.band_scheme is not None
    argv = simdb_argv() + ["convert", "--database-url", database_url, "-c", name]
    p = subprocess.run(argv, capture_output=True, text=True, env=base_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "removed the band keys of 2 rows" in p.stdout and "below 0.79" in p.stdout
    with SimhashIndex(database_url, name) as ix:
        assert ix.band_scheme is None
        assert [(q.key_a, q.key_b) for q in ix.pairs()] == [("a", "b")]
        ix.drop()
