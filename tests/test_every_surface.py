"""A test per surface: one planted collection, asked through every surface, one answer.

The collection (:mod:`tests.planted_support`: comments, paragraphs and Chinese texts with copies
at 1 to 16 typos) is asked for its near-duplicate pairs through the Python API (``near``,
``near_many``, ``near_key``, ``add_if_unique``, ``pairs``, ``clusters``), ``simdb.aio``, the CLI
(``query`` by text, file and key; ``dups``, ``check``, ``dedup``), the SQL functions and the
Flask extension (the framework validators are ``add_if_unique``: :mod:`simdb.validators`). Every default answer must be the API's
``pairs()`` (the collection's rule); the Hamming answer, asked by name (``verify=False``,
``--hamming``, ``simdb_pairs_hamming``), must be the pairs within 3 bits and differ from it on
this collection. ``pytest -s`` prints the surface x answer table.

Not here: the model columns and helpers of SQLAlchemy and Django (``SimhashMixin``, the
verified model mixins) search the application's own table with the model rule of
docs/verified-models.md, not a collection. Spark's ``rule_pairs`` (and ``keep_one`` fed with it) is
checked against ``pairs()`` in tests/test_spark_rule.py, apart: a Spark session costs minutes here.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import text

from simdb import SimhashIndex
from simdb.aio import AsyncSimhashIndex
from simdb.cli.main import main
from simdb.flask import SimDB
from tests.planted_support import pair_set, planted_texts

TEXTS = planted_texts()
KEYS = list(TEXTS)


@pytest.fixture(scope="module")
def planted(database_url):
    """(database URL, collection name, open index) of the planted verified collection."""
    name = f"every-{uuid.uuid4().hex[:8]}"
    index = SimhashIndex(database_url, collection=name)
    assert index.verifier is not None and index.bands
    for key, value in TEXTS.items():
        index.add(key, value)
    yield database_url, name, index
    index.drop()
    index.close()


def by_query(answers: dict[str, list[str]]) -> set[frozenset]:
    """The pairs (query key, answer key) of per-key answers, the key itself left out."""
    return {frozenset((k, a)) for k, found in answers.items() for a in found if a != k}


def components(pairs: set[frozenset]) -> list[list[str]]:
    """The connected components (two keys or more) of a pair set, each sorted, sorted."""
    parent = {k: k for p in pairs for k in p}

    def root(k: str) -> str:
        while parent[k] != k:
            k = parent[k]
        return k

    for a, b in (tuple(p) for p in pairs):
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for k in parent:
        groups.setdefault(root(k), []).append(k)
    return sorted(sorted(g) for g in groups.values())


def run_cli(capsys, planted, *argv: object, as_json: bool = True):
    url, name, _ = planted
    capsys.readouterr()
    code = main([*map(str, argv), *(["--json"] if as_json else []), "--database-url", url, "-c", name])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    return json.loads(captured.out) if as_json else captured.out


def api_answers(index: SimhashIndex) -> dict[str, set[frozenset]]:
    got = {"near(text)": by_query({k: [m.key for m in index.near(t)] for k, t in TEXTS.items()})}
    many = index.near_many(list(TEXTS.values()))
    got["near_many(texts)"] = by_query({k: [m.key for m in ms] for k, ms in zip(KEYS, many)})
    got["near_key(key)"] = by_query({k: [m.key for m in index.near_key(k)] for k in KEYS})
    refused = {}
    for k, t in TEXTS.items():  # the identical stored text is there: refused, with all its near-duplicates
        result = index.add_if_unique(f"probe-{k}", t)
        assert not result.inserted
        refused[k] = [m.key for m in result.matches]
    got["add_if_unique"] = by_query(refused)
    got["pairs()"] = pair_set((p.key_a, p.key_b) for p in index.pairs())
    return got


def aio_answers(url: str, name: str) -> tuple[dict[str, set[frozenset]], list[list[str]], set[frozenset]]:
    async def go():
        async with AsyncSimhashIndex(url, name) as aix:
            got = {"aio near": by_query({k: [m.key for m in await aix.near(t)] for k, t in TEXTS.items()})}
            many = await aix.near_many(list(TEXTS.values()))
            got["aio near_many"] = by_query({k: [m.key for m in ms] for k, ms in zip(KEYS, many)})
            got["aio near_key"] = by_query({k: [m.key for m in await aix.near_key(k)] for k in KEYS})
            refused = {}
            for k, t in TEXTS.items():
                result = await aix.add_if_unique(f"probe-{k}", t)
                assert not result.inserted
                refused[k] = [m.key for m in result.matches]
            got["aio add_if_unique"] = by_query(refused)
            got["aio pairs"] = pair_set([(p.key_a, p.key_b) async for p in aix.pairs()])
            clusters = sorted([sorted(c.keys) async for c in aix.clusters()])
            hamming = pair_set([(p.key_a, p.key_b) async for p in aix.pairs(verify=False)])
            return got, clusters, hamming

    return asyncio.run(go())


def cli_answers(capsys, planted, tmp_path: Path) -> tuple[dict[str, set[frozenset]], list[list[str]], set[frozenset]]:
    for key, value in TEXTS.items():
        (tmp_path / key).write_text(value, encoding="utf-8")
    got = {
        "query TEXT": by_query({k: [a["key"] for a in run_cli(capsys, planted, "query", t)] for k, t in TEXTS.items()}),
        "query --file": by_query({k: [a["key"] for a in run_cli(capsys, planted, "query", "--file", tmp_path / k)]
                                  for k in KEYS}),
        "query --key": by_query({k: [a["key"] for a in run_cli(capsys, planted, "query", "--key", k)] for k in KEYS}),
        "dups --pairs": pair_set((p["key_a"], p["key_b"]) for p in run_cli(capsys, planted, "dups", "--pairs")),
    }
    check = run_cli(capsys, planted, "check", "--root", tmp_path, tmp_path)
    got["check"] = by_query({Path(f["path"]).name: [m["key"] for m in f["matches"]] for f in check["files"]})
    clusters = sorted(sorted(c["keys"]) for c in run_cli(capsys, planted, "dups"))
    hamming = pair_set((p["key_a"], p["key_b"]) for p in run_cli(capsys, planted, "dups", "--pairs", "--hamming"))
    return got, clusters, hamming


def sql_answers(index: SimhashIndex) -> tuple[dict[str, set[frozenset]], set[frozenset]]:
    with index.engine.connect() as c:
        rule = pair_set(c.execute(text("SELECT key_a, key_b FROM simdb_pairs(:c)"), {"c": index.collection}))
        by_key = by_query({k: [r[0] for r in c.execute(text("SELECT key FROM simdb_near_key(:c, :k)"),
                                                         {"c": index.collection, "k": k})] for k in KEYS})
        hamming = pair_set(c.execute(text("SELECT key_a, key_b FROM simdb_pairs_hamming(:c, 3)"), {"c": index.collection}))
    return {"SQL simdb_pairs": rule, "SQL simdb_near_key": by_key}, hamming


def integration_answers(url: str, name: str) -> dict[str, set[frozenset]]:
    app = Flask(__name__)
    app.config.update(SIMDB_DATABASE_URL=url, SIMDB_COLLECTION=name)
    ext = SimDB(app)
    with app.app_context():
        got = {"Flask ext.near": by_query({k: [m.key for m in ext.near(t)] for k, t in TEXTS.items()})}
        ext.close(app)
    return got


def test_every_surface_gives_the_api_pairs(capsys, planted, tmp_path):
    url, name, index = planted
    expected = pair_set((p.key_a, p.key_b) for p in index.pairs())
    expected_clusters = sorted(sorted(c.keys) for c in index.clusters())
    hamming_api = pair_set((p.key_a, p.key_b) for p in index.pairs(verify=False))
    answers = api_answers(index)
    aio, aio_clusters, aio_hamming = aio_answers(url, name)
    cli, cli_clusters, cli_hamming = cli_answers(capsys, planted, tmp_path)
    sql, sql_hamming = sql_answers(index)
    answers |= aio | cli | sql | integration_answers(url, name)
    clusters = {"clusters()": expected_clusters, "aio clusters": aio_clusters, "dups (clusters)": cli_clusters}
    hamming = {"pairs(verify=False)": hamming_api, "aio pairs(verify=False)": aio_hamming,
               "dups --pairs --hamming": cli_hamming, "SQL simdb_pairs_hamming": sql_hamming}
    with capsys.disabled():
        print(f"\n{'surface':<26} {'pairs':>5}  answer")
        for surface, found in answers.items():
            print(f"{surface:<26} {len(found):5}  {'= pairs()' if found == expected else 'DIFFERS'}")
        for surface, found_clusters in clusters.items():
            same = found_clusters == components(expected)
            print(f"{surface:<26} {len(found_clusters):5}  {'= components of pairs()' if same else 'DIFFERS'}")
        for surface, found in hamming.items():
            print(f"{surface:<26} {len(found):5}  {'Hamming k=3 (by name)' if found == hamming_api else 'DIFFERS'}")
    assert expected and all(found == expected for found in answers.values())
    assert all(found == components(expected) for found in clusters.values())
    assert all(found == hamming_api for found in hamming.values()) and hamming_api != expected


def test_dedup_keeps_no_pair_and_removes_along_pairs(capsys, planted, tmp_path):
    """``simdb dedup`` of the planted records: every removal is a pair of the rule, and no two kept
    records are a pair of it (what a deduplication by the rule means)."""
    url, _, index = planted
    expected = pair_set((p.key_a, p.key_b) for p in index.pairs())
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in TEXTS.items()), encoding="utf-8")
    kept, log = tmp_path / "kept.jsonl", tmp_path / "removed.jsonl"
    capsys.readouterr()
    assert main(["dedup", str(records), "-o", str(kept), "--removed", str(log), "--database-url", url]) == 0
    removed = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    kept_ids = {json.loads(line)["id"] for line in kept.read_text(encoding="utf-8").splitlines()}
    assert removed and {frozenset((r["removed"], r["kept"])) for r in removed} <= expected
    assert not {p for p in expected if p <= kept_ids}
    assert kept_ids | {r["removed"] for r in removed} == set(TEXTS)
