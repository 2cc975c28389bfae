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

import json
import math

import pytest
from cli_support import LION, LION_TYPO, run_in_process

from simdb.cli.parser import build_parser
from simdb.cli.results import shingle_words
from simdb.cli.session import JACCARD_GONE
from simdb.core.sketch import DEFAULT_MIN_JACCARD, SCHEME, check_min_jaccard
from simdb.errors import InputError

BASE = ("The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden fence "
        "near the barn")
#: words of the API's keyword arguments and methods that a CLI error must not name
PYTHON_WORDS = ("min_jaccard", "clusters()", "pairs()", "near_within", "add_if_unique", "near(", "verify=")


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


# 2. --jaccard's refusal states the default rule

def test_jaccard_refusal_states_the_default_rule(db, tmp_path):
    rule = f"near-duplicate = Jaccard of character 4-grams >= {DEFAULT_MIN_JACCARD:g}"
    assert shingle_words(SCHEME) == "character 4-grams" and shingle_words("tok3-xxh64-v3") == "token 3-grams"
    assert rule in JACCARD_GONE and "word 3-grams" not in JACCARD_GONE
    p = db("add", "--jaccard", LION)
    assert p.returncode == 2 and rule in one_line_error(p)


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


# 8. add --min-jaccard needs --unique

def test_add_min_jaccard_without_unique_is_refused(db, tmp_path):
    p = db("add", LION, "--min-jaccard", "0.9")
    assert p.returncode == 2 and one_line_error(p).startswith("--min-jaccard applies with --unique")
    assert "no collection" in one_line_error(db("stats"))  # nothing created
    assert db("add", "--unique", LION, "--min-jaccard", "0.9").returncode == 0
