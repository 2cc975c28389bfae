"""One answer on every CLI surface: on one planted collection, each command's default answer is
the API's (``near``, ``near_key``, ``pairs``), by the collection's rule, and ``--hamming`` gives
the Hamming answer by name.

The collection is planted with copies of random texts at several lengths (30 to 300 words) with
1 to 16 character typos: short texts with two typos are near-duplicates by the rule (Jaccard of
character 4-grams >= 0.8) while their fingerprints lie more than 3 bits apart, so the Hamming
answer and the rule's differ (checked, not assumed). The CLI runs in-process (``main(argv)``).
"""

from __future__ import annotations

import csv
import io
import json
import random
import uuid
from pathlib import Path

import pytest

from simdb import SimhashIndex
from simdb.cli.main import main
from simdb.core import sketch as S

LENGTHS = (30, 60, 120, 300)
TYPOS = (1, 2, 4, 8, 16)


def _planted() -> dict[str, str]:
    rng = random.Random(27)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8))) for _ in range(400)]
    texts = {}
    for n in LENGTHS:
        base = " ".join(rng.choice(words) for _ in range(n))
        texts[f"t{n}"] = base
        for e in TYPOS:
            chars = list(base)
            for _ in range(e):
                chars[rng.randrange(len(chars))] = rng.choice("abcdefghijklmnopqrstuvwxyz")
            texts[f"t{n}-typo{e}"] = "".join(chars)
    return texts


TEXTS = _planted()


@pytest.fixture(scope="module")
def planted(database_url):
    """(database URL, collection name, open index) of the planted verified collection."""
    name = f"surfaces-{uuid.uuid4().hex[:8]}"
    index = SimhashIndex(database_url, collection=name)
    assert index.verifier is not None
    for key, text in TEXTS.items():
        index.add(key, text)
    yield database_url, name, index
    index.drop()
    index.close()


def cli_json(capsys, planted, *argv):
    """The JSON that ``simdb ARGV --json`` prints on the planted collection (exit status 0 or 1)."""
    url, name, _ = planted
    capsys.readouterr()
    code = main([*map(str, argv), "--json", "--database-url", url, "-c", name])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    return json.loads(captured.out)


def answer(matches) -> list[tuple]:
    return [(m.key, m.distance, None if m.jaccard is None else round(m.jaccard, 4)) for m in matches]


def test_near_key_is_near_of_the_stored_text(planted):
    _, _, index = planted
    differs = 0
    for key, text in TEXTS.items():
        by_key = index.near_key(key)
        assert answer(by_key) == answer([m for m in index.near(text) if m.key != key]), key
        assert all(m.jaccard is not None and m.jaccard >= index.verifier.min_jaccard for m in by_key)
        hamming = index.near_key(key, verify=False)
        assert answer(hamming) == answer([m for m in index.near(index.get(key).fp) if m.key != key])
        differs += {m.key for m in hamming} != {m.key for m in by_key}
    assert differs  # the planted collection tells the rule's answer from the Hamming one
    assert index.near_key("t30", limit=1) == index.near_key("t30")[:1]
    with pytest.raises(KeyError):
        index.near_key("no such key")


def test_query_key_answers_by_the_rule(capsys, planted):
    _, _, index = planted
    differs = 0
    for key in TEXTS:
        got = cli_json(capsys, planted, "query", "--key", key)
        expected = index.near_key(key)
        assert [(a["key"], a["distance"], a.get("jaccard")) for a in got] == answer(expected)
        hamming = cli_json(capsys, planted, "query", "--key", key, "--hamming")
        assert [(a["key"], a["distance"]) for a in hamming] == [(m.key, m.distance) for m in index.near_key(key, verify=False)]
        differs += {a["key"] for a in hamming} != {a["key"] for a in got}
    assert differs


def test_query_key_table_shows_jaccard(capsys, planted):
    url, name, index = planted
    key = next(k for k in TEXTS if index.near_key(k))
    capsys.readouterr()
    assert main(["query", "--key", key, "--database-url", url, "-c", name]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["jaccard", "distance", "key"]
    best = index.near_key(key)[0]
    assert lines[2].split() == [f"{best.jaccard:.3f}", str(best.distance), best.key]


# --------------------------------------------------------------------------- every surface, one pair set


def api_pairs(index) -> set[frozenset]:
    return {frozenset((p.key_a, p.key_b)) for p in index.pairs()}


def cli_text(capsys, planted, *argv) -> str:
    url, name, _ = planted
    capsys.readouterr()
    code = main([*map(str, argv), "--database-url", url, "-c", name])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    return captured.out


def test_dups_pairs_json_csv_table_are_the_api_pairs_most_similar_first(capsys, planted):
    _, _, index = planted
    expected = api_pairs(index)
    assert expected
    by_api = {frozenset((p.key_a, p.key_b)): (round(p.jaccard, 4), p.distance) for p in index.pairs()}
    got = cli_json(capsys, planted, "dups", "--pairs")
    assert {frozenset((p["key_a"], p["key_b"])) for p in got} == expected
    assert all((p["jaccard"], p["distance"]) == by_api[frozenset((p["key_a"], p["key_b"]))] for p in got)
    assert [p["jaccard"] for p in got] == sorted((p["jaccard"] for p in got), reverse=True)
    rows = list(csv.reader(io.StringIO(cli_text(capsys, planted, "dups", "--pairs", "--output-format", "csv"))))
    assert rows[0] == ["key_a", "key_b", "jaccard", "distance"]
    assert [(r[0], r[1], float(r[2]), int(r[3])) for r in rows[1:]] == [
        (p["key_a"], p["key_b"], p["jaccard"], p["distance"]) for p in got]
    lines = cli_text(capsys, planted, "dups", "--pairs").splitlines()
    assert lines[0].split() == ["key_a", "key_b", "jaccard", "distance"]  # the CSV's order, and the JSON's
    assert [line.split() for line in lines[2:]] == [
        [p["key_a"], p["key_b"], f"{p['jaccard']:.3f}", str(p["distance"])] for p in got]


def test_dups_hamming_is_the_hamming_pairs(capsys, planted):
    _, _, index = planted
    hamming = {frozenset((p.key_a, p.key_b)) for p in index.pairs(verify=False)}
    got = cli_json(capsys, planted, "dups", "--pairs", "--hamming")
    assert {frozenset((p["key_a"], p["key_b"])) for p in got} == hamming != api_pairs(index)
    assert all(p["jaccard"] is None for p in got)


def test_dups_clusters_are_the_api_clusters(capsys, planted):
    _, _, index = planted
    got = cli_json(capsys, planted, "dups")
    assert [sorted(c["keys"]) for c in got] == [sorted(c.keys) for c in index.clusters()]


def test_query_key_of_every_key_gives_the_api_pairs(capsys, planted):
    _, _, index = planted
    found = {frozenset((key, a["key"])) for key in TEXTS for a in cli_json(capsys, planted, "query", "--key", key)}
    assert found == api_pairs(index)


def test_check_finds_the_api_pairs_and_names_the_rule(capsys, planted, tmp_path):
    _, _, index = planted
    for key, text in TEXTS.items():
        (tmp_path / key).write_text(text, encoding="utf-8")
    report = cli_json(capsys, planted, "check", "--root", tmp_path, tmp_path)
    assert report["rule"] == {**index.verifier.to_dict(), "bands": index.config["bands"]}
    found = {frozenset((Path(f["path"]).name, m["key"])) for f in report["files"] for m in f["matches"]}
    assert found == api_pairs(index)
    assert all(set(m) >= {"jaccard", "distance"} and "similarity" not in m for f in report["files"] for m in f["matches"])
    lines = cli_text(capsys, planted, "check", "--root", tmp_path, tmp_path / "t30").splitlines()
    best = index.near_key("t30")[0]
    assert lines == [f"{tmp_path / 't30'}: near-duplicate of {best.key} (jaccard {best.jaccard:.3f}, distance "
                     f"{best.distance})" + (f" and {len(index.near_key('t30')) - 1} more" if len(index.near_key("t30")) > 1 else "")]


def test_dedup_log_uses_one_vocabulary_and_removes_along_api_pairs(capsys, planted, tmp_path):
    url, _, index = planted
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in TEXTS.items()), encoding="utf-8")
    log = tmp_path / "removed.jsonl"
    capsys.readouterr()
    assert main(["dedup", str(records), "-o", str(tmp_path / "kept.jsonl"), "--removed", str(log),
                 "--database-url", url]) == 0
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert lines and all(set(r) == {"removed", "kept", "jaccard", "distance", "where"} for r in lines)
    assert {frozenset((r["removed"], r["kept"])) for r in lines} <= api_pairs(index)


def test_report_header_names_the_rule(capsys, planted, tmp_path):
    _, _, index = planted
    out = tmp_path / "report.html"
    cli_text(capsys, planted, "report", out)
    page = out.read_text(encoding="utf-8")
    assert f"Jaccard \u2265 {index.verifier.min_jaccard:g} ({index.verifier.scheme})" in page
    assert "k = 3" not in page


def test_every_surface_gives_the_api_pairs(capsys, planted, tmp_path):
    """The surface x answer table of the issue: every CLI surface's pair set on the planted
    collection, next to the API's ``pairs()``; printed (``pytest -s``) and all equal."""
    _, _, index = planted
    for key, text in TEXTS.items():
        (tmp_path / key).write_text(text, encoding="utf-8")
    answers = {"api pairs()": api_pairs(index)}
    answers["api near_key"] = {frozenset((k, m.key)) for k in TEXTS for m in index.near_key(k)}
    answers["query --key"] = {frozenset((k, a["key"])) for k in TEXTS for a in cli_json(capsys, planted, "query", "--key", k)}
    answers["query --file"] = {frozenset((k, a["key"])) for k in TEXTS
                               for a in cli_json(capsys, planted, "query", "--file", tmp_path / k) if a["key"] != k}
    answers["dups --pairs"] = {frozenset((p["key_a"], p["key_b"])) for p in cli_json(capsys, planted, "dups", "--pairs")}
    check = cli_json(capsys, planted, "check", "--root", tmp_path, tmp_path)
    answers["check"] = {frozenset((Path(f["path"]).name, m["key"])) for f in check["files"] for m in f["matches"]}
    hamming = {frozenset((p.key_a, p.key_b)) for p in index.pairs(verify=False)}
    with capsys.disabled():
        print(f"\n{'surface':<14} pairs  = api pairs()  (Hamming k=3 answer: {len(hamming)} pairs)")
        for surface, found in answers.items():
            print(f"{surface:<14} {len(found):5}  {found == answers['api pairs()']}")
    assert all(found == answers["api pairs()"] for found in answers.values())
    assert hamming != answers["api pairs()"]


def test_messages_name_the_band_candidates_of_a_banded_collection(capsys, planted):
    _, name, index = planted
    assert index.bands
    text = cli_text(capsys, planted, "query", "nothing like any planted text at all")
    assert text.strip() == f"no near-duplicates (Jaccard >= {index.verifier.min_jaccard:g}, band-key candidates) in collection '{name}'"


def test_help_states_todays_rule(capsys):
    """Every ``--help`` names the default rule as the code defines it (character 4-grams), never the
    previous default (word 3-grams), and ``-k``/``--unique`` say what they mean in a verified collection."""
    assert S.SCHEME.startswith("chr4")  # the rule the help text names
    texts = []
    for argv in ([], *([c] for c in ("add", "query", "dups", "check", "dedup", "report", "convert"))):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        texts.append(" ".join(capsys.readouterr().out.split()))
    assert "Jaccard similarity of their character 4-grams" in texts[0]
    assert not [t for t in texts if "word 3-gram" in t]
    assert "in a verified collection, that of rows stored by fingerprint" in texts[0]
    assert "no near-duplicate already stored (by the collection's rule" in texts[1]
