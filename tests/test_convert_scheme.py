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
