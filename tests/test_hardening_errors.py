"""Clear errors for bad input (issue 15, items 4-7): a typed error naming the argument, item or line;
exit status 2 at the CLI; never a raw driver error, a silent wrong answer or a whole folder lost."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from cli_support import base_env, run_in_process, simdb_argv

from simdb import SimhashIndex
from simdb.errors import (
    InputTooLargeError,
    InvalidArgumentError,
    InvalidTypeError,
    SimdbError,
)

SURROGATE = "bad\udc80key"


@pytest.fixture
def ix(database_url, collection_name):
    with SimhashIndex(database_url, collection_name) as index:
        yield index


# --------------------------------------------------------------------------- API


def test_lone_surrogates_are_named(ix, database_url, collection_name):
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        ix.add(SURROGATE, "some text")
    with pytest.raises(InvalidArgumentError, match=r"item 1 \(key 'bad\\udc80key'\).*lone surrogate"):
        ix.add_many([("good", "text one"), (SURROGATE, "text two")])
    with pytest.raises(InvalidArgumentError, match=r"add_many: item 0.*meta.*lone surrogate"):
        ix.add_many([{"key": "m", "text": "x", "meta": {"note": "\ud800"}}])
    with pytest.raises(InvalidArgumentError, match="meta.*lone surrogate"):
        ix.add("m", "x", meta="\ud800")
    with pytest.raises(InvalidArgumentError, match="collection.*lone surrogate"):
        SimhashIndex(database_url, "coll\udc80")
    assert len(ix) == 0  # all or nothing


def test_incompressible_long_key_is_input_too_large(ix):
    import random

    rnd = random.Random(5)
    key = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(3000))  # ~9 kB that does not compress
    with pytest.raises(InputTooLargeError, match="key '.*too large for PostgreSQL's key index"):
        ix.add(key, "some text")
    with pytest.raises(InputTooLargeError, match="add_many: a key is too large"):
        ix.add_many([("fine", "text"), (key, "text")])
    assert len(ix) == 0
    ix.add("x" * 100_000, "text")  # compressible: fits
    assert ix.get("x" * 100_000) is not None


def test_near_many_arguments(ix):
    ix.add("a", "the quick brown fox jumps over the lazy dog")
    with pytest.raises(InvalidTypeError, match="not a single str"):
        ix.near_many("abc")
    assert ix.near_many(["the quick brown fox jumps over the lazy dog"], k=None) == [
        ix.near("the quick brown fox jumps over the lazy dog", k=None)
    ]
    with pytest.raises(InvalidTypeError, match=r"queries\[1\]"):
        ix.near_many(["x", 1.5])


def test_text_size_limit(database_url, collection_name, monkeypatch):
    with SimhashIndex(database_url, collection_name, max_text_bytes=100) as ix:
        assert ix.max_text_bytes == 100
        ix.add("ok", "word " * 20)
        with pytest.raises(InputTooLargeError, match="text is .*more than the maximum text size of 100 bytes"):
            ix.add("big", "word " * 21)
        with pytest.raises(InputTooLargeError, match=r"add_many: item 1 \(key 'big'\)"):
            ix.add_many([("ok2", "fine"), ("big", "é" * 51)])  # 102 bytes of UTF-8 in 51 characters
        with pytest.raises(InputTooLargeError, match="query"):
            ix.near("word " * 21)
        with pytest.raises(InputTooLargeError, match=r"queries\[0\]"):
            ix.near_many(["word " * 21])
        assert [e.key for e in [ix.get("ok")]] == ["ok"] and ix.get("big") is None
    monkeypatch.setenv("SIMDB_MAX_TEXT_BYTES", "50")
    with SimhashIndex(database_url, collection_name) as ix:
        assert ix.max_text_bytes == 50
        with pytest.raises(InputTooLargeError):
            ix.near("word " * 11)
    monkeypatch.setenv("SIMDB_MAX_TEXT_BYTES", "lots")
    with pytest.raises(InvalidArgumentError, match="SIMDB_MAX_TEXT_BYTES"):
        SimhashIndex(database_url, collection_name)
    with pytest.raises(InvalidArgumentError, match="max_text_bytes"):
        SimhashIndex(database_url, collection_name, max_text_bytes=0)


def test_typed_errors_are_also_the_builtins(ix):
    with pytest.raises(ValueError):
        ix.near("x", k=12)
    with pytest.raises(TypeError):
        ix.near("x", k="3")
    with pytest.raises(SimdbError):
        ix.near("x", limit=-1)


# --------------------------------------------------------------------------- CLI


def run(*args, env=None, input=None, timeout=120):
    return subprocess.run(simdb_argv() + [str(a) for a in args], check=False, capture_output=True, text=True,
                          env=env or base_env(), input=input, timeout=timeout)


@pytest.fixture
def db(database_url, collection_name):
    """``simdb`` on the test database and a fresh collection: in this process (what it answers is
    made by ``main``), or a real process when given a ``timeout`` (a command that must not block on
    a FIFO or /dev/zero: blocking in-process would hang the suite instead of failing the test)."""

    def call(*args, input=None, timeout=None):
        argv = [*args, "--database-url", database_url, "-c", collection_name]
        if timeout is not None:
            return run(*argv, input=input, timeout=timeout)
        return run_in_process(argv, input=input)

    return call


def one_line(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_cli_parsing(db):
    p = db("query", "--k", "99", "hello")  # was read as --key 99
    assert p.returncode == 2 and "unrecognized arguments: --k" in one_line(p)
    p = db("query", "--lim", "3", "hello")  # no prefix matching anywhere
    assert p.returncode == 2 and "unrecognized" in one_line(p)
    p = db("query", "-k", "12", "hello")
    assert p.returncode == 2 and "invalid k 12" in one_line(p)
    assert "0..11" in run("query", "--help").stdout
    assert "0 to 3" not in run("query", "--help").stdout
    assert db("add", "--store-text", os.devnull).returncode == 2  # /dev/null is not a regular file


def test_cli_query_reads_only_what_it_may(db, tmp_path):
    (tmp_path / "a.txt").write_text("the lion and the mouse", encoding="utf-8")
    assert db("add", tmp_path / "a.txt").returncode == 0
    p = db("query", input="")
    assert p.returncode == 2 and "standard input is empty" in one_line(p)
    start = time.monotonic()
    p = db("query", "--file", "/dev/zero", timeout=60)
    assert p.returncode == 2 and "not a regular file" in one_line(p)
    assert time.monotonic() - start < 60
    big = tmp_path / "big.txt"
    big.write_text("word " * 300, encoding="utf-8")
    p = db("query", "--max-text-bytes", "1000", "--file", big)
    assert p.returncode == 2 and "maximum text size of 1,000 bytes" in one_line(p)
    p = db("query", "--max-text-bytes", "1000", input="word " * 300)
    assert p.returncode == 2 and "standard input is larger" in one_line(p)


def test_cli_records_name_the_line(db, tmp_path):
    jl = tmp_path / "r.jsonl"
    jl.write_text(json.dumps({"id": "ok", "text": "one two"}) + "\n"
                  + '{"id": "bad\\udc80", "text": "three four"}\n', encoding="utf-8")
    p = db("add", jl)
    assert p.returncode == 2 and f"{jl}:2" in one_line(p) and "lone surrogate" in one_line(p)
    csv_file = tmp_path / "r.csv"
    csv_file.write_text('id,text\n1,"unterminated\n', encoding="utf-8")
    p = db("add", csv_file)
    assert p.returncode == 2 and "invalid CSV" in one_line(p)


def test_cli_non_utf8_file_name_is_skipped_not_fatal(db, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "good.txt").write_text("a perfectly fine text about foxes", encoding="utf-8")
    bad = os.path.join(os.fsencode(folder), b"caf\xe9.txt")
    with open(bad, "wb") as f:
        f.write(b"a text in a badly named file")
    p = db("add", folder)
    assert p.returncode == 0, p.stderr
    assert "added 1 text to" in p.stdout
    assert "caf\\xe9.txt" in p.stderr and "not valid UTF-8" in p.stderr
    p = db("add", "--json", folder)
    skipped = json.loads(p.stdout)["skipped_files"]
    assert [s["key"].endswith("caf\\xe9.txt") for s in skipped] == [True]


def test_cli_oversized_key_is_bad_input_not_a_database_error(db, tmp_path):
    import random

    rnd = random.Random(9)
    key = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(3000))
    jl = tmp_path / "k.jsonl"
    jl.write_text(json.dumps({"id": key, "text": "some words here"}, ensure_ascii=False) + "\n", encoding="utf-8")
    p = db("add", jl)
    assert p.returncode == 2 and "too large for PostgreSQL's key index" in one_line(p)


def test_cli_never_blocks_on_a_fifo_and_bounds_records(db, tmp_path):
    (tmp_path / "a.txt").write_text("the lion and the mouse", encoding="utf-8")
    assert db("add", tmp_path / "a.txt").returncode == 0
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait forever
    p = db("query", "--file", fifo, timeout=60)
    assert p.returncode == 2 and "not a regular file" in one_line(p)
    jl = tmp_path / "long.jsonl"
    jl.write_text(json.dumps({"id": "a", "text": "word " * 100}) + "\n", encoding="utf-8")
    p = db("add", "--max-text-bytes", "100", jl)
    assert p.returncode == 2 and f"{jl}:1" in one_line(p)
    csv_file = tmp_path / "long.csv"
    csv_file.write_text("id,text\n1," + "w" * 500 + "\n", encoding="utf-8")
    p = db("add", "--max-text-bytes", "100", csv_file)
    assert p.returncode == 2 and "long.csv" in one_line(p)
