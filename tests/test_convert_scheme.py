"""``simdb convert`` (``SimhashIndex.convert_to_verified``) of a verified collection of another sketch size:
re-sketched at the current size, with the current band keys, it keeps its radius and threshold."""

from __future__ import annotations

import json
import subprocess
import uuid

from cli_support import base_env, simdb_argv
from sqlalchemy import text as sql

from simdb.core import sketch as S
from simdb.core.sketch import bands as B
from simdb.index import SimhashIndex

BASE = "I really enjoyed reading this article about database indexing and will try these ideas in my own project soon"
TYPO = BASE.replace("article", "artcile")


def test_a_collection_of_another_sketch_size_is_re_sketched(database_url):
    name = "resketch-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as ix:
        ix.add("a", BASE, meta={"text": BASE})
        ix.add("b", TYPO, meta={"text": TYPO})
        with ix.engine.begin() as c:  # a collection of 384-value sketches with its own radius
            verify = {"scheme": S.SCHEME, "sketch": 384, "k": 9, "min_jaccard": 0.8}
            c.execute(sql("UPDATE simdb_collections SET config = jsonb_set(config, '{verify}', CAST(:v AS jsonb)) "
                          "WHERE name = :n"), {"v": json.dumps(verify), "n": name})
    argv = simdb_argv() + ["convert", "--database-url", database_url, "-c", name]
    p = subprocess.run(argv, capture_output=True, text=True, env=base_env(), timeout=120)
    assert p.returncode == 0 and "converted 2 rows" in p.stdout, p.stderr
    with SimhashIndex(database_url, name) as ix:
        assert ix.verifier == S.Verifier(k=9, min_jaccard=0.8) and ix.band_scheme == B.BAND_SCHEME
        (pair,) = ix.pairs()
        assert (pair.key_a, pair.key_b) == ("a", "b") and pair.jaccard >= 0.8
        assert ix.convert_to_verified() == 0  # nothing left to do
        p = subprocess.run(argv, capture_output=True, text=True, env=base_env(), timeout=120)
        assert p.returncode == 0 and "already a verified collection of the current scheme" in p.stdout, p.stderr
        ix.drop()
