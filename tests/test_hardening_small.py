"""Smaller hardening: the client encoding, outputs that cannot be written, lone surrogates in kept texts.

- ``PGCLIENTENCODING=SQL_ASCII`` made psycopg answer bytes (exit 4, a ``TypeError``; "cannot start
  the embedded PostgreSQL"), ``BIG5`` a codec error naming nothing: every connection simdb opens
  now asks for UTF-8 itself, and one of a caller's engine is switched to it;
- ``dedup -o`` onto a full disk said "No space left on device" without naming the file, and an
  output that is a device or a FIFO (``/dev/full``, ``/dev/stdout``) was *replaced* by a regular file;
- a lone surrogate in a text kept with ``--store-text`` / ``store_texts=True`` was stored as ``?``:
  now a typed error naming the item (the argument), as for a key, and nothing is stored.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from cli_support import base_env, run_in_process, simdb_argv
from sqlalchemy import create_engine

from simdb import SimhashIndex
from simdb.errors import InvalidArgumentError
from simdb.util.atomic_file import atomic_file

RECORD = {"key": "中文键", "text": "the quick brown fox jumps over the lazy dog 中文文本 naïve café"}


def _one_line_error(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("simdb: error: "), lines[0]
    return lines[0]


# --------------------------------------------------------------------------- PGCLIENTENCODING


@pytest.mark.parametrize("encoding", ["SQL_ASCII", "LATIN1", "BIG5", "WIN1252"])
def test_add_and_query_whatever_pgclientencoding_says(tmp_path: Path, database_url, collection_name, encoding):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(RECORD, ensure_ascii=False) + "\n", encoding="utf-8")
    env = base_env(PGCLIENTENCODING=encoding)
    common = ["--database-url", database_url, "-c", collection_name]
    added = run_in_process(["add", "--store-text", "--key-field", "key", data, *common], env=env)
    assert added.returncode == 0, added.stderr
    found = run_in_process(["query", "--json", RECORD["text"], *common], env=env)
    assert found.returncode == 0, found.stderr
    assert [m["key"] for m in json.loads(found.stdout)] == [RECORD["key"]]
    with SimhashIndex(database_url, collection=collection_name) as ix:
        assert ix.text(RECORD["key"]) == RECORD["text"]


def test_a_callers_engine_under_latin1(database_url, collection_name, monkeypatch):
    """The index's own connections of a caller's engine are switched to UTF-8 (under SQL_ASCII, SQLAlchemy
    itself cannot connect: that engine is the caller's to configure)."""
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")
    engine = create_engine(database_url)
    try:
        with SimhashIndex(engine, collection=collection_name, store_texts=True) as ix:
            ix.add(RECORD["key"], RECORD["text"])
            assert [m.key for m in ix.near(RECORD["text"])] == [RECORD["key"]]
            assert ix.text(RECORD["key"]) == RECORD["text"]
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- outputs


def _input(tmp_path: Path) -> Path:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"key": f"k{i}", "text": f"record {i} " * 50}) + "\n" for i in range(200)),
                    encoding="utf-8")
    return data


@pytest.fixture
def full_device(tmp_path: Path) -> Path:
    """A private ``/dev/full`` (the same device, its own node): the code before the fix replaced the
    node written to by a regular file, and a test must not do that to the machine's ``/dev/full``."""
    node = tmp_path / "full"
    try:
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here ({exc.strerror})")
    return node


def test_dedup_onto_a_full_device_names_it_and_leaves_it_a_device(tmp_path: Path, database_url, full_device):
    p = run_in_process(["dedup", _input(tmp_path), "-o", full_device, "--database-url", database_url])
    assert p.returncode == 2
    assert _one_line_error(p) == f"simdb: error: No space left on device: {full_device}"
    after = os.lstat(full_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == os.makedev(1, 7)


def _limit_file_size():  # in the child: files stop growing at 4 kB (EFBIG), as a full disk stops them
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_dedup_output_that_cannot_grow_names_the_file(tmp_path: Path, database_url):
    out = tmp_path / "kept.jsonl"
    p = subprocess.run(simdb_argv() + ["dedup", str(_input(tmp_path)), "-o", str(out), "--database-url", database_url],
                       capture_output=True, text=True, env=base_env(), timeout=180, preexec_fn=_limit_file_size)
    assert p.returncode == 2
    assert _one_line_error(p) == f"simdb: error: File too large: {out}"
    assert not out.exists() and sorted(f.name for f in tmp_path.iterdir()) == ["in.jsonl"]  # no partial file left


def test_dedup_into_a_fifo_writes_through_it(tmp_path: Path, database_url):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read():  # blocks until a writer opens the FIFO (before the fix none did: it was renamed over)
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p = run_in_process(["dedup", _input(tmp_path), "-o", fifo, "--database-url", database_url])
    reader.join(60)
    assert p.returncode == 0, p.stderr
    assert not reader.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(got[0].splitlines()) == 200


def test_atomic_file_write_errors_name_the_file(tmp_path: Path, full_device):
    with pytest.raises(OSError) as info, atomic_file(full_device, "w", encoding="utf-8") as f:
        f.write("x" * 100_000)
    assert info.value.filename == str(full_device)
    assert stat.S_ISCHR(os.lstat(full_device).st_mode)
    target = tmp_path / "ok.txt"
    with atomic_file(target, "w", encoding="utf-8") as f:
        f.write("é\n")
    assert target.read_text(encoding="utf-8") == "é\n"


# --------------------------------------------------------------------------- lone surrogates in kept texts


def test_store_text_refuses_a_lone_surrogate_naming_the_record(tmp_path: Path, database_url, collection_name):
    data = tmp_path / "in.jsonl"
    data.write_text('{"key": "fine", "text": "a fine text"}\n{"key": "bad", "text": "caf\\udce9 text"}\n',
                    encoding="utf-8")
    common = ["--database-url", database_url, "-c", collection_name]
    p = run_in_process(["add", "--store-text", "--key-field", "key", data, *common])
    assert p.returncode == 2
    line = _one_line_error(p)
    assert "(key 'bad')" in line and "lone surrogate '\\udce9'" in line, line
    listed = run_in_process(["collections", "--json", "--database-url", database_url])
    assert collection_name not in listed.stdout  # nothing stored: the batch, and the new collection, rolled back


def test_add_refuses_a_lone_surrogate_in_a_kept_text(database_url, collection_name):
    with SimhashIndex(database_url, collection=collection_name, store_texts=True) as ix:
        with pytest.raises(InvalidArgumentError, match=r"^text contains a lone surrogate"):
            ix.add("k", "caf\udce9 au lait")
        with pytest.raises(InvalidArgumentError, match=r"item 1 \(key 'b'\): text contains a lone surrogate"):
            ix.add_many([("a", "fine"), ("b", "caf\udce9")])
        assert ix.get("k") is None and ix.get("a") is None and len(ix) == 0
