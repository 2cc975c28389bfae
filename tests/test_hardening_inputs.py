"""Bad input files and options (issue 31, items 5, 6 and the minor ones): exit status 2 with one line
naming the file, line or option, never 4 (internal error) or 0; the same verdict from ``add`` and
``dedup`` (one reader, :mod:`simdb.dataset.records`). The CLI runs in-process (``main(argv)``), except
for stdin from ``/dev/zero``."""

from __future__ import annotations

import gzip
import io
import subprocess
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv

from simdb import SimhashIndex
from simdb.cli.main import main
from simdb.dataset.dedup import dedup_records
from simdb.errors import InputError, InvalidArgumentError, InvalidTypeError

DEEP = '{"id": "deep", "text": ' + "[" * 200_000 + "]" * 200_000 + "}\n"
GOOD_JSONL = '{"id": "a", "text": "the quick brown fox"}\n'


def cli(capsys, *argv) -> tuple[int, str]:
    """(exit status, stderr) of ``simdb ARGV`` run in this process (argparse's SystemExit included)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


def _gz(payload: bytes) -> bytes:
    return gzip.compress(payload)


def _corrupt_gz() -> bytes:
    data = bytearray(gzip.compress((GOOD_JSONL * 50).encode()))
    data[20:40] = b"\xff" * 20  # inside the deflate stream
    return bytes(data)


#: name -> (file name, content, extra options, what the one-line error names)
BAD_FILES = {
    "deep-json": ("deep.jsonl", DEEP.encode(), [], "deep.jsonl:1: invalid JSON (nested too deeply)"),
    "csv-extra-values": ("extra.csv", b"id,text\na,one\nb,two,three\n", [], "extra.csv:3: more values than columns"),
    "csv-open-quote": ("quote.csv", b'id,text\na,"never closed\nb,two\n', [], "quote.csv"),
    "nul-in-id": ("nul.jsonl", (GOOD_JSONL + '{"id": "x\\u0000y", "text": "t"}\n').encode(), [],
                  "nul.jsonl:2: key 'id'"),
    "surrogate-in-id": ("sur.jsonl", (GOOD_JSONL + '{"id": "x\\ud800", "text": "t"}\n').encode(), [],
                        "sur.jsonl:2: key 'id'"),
    "bogus-encoding": ("enc.jsonl", GOOD_JSONL.encode(), ["--encoding", "bogus"], "unknown encoding 'bogus'"),
    "bogus-encoding-csv": ("enc.csv", b"id,text\na,one\n", ["--encoding", "bogus"], "unknown encoding 'bogus'"),
    "text-over-limit": ("big.jsonl", b'{"text": "' + b"x" * 3000 + b'"}\n', ["--max-text-bytes", "1000"],
                        "big.jsonl:1: field 'text'"),
    "long-line": ("line.jsonl", b'{"text": "' + b"x" * 2_000_000 + b'"}\n', ["--max-text-bytes", "1000"],
                  "line.jsonl:1: line longer than"),
}


@pytest.mark.parametrize("command", ["add", "dedup"])
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_get_exit_2_naming_the_line_from_add_and_dedup(capsys, tmp_path, database_url, collection_name,
                                                                 case, command):
    name, content, options, named = BAD_FILES[case]
    path = tmp_path / name
    path.write_bytes(content)
    if command == "add":
        argv = ["add", path, "-c", collection_name, *options]
    else:
        argv = ["dedup", path, "-o", tmp_path / "out.jsonl", *options]
    code, err = cli(capsys, *argv, "--database-url", database_url)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and named in err, err
    assert "internal error" not in err and "000000000000" not in err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("content", [_corrupt_gz(), _gz(GOOD_JSONL.encode() * 50)[:-12], b"\x1f\x8b\x08garbage"],
                         ids=["corrupt", "truncated", "bad-header"])
def test_a_broken_gzip_is_an_input_error(capsys, tmp_path, database_url, content):
    (tmp_path / "d.jsonl.gz").write_bytes(content)
    code, err = cli(capsys, "dedup", tmp_path / "d.jsonl.gz", "-o", tmp_path / "o.jsonl", "--database-url",
                    database_url)
    assert code == 2 and "d.jsonl.gz" in err and "internal error" not in err, err


@pytest.mark.parametrize("command", ["add", "dedup"])
def test_a_huge_batch_size_is_refused_by_name(capsys, tmp_path, database_url, collection_name, command):
    (tmp_path / "d.jsonl").write_text(GOOD_JSONL)
    out = ["-c", collection_name] if command == "add" else ["-o", tmp_path / "o.jsonl"]
    code, err = cli(capsys, command, tmp_path / "d.jsonl", *out, "--batch-size", "99999999999999999999",
                    "--database-url", database_url)
    assert code == 2 and "--batch-size" in err and "islice" not in err, err


def test_an_empty_query_text_is_refused_like_empty_stdin(capsys, tmp_path, database_url, collection_name):
    (tmp_path / "d.jsonl").write_text(GOOD_JSONL)
    assert cli(capsys, "add", tmp_path / "d.jsonl", "-c", collection_name, "--database-url", database_url)[0] == 0
    for text in ("", "  "):
        code, err = cli(capsys, "query", text, "-c", collection_name, "--database-url", database_url)
        assert code == 2 and "empty" in err, err


def test_dedup_of_endless_stdin_is_refused_not_read_into_memory(tmp_path, database_url):
    """``simdb dedup - < /dev/zero`` (no newline ever): refused once a line passes the bound."""
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([*simdb_argv(), "dedup", "-", "-o", str(tmp_path / "o.jsonl"), "--max-text-bytes", "1000",
                            "--database-url", database_url], stdin=zero, capture_output=True, text=True,
                           env=base_env(), timeout=300)
    assert p.returncode == 2 and "-:1: line longer than" in p.stderr, p.stderr


def test_the_api_names_the_record_of_a_bad_key(database_url):
    records = [{"id": "a", "text": "one two three"}, {"id": "b\x00", "text": "four five six"}]
    with pytest.raises(InputError, match=r"record 2: key 'id'.*NUL"):
        list(dedup_records(records, database=database_url))


def test_add_and_dedup_read_the_same_records(tmp_path, database_url, collection_name, capsys):
    """A well-formed CSV: both commands take every row (the extra-values rule refuses only extra values)."""
    path = Path(tmp_path / "ok.csv")
    path.write_text('id,text\na,"one, two"\nb,\n')
    assert cli(capsys, "add", path, "-c", collection_name, "--database-url", database_url)[0] == 0
    assert cli(capsys, "dedup", path, "-o", tmp_path / "o.csv", "--database-url", database_url)[0] == 0
    assert (tmp_path / "o.csv").read_text().splitlines() == ["id,text", 'a,"one, two"', "b,"]
    with SimhashIndex(database_url, collection_name) as ix:
        assert len(ix) == 2 and ix.get("a") is not None and ix.get("b") is not None


@pytest.mark.parametrize("database, error, named", [
    (5, InvalidTypeError, "database must be a URL string"),
    ("not a url", InvalidArgumentError, "database is not a valid URL"),
    ("postgresql://u:secret@host:port/db", InvalidArgumentError, "database is not a valid URL"),
])
def test_the_api_names_a_bad_database_argument(database, error, named):
    with pytest.raises(error, match=named) as info:
        SimhashIndex(database)
    assert "secret" not in str(info.value)  # never the password of a URL it could not parse


def test_limit_0_is_refused_by_the_api_as_by_the_cli(database_url, collection_name, capsys):
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("a", "the quick brown fox")
        with pytest.raises(InvalidArgumentError, match="limit must be None or an int >= 1"):
            ix.near("the quick brown fox", limit=0)
        with pytest.raises(InvalidArgumentError, match="limit must be None or an int >= 1"):
            ix.near_many(["the quick brown fox"], limit=0)
    code, err = cli(capsys, "query", "the quick brown fox", "--limit", "0", "-c", collection_name,
                    "--database-url", database_url)
    assert code == 2 and "--limit" in err, err


def test_a_corrupt_parquet_page_names_the_file(capsys, tmp_path, database_url):
    """The footer reads well, a data page does not: an input error naming the file and row."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"id": f"r{i}", "text": f"record {i}"} for i in range(50)]), buf)
    data = bytearray(buf.getvalue())
    data[40:48] = b"\xff" * 8  # inside the first column chunk
    (tmp_path / "d.parquet").write_bytes(bytes(data))
    code, err = cli(capsys, "dedup", tmp_path / "d.parquet", "-o", tmp_path / "o.jsonl", "--database-url",
                    database_url)
    assert code == 2 and "d.parquet: row 1: not readable Parquet" in err, err


def test_a_password_in_the_query_string_is_masked_in_errors(tmp_path):
    """audit: ``?password=...`` was printed whole by a failed connection's message (the user part's
    password was already masked)."""
    url = "postgresql://u:userpw@127.0.0.1:1/db?password=s3cr3tpw&sslpassword=k3ypw&sslmode=disable"
    p = subprocess.run(simdb_argv() + ["collections"], check=False, capture_output=True, text=True, timeout=60,
                       env=base_env(SIMDB_DATABASE_URL=url))
    assert p.returncode != 0
    for secret in ("s3cr3tpw", "k3ypw", "userpw"):
        assert secret not in p.stderr + p.stdout
    assert "password=***" in p.stderr and "sslpassword=***" in p.stderr and "u:***@" in p.stderr, p.stderr
