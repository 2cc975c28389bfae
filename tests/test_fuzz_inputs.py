"""A fuzz over malformed input files and CLI options (issue 31, target: 0 exit statuses 0 or 4 on bad
input). Known-bad inputs (a valid file with one corruption drawn by hypothesis) must exit 2 from ``add``
and ``dedup``; arbitrary byte flips of a valid file may be valid, so they must exit 0 or 2, never 4.
The CLI runs in-process (``main(argv)``): a few dozen invocations in all."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.cli.main import main

GOOD = [{"id": f"r{i}", "text": f"record {i} about rivers and stones and lanterns number {i}"} for i in range(5)]
GOOD_JSONL = "".join(json.dumps(r) + "\n" for r in GOOD).encode()
GOOD_CSV = ("id,text\n" + "".join(f"{r['id']},{r['text']}\n" for r in GOOD)).encode()
FUZZ = settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


def run(capsys, *argv) -> tuple[int, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


bad_json_lines = st.one_of(
    st.sampled_from(['{"id": "x", "text": ', "[1, 2]", '"just a string"', "{not json", '{"id": "x"}',
                     '{"id": "x", "text": 5}', '{"id": {"a": 1}, "text": "t"}', '{"id": "a\\u0000b", "text": "t"}',
                     '{"id": "\\udfff", "text": "t"}']),
    st.integers(min_value=2_000, max_value=300_000).map(lambda n: '{"text": ' + "[" * n + "]" * n + "}"),
)
bad_csv_rows = st.sampled_from(['r9,one,extra', 'r9,"never closed', 'r9,"a"b"'])


def _jsonl_with(line: str, at: int) -> bytes:
    lines = GOOD_JSONL.decode().splitlines(keepends=True)
    lines.insert(at, line + "\n")
    return "".join(lines).encode()


def _argv(command: str, path: Path, tmp: Path, url: str, collection: str) -> list:
    if command == "add":
        return ["add", path, "-c", collection, "--database-url", url, "-q"]
    return ["dedup", path, "-o", tmp / "out.jsonl", "--database-url", url, "-q"]


@FUZZ
@given(line=bad_json_lines, at=st.integers(0, len(GOOD)), command=st.sampled_from(["add", "dedup"]),
       gz=st.booleans())
def test_a_bad_jsonl_line_exits_2(capsys, tmp_path, database_url, collection_name, line, at, command, gz):
    data = _jsonl_with(line, at)
    path = tmp_path / "d.jsonl"
    if gz and command == "dedup":  # add reads .gz as a text file; dedup decompresses it
        path, data = tmp_path / "d.jsonl.gz", gzip.compress(data)
    path.write_bytes(data)
    code, err = run(capsys, *_argv(command, path, tmp_path, database_url, collection_name))
    assert code == 2 and f"{path.name}:{at + 1}" in err, err


@FUZZ
@given(row=bad_csv_rows, command=st.sampled_from(["add", "dedup"]))
def test_a_bad_csv_row_exits_2(capsys, tmp_path, database_url, collection_name, row, command):
    path = tmp_path / "d.csv"
    path.write_bytes(GOOD_CSV + row.encode() + b"\n")
    code, err = run(capsys, *_argv(command, path, tmp_path, database_url, collection_name))
    assert code == 2 and "d.csv" in err, err


@FUZZ
@given(data=st.data(), kind=st.sampled_from(["jsonl", "csv", "jsonl.gz", "parquet"]))
def test_flipped_bytes_never_an_internal_error(capsys, tmp_path, database_url, data, kind):
    original = {"jsonl": GOOD_JSONL, "csv": GOOD_CSV, "jsonl.gz": gzip.compress(GOOD_JSONL),
                "parquet": _parquet()}[kind]
    raw = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / f"d.{kind}"
    path.write_bytes(bytes(raw))
    code, err = run(capsys, "dedup", path, "-o", tmp_path / "out.jsonl", "--database-url", database_url, "-q")
    assert code in (0, 2) and "internal error" not in err, err


def _parquet() -> bytes:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(GOOD), buf)
    return buf.getvalue()


OPTIONS = st.sampled_from([
    ["--batch-size", "0"], ["--batch-size", "99999999999999999999"], ["--batch-size", "-5"], ["--batch-size", "x"],
    ["--encoding", "bogus"], ["--encoding", ""], ["-k", "12"], ["-k", "-1"], ["--min-jaccard", "1.5"],
    ["--min-jaccard", "nan"], ["--max-text-bytes", "0"], ["--max-text-bytes", "99999999999999999999"],
    ["--format", "xml"], ["--keep", "middle"], ["--text-field", "nope"], ["--key-field", "nope"],
])


@FUZZ
@given(option=OPTIONS)
def test_bad_dedup_options_exit_2(capsys, tmp_path, database_url, option):
    path = tmp_path / "d.jsonl"
    path.write_bytes(GOOD_JSONL)
    code, err = run(capsys, "dedup", path, "-o", tmp_path / "out.jsonl", *option, "--database-url", database_url)
    assert code == 2 and "internal error" not in err, (option, err)
