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
