"""The new-user audit of the CLI: one answer on every surface, errors in the CLI's own words.

Each test is one finding: ``query --key --explain`` reads the key's kept text (and ``--json``
carries the explanation); ``--jaccard``'s refusal states today's rule; ``--min-jaccard`` is
checked by the parser exactly as the library checks it; a query that compares every row says
so; the measures and the pair columns are named and ordered alike; errors name ``-k``,
``--min-jaccard`` and the command, never ``min_jaccard=`` or ``clusters()``; an empty query is a
usage error from every source and an empty added text is noted; ``add --min-jaccard`` needs
``--unique``. Commands run in this process (``cli_support.run_in_process``).
"""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from cli_support import LION, LION_TYPO, REPO, SAMPLE, run_in_process

from simdb.cli.parser import build_parser
from simdb.cli.results import shingle_words
from simdb.cli.session import DEFAULT_RULE
from simdb.core.sketch import DEFAULT_MIN_JACCARD, SCHEME, check_min_jaccard
from simdb.errors import InputError

BASE = ("The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden fence "
        "near the barn")
#: words of the API's keyword arguments and methods that a CLI error must not name
PYTHON_WORDS = ("min_jaccard", "clusters()", "pairs()", "add_if_unique", "near(", "verify=")


@pytest.fixture
def db(database_url, collection_name):
    def call(*args, input=None, cwd=None):
        return run_in_process([*args, "--database-url", database_url, "-c", collection_name], input=input, cwd=cwd)

    call.collection = collection_name
    return call


def one_line_error(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("simdb: error: "), lines[0]
    return lines[0][len("simdb: error: "):]


def cli_worded(message: str, collection: str) -> str:
    for word in PYTHON_WORDS:
        assert word not in message.replace(collection, "NAME"), message
    return message


@pytest.fixture
def recs(db, tmp_path):
    """A collection that keeps its texts, holding r1 and r9 (one word apart)."""
    path = tmp_path / "recs.jsonl"
    path.write_text(json.dumps({"id": "r1", "text": BASE}) + "\n"
                    + json.dumps({"id": "r9", "text": BASE.replace("lazy", "sleepy")}) + "\n", encoding="utf-8")
    assert db("add", path, "--store-text").returncode == 0
    return path


# 1. query --key K --explain

def test_explain_of_a_key_compares_its_kept_text(db, recs):
    by_key = db("query", "--explain", "--key", "r9")
    by_text = db("query", "--explain", BASE.replace("lazy", "sleepy"))
    assert by_key.returncode == 0 and by_text.returncode == 0
    assert "no stored text" not in by_key.stdout
    assert by_key.stdout.splitlines()[1:] == [
        "  shared words: 16; exact shingle Jaccard 0.848",
        "  only in the query:  sleepy",
        "  only in r1: lazy",
    ]
    assert by_key.stdout.splitlines()[0].startswith("r1: jaccard 0.848, distance ")
    # the text given as TEXT explains the same way (it matches r9 itself too)
    assert "  only in r1: lazy" in by_text.stdout.splitlines()


def test_explain_json_carries_the_explanation(db, recs):
    p = db("query", "--explain", "--key", "r9", "--json")
    assert p.returncode == 0, p.stderr
    [match] = json.loads(p.stdout)
    assert match["key"] == "r1"
    assert match["explain"] == {"shared_words": 16, "exact_jaccard": pytest.approx(match["explain"]["exact_jaccard"]),
                                "only_in_query": ["sleepy"], "only_in_match": ["lazy"]}
    assert match["explain"]["exact_jaccard"] >= DEFAULT_MIN_JACCARD
    plain = json.loads(db("query", "--key", "r9", "--json").stdout)
    assert "explain" not in plain[0]  # only asked for


def test_explain_without_kept_texts_says_so(db):
    assert db("add", LION, LION_TYPO).returncode == 0  # no --store-text
    p = db("query", "--explain", "--file", LION_TYPO, "--json")
    assert p.returncode == 0, p.stderr
    assert [m["explain"] for m in json.loads(p.stdout)] == [None, None]


# 2. the default rule is named in its current words

def test_default_rule_names_the_current_shingles():
    rule = f"Jaccard of character 4-grams >= {DEFAULT_MIN_JACCARD:g}"
    assert shingle_words(SCHEME) == "character 4-grams"
    assert DEFAULT_RULE == rule


# 3. --min-jaccard: the parser refuses exactly what the library refuses

@pytest.mark.parametrize("text", ["0", "-0.0", "1.0000001", "2", "-1", "nan", "inf", "1e-300", "0.5", "1", "1.0"])
def test_min_jaccard_type_is_the_library_check(text):
    try:
        check_min_jaccard(float(text))
        library_ok = True
    except InputError:
        library_ok = False
    parser = build_parser()
    if library_ok:
        args = parser.parse_args(["query", "--min-jaccard", text, "x"])
        assert args.min_jaccard == float(text)
    else:
        with pytest.raises(Exception) as caught:
            parser.parse_args(["query", "--min-jaccard", text, "x"])
        assert str(caught.value).startswith(f"argument --min-jaccard: must be > 0 and <= 1, got {text}")
    assert library_ok == (0 < float(text) <= 1 and not math.isnan(float(text)))


@pytest.mark.parametrize("command", [["query", "x"], ["dups"], ["check", LION], ["dedup", "in.jsonl", "-o", "o.jsonl"]])
def test_min_jaccard_zero_is_a_usage_error_naming_the_option(db, command):
    p = db(*command, "--min-jaccard", "0")
    assert p.returncode == 2
    assert one_line_error(p).startswith("argument --min-jaccard: must be > 0 and <= 1, got 0")


# 4. a query that compares every row says so

def test_a_scanning_query_says_every_row_compared(db):
    assert db("add", "-q", "--glob", "*.txt", SAMPLE, cwd=REPO).returncode == 0
    for argv in (["--file", LION], ["--file", LION, "--json"], ["--key", LION.relative_to(REPO).as_posix()]):
        p = db("query", "--min-jaccard", "0.5", *argv, cwd=REPO)
        assert p.returncode == 0 and "every row compared" in p.stderr, (argv, p.stderr)
        assert "every row compared" not in p.stdout  # the table / JSON stays as it is
    none = db("query", "--min-jaccard", "0.5", "zebra quagga okapi")
    assert "every row compared" in none.stdout
    assert "every row compared" not in db("query", "--file", LION).stderr  # by the band keys: no note
    p = db("check", "--min-jaccard", "0.5", LION_TYPO)
    assert p.returncode == 1 and "every row compared" in p.stderr
    assert "every row compared" not in db("query", "-q", "--min-jaccard", "0.5", "--file", LION).stderr


# 5. one name per measure, one order of the pair columns

def test_kept_out_names_both_measures_as_check_does(db):
    assert db("add", LION).returncode == 0
    add = db("add", "--unique", LION_TYPO)
    check = db("check", LION_TYPO)
    kept_out = [line for line in add.stdout.splitlines() if line.startswith("kept out")]
    assert len(kept_out) == 1 and check.returncode == 1
    measures = kept_out[0][kept_out[0].index("("):]
    assert measures.startswith("(jaccard 0.") and ", distance " in measures
    assert check.stdout.strip().endswith(measures)


def test_pair_columns_are_in_one_order_everywhere(db):
    assert db("add", LION, LION_TYPO).returncode == 0
    table = db("dups", "--pairs").stdout.splitlines()
    assert table[0].split() == ["key_a", "key_b", "jaccard", "distance"]
    rows = list(csv.reader(io.StringIO(db("dups", "--pairs", "--output-format", "csv").stdout)))
    assert rows[0] == ["key_a", "key_b", "jaccard", "distance"]
    [pair] = json.loads(db("dups", "--pairs", "--json").stdout)
    assert list(pair) == ["key_a", "key_b", "jaccard", "distance"]
    assert table[2].split() == [pair["key_a"], pair["key_b"], f"{pair['jaccard']:.3f}", str(pair["distance"])]


# 6. errors name the CLI's options and commands

def test_k_past_11_names_the_options(db):
    p = db("query", "-k", "12", "hello")
    message = cli_worded(one_line_error(p), db.collection)
    assert p.returncode == 2 and message.startswith("argument -k: invalid k 12: must be an integer from 0 to 11")
    assert "--min-jaccard" in message


@pytest.mark.parametrize("command, named", [
    (["dups"], "'simdb dups'"), (["dups", "--pairs"], "'simdb dups'"), (["report", "r.html"], "'simdb report'"),
    (["add", "--unique", LION_TYPO], "'simdb add --unique'"), (["dedup", "in.jsonl", "-o", "o.jsonl"], "'simdb dedup'"),
])
def test_below_the_band_keys_reach_names_the_option_and_command(db, tmp_path, command, named):
    assert db("add", LION).returncode == 0
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "a record"}\n', encoding="utf-8")
    p = db(*command, "--min-jaccard", "0.5", cwd=tmp_path)
    message = cli_worded(one_line_error(p), db.collection)
    assert p.returncode == 2 and message.startswith(f"--min-jaccard 0.5 is below 0.79, the lowest threshold {named}")
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "r.html").exists()


def test_dedup_without_a_collection_names_the_option(database_url, tmp_path):
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "a record"}\n', encoding="utf-8")
    p = run_in_process(["dedup", "in.jsonl", "-o", "o.jsonl", "--min-jaccard", "0.5", "--database-url", database_url],
                       cwd=tmp_path)
    message = cli_worded(one_line_error(p), "")
    assert p.returncode == 2 and message.startswith("--min-jaccard 0.5 is below 0.79, the lowest threshold 'simdb dedup'")


# 7. empty input

def test_an_empty_query_is_a_usage_error_from_every_source(db, tmp_path):
    assert db("add", LION).returncode == 0
    for name, content in (("empty.txt", ""), ("blank.txt", "  \n\t")):
        (tmp_path / name).write_text(content, encoding="utf-8")
        p = db("query", "--file", tmp_path / name)
        assert p.returncode == 2 and one_line_error(p) == (
            f"--file {tmp_path / name} is empty: give a file holding the text to search for")
    for text in ("", "  "):
        p = db("query", text)
        assert p.returncode == 2 and "TEXT is empty" in one_line_error(p)
    p = db("query", "-", input=" \n")
    assert p.returncode == 2 and "standard input is empty" in one_line_error(p)


def test_adding_an_empty_text_says_so(db, tmp_path):
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "blank.txt").write_text(" \n", encoding="utf-8")
    (tmp_path / "full.txt").write_text("the lion and the mouse", encoding="utf-8")
    p = db("add", tmp_path, cwd=tmp_path)
    assert p.returncode == 0 and "added 3 texts" in p.stdout
    assert p.stderr.strip() == ("simdb: note: 2 empty texts (blank.txt, empty.txt) were stored with no fingerprint: an "
                                "empty text is never a near-duplicate (see 'simdb stats', \"without features\")")
    p = db("add", "--json", tmp_path / "empty.txt", cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout)["empty_texts"] == 1 and "1 empty text (empty.txt)" in p.stderr
    assert db("add", tmp_path / "full.txt", cwd=tmp_path).stderr == ""


# 8. add --min-jaccard needs --unique

def test_add_min_jaccard_without_unique_is_refused(db, tmp_path):
    p = db("add", LION, "--min-jaccard", "0.9")
    assert p.returncode == 2 and one_line_error(p).startswith("--min-jaccard applies with --unique")
    assert "no collection" in one_line_error(db("stats"))  # nothing created
    assert db("add", "--unique", LION, "--min-jaccard", "0.9").returncode == 0
