"""The report shows only what it was given: stored texts, or files inside ``texts_from`` (issue 15, item 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv

from simdb import SimhashIndex
from simdb.errors import InvalidArgumentError
from simdb.report import write_report

PASSWD = Path("/etc/passwd")
TEXT = "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm afternoon sun"
NEAR = TEXT.replace("sleeps", "naps")


def _secret_marker() -> str:
    """A line of /etc/passwd that appears in no text of these tests."""
    line = PASSWD.read_text().splitlines()[0]
    assert line and line not in TEXT
    return line


pytestmark = pytest.mark.skipif(not PASSWD.is_file(), reason="needs /etc/passwd")


def _fill(index: SimhashIndex, docs: Path) -> None:
    """Near-duplicate pairs whose keys point at files in all the ways that must not be followed."""
    (docs / "inside.txt").write_text(TEXT + " inside", encoding="utf-8")
    os.symlink(PASSWD, docs / "link-out.txt")
    os.mkfifo(docs / "pipe.txt")  # reading it would block forever
    index.add("/etc/passwd", TEXT)
    index.add("near-of-passwd", NEAR)
    index.add("../../../../../../etc/passwd", TEXT + " dotdot")
    index.add("link-out.txt", TEXT + " link")
    index.add("pipe.txt", TEXT + " pipe")
    index.add("inside.txt", TEXT + " inside")


def test_api_never_reads_a_path_from_a_key(database_url, collection_name, tmp_path):
    secret = _secret_marker()
    docs = tmp_path / "docs"
    docs.mkdir()
    with SimhashIndex(database_url, collection_name) as index:
        _fill(index, docs)
        # no texts_from: no file is read at all
        out = tmp_path / "plain.html"
        res = write_report(index, out, k=11)
        assert res.clusters >= 1
        page = out.read_text(encoding="utf-8")
        assert "/etc/passwd" in page  # the key is listed (as data) ...
        assert secret not in page  # ... but the file is not read
        assert TEXT + " inside" not in page
        # texts_from=docs: only the regular file inside docs
        out = tmp_path / "dir.html"
        write_report(index, out, k=11, texts_from=docs)
        page = out.read_text(encoding="utf-8")
        assert secret not in page  # absolute path outside, ../.., and a symlink out are all refused
        assert TEXT + " inside" in page  # the file inside is shown
        with pytest.raises(InvalidArgumentError, match="texts_from"):
            write_report(index, tmp_path / "x.html", texts_from=docs / "inside.txt")  # not a directory
        with pytest.raises(InvalidArgumentError, match="read_files=True"):
            write_report(index, tmp_path / "x.html", read_files=True)


def test_cli_report_with_etc_passwd_as_a_key(database_url, collection_name, tmp_path):
    import subprocess

    secret = _secret_marker()
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "/etc/passwd", "text": TEXT}) + "\n"
                       + json.dumps({"id": "other", "text": NEAR}) + "\n", encoding="utf-8")
    env = base_env(SIMDB_DATABASE_URL=database_url)

    def simdb(*args):
        return subprocess.run(simdb_argv() + [str(a) for a in args] + ["-c", collection_name],
                              check=False, capture_output=True, text=True, env=env, timeout=180)

    assert simdb("add", "--rule", "hamming", records).returncode == 0  # clusters at k=11 (Hamming rule)
    for extra in ([], ["--texts-from", tmp_path], ["--texts-from", "/"]):
        out = tmp_path / "r.html"
        p = simdb("report", "-k", "11", "--output", out, *extra)
        assert p.returncode == 0, p.stderr
        page = out.read_text(encoding="utf-8")
        assert "/etc/passwd" in page
        if extra[-1:] == ["/"]:
            # the user named "/" explicitly: files under it may be shown; that is the user's choice
            continue
        assert secret not in page, extra
    p = simdb("report", "--output", tmp_path / "r.html", "--texts-from", tmp_path / "missing")
    assert p.returncode == 2 and "not a directory" in p.stderr
