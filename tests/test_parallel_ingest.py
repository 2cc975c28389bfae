"""add_many / ``simdb add`` with workers: the same rows as one process, all or nothing, errors named."""

from __future__ import annotations

import json
import random

import pytest
from cli_support import base_env, simdb_argv

from simdb import SimhashIndex
from simdb.errors import InvalidArgumentError

WORDS = "the cat sat on a mat while 中文 分词 测试 我们 今天 去 公园 散步 dogs ran far away 12 x".split()


def items(n: int, seed: int = 1) -> list:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 40)))
        if i % 7 == 0:
            out.append({"key": f"k{i}", "text": text, "meta": {"i": i, "tab": "a\tb"}})
        elif i % 11 == 0:
            out.append({"key": f"k{i}", "fp": rnd.getrandbits(64)})
        else:
            out.append((f"k{i}", text))
    out.append((f"k{n // 2}", "the last one wins"))
    return out


def rows(ix: SimhashIndex) -> list[tuple]:
    return ix.connection().execute(
        "SELECT key, fp, meta FROM simdb_fingerprints WHERE collection_id = %s ORDER BY key", (ix.collection_id,)
    ).fetchall()


@pytest.mark.parametrize("rebuild", [None, False])
def test_workers_store_the_same_rows_as_one_process(database_url, collection_name, rebuild):
    data = items(1500)
    with SimhashIndex(database_url, collection_name + "_one") as one, SimhashIndex(database_url, collection_name) as par:
        assert one.add_many(data, chunk_rows=100, workers=1, rebuild_indexes=rebuild) == len(data)
        assert par.add_many(iter(data), chunk_rows=100, workers=2, rebuild_indexes=rebuild) == len(data)
        got = rows(par)
        assert got == rows(one) and len(got) == 1500
        assert par.get("k750").fp == par.fingerprinter.fingerprint("the last one wins")  # the collection's own


def test_an_error_in_a_worker_chunk_rolls_back_everything_and_names_the_item(database_url, collection_name):
    data = items(1000)
    data[777] = ("k777", 5)
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("keep", fp=1)
        with pytest.raises(TypeError, match=r"item 777 \(key 'k777'\)"):
            ix.add_many(data, chunk_rows=100, workers=2)
        assert len(ix) == 1


def test_workers_argument_is_checked(database_url, collection_name):
    with SimhashIndex(database_url, collection_name) as ix:
        with pytest.raises(InvalidArgumentError, match="workers"):
            ix.add_many([("a", "b")], workers=0)
        with pytest.raises(TypeError, match="workers"):
            ix.add_many([("a", "b")], workers="2")
        assert len(ix) == 0


def test_cli_add_workers(database_url, collection_name, tmp_path):
    """More records than one chunk (20,000), so --workers 2 really uses the pool."""
    import subprocess

    rnd = random.Random(9)
    path = tmp_path / "posts.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(21_000):
            fh.write(json.dumps({"id": i, "text": " ".join(rnd.choice(WORDS) for _ in range(12))}) + "\n")
    for name, workers in ((collection_name, "2"), (collection_name + "_one", "1")):
        p = subprocess.run(
            simdb_argv() + ["--json", "add", "--workers", workers, "--database-url", database_url, "-c", name, str(path)],
            capture_output=True, text=True, env=base_env(), timeout=300,
        )
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["added"] == 21_000
    with SimhashIndex(database_url, collection_name) as a, SimhashIndex(database_url, collection_name + "_one") as b:
        assert rows(a) == rows(b)
    p = subprocess.run(simdb_argv() + ["add", "--workers", "0", str(path)], capture_output=True, text=True, env=base_env())
    assert p.returncode == 2 and "--workers" in p.stderr



def test_pool_tasks_smaller_than_a_chunk_store_the_same_rows_and_name_items(database_url, collection_name, monkeypatch):
    """Chunks cut into pool tasks of another size (simdb.store.encode.POOL_TASK_ROWS) keep the
    items' order and positions: the same rows as one process, and an error names its item."""
    from simdb.store import encode

    monkeypatch.setattr(encode, "POOL_TASK_ROWS", 37)
    data = items(700)
    with SimhashIndex(database_url, collection_name + "_one") as one, SimhashIndex(database_url, collection_name) as par:
        one.add_many(data, chunk_rows=100, workers=1)
        assert par.add_many(iter(data), chunk_rows=100, workers=2) == len(data)
        assert rows(par) == rows(one)
        bad = list(data)
        bad[555] = ("k555", 5)
        with pytest.raises(TypeError, match=r"item 555 \(key 'k555'\)"):
            par.add_many(bad, chunk_rows=100, workers=2)
        assert rows(par) == rows(one)


def test_merged_in_groups_the_last_item_wins_and_an_error_undoes_every_group(database_url, collection_name, monkeypatch):
    """With workers, a load the table lock does not allow to bulk-load merges its stage every
    MERGE_GROUP_ROWS rows (simdb.store.bulk). Keys repeated across groups and keys already in
    the collection end as the last item says, like one process; an error in a late group rolls
    back the groups already merged."""
    from simdb.store import bulk, encode

    monkeypatch.setattr(encode, "POOL_TASK_ROWS", 17)
    monkeypatch.setattr(bulk, "MERGE_GROUP_ROWS", 50)
    merges = []
    real_merge = bulk.BulkLoad._merge
    monkeypatch.setattr(bulk.BulkLoad, "_merge", lambda self, conn, replace, staged: merges.append(replace) or real_merge(self, conn, replace, staged))
    data = items(600)
    data += [(f"k{i}", f"replaced in a later group {i}") for i in range(0, 600, 9)]
    with SimhashIndex(database_url, collection_name + "_one") as one, SimhashIndex(database_url, collection_name) as par:
        for ix in (one, par):  # populated: existing keys to replace, and no bulk path
            ix.add_many([(f"k{i}", f"already there {i}") for i in range(0, 900, 5)], workers=1)
        one.add_many(data, chunk_rows=100, workers=1)
        merges.clear()
        par.add_many(iter(data), chunk_rows=100, workers=2)
        assert par.last_load["rebuilt"] is False
        assert len(merges) >= len(data) // 50 - 1 and all(merges)  # in groups, each replacing keys
        assert rows(par) == rows(one)
        assert par.get("k9").fp == par.fingerprinter.fingerprint("replaced in a later group 9")
        before = rows(par)
        bad = data + [("k-bad", 5)]
        with pytest.raises(TypeError, match=rf"item {len(data)} \(key 'k-bad'\)"):
            par.add_many(bad, chunk_rows=100, workers=2)
        assert rows(par) == before
