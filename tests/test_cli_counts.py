"""The CLI's small courtesies: counts in English, a refusal when nothing could be added (and no empty
collection left behind), and blank collection names refused by the CLI and the API alike."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_support import LION, run_in_process

from simdb import SimhashIndex
from simdb.cli.output import counted
from simdb.errors import InvalidArgumentError


def run(*args) -> subprocess.CompletedProcess:
    """``simdb ARGS`` in this process: these tests check what a command says, not how a process runs."""
    return run_in_process(list(args))


def test_counted_reads_as_english():
    assert [counted(n, "text") for n in (0, 1, 2, 1000)] == ["0 texts", "1 text", "2 texts", "1,000 texts"]


def test_adding_one_text_says_text(database_url, collection_name, tmp_path):
    p = run("add", LION, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"added 1 text to collection '{collection_name}'")


def test_a_folder_of_binary_files_fails_and_creates_no_collection(database_url, collection_name, tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_bytes(b"\x00\x01\x02PNG\x00" * 50)
    p = run("add", folder, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 2, p.stdout + p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last == (f"simdb: error: nothing to add: no text could be read from {folder} (2 files skipped); "
                    f"collection '{collection_name}' was not created")
    listed = run("collections", "--json", "--database-url", database_url)
    assert listed.returncode == 0, listed.stderr
    assert collection_name not in {c["name"] for c in json.loads(listed.stdout)}


@pytest.mark.parametrize("name", ["", "   ", "\t"])
def test_a_blank_collection_name_is_refused(database_url, name):
    with pytest.raises(InvalidArgumentError, match="collection must be a non-blank str"):
        SimhashIndex(database_url, name)
    p = run("add", LION, "--database-url", database_url, "-c", name)
    assert p.returncode == 2 and "collection must be a non-blank str" in p.stderr, p.stderr


def _names(database_url) -> set[str]:
    listed = run("collections", "--json", "--database-url", database_url)
    assert listed.returncode == 0, listed.stderr
    return {c["name"] for c in json.loads(listed.stdout)}


def test_a_failed_add_creates_no_collection(database_url, collection_name, tmp_path):
    """A bad record fails the add (its batch rolled back), and the collection the add created for it is
    removed again (the audit's 't6  0 texts'); the message says so."""
    bad = tmp_path / "b2.jsonl"
    bad.write_text('{"text": "ok"}\n{"txt": "x"}\n', encoding="utf-8")
    p = run("add", bad, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        f"simdb: error: {bad}:2: no field 'text'; use --text-field "
        f"(nothing was added; collection '{collection_name}' was not created)")
    assert collection_name not in _names(database_url)
    # --unique adds one text at a time: the first was stored before the bad one, so its collection stays
    p = run("add", "--unique", bad, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 2 and "(1 texts were added before it)" in p.stderr, p.stderr
    assert collection_name in _names(database_url)


@pytest.mark.parametrize("unique", [False, True])
def test_a_bad_first_record_creates_no_collection(database_url, collection_name, tmp_path, unique):
    """Read before the collection is opened: nothing to remove afterwards."""
    bad = tmp_path / "b1.jsonl"
    bad.write_text('{"txt": "x"}\n', encoding="utf-8")
    p = run("add", *(["--unique"] if unique else []), bad, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 2 and ":1: no field 'text'" in p.stderr, p.stderr
    assert collection_name not in _names(database_url)


def test_a_failed_add_keeps_a_collection_that_existed(database_url, collection_name, tmp_path):
    """Only what the failing run created is removed: an existing collection, even an empty one (made by
    the API, with its own settings), stays as it was."""
    with SimhashIndex(database_url, collection_name, verify=False) as index:
        assert index.created
    with SimhashIndex(database_url, collection_name) as index:
        assert not index.created
    bad = tmp_path / "b2.jsonl"
    bad.write_text('{"text": "ok"}\n{"txt": "x"}\n', encoding="utf-8")
    p = run("add", bad, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 2 and "was not created" not in p.stderr, p.stderr
    assert collection_name in _names(database_url)


def test_an_add_interrupted_before_its_first_batch_creates_no_collection(database_url, collection_name, tmp_path,
                                                                         monkeypatch):
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(SimhashIndex, "add_many", interrupted)
    p = run("add", LION, "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 130, p.stderr
    monkeypatch.undo()
    assert collection_name not in _names(database_url)


def test_drop_collection_if_empty_keeps_a_collection_with_rows(database_url, collection_name):
    from simdb.store.collections import drop_collection_if_empty
    from simdb.store.connect import in_transaction

    with SimhashIndex(database_url, collection_name) as index:
        index.add("a", "a text about lions and mice")
        with in_transaction(index.engine) as conn:
            assert not drop_collection_if_empty(conn, index.collection_id, lock_timeout_ms=1000)
        index.remove("a")
        with in_transaction(index.engine) as conn:
            assert drop_collection_if_empty(conn, index.collection_id, lock_timeout_ms=1000)
    assert collection_name not in _names(database_url)
