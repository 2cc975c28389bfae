"""The ``simdb`` command end to end against a real PostgreSQL.

Most tests use the session's migrated database through ``--database-url`` and a
collection of their own (the ``db`` fixture), and run the command in this process
(``cli_support.run_in_process``: what a command answers is made by ``main``); ``run``
starts a real ``simdb`` process where the process is what is tested (bad URLs and
usage errors of the console script, ``psql``, Ctrl-C). ``test_embedded.py`` covers the
embedded default.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import (
    LION,
    LION_TYPO,
    REPO,
    SAMPLE,
    WOLF,
    base_env,
    popen_interruptible,
    run_in_process,
    simdb_argv,
)

from simdb import SimhashIndex
from simdb.dataset.records import file_key
from simdb.errors import CollectionConfigError


def run(*args, env=None, input=None, timeout=120, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        simdb_argv() + [str(a) for a in args],
        capture_output=True,
        text=True,
        env=env or base_env(),
        input=input,
        timeout=timeout,
        cwd=cwd,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The error must be exactly one line on stderr, with no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("simdb: error: "), lines[0]
    return lines[0]


@pytest.fixture
def db(database_url, collection_name):
    """``simdb`` bound to the test database and a fresh collection, run in this process."""

    def call(*args, env=None, input=None, cwd=None, timeout=None):
        return run_in_process([*args, "--database-url", database_url, "-c", collection_name], env=env, input=input,
                              cwd=cwd)

    call.url = database_url
    call.collection = collection_name
    return call


@pytest.fixture
def corpus(tmp_path):
    """A directory with three fables, a near-duplicate of one, and a hidden file."""
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    (d / "lion.txt").write_text(LION.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "sub" / "lion-typo.txt").write_text(LION_TYPO.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "wolf.txt").write_text(WOLF.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "notes.md").write_text("not matched by --glob '*.txt'", encoding="utf-8")
    (d / ".hidden.txt").write_text("hidden files are skipped", encoding="utf-8")
    return d


# --------------------------------------------------------------------------- the main flow


def test_add_dups_query_check_stats(db, corpus, tmp_path):
    p = db("add", "--glob", "*.txt", "corpus", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "added 3 texts" in p.stdout

    p = db("dups", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    clusters = json.loads(p.stdout)
    assert len(clusters) == 1
    assert sorted(clusters[0]["keys"]) == ["corpus/lion.txt", "corpus/sub/lion-typo.txt"]
    assert clusters[0]["representative"] == "corpus/lion.txt"  # the earliest added (sorted walk)

    p = db("dups", cwd=tmp_path)
    assert "cluster 1: 2 texts" in p.stdout and "* corpus/lion.txt" in p.stdout

    p = db("dups", "--output-format", "csv", cwd=tmp_path)
    rows = list(csv.reader(p.stdout.splitlines()))
    assert rows[0] == ["cluster", "representative", "key"] and len(rows) == 3
    old = db("dups", "--format", "csv", cwd=tmp_path)  # simdb 0.1's spelling: the same output, and a warning
    assert old.stdout == p.stdout and "dups --format is deprecated: use --output-format csv" in old.stderr

    p = db("dups", "--pairs", "--json", cwd=tmp_path)
    pairs = json.loads(p.stdout)
    assert [sorted([x["key_a"], x["key_b"]]) for x in pairs] == [["corpus/lion.txt", "corpus/sub/lion-typo.txt"]]

    # query by text argument, by file, by stdin, by stored key
    p = db("query", "--json", LION.read_text(encoding="utf-8"))
    assert p.returncode == 0, p.stderr
    answers = json.loads(p.stdout)
    assert answers[0]["key"] == "corpus/lion.txt" and answers[0]["distance"] == 0
    assert answers[0]["jaccard"] == 1.0
    assert {a["key"] for a in answers} == {"corpus/lion.txt", "corpus/sub/lion-typo.txt"}

    p = db("query", "--file", LION_TYPO)
    assert p.returncode == 0 and "corpus/sub/lion-typo.txt" in p.stdout and "distance" in p.stdout

    p = db("query", "--json", input=WOLF.read_text(encoding="utf-8"))
    assert [a["key"] for a in json.loads(p.stdout)] == ["corpus/wolf.txt"]

    p = db("query", "--json", "--key", "corpus/lion.txt")
    assert [a["key"] for a in json.loads(p.stdout)] == ["corpus/sub/lion-typo.txt"]

    p = db("query", "completely unrelated words about databases and indexes")
    assert p.returncode == 0 and "no near-duplicates" in p.stdout

    # check: exit 1 when a file is a near-duplicate of a stored text (its own key does not count)
    p = db("check", "corpus/wolf.txt", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "corpus/wolf.txt: ok" in p.stdout
    p = db("check", "corpus/wolf.txt", "corpus/lion.txt", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "corpus/lion.txt: near-duplicate of corpus/sub/lion-typo.txt" in p.stdout
    p = db("check", "--json", LION_TYPO)
    assert p.returncode == 1
    report = json.loads(p.stdout)
    assert report["duplicates_found"] is True and report["files"][0]["matches"]

    p = db("stats", "--json")
    stats = json.loads(p.stdout)
    assert stats["texts"] == 3 and stats["collection"] == db.collection

    p = db("collections", "--json")
    assert any(c["name"] == db.collection and c["texts"] == 3 for c in json.loads(p.stdout))

    p = db("drop")
    assert p.returncode == 2 and "--yes" in one_line_error(p)
    p = db("drop", "--yes")
    assert p.returncode == 0 and "dropped" in p.stdout
    p = db("stats")
    assert p.returncode == 2 and "no collection" in one_line_error(p)


def test_add_is_idempotent_and_options_go_anywhere(db, corpus, tmp_path):
    for _ in range(2):
        p = run("--json", "add", "--glob", "*.txt", corpus, "-c", db.collection, "--database-url", db.url)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["added"] == 3
    p = db("stats", "--json")
    assert json.loads(p.stdout)["texts"] == 3  # re-adding a key replaces it


def test_add_unique_keeps_out_near_duplicates(db, corpus, tmp_path):
    p = db("add", "--unique", "--json", "--glob", "*.txt", "corpus", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["added"] == 2
    # a verified collection (the default): the answer carries the Jaccard and the distance
    assert out["rejected"] == [{"key": "corpus/sub/lion-typo.txt", "near": "corpus/lion.txt",
                                "distance": out["rejected"][0]["distance"],
                                "jaccard": out["rejected"][0]["jaccard"]}]
    assert 0.8 <= out["rejected"][0]["jaccard"] < 1
    p = db("add", "--unique", LION_TYPO)
    assert p.returncode == 0 and "kept out" in p.stdout


def test_add_unique_re_adds_a_file_in_place(db, tmp_path):
    """A file's own stored row is no near-duplicate of it (as 'check' never counts it): re-adding it under
    --unique replaces its row, as plain add does, even after an edit; another file with its text is kept out."""
    fable = tmp_path / "wolf.txt"
    fable.write_text(WOLF.read_text(encoding="utf-8"), encoding="utf-8")
    for _ in range(2):
        p = db("add", "--unique", "--json", "wolf.txt", cwd=tmp_path)
        assert p.returncode == 0 and json.loads(p.stdout)["added"] == 1 and json.loads(p.stdout)["rejected"] == []
    fable.write_text(fable.read_text(encoding="utf-8") + " The wolf ate the lamb at once, as wolves will.\n",
                     encoding="utf-8")
    p = db("add", "--unique", "wolf.txt", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("added 1 text") and "0 near-duplicates kept out" in p.stdout
    p = db("query", "--json", "--file", fable)
    assert [(m["key"], m["jaccard"]) for m in json.loads(p.stdout)] == [("wolf.txt", 1.0)]  # the row is the edit
    (tmp_path / "copy.txt").write_text(fable.read_text(encoding="utf-8"), encoding="utf-8")
    p = db("add", "--unique", "copy.txt", cwd=tmp_path)
    assert p.returncode == 0 and "kept out copy.txt: near-duplicate of wolf.txt (jaccard 1.000, distance 0)" in p.stdout
    assert json.loads(db("stats", "--json").stdout)["texts"] == 1


def test_add_of_files_stored_under_other_keys_warns_or_skips(db, corpus):
    """The same files added from another working directory get other keys: said (not silently stored twice),
    and --skip-stored leaves them out; re-adding a file under its own key stays a plain replacement."""
    assert db("add", "--json", "corpus", cwd=corpus.parent).returncode == 0  # keys corpus/lion.txt, ...
    texts = json.loads(db("stats", "--json").stdout)["texts"]
    p = db("add", "--json", "lion.txt", "wolf.txt", cwd=corpus)  # the same two files, as lion.txt, wolf.txt
    assert p.returncode == 0 and json.loads(p.stdout)["stored_elsewhere"] == [
        {"key": "lion.txt", "stored_as": "corpus/lion.txt"}, {"key": "wolf.txt", "stored_as": "corpus/wolf.txt"}]
    assert "warning: 2 files already stored under another key (lion.txt is corpus/lion.txt, ...)" in p.stderr
    assert json.loads(db("stats", "--json").stdout)["texts"] == texts + 2
    (corpus / "fox.txt").write_text("The fox and the grapes, a short fable about wanting what you cannot reach.\n",
                                    encoding="utf-8")
    p = db("add", "--skip-stored", "sub/lion-typo.txt", "fox.txt", cwd=corpus)
    assert p.returncode == 0 and p.stdout.startswith("added 1 text"), p.stdout
    assert "skipped 1 file already stored under another key (sub/lion-typo.txt is corpus/sub/lion-typo.txt)" in p.stderr
    p = db("add", "corpus", cwd=corpus.parent)  # files under their own keys (and others too) are replaced, unsaid
    assert p.returncode == 0 and "warning: 1 file already stored under another key (corpus/fox.txt is fox.txt)" in p.stderr
    assert json.loads(db("stats", "--json").stdout)["texts"] == texts + 4


def test_add_jsonl_and_csv_records(db, tmp_path):
    lion, wolf = LION.read_text(encoding="utf-8"), WOLF.read_text(encoding="utf-8")
    jl = tmp_path / "posts.jsonl"
    jl.write_text(
        json.dumps({"id": 1, "body": lion}) + "\n\n" + json.dumps({"id": "w", "body": wolf}) + "\n",
        encoding="utf-8",
    )
    cs = tmp_path / "posts.csv"
    with open(cs, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["slug", "body"])
        w.writerow(["lion-copy", lion])
    p = db("add", "--text-field", "body", jl)
    assert p.returncode == 0, p.stderr
    p = db("add", "--text-field", "body", "--key-field", "slug", cs)
    assert p.returncode == 0, p.stderr
    p = db("query", "--json", "--file", LION)
    assert {a["key"] for a in json.loads(p.stdout)} == {"1", "lion-copy"}

    # records without the key field get PATH:LINE keys
    nokey = tmp_path / "nokey.jsonl"
    nokey.write_text(json.dumps({"text": wolf}) + "\n", encoding="utf-8")
    p = db("add", nokey.name, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = db("query", "--json", "--file", WOLF)
    assert "nokey.jsonl:1" in {a["key"] for a in json.loads(p.stdout)}

    # bad records: one clear line naming the place
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 9, "text": "fine"}) + "\n{not json\n", encoding="utf-8")
    p = db("add", bad)
    assert p.returncode == 2
    assert "bad.jsonl:2: invalid JSON" in one_line_error(p)
    p = db("add", "--text-field", "nope", jl)
    assert p.returncode == 2 and "no field 'nope'" in one_line_error(p)
    p = db("add", "--text-field", "nope", cs)
    assert p.returncode == 2 and "no column 'nope'" in one_line_error(p)
    # the failed batch left nothing behind
    p = db("query", "--json", "fine")
    assert all(a["key"] != "9" for a in json.loads(p.stdout))
    # with one text per batch, the batch before the bad line is kept, and the error says so
    p = db("add", "--batch-size", "1", bad)
    assert p.returncode == 2
    assert "bad.jsonl:2: invalid JSON" in one_line_error(p) and "1 texts from earlier batches were kept" in p.stderr
    p = db("query", "--json", "fine")
    assert [a["key"] for a in json.loads(p.stdout)] == ["9"]


def test_jaccard_flag_is_gone(db, tmp_path):
    """--jaccard (the retired legacy MinHash collections) is no option any more: argparse's one-line
    usage error; nothing is created."""
    for args in (("add", "--jaccard", WOLF), ("dedup", "--jaccard", str(WOLF), "-o", str(tmp_path / "out.txt"))):
        p = db(*args)
        line = one_line_error(p)
        assert p.returncode == 2 and "unrecognized arguments: --jaccard" in line, line
    assert db("collections").stdout.count(db.collection) == 0


def test_a_converted_legacy_collection_says_it_answers_by_hamming(db):
    """A collection that migration simdb_0009 converted from the legacy store (marked legacy_minhash)
    answers, and the CLI says on stderr that it answers by Hamming distance until simdb convert."""
    from sqlalchemy import create_engine, text

    assert db("add", "--rule", "hamming", LION).returncode == 0
    eng = create_engine(db.url)
    with eng.begin() as conn:
        conn.execute(text("UPDATE simdb_collections SET config = config || '{\"legacy_minhash\": true}'::jsonb "
                          "WHERE name = :n"), {"n": db.collection})
    eng.dispose()
    p = db("query", "--json", "--file", LION)
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1
    assert "simdb: note:" in p.stderr and "Hamming distance" in p.stderr and f"simdb convert -c {db.collection}" in p.stderr


def test_a_collection_of_a_retired_band_scheme_names_the_way_out(db):
    """A collection banded with oph-b14r5-v2 (written only by development builds after 0.1.0): every
    command, ``simdb convert`` included, names it, its scheme and how to re-create it."""
    from sqlalchemy import create_engine, text

    assert db("add", LION).returncode == 0
    eng = create_engine(db.url)
    with eng.begin() as conn:
        conn.execute(text("UPDATE simdb_collections SET config = jsonb_set(config, '{bands}', '\"oph-b14r5-v2\"') "
                          "WHERE name = :n"), {"n": db.collection})
    eng.dispose()
    p = db("convert")
    assert p.returncode != 0 and "oph-b14r5-v2" in p.stderr and f"simdb drop -c {db.collection}" in p.stderr, p.stderr


def _cli_worded(line: str, collection: str = "") -> str:
    """A CLI error names options and commands, never the API's keyword arguments (the collection's name,
    a test's name, may hold any of them)."""
    for python in ("min_jaccard", "verify=", "near(", "fingerprinter="):
        assert python not in line.replace(collection, "NAME"), line
    return line


def test_min_jaccard_needs_a_verified_collection(db, tmp_path):
    assert db("add", "--rule", "hamming", LION).returncode == 0
    records = tmp_path / "r.jsonl"
    records.write_text('{"id": "r1", "text": "a record"}\n', encoding="utf-8")
    hamming_only = (f"simdb: error: --min-jaccard needs a verified collection, and '{db.collection}' is "
                    "Hamming-only (near-duplicate = Hamming distance <= k, set by -k; it keeps no sketches): "
                    f"leave out --min-jaccard, or make it verified with 'simdb convert -c {db.collection}'")
    for args in (["query", "--file", LION], ["query", "--key", "x"], ["dups"], ["dups", "--pairs"], ["check", LION],
                 ["add", "--unique", WOLF], ["report", tmp_path / "r.html"],
                 ["dedup", records, "-o", tmp_path / "o.jsonl"]):
        p = db(*args, "--min-jaccard", "0.8")
        assert p.returncode == 2 and _cli_worded(one_line_error(p), db.collection).startswith(hamming_only), (args, p.stderr)
    p = db("add", WOLF, "--min-jaccard", "0.8")  # a plain add judges nothing: the option is refused, not ignored
    assert p.returncode == 2 and "--min-jaccard applies with --unique" in one_line_error(p)
    p = db("query", "--min-jaccard", "1.5", "x")
    assert p.returncode == 2 and "argument --min-jaccard: must be > 0 and <= 1, got 1.5" in one_line_error(p)


def test_hamming_options_on_a_verified_collection_name_the_options(db):
    """The audit's 'open it with verify=None (... near(..., verify=False) ...)' at a shell: the CLI names its
    own options and commands; the API keeps its words for Python callers."""
    assert db("add", LION).returncode == 0  # verified: the default
    p = db("add", "--rule", "hamming", WOLF)
    assert p.returncode == 2 and _cli_worded(one_line_error(p), db.collection) == (
        f"simdb: error: --rule hamming: collection '{db.collection}' is a verified collection (near-duplicate = "
        "Jaccard of shingles), and --rule only sets the rule of a new collection: add without --rule (for answers "
        f"by distance alone: 'simdb query --hamming'), add to a new collection, or remove this one first: "
        f"'simdb drop -c {db.collection} --yes'")
    assert db("add", "--rule", "verified", WOLF).returncode == 0  # the rule it has
    with pytest.raises(CollectionConfigError, match=r"open it with verify=None"):
        SimhashIndex(db.url, db.collection, verify=False)
    for args in (["query", "--file", LION], ["dups"], ["check", LION]):
        p = db(*args, "--hamming", "--min-jaccard", "0.8")
        assert p.returncode == 2 and _cli_worded(one_line_error(p), db.collection) == (
            "simdb: error: --min-jaccard with --hamming: --hamming answers by Hamming distance <= k alone (set by "
            "-k), which has no Jaccard to compare with --min-jaccard: give one of them"), args
    fresh = f"{db.collection}-new"
    p = run_in_process(["add", "--unique", "--rule", "hamming", "--min-jaccard", "0.8", WOLF, "--database-url", db.url,
                        "-c", fresh])
    assert p.returncode == 2 and "--rule hamming makes a Hamming-only collection" in _cli_worded(one_line_error(p), fresh)
    assert fresh not in db("collections").stdout  # refused before the collection was opened


# --------------------------------------------------------------------------- bad input: one line, non-zero


def test_errors_are_one_line_with_exit_codes(db, tmp_path, fresh_database_url):
    p = db("add", tmp_path / "missing.txt")
    assert p.returncode == 2 and "no such file or directory" in one_line_error(p)

    binary = tmp_path / "latin1.txt"
    binary.write_bytes("caf\xe9".encode("latin-1"))
    p = db("add", binary)
    assert p.returncode == 2 and "not valid utf-8" in one_line_error(p)
    p = db("add", "--encoding", "latin-1", binary)
    assert p.returncode == 0, p.stderr

    p = db("query", "--file", tmp_path)
    assert p.returncode == 2 and "directory" in one_line_error(p)

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    p = db("add", fifo)
    assert p.returncode == 2 and "not a regular file" in one_line_error(p)

    for k in ("-1", "x", "65"):
        p = db("query", "-k", k, "text")
        assert p.returncode == 2 and "invalid k" in one_line_error(p)
    p = db("query", "-k", "12", "some text")  # past what the block index answers exactly
    assert p.returncode == 2, p.stderr
    one_line_error(p)

    p = run("stats", "--database-url", "mysql://user@localhost/db")
    assert p.returncode == 2 and "invalid database URL" in one_line_error(p)
    p = run("stats", "--database-url", "not a url at all")
    assert p.returncode == 2 and "invalid database URL" in one_line_error(p)

    p = run("stats", "--database-url", "postgresql://nobody@127.0.0.1:1/nothing")
    assert p.returncode == 3 and "cannot use the database" in one_line_error(p)

    # a server without simdb's tables: say what to do; then do it
    p = run("stats", "--database-url", fresh_database_url)
    assert p.returncode == 3 and "simdb migrate" in one_line_error(p)
    p = run("migrate", "--database-url", fresh_database_url)
    assert p.returncode == 0 and "head" in p.stdout, p.stderr
    p = run("collections", "--database-url", fresh_database_url)
    assert p.returncode == 0 and "no collections" in p.stdout

    p = run("frobnicate")
    assert p.returncode == 2 and "invalid choice" in one_line_error(p)
    p = run()
    assert p.returncode == 2

    # --debug shows the traceback
    p = run("stats", "--debug", "--database-url", "postgresql://nobody@127.0.0.1:1/nothing")
    assert p.returncode == 3 and "Traceback" in p.stderr


def test_url_and_psql(db):
    p = db("url", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["url"].startswith("postgresql://") and info["embedded"] is False
    assert Path(info["psql"][0]).name == "psql"
    p = db("url")
    assert p.stdout.strip() == info["url"] and "psql" in p.stderr

    p = db("add", LION)
    p = run("psql", "--database-url", db.url, "--", "-tA", "-c",
            f"SELECT count(*) FROM simdb_collections WHERE name = '{db.collection}'")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"

    p = db("server", "stop")
    assert p.returncode == 2 and "embedded" in one_line_error(p)
    p = db("stop")  # retired: the same command is 'simdb server stop'
    assert p.returncode == 2 and "use 'simdb server stop'" in one_line_error(p)


# --------------------------------------------------------------------------- bulk path: progress, Ctrl-C


def _write_records(path: Path, n: int) -> None:
    words = LION.read_text(encoding="utf-8").split()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            # distinct texts: a few words of the fable and the record number
            text = " ".join(words[i % 50: i % 50 + 12]) + f" record {i} {i * 7919 % 104729}"
            fh.write(json.dumps({"id": f"r{i}", "text": text}) + "\n")


def test_bulk_add_shows_progress_and_rate(db, tmp_path):
    data = tmp_path / "many.jsonl"
    _write_records(data, 30_000)
    p = db("add", "--progress", data)
    assert p.returncode == 0, p.stderr
    assert "added 30,000 texts" in p.stdout and "texts/s" in p.stdout
    assert "/s" in p.stderr and "adding" in p.stderr  # the progress line, with a rate
    p = db("stats", "--json")
    assert json.loads(p.stdout)["texts"] == 30_000


def test_interrupt_leaves_whole_batches(db, tmp_path):
    data = tmp_path / "many.jsonl"
    _write_records(data, 200_000)
    batch = 2_000
    proc = popen_interruptible(
        simdb_argv() + ["add", "--batch-size", str(batch), "--database-url", db.url, "-c", db.collection, str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env(),
    )
    # interrupt once the first batches are committed, in the middle of the load
    from sqlalchemy import create_engine, text

    engine = create_engine(db.url)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            with engine.connect() as conn:
                n = conn.execute(text(
                    "SELECT count(*) FROM simdb_fingerprints f JOIN simdb_collections c ON c.id = f.collection_id "
                    "WHERE c.name = :name"), {"name": db.collection}).scalar()
            if n >= 2 * batch:
                break
            time.sleep(0.05)
    finally:
        engine.dispose()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert err.count("interrupted") == 1, err  # issue 15: said once, by the command that knows what was kept
    p = db("stats", "--json")
    n = json.loads(p.stdout)["texts"] if p.returncode == 0 else 0
    assert n % batch == 0 and n < 200_000  # whole batches only
    assert f"{n:,} texts were committed" in err


def test_an_interrupt_after_a_batch_commits_counts_that_batch(database_url, tmp_path, monkeypatch):
    """Ctrl-C landing in a batch's post-commit work (VACUUM, statistics: the window
    test_interrupt_leaves_whole_batches hits now and then) leaves that batch stored, and the
    message counts it."""
    from simdb.index import SimhashIndex
    from simdb.store import bulk

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(bulk, "stale_statistics", lambda stats: True)  # every load refreshes its statistics
    monkeypatch.setattr(SimhashIndex, "refresh_stats", interrupted)  # ... and is interrupted there
    data = tmp_path / "few.jsonl"
    _write_records(data, 3_000)
    name = f"after_commit_{os.getpid()}"
    p = run_in_process(["add", "--batch-size", "2000", "--database-url", database_url, "-c", name, str(data)])
    assert p.returncode == 130, p.stderr
    assert "2,000 texts were committed" in p.stderr, p.stderr
    monkeypatch.undo()
    index = SimhashIndex(database_url, collection=name)
    try:
        assert index.last_load_committed == 0 and len(index) == 2_000
    finally:
        index.close()


# --------------------------------------------------------------------------- in-process: parsing and input


def test_parser_accepts_common_options_anywhere():
    from simdb.cli import build_parser

    a = build_parser().parse_args(["--json", "-k", "2", "query", "x"])
    b = build_parser().parse_args(["query", "x", "--json", "-k", "2"])
    for args in (a, b):
        assert args.json is True and args.k == 2 and args.collection == "default" and args.text == "x"


def test_walk_and_records(tmp_path):
    from simdb.cli import CliError, build_parser
    from simdb.cli.inputs import iter_records as _iter_records
    from simdb.cli.inputs import walk as _walk

    (tmp_path / "d" / ".git").mkdir(parents=True)
    (tmp_path / "d" / "a.txt").write_text("alpha")
    (tmp_path / "d" / ".git" / "b.txt").write_text("hidden")
    (tmp_path / "d" / "bin.dat").write_bytes(b"\x00\x01binary")
    (tmp_path / "r.jsonl").write_text('{"id": 7, "text": "seven"}\n{"text": "no id"}\n')
    files = _walk([str(tmp_path / "d"), str(tmp_path / "r.jsonl")], "*")
    assert [f.name for f, _ in files] == ["a.txt", "bin.dat", "r.jsonl"]
    args = build_parser().parse_args(["add", "x"])
    skipped = []
    records = list(_iter_records(files, args, skipped))
    assert [(r.key, r.text) for r in records] == [
        ((tmp_path / "d" / "a.txt").as_posix(), "alpha"),
        ("7", "seven"),
        (f"{(tmp_path / 'r.jsonl').as_posix()}:2", "no id"),
    ]
    assert len(skipped) == 1 and "binary" in skipped[0]["reason"]  # skipped inside a directory...
    with pytest.raises(CliError, match="binary"):  # ...but an error when named explicitly
        list(_iter_records(_walk([str(tmp_path / "d" / "bin.dat")], "*"), args, []))
    with pytest.raises(CliError, match="no such file"):
        _walk([str(tmp_path / "nope")], "*")


def test_progress_line(capsys):
    from simdb.cli import Progress

    p = Progress(True, "adding", total_bytes=1000, interval=0)
    p.start -= 1.0  # pretend the work has run for a second
    p.update(500, 500)
    p.close()
    err = capsys.readouterr().err
    assert "adding 500 texts" in err and "/s" in err and "50%" in err


def test_report_of_records_with_stored_text(db, tmp_path):
    """JSONL keys name no file: --store-text keeps the text in meta, and the report shows it."""
    import re

    lion, typo = LION.read_text(encoding="utf-8"), LION_TYPO.read_text(encoding="utf-8")
    word = max(re.findall(r"[A-Za-z]+", lion), key=len)  # a word only the text itself carries
    jl = tmp_path / "posts.jsonl"
    jl.write_text(json.dumps({"text": lion}) + "\n" + json.dumps({"text": typo}) + "\n", encoding="utf-8")
    out = tmp_path / "report.html"

    assert db("add", jl).returncode == 0
    p = db("report", "--output", out)
    assert p.returncode == 0, p.stderr
    assert word not in out.read_text(encoding="utf-8")  # PATH:LINE keys: no text to show

    p = db("add", "--store-text", jl)
    assert p.returncode == 0, p.stderr
    p = db("report", "--output", out)
    assert p.returncode == 0, p.stderr
    assert word in out.read_text(encoding="utf-8")

    p = db("report")  # the output file must be named exactly once
    assert p.returncode == 2
    assert "--output" in one_line_error(p)


def test_write_report_of_an_index_writes_the_file(database_url, collection_name, tmp_path):
    from simdb import SimhashIndex
    from simdb.report import write_report

    lion, typo = LION.read_text(encoding="utf-8"), LION_TYPO.read_text(encoding="utf-8")
    with SimhashIndex(database_url, collection=collection_name) as index:
        index.add("a", lion, meta={"text": lion})
        index.add("b", typo, meta={"text": typo})
        out = tmp_path / "r.html"
        write_report(index, out, k=3)
    html = out.read_text(encoding="utf-8")
    assert '"a"' in html and '"b"' in html


def test_dups_larger_k_finds_the_untitled_variant(db, tmp_path):
    """The variant without its title is 6 bits from its original: found from k=6 (pairs by the radius join)."""
    untitled = SAMPLE / "variants" / "father-and-sons.untitled.txt"
    father = SAMPLE / "originals" / "06-the-father-and-his-sons.txt"
    assert db("add", "--rule", "hamming", father, untitled, WOLF, cwd=REPO).returncode == 0
    for k, expect in ((3, []), (6, [[file_key(father, REPO), file_key(untitled, REPO)]])):
        p = db("dups", "--pairs", "--json", "-k", str(k))
        assert p.returncode == 0, p.stderr
        assert [[x["key_a"], x["key_b"]] for x in json.loads(p.stdout)] == expect
    p = db("dups", "-k", "12")
    assert p.returncode == 2 and "invalid k 12: must be an integer from 0 to 11" in one_line_error(p)


def test_default_collection_is_verified_and_finds_the_untitled_variant(db, tmp_path):
    """What issue 13 is about: with no options the 6-bit variant is a near-duplicate (Jaccard >= 0.8)."""
    untitled = SAMPLE / "variants" / "father-and-sons.untitled.txt"
    father = SAMPLE / "originals" / "06-the-father-and-his-sons.txt"
    assert db("add", "--store-text", father, WOLF, cwd=REPO).returncode == 0
    p = db("query", "--json", "--file", untitled)
    assert p.returncode == 0, p.stderr
    (m,) = json.loads(p.stdout)
    assert m["key"] == file_key(father, REPO) and m["jaccard"] >= 0.8 and 0 <= m["distance"] <= 11
    p = db("query", "--explain", "--file", untitled)
    assert p.returncode == 0, p.stderr
    assert "shared words" in p.stdout and "only in the query" in p.stdout
    p = db("dups", "--pairs", "--json")
    assert [[x["key_a"], x["key_b"]] for x in json.loads(p.stdout)] == []
    p = db("add", "--rule", "hamming", WOLF)  # an existing verified collection keeps its kind
    assert p.returncode == 2, p.stdout


def test_convert_needs_stored_texts(db, tmp_path):
    father = SAMPLE / "originals" / "06-the-father-and-his-sons.txt"
    untitled = SAMPLE / "variants" / "father-and-sons.untitled.txt"
    assert db("add", "--rule", "hamming", "--store-text", father, untitled, cwd=REPO).returncode == 0
    assert json.loads(db("dups", "--pairs", "--json").stdout) == []
    p = db("convert")
    assert p.returncode == 0, p.stderr
    pairs = json.loads(db("dups", "--pairs", "--json").stdout)
    assert [[x["key_a"], x["key_b"]] for x in pairs] == [[file_key(father, REPO), file_key(untitled, REPO)]] and pairs[0]["jaccard"] >= 0.8
    assert "already" in db("convert").stdout
    other = ("--database-url", db.url, "-c", db.collection + "-other")
    assert run("add", "--rule", "hamming", WOLF, *other).returncode == 0
    p = run("add", "--rule", "verified", LION, *other)  # an existing Hamming-only collection keeps its rule
    assert p.returncode == 2 and "--rule verified: collection" in one_line_error(p) and "simdb convert" in one_line_error(p)
    p = run("convert", *other)
    assert p.returncode == 2 and "no stored text" in one_line_error(p)


def test_report_names_what_is_wrong_with_its_output_file(db, tmp_path):
    """No output file and two output files are different mistakes, each said as such (exit 2)."""
    none, both = db("report"), db("report", tmp_path / "a.html", "--output", tmp_path / "b.html")
    assert none.returncode == both.returncode == 2
    assert "needs the output file" in one_line_error(none)
    assert "not both" in one_line_error(both)


def test_check_reads_jsonl_records_as_add_does(db, tmp_path):
    """A .jsonl file is its records, each checked apart (never against its own key), not one text of JSON."""
    lion = LION.read_text(encoding="utf-8")
    stored = tmp_path / "stored.jsonl"
    stored.write_text(json.dumps({"id": "r0", "text": lion}) + "\n", encoding="utf-8")
    assert db("add", "-q", stored).returncode == 0
    asked = tmp_path / "asked.jsonl"
    asked.write_text("\n".join(json.dumps(r) for r in (
        {"id": "r0", "text": lion},  # the stored record itself: not its own duplicate
        {"id": "new-copy", "text": lion.replace("Lion", "lion")},  # a re-cased copy under another key
        {"id": "other", "text": "A short note about gardens, rain and the smell of wet stones in spring."},
    )) + "\n", encoding="utf-8")
    got = db("check", "--json", asked)
    assert got.returncode == 1, got.stderr
    files = {f["path"]: f for f in json.loads(got.stdout)["files"]}
    assert set(files) == {"r0", "new-copy", "other"}
    assert [files[k]["duplicate"] for k in ("r0", "new-copy", "other")] == [False, True, False]
    assert files["new-copy"]["matches"][0]["key"] == "r0"


def test_add_and_check_read_gzipped_files_as_dedup_does(db, tmp_path):
    """A .gz file is decompressed by its inner extension: JSONL/CSV records, else one text (dedup reads
    them so too); a corrupt or truncated archive is one error naming the file, not a traceback."""
    lion, wolf = LION.read_text(encoding="utf-8"), WOLF.read_text(encoding="utf-8")
    rows = tmp_path / "rows.jsonl.gz"
    rows.write_bytes(gzip.compress((json.dumps({"id": "r-lion", "text": lion}) + "\n").encode()))
    table = tmp_path / "rows.csv.gz"
    buf = io.StringIO()
    csv.writer(buf).writerows([["id", "text"], ["r-csv", wolf]])
    table.write_bytes(gzip.compress(buf.getvalue().encode()))
    note = tmp_path / "wolf.txt.gz"
    note.write_bytes(gzip.compress(wolf.encode()))
    p = db("add", rows, table, note.name, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert db("query", "--json", "--file", LION).stdout.count('"r-lion"') == 1
    assert {m["key"] for m in json.loads(db("query", "--json", "--file", WOLF).stdout)} == {"r-csv", "wolf.txt.gz"}
    copy = tmp_path / "copy.txt.gz"
    copy.write_bytes(gzip.compress(lion.encode()))
    got = db("check", "--json", copy)
    assert got.returncode == 1 and json.loads(got.stdout)["files"][0]["matches"][0]["key"] == "r-lion"
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(rows.read_bytes()[:-12])
    not_gzip = tmp_path / "plain.txt.gz"
    not_gzip.write_text("not compressed at all", encoding="utf-8")
    for bad in (broken, not_gzip):
        p = db("add", bad)
        assert p.returncode == 2 and f"cannot read {bad}" in one_line_error(p) and "gzip" in one_line_error(p)
