"""``simdb dedup``, file keys in ``add``/``check`` and ``psql -c``, on a real PostgreSQL.

The commands run in this process (``cli``: ``cli_support.run_in_process``) where what they answer is
tested; a real ``simdb`` process (``run``) where the process is: an import path of its own (no
pyarrow), psql's output (psql's own process writes it), Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import LION, LION_TYPO, SAMPLE, WOLF, base_env, popen_interruptible, run_in_process, simdb_argv

from simdb import dedup_records
from simdb.dataset.records import file_key, is_same_file, read_records

TEXTS = [p.read_text(encoding="utf-8") for p in sorted((SAMPLE / "originals").glob("*.txt"))]


def run(*args, env=None, input=None, timeout=180, cwd=None, text=True) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=text,
                          env=env or base_env(), input=input, timeout=timeout, cwd=cwd)


def cli(*args, env=None, input=None, cwd=None, text=True) -> subprocess.CompletedProcess:
    return run_in_process(list(args), env=env, input=input, cwd=cwd, text=text)


def one_line_error(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("simdb: error: "), lines[0]
    return lines[0]


def _records() -> list[dict]:
    """Fables, their copies and typo'd variants, interleaved; keys r0, r1, ..."""
    out = []
    for i, t in enumerate(TEXTS[:8]):
        out.append({"text": t, "title": f"fable {i}"})
        out.append({"text": t.replace(" the ", " a ", 1), "title": f"fable {i} edited"})
        if i % 3 == 0:
            out.append({"text": t, "title": f"fable {i} copy"})
    out.append({"text": LION_TYPO.read_text(encoding="utf-8"), "title": "lion typo"})
    return [{"id": f"r{n}", **r} for n, r in enumerate(out)]


def _write_jsonl(path: Path, records: list[dict]) -> bytes:
    # unusual spacing and key order: the output must keep each kept line byte for byte
    data = "".join(json.dumps(r, indent=None, separators=(" ,", ": ")) + "\n" for r in records).encode()
    path.write_bytes(data)
    return data


def test_jsonl_dedup_equals_the_python_function_and_keeps_lines(database_url, tmp_path):
    records = _records()
    raw = _write_jsonl(tmp_path / "in.jsonl", records)
    p = cli("dedup", "in.jsonl", "-o", "out.jsonl", "--removed", "removed.jsonl", "--json", "-k", "3",
            "--database-url", database_url, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    out_lines = (tmp_path / "out.jsonl").read_bytes().splitlines(keepends=True)
    log = [json.loads(x) for x in (tmp_path / "removed.jsonl").read_text().splitlines()]
    expected = list(dedup_records(records, database=database_url, k=3))
    assert [json.loads(x)["id"] for x in out_lines] == [r["id"] for r in expected]
    assert all(line in raw.splitlines(keepends=True) for line in out_lines)  # unchanged bytes
    assert summary["read"] == len(records) and summary["kept"] == len(out_lines) and summary["removed"] == len(log)
    assert len(out_lines) + len(log) == len(records) and log
    kept_ids = {json.loads(x)["id"] for x in out_lines}
    for entry in log:
        assert entry["kept"] in kept_ids and entry["removed"] not in kept_ids
        assert entry["distance"] <= 3 and entry["where"].startswith("in.jsonl:")
    assert not list(tmp_path.glob(".*partial"))
    # the temporary collection is gone
    p = cli("collections", "--json", "--database-url", database_url)
    assert not [c for c in json.loads(p.stdout) if c["name"].startswith("_simdb_dedup_")]


def test_keep_longest_and_last_stdin_stdout_csv(database_url, tmp_path):
    records = _records()
    data = "".join(json.dumps(r) + "\n" for r in records)
    for keep in ("longest", "last"):
        p = cli("dedup", "-", "-o", "-", "--keep", keep, "-q", "--database-url", database_url, input=data)
        assert p.returncode == 0, p.stderr
        got = [json.loads(x)["id"] for x in p.stdout.splitlines()]
        assert got == [r["id"] for r in dedup_records(records, database=database_url, keep=keep)]
    # CSV in, CSV out: the same columns, the kept rows
    with open(tmp_path / "in.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["id", "title", "text"])
        w.writeheader()
        w.writerows(records)
    p = cli("dedup", tmp_path / "in.csv", "-o", tmp_path / "out.csv", "--database-url", database_url)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["id"] for r in rows] == [r["id"] for r in dedup_records(records, database=database_url)]
    assert rows[0] == {k: str(v) for k, v in records[0].items()}
    assert "kept" in p.stderr and "removed" in p.stderr  # the summary line on stderr


def test_parquet_in_and_out(database_url, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = [{**r, "n": i} for i, r in enumerate(_records())]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "in.parquet")
    p = cli("dedup", tmp_path / "in.parquet", "-o", tmp_path / "out.parquet", "--database-url", database_url)
    assert p.returncode == 0, p.stderr
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.schema == pq.read_schema(tmp_path / "in.parquet")
    assert table.to_pylist() == list(dedup_records(records, database=database_url))
    p = cli("dedup", tmp_path / "in.parquet", "-o", tmp_path / "out.jsonl", "--database-url", database_url)
    assert [json.loads(x)["n"] for x in (tmp_path / "out.jsonl").read_text().splitlines()] == table["n"].to_pylist()


def test_parquet_without_pyarrow_says_what_to_install(database_url, tmp_path):
    fake = tmp_path / "nopyarrow" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    (tmp_path / "in.jsonl").write_text('{"text": "a b c"}\n')
    env = base_env(PYTHONPATH=str(fake.parent))
    p = run("dedup", tmp_path / "in.jsonl", "-o", tmp_path / "out.parquet", "--database-url", database_url, env=env)
    assert p.returncode == 2 and "simdb-postgres[parquet]" in one_line_error(p)
    assert not (tmp_path / "out.parquet").exists()


def test_incremental_dedup_against_a_collection(database_url, collection_name, tmp_path):
    records = _records()
    _write_jsonl(tmp_path / "a.jsonl", records[:10])
    _write_jsonl(tmp_path / "b.jsonl", records[10:])
    common = ["--database-url", database_url, "-c", collection_name, "-k", "3"]
    p = cli("dedup", tmp_path / "a.jsonl", "-o", tmp_path / "a.out", "--output-format", "jsonl", *common)
    assert p.returncode == 0, p.stderr
    p = cli("dedup", tmp_path / "b.jsonl", "-o", tmp_path / "b.out.jsonl", "--removed", tmp_path / "b.removed",
            *common)
    assert p.returncode == 0, p.stderr
    kept = [json.loads(x)["id"] for f in ("a.out", "b.out.jsonl") for x in (tmp_path / f).read_text().splitlines()]
    assert kept == [r["id"] for r in dedup_records(records, database=database_url, k=3)]
    p = cli("stats", "--json", *common)
    assert json.loads(p.stdout)["texts"] == len(kept)


def test_summary_and_stats_file(tmp_path):
    """The end-of-run summary has the input's MB and MB/s; --stats FILE holds it as JSON (refused when it
    is an output or an input)."""
    records = _records()
    data = _write_jsonl(tmp_path / "in.jsonl", records)
    p = cli("dedup", tmp_path / "in.jsonl", "-o", tmp_path / "out.jsonl", "--stats", tmp_path / "stats.json")
    assert p.returncode == 0, p.stderr
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["read"] == len(records) == stats["kept"] + stats["removed"]
    assert stats["input_mb"] == round(len(data) / 1e6, 3) and stats["mb_per_s"] > 0
    assert "kept" in p.stderr and "records" in p.stderr
    for target in ("out.jsonl", "in.jsonl"):
        p = cli("dedup", tmp_path / "in.jsonl", "-o", tmp_path / "out.jsonl", "--stats", tmp_path / target)
        assert p.returncode == 2 and "--stats" in p.stderr


def test_dedup_against_a_collection_reads_it_only(database_url, collection_name, tmp_path):
    """--against NAME: the new records checked against NAME's (the log names NAME's keys), NAME unchanged;
    the same kept records as one dedup of both files in a row; a missing NAME is exit 2, not created."""
    records = _records()
    _write_jsonl(tmp_path / "old.jsonl", records[:10])
    _write_jsonl(tmp_path / "new.jsonl", records[10:])
    common = ["--database-url", database_url, "-k", "3"]
    p = cli("dedup", tmp_path / "old.jsonl", "-o", tmp_path / "old.out.jsonl", "-c", collection_name, *common)
    assert p.returncode == 0, p.stderr
    before = json.loads(cli("stats", "--json", "-c", collection_name, *common).stdout)["texts"]
    p = cli("dedup", tmp_path / "new.jsonl", "-o", tmp_path / "new.out.jsonl", "--removed", tmp_path / "log.jsonl",
            "--against", collection_name, "--json", *common)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["against"] == collection_name
    kept = [json.loads(x)["id"] for f in ("old.out.jsonl", "new.out.jsonl") for x in (tmp_path / f).read_text().splitlines()]
    assert kept == [r["id"] for r in dedup_records(records, k=3)]
    old_ids = {r["id"] for r in records[:10]}
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert any(r["kept"] in old_ids for r in log)
    assert json.loads(cli("stats", "--json", "-c", collection_name, *common).stdout)["texts"] == before
    p = cli("dedup", tmp_path / "new.jsonl", "-o", tmp_path / "x.jsonl", "--against", "no_such_collection", *common)
    assert p.returncode == 2 and "no collection 'no_such_collection'" in p.stderr
    assert "no_such_collection" not in cli("collections", *common[:2]).stdout


def test_interrupt_leaves_no_partial_output(database_url, tmp_path):
    import random

    rng = random.Random(5)
    words = " ".join(TEXTS).split()
    with open(tmp_path / "big.jsonl", "w") as fh:
        for i in range(200_000):
            fh.write(json.dumps({"id": i, "text": " ".join(rng.choice(words) for _ in range(30))}) + "\n")
    proc = popen_interruptible(
        simdb_argv() + ["dedup", str(tmp_path / "big.jsonl"), "-o", str(tmp_path / "out.jsonl"), "--removed",
                        str(tmp_path / "removed.jsonl"), "--progress", "--database-url", database_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not list(tmp_path.glob(".out.jsonl.*")):
        time.sleep(0.05)
    time.sleep(1.0)  # some records done
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["big.jsonl"]  # no output, no log, no temporary file
    p = cli("collections", "--json", "--database-url", database_url)
    assert not [c for c in json.loads(p.stdout) if c["name"].startswith("_simdb_dedup_")]


def test_bad_input_is_one_line_exit_2(database_url, tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": \n')
    p = cli("dedup", tmp_path / "bad.jsonl", "-o", tmp_path / "out.jsonl", "--database-url", database_url)
    assert p.returncode == 2 and "bad.jsonl:2: invalid JSON" in one_line_error(p)
    assert not (tmp_path / "out.jsonl").exists()
    p = cli("dedup", tmp_path / "nope.jsonl", "-o", tmp_path / "out.jsonl", "--database-url", database_url)
    assert p.returncode == 2 and "no such file" in one_line_error(p)
    p = cli("dedup", tmp_path / "x.txt", "-o", "-", "--database-url", database_url)
    assert p.returncode == 2 and "--format" in one_line_error(p)
    p = cli("dedup", tmp_path / "bad.jsonl", "-o", tmp_path / "no" / "out.jsonl", "--database-url", database_url)
    assert p.returncode == 2 and "no such directory" in one_line_error(p)


def test_keep_choices_mirror_the_library():
    from simdb.cli import dedup as cli_dedup
    from simdb.dataset import dedup as dedup_dataset

    assert cli_dedup.KEEP == dedup_dataset.KEEP and cli_dedup.BATCH == dedup_dataset.BATCH


# --------------------------------------------------------------------------- file keys: add and check


def test_check_never_matches_a_file_against_itself(database_url, collection_name, tmp_path):
    repo = tmp_path / "repo"
    (repo / "man").mkdir(parents=True)
    (repo / "man" / "ls.txt").write_text(LION.read_text(encoding="utf-8"), encoding="utf-8")
    (repo / "man" / "cp.txt").write_text(WOLF.read_text(encoding="utf-8"), encoding="utf-8")
    db = ["--database-url", database_url, "-c", collection_name]
    p = cli("add", "man", *db, cwd=repo)
    assert p.returncode == 0, p.stderr
    p = cli("query", "--json", "--key", "man/ls.txt", *db)
    assert p.returncode == 0, p.stderr  # the key is relative to the current directory
    target = repo / "man" / "ls.txt"
    for cwd, path, extra in [
        (repo, "man/ls.txt", []),
        (repo, target, []),  # absolute
        (repo / "man", "ls.txt", []),  # another directory, relative
        (repo / "man", target, []),
        (tmp_path, target, []),
        (repo / "man", "ls.txt", ["--root", ".."]),
        (repo, "./man/../man/ls.txt", []),
    ]:
        p = cli("check", path, *extra, *db, cwd=cwd)
        assert p.returncode == 0, (cwd, path, p.stdout, p.stderr)
    # a copy elsewhere is still found, from anywhere
    (tmp_path / "copy.txt").write_text(LION.read_text(encoding="utf-8"), encoding="utf-8")
    p = cli("check", tmp_path / "copy.txt", *db, cwd=repo / "man")
    assert p.returncode == 1 and "near-duplicate of man/ls.txt" in p.stdout


def test_check_recognises_keys_of_the_old_rule(database_url, collection_name, tmp_path):
    """Collections added before --root keyed files by the path as given: still never self-matches."""
    from simdb import SimhashIndex

    f = tmp_path / "a.txt"
    f.write_text(LION.read_text(encoding="utf-8"), encoding="utf-8")
    with SimhashIndex(database_url, collection=collection_name) as ix:
        ix.add(f.as_posix(), f.read_text(encoding="utf-8"))  # old rule, absolute path given, no meta
    sub = tmp_path / "sub"
    sub.mkdir()
    for cwd, path in [(tmp_path, "a.txt"), (sub, "../a.txt"), (sub, f)]:
        p = cli("check", path, "--database-url", database_url, "-c", collection_name, cwd=cwd)
        assert p.returncode == 0, p.stdout + p.stderr


def test_file_key_rule(tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    f = tmp_path / "d" / "x.txt"
    f.write_text("x")
    monkeypatch.chdir(tmp_path)
    assert file_key("d/x.txt") == "d/x.txt" == file_key(f) == file_key("./d/../d/x.txt")
    assert file_key(f, root=tmp_path / "d") == "x.txt"
    assert file_key(f, root=tmp_path / "elsewhere") == f.resolve().as_posix()
    assert is_same_file("x.txt", None, f, root="d") and is_same_file("zzz", {"path": str(f)}, "d/x.txt")
    assert not is_same_file("d/y.txt", {"path": "/nowhere"}, f)


def test_record_keys_use_the_file_rule(tmp_path, monkeypatch):
    (tmp_path / "r.jsonl").write_text('{"text": "a"}\n\n{"id": 5, "text": "b"}\n')
    monkeypatch.chdir(tmp_path)
    assert [(r.key, r.where) for r in read_records([str(tmp_path / "r.jsonl")])] == [
        ("r.jsonl:1", f"{tmp_path / 'r.jsonl'}:1"), ("5", f"{tmp_path / 'r.jsonl'}:3")]


# --------------------------------------------------------------------------- psql -c


def test_psql_dash_c_runs_sql(database_url):
    p = run("psql", "--database-url", database_url, "-c", "SELECT 40 + 2", "--", "-tA")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "42"
    p = run("psql", "--database-url", database_url, "-c", "SELECT nope")
    assert p.returncode != 0 and "nope" in p.stderr
