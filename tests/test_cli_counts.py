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
