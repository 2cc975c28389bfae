"""``simdb dedup``'s new-user audit: each problem it found, as the behaviour that replaces it.

The commands run in this process (``cli_support.run_in_process``) on a real PostgreSQL; the readers'
own rules (BOM, JSON positions, multi-line CSV records) are tested on the readers, with no database."""

from __future__ import annotations

import io
import json
import os

import pytest
from cli_support import run_in_process

from simdb.cli.dedup import _Progress
from simdb.dataset.dedup import DedupStats
from simdb.dataset.records import csv_records, jsonl_records, read_records
from simdb.errors import InputError


def cli(*args, cwd=None, input=None):
    return run_in_process([str(a) for a in args], cwd=cwd, input=input)


def one_line_error(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("simdb: error: "), lines[0]
    return lines[0]


DATA = "".join(json.dumps({"id": f"r{i}", "text": f"the quick brown fox {i % 3} jumps over the lazy dog {i % 3}"})
               + "\n" for i in range(9))


# --------------------------------------------------------------------------- 1. --removed never replaces an input


@pytest.mark.parametrize("link", ["same", "relative", "symlink", "hardlink"])
def test_removed_naming_an_input_is_refused_and_the_input_kept(database_url, tmp_path, link):
    (tmp_path / "in.jsonl").write_text(DATA)
    removed = {"same": "in.jsonl", "relative": "./sub/../in.jsonl", "symlink": "sym.jsonl", "hardlink": "hard.jsonl"}[link]
    (tmp_path / "sub").mkdir()
    if link == "symlink":
        os.symlink(tmp_path / "in.jsonl", tmp_path / "sym.jsonl")
    elif link == "hardlink":
        os.link(tmp_path / "in.jsonl", tmp_path / "hard.jsonl")
    p = cli("dedup", "in.jsonl", "-o", "out.jsonl", "--removed", removed, "--database-url", database_url,
            cwd=tmp_path)
    assert p.returncode == 2 and f"--removed {removed} is also an input" in one_line_error(p)
    assert (tmp_path / "in.jsonl").read_text() == DATA and not (tmp_path / "out.jsonl").exists()


def test_removed_naming_the_output_is_refused(database_url, tmp_path):
    (tmp_path / "in.jsonl").write_text(DATA)
    os.symlink(tmp_path / "out.jsonl", tmp_path / "dangling.jsonl")  # out.jsonl does not exist yet
    for output, removed in [("out.jsonl", "out.jsonl"), ("out.jsonl", "dangling.jsonl"), ("-", "-")]:
        p = cli("dedup", "in.jsonl", "-o", output, "--removed", removed, "--database-url", database_url,
                cwd=tmp_path)
        assert p.returncode == 2 and "--output and --removed must be different files" in one_line_error(p)
    assert sorted(os.listdir(tmp_path)) == ["dangling.jsonl", "in.jsonl"]


# --------------------------------------------------------------------------- 2-4. the readers


def _csv(data: bytes, **kw):
    return list(csv_records(io.BytesIO(data), "f.csv", "f.csv", **kw))


def _jsonl(data: bytes, **kw):
    return list(jsonl_records(io.BytesIO(data), "m.jsonl", "m.jsonl", **kw))


def test_a_utf8_bom_starts_the_file_not_the_first_column(database_url, tmp_path):
    bom = "\ufeffid,text\na1,hello world this is a text\na2,hello world this is a text\n".encode()
    for encoding in ("utf-8", "UTF8", "utf_8", "utf-8-sig"):
        assert [r.key for r in _csv(bom, encoding=encoding)] == ["a1", "a2"]
        assert [r.key for r in _csv(bom, key_field="id", encoding=encoding)] == ["a1", "a2"]
    # another encoding given explicitly is respected: the BOM's bytes are then part of the name
    with pytest.raises(InputError, match=r"no column 'id' \(columns: ï»¿id, text\)"):
        _csv(bom, key_field="id", encoding="latin-1")
    jsonl = '\ufeff{"id": "b1", "text": "hello there"}\n{"id": "b2", "text": "x"}\n'.encode()
    got = _jsonl(jsonl)
    assert [r.key for r in got] == ["b1", "b2"] and got[0].raw == b'{"id": "b1", "text": "hello there"}\n'
    with pytest.raises(InputError, match=r"m.jsonl:2: invalid JSON at column 1: Unexpected UTF-8 BOM"):
        _jsonl(b'{"text": "a"}\n\xef\xbb\xbf{"text": "b"}\n')  # only the file's start may carry one
    # the audit's command
    (tmp_path / "bom.csv").write_bytes(bom)
    p = cli("dedup", "bom.csv", "-o", "out.csv", "--key-field", "id", "--removed", "log.jsonl",
            "--database-url", database_url, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out.csv").read_text().splitlines() == ["id,text", "a1,hello world this is a text"]
    assert json.loads((tmp_path / "log.jsonl").read_text())["removed"] == "a2"


def test_invalid_json_says_where_and_what():
    with pytest.raises(InputError) as exc:
        _jsonl(b'{"id": "ok", "text": "fine"}\n{"id": "x", "text": "a\tb"}\n')
    assert str(exc.value) == "m.jsonl:2: invalid JSON at column 23: Invalid control character"
    with pytest.raises(InputError, match=r"^m.jsonl:1: invalid JSON at column 10: Expecting value$"):
        _jsonl(b'{"text": }\n')
    with pytest.raises(InputError, match=r"^m.jsonl:1: invalid JSON at column 10: Unterminated string starting$"):
        _jsonl(b'{"text": "abc')  # the last line, unterminated


def test_a_csv_record_is_located_by_its_first_line():
    data = b'id,text\n1,one\n\n2,"two\nlines"\n3,three\n,"four\nlines\nhere"\n6,six\n'
    got = [(r.key, r.where) for r in _csv(data)]
    assert got == [("1", "f.csv:2"), ("2", "f.csv:4"), ("3", "f.csv:6"), ("f.csv:7", "f.csv:7"), ("6", "f.csv:10")]
    with pytest.raises(InputError, match=r"^f.csv:4: more values than columns \(2\)$"):
        _csv(b'id,text\n1,"a\nb"\n2,b,c\n')
    assert _csv(b"id,text,n\n1,one\n")[0].fields == {"id": "1", "text": "one", "n": None}  # as DictReader


# --------------------------------------------------------------------------- 7. a directory as input


def test_a_directory_input_is_named_as_a_directory(database_url, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data.jsonl").mkdir()  # a name with a format's extension too
    for name in ("data", "data.jsonl"):
        p = cli("dedup", name, "-o", "out.jsonl", "--database-url", database_url, cwd=tmp_path)
        line = one_line_error(p)
        assert p.returncode == 2 and f"{name} is a directory: dedup reads JSONL, CSV or Parquet files" in line
        assert f"{name}/*.jsonl" in line and "--format" not in line
    with pytest.raises(InputError, match="is a directory"):
        list(read_records([str(tmp_path / "data")]))


# --------------------------------------------------------------------------- 5. a collection the run created


def test_a_failed_dedup_removes_the_collection_it_created(database_url, collection_name, tmp_path):
    """Bad input after batches were stored: the journal takes the rows out, and the new collection goes too."""
    lines = [json.dumps({"id": f"n{i}", "text": f"record number {i} about {i * 7919 % 1000} things"}) for i in range(30)]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + '\n{"text": \n')
    db = ["--database-url", database_url]
    p = cli("dedup", "bad.jsonl", "-o", "out.jsonl", "-c", collection_name, "--batch-size", "10", *db, cwd=tmp_path)
    assert p.returncode == 2 and "bad.jsonl:31: invalid JSON" in one_line_error(p)
    names = [c["name"] for c in json.loads(cli("collections", "--json", *db).stdout)]
    assert collection_name not in names and not (tmp_path / "out.jsonl").exists()


# --------------------------------------------------------------------------- 6. the progress line


def test_the_progress_line_counts_decided_records(capsys):
    """Mid-run the reader has counted a batch ahead (read 10,000) that is not decided yet: the line shows
    the records decided, which are its kept and removed."""
    progress = _Progress(True, DedupStats(read=10_000, kept=4_543, removed=457))
    progress.tick(force=True)
    progress.close()
    line = capsys.readouterr().err
    assert "dedup 5,000 records decided" in line and "kept 4,543" in line and "removed 457" in line
    assert "10,000" not in line


# --------------------------------------------------------------------------- 8. the same input deduplicated twice


def test_a_rerun_into_the_collection_warns_once_and_keeps_the_rule(database_url, collection_name, tmp_path):
    (tmp_path / "in.jsonl").write_text(DATA)
    args = ["dedup", "in.jsonl", "-o", "out.jsonl", "--removed", "log.jsonl", "-c", collection_name,
            "--database-url", database_url]
    first = cli(*args, cwd=tmp_path)
    assert first.returncode == 0 and "warning" not in first.stderr, first.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3
    again = cli(*args, "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    warnings = [x for x in again.stderr.splitlines() if "warning" in x]
    assert warnings == [f"simdb: warning: 3 records matched stored rows of the same key and were removed: was this "
                        f"input deduplicated into '{collection_name}' before? (a stored record is a near-duplicate "
                        "of itself; see docs/dedup.md)"]
    assert json.loads(again.stdout)["same_key_matches"] == 3
    # which records are kept is the documented rule's: none, each is a near-duplicate of a stored row
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert (tmp_path / "out.jsonl").read_text() == "" and len(log) == 9
    assert sum(e["removed"] == e["kept"] for e in log) == 3
