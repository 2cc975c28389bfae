"""The report shows the texts by default where simdb has them (issue 27 item 3): files added with
``simdb add DIR`` (read only inside the folders recorded then), texts a collection keeps; else it
says why not. Diffs compare the way the rule does: a re-cased, re-punctuated copy shows as equal."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from cli_support import LION, LION_TYPO, base_env, simdb_argv

from simdb import SimhashIndex
from simdb.report import write_report
from simdb.report.diff import DELETED, INSERTED, RESPACED, word_diff


def run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=True,
                          env=base_env(), timeout=180, cwd=cwd)


def page_data(path) -> dict:
    m = re.search(r'<script type="application/json" id="simdb-data">(.*?)</script>', path.read_text("utf-8"), re.S)
    assert m, "data element missing"
    return json.loads(m.group(1))


def items(data: dict) -> list[dict]:
    return [x for c in data["clusters"] for x in (c["r"], *c["m"])]


def shown(item: dict) -> bool:
    return item.get("t") is not None or "s" in item or item.get("same") == 1


RECASED = LION.read_text(encoding="utf-8").upper().replace(",", "").replace(".", "!")


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "texts"
    (d / "sub").mkdir(parents=True)
    (d / "lion.txt").write_text(LION.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "sub" / "lion-typo.txt").write_text(LION_TYPO.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "lion-recased.txt").write_text(RECASED, encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    return d


def test_add_dir_then_report_shows_every_text_with_no_flag(database_url, collection_name, folder, tmp_path):
    db = ("--database-url", database_url, "-c", collection_name)
    assert run("add", folder, *db, cwd=tmp_path).returncode == 0
    out = tmp_path / "report.html"
    p = run("report", "--json", "-o", out, *db, cwd=tmp_path / "elsewhere")  # keys do not resolve from here
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["texts_in_clusters"] == 3 and info["texts_shown"] == 3
    data = page_data(out)
    assert all(shown(x) for x in items(data))
    (cluster,) = data["clusters"]
    pair = {cluster["r"]["k"].rsplit("/", 1)[-1]} | {m["k"].rsplit("/", 1)[-1] for m in cluster["m"] if m.get("rule_same")}
    assert pair == {"lion.txt", "lion-recased.txt"}  # the re-cased copy (Jaccard 1.0) shows as equal
    assert not [s for m in cluster["m"] if m.get("rule_same") for s in m["s"] if s[0] in (DELETED, INSERTED)]


def test_a_file_moved_away_says_why(database_url, collection_name, folder, tmp_path):
    db = ("--database-url", database_url, "-c", collection_name)
    assert run("add", folder, *db, cwd=tmp_path).returncode == 0
    (folder / "sub" / "lion-typo.txt").rename(tmp_path / "moved.txt")
    out = tmp_path / "report.html"
    assert run("report", "-o", out, *db, cwd=tmp_path).returncode == 0
    missing = [x for x in items(page_data(out)) if not shown(x)]
    assert len(missing) == 1 and "could not be read" in missing[0]["why"]


def test_records_of_a_collection_that_keeps_texts(database_url, collection_name, tmp_path):
    jl = tmp_path / "posts.jsonl"
    jl.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in (
        ("a", LION.read_text(encoding="utf-8")), ("b", LION_TYPO.read_text(encoding="utf-8")), ("c", RECASED))),
        encoding="utf-8")
    out = tmp_path / "report.html"
    plain = ("--database-url", database_url, "-c", collection_name + "-plain")
    assert run("add", jl, *plain).returncode == 0
    assert run("report", "-o", out, *plain).returncode == 0
    whys = {x.get("why") for x in items(page_data(out))}
    assert whys and all(w and "does not keep texts" in w for w in whys)  # not shown, and says why

    kept = ("--database-url", database_url, "-c", collection_name)
    assert run("add", "--store-text", jl, *kept).returncode == 0
    p = run("report", "--json", "-o", out, *kept)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["texts_in_clusters"] == 3 and info["texts_shown"] == 3
    with SimhashIndex(database_url, collection_name) as ix:
        assert ix.store_texts and ix.get("a").meta is None  # kept by the collection, not in meta


def test_dedup_into_a_collection_that_keeps_texts_keeps_them(database_url, collection_name, tmp_path):
    with SimhashIndex(database_url, collection_name, store_texts=True):
        pass
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "x", "text": "a record deduplicated into the collection"}) + "\n", "utf-8")
    p = run("dedup", src, "-o", tmp_path / "out.jsonl", "--database-url", database_url, "-c", collection_name)
    assert p.returncode == 0, p.stderr
    with SimhashIndex(database_url, collection_name) as ix:
        assert ix.text("x") == "a record deduplicated into the collection"
    other = ("--database-url", database_url, "-c", collection_name + "-new")
    p = run("dedup", src, "-o", tmp_path / "out2.jsonl", "--store-text", *other)
    assert p.returncode == 0, p.stderr
    with SimhashIndex(database_url, collection_name + "-new") as ix:
        assert ix.store_texts and ix.text("x") == "a record deduplicated into the collection"
    p = run("dedup", src, "-o", tmp_path / "out3.jsonl", "--store-text", "--database-url", database_url)
    assert p.returncode == 2 and "needs -c NAME" in p.stderr


def test_a_path_in_meta_outside_the_recorded_folders_is_not_read(database_url, collection_name, folder, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(LION.read_text(encoding="utf-8") + " SECRET-MARKER", encoding="utf-8")
    with SimhashIndex(database_url, collection_name) as ix:
        ix.record_file_root(folder)
        ix.add("a", LION.read_text(encoding="utf-8"), meta={"path": str(folder / "lion.txt")})
        ix.add("b", LION_TYPO.read_text(encoding="utf-8"), meta={"path": str(secret)})
        out = tmp_path / "r.html"
        write_report(ix, out)
    page = out.read_text("utf-8")
    assert "SECRET-MARKER" not in page
    member = page_data(out)["clusters"][0]["m"][0]
    assert member["k"] == "b" and "not inside a folder recorded" in member["why"]


def test_fold_diff_compares_like_the_rule():
    a = "The lion, the fox and the wolf went hunting."
    b = "THE LION THE FOX AND THE WOLF WENT HUNTING!!"
    plain, folded = word_diff(a, b), word_diff(a, b, fold=True)
    assert any(s[0] in (DELETED, INSERTED) for s in plain)
    assert not any(s[0] in (DELETED, INSERTED) for s in folded) and any(s[0] == RESPACED for s in folded)
    changed = word_diff(a, "the lion the fox and the bear went hunting", fold=True)
    assert [s[1].strip() for s in changed if s[0] == DELETED] == ["wolf"]
    assert [s[1].strip() for s in changed if s[0] == INSERTED] == ["bear"]
    for x, y in ((a, b), (a, "the lion the fox and the bear went hunting"), ("，这是中文。", "这是中文")):
        segs = word_diff(x, y, fold=True)
        assert "".join(s[1] for s in segs if s[0] != INSERTED) == x
        assert "".join(s[2] if s[0] == RESPACED else s[1] for s in segs if s[0] != DELETED) == y
