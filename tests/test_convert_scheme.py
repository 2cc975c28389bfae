"""Issue 26: verified collections of the token 3-gram scheme keep it until converted; ``simdb convert``
(``SimhashIndex.convert_to_verified``) moves them to the character-gram default."""

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


def _make_v3(url: str, name: str) -> None:
    """A verified collection as a release before issue 26 created it (tok3-xxh64-v3, 384 values),
    with its own threshold and radius."""
    with SimhashIndex(url, name) as ix, ix.engine.begin() as c:
        verify = {"scheme": S.SCHEME_V3, "sketch": S.TOKEN_SKETCH_SIZE, "k": 9, "min_jaccard": 0.7}
        c.execute(sql("UPDATE simdb_collections SET config = jsonb_set(config, '{verify}', CAST(:v AS jsonb)) "
                      "WHERE name = :n"), {"v": json.dumps(verify), "n": name})


def _stored(ix: SimhashIndex) -> dict[str, list[int]]:
    with ix.engine.connect() as c:
        rows = c.execute(sql("SELECT f.key, f.shingles FROM simdb_fingerprints f JOIN simdb_collections c "
                             "ON c.id = f.collection_id WHERE c.name = :n"), {"n": ix.collection}).all()
    return dict(rows)


def test_an_old_scheme_answers_by_its_rule_until_converted(database_url):
    name = "v3-" + uuid.uuid4().hex[:8]
    _make_v3(database_url, name)
    with SimhashIndex(database_url, name) as ix:
        assert ix.verifier == S.Verifier(k=9, min_jaccard=0.7, size=S.TOKEN_SKETCH_SIZE, scheme=S.SCHEME_V3)
        ix.add("a", BASE, meta={"text": BASE})
        assert _stored(ix) == {"a": S.sketch(BASE, S.TOKEN_SKETCH_SIZE, S.SCHEME_V3)}
        (m,) = ix.near(TYPO, min_jaccard=0.5)
        assert m.jaccard == S.jaccard(S.token_shingles(BASE, S.SCHEME_V3), S.token_shingles(TYPO, S.SCHEME_V3)) < 0.8
        assert ix.near(TYPO, min_jaccard=0.8) == []  # the old rule: a typo in a comment is not found

        assert ix.convert_to_verified() == 1
        assert ix.verifier == S.Verifier(k=9, min_jaccard=0.7)  # the new scheme and size, its own k and threshold
        assert ix.verifier.scheme == S.SCHEME and ix.verifier.size == S.SKETCH_SIZE
        assert _stored(ix) == {"a": S.sketch(BASE, S.SKETCH_SIZE)}
        (m,) = ix.near(TYPO, min_jaccard=0.8)
        assert m.key == "a" and m.jaccard == S.jaccard(S.token_shingles(BASE), S.token_shingles(TYPO)) >= 0.8
        assert ix.convert_to_verified() == 0  # already current
    with SimhashIndex(database_url, name) as ix:  # the new config is what a reopen reads
        assert ix.verifier == S.Verifier(k=9, min_jaccard=0.7)
        ix.drop()


def test_cli_convert_moves_an_old_scheme(database_url):
    name = "v3cli-" + uuid.uuid4().hex[:8]
    _make_v3(database_url, name)
    with SimhashIndex(database_url, name) as ix:
        ix.add("a", BASE, meta={"text": BASE})

    def simdb(*args: str) -> subprocess.CompletedProcess:
        argv = simdb_argv() + [*args, "--database-url", database_url, "-c", name]
        return subprocess.run(argv, capture_output=True, text=True, env=base_env(), timeout=120)

    p = simdb("convert")
    assert p.returncode == 0, p.stderr
    assert "converted 1 rows" in p.stdout and "character 4-grams >= 0.7" in p.stdout
    assert "already a verified collection of the current scheme" in simdb("convert").stdout
    with SimhashIndex(database_url, name) as ix:
        assert ix.verifier is not None and ix.verifier.scheme == S.SCHEME
        ix.drop()


def _unband(ix: SimhashIndex) -> None:
    """As a release before band keys left a collection: no ``bands`` in its config, none in its rows."""
    with ix.engine.begin() as c:
        c.execute(sql("UPDATE simdb_collections SET config = config - 'bands' WHERE name = :n"), {"n": ix.collection})
        c.execute(sql("UPDATE simdb_fingerprints SET bands = NULL WHERE collection_id = :c"), {"c": ix.collection_id})


def test_an_old_scheme_below_the_band_keys_reach_keeps_answering_its_pairs(database_url):
    # an older release's collection at threshold 0.7 answered pairs() from its Hamming-radius candidates;
    # converting it must not give it band keys that make pairs(), clusters(), dups and report refuse 0.7
    name = "v3low-" + uuid.uuid4().hex[:8]
    _make_v3(database_url, name)
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
    name = "v3short-" + uuid.uuid4().hex[:8]
    _make_v3(database_url, name)
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
