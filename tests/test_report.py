"""The HTML review report (simdb.report) without a browser: escaping, word diff,
paging/lazy rendering, summary numbers, text sources. The browser test is
tests/test_report_browser.py."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.report import (
    DELETED,
    EQUAL,
    INSERTED,
    RESPACED,
    ReportCluster,
    ReportItem,
    build_report_data,
    json_for_script,
    render_report,
    tokenize_for_diff,
    word_diff,
    write_report,
)
from simdb.report import diff as report_diff
from simdb.report import render as report_render

EVIL = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2"> & <b>bold</b>'


def side(segs, tag):
    """The text of one side: tag DELETED = the representative's, INSERTED = the member's."""
    out = []
    for seg in segs:
        if seg[0] in (EQUAL, tag):
            out.append(seg[1])
        elif seg[0] == RESPACED:
            out.append(seg[1] if tag == DELETED else seg[2])
    return "".join(out)


def marked(segs, tag):
    return [seg[1].strip() for seg in segs if seg[0] == tag]


def embedded_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="simdb-data">(.*?)</script>', page, re.S)
    assert m, "data element missing"
    return json.loads(m.group(1))


# --------------------------------------------------------------------------- word diff

words = st.lists(
    st.sampled_from(["the", "cat", "sat", "on", "mat", "dog", ",", ".", "中", "文", "  ", "\n", "Ärger", "x_y"]),
    max_size=40,
).map(lambda ws: " ".join(ws))


@given(st.text(max_size=200))
def test_tokens_join_back_to_the_text(text):
    assert "".join(tokenize_for_diff(text)) == text


@given(words, words)
@settings(max_examples=300)
def test_word_diff_reconstructs_both_sides(a, b):
    segs = word_diff(a, b)
    assert side(segs, DELETED) == a
    assert side(segs, INSERTED) == b
    assert all(seg[1] or seg[0] == RESPACED for seg in segs), "no empty segments"
    assert all(x[0] != y[0] for x, y in zip(segs, segs[1:])), "adjacent segments merged"


@given(st.text(max_size=300), st.text(max_size=300))
@settings(max_examples=200)
def test_word_diff_reconstructs_arbitrary_text(a, b):
    segs = word_diff(a, b)
    assert side(segs, DELETED) == a and side(segs, INSERTED) == b


def test_word_diff_marks_whole_changed_words_only():
    segs = word_diff("the quick brown fox jumps over the dog", "the quick red fox jumps over the lazy dog")
    assert marked(segs, DELETED) == ["brown"]
    assert marked(segs, INSERTED) == ["red", "lazy"]
    assert segs[0] == [EQUAL, "the quick "]


def test_rewrapped_text_is_not_marked_as_changed():
    a = "A LION was awakened from sleep by a Mouse running over his face. Rising\nup angrily, he caught him"
    b = "A LION was awakened from sleep by a Mouse running over his face.\nRising up  angrily, he caught him"
    segs = word_diff(a, b)
    assert side(segs, DELETED) == a and side(segs, INSERTED) == b
    assert marked(segs, DELETED) == [] and marked(segs, INSERTED) == []
    assert any(seg[0] == RESPACED for seg in segs)
    segs = word_diff(a, b.replace("angrily", "angerly"))
    assert marked(segs, DELETED) == ["angrily"] and marked(segs, INSERTED) == ["angerly"]


def test_word_diff_identical_and_empty():
    assert word_diff("same text", "same text") == [[EQUAL, "same text"]]
    assert word_diff("", "") == []
    assert word_diff("", "new") == [[INSERTED, "new"]]
    assert word_diff("old", "") == [[DELETED, "old"]]


def test_word_diff_cjk_is_per_character():
    segs = word_diff("我爱北京天安门", "我爱上海天安门")
    assert segs == [[EQUAL, "我爱"], [DELETED, "北京"], [INSERTED, "上海"], [EQUAL, "天安门"]]


def test_word_diff_long_texts_fall_back_to_lines(monkeypatch):
    monkeypatch.setattr(report_diff, "MAX_DIFF_TOKENS", 10)
    a = "one two three four five six\nseven eight nine ten eleven twelve\n"
    b = "one two three four five six\nseven eight NINE ten eleven twelve\n"
    segs = word_diff(a, b)
    assert side(segs, DELETED) == a and side(segs, INSERTED) == b
    assert marked(segs, DELETED) == ["seven eight nine ten eleven twelve"]


def test_word_diff_of_long_near_duplicates():
    """Long texts with a few changed words (the speed is measured in benchmarks/bench_report.py)."""
    base = " ".join(f"w{i % 997}" for i in range(3000))
    other = base.replace("w5 ", "CHANGED ", 3)
    segs = word_diff(base, other)
    assert side(segs, DELETED) == base and side(segs, INSERTED) == other
    assert marked(segs, INSERTED) == ["CHANGED"] * 3
    assert marked(segs, DELETED) == ["w5"] * 3


# --------------------------------------------------------------------------- escaping


def test_json_for_script_escapes_markup_characters_and_round_trips():
    value = {"t": EVIL + "\u2028\u2029", "k": "a&b<c>"}
    s = json_for_script(value)
    for ch in "<>&\u2028\u2029":
        assert ch not in s
    assert "\\u003c/script\\u003e" in s
    assert json.loads(s) == value


def evil_page() -> str:
    clusters = [
        {
            "representative": {"key": "<rep key>", "text": "hello " + EVIL + " world"},
            "members": [{"key": 'm"1\'<x>', "text": "hello " + EVIL + " there world", "distance": 1}],
        }
    ]
    return render_report(clusters, title="<title> & <script>t()</script>", collection="<coll>", k=3, total_texts=5)


def test_texts_keys_and_titles_never_reach_markup_unescaped():
    page = evil_page()
    # exactly two script elements: the JSON data and the page's own code
    assert len(re.findall(r"<script\b", page)) == 2
    assert "__pwned" in page  # ... the text is in the file, but only inside the JSON string
    assert "<img" not in page and "onerror=\"" not in page
    assert "<rep key>" not in page and "<coll>" not in page
    assert "&lt;title&gt; &amp; &lt;script&gt;t()&lt;/script&gt;" in page
    assert "&lt;coll&gt;" in page
    data = embedded_data(page)
    c = data["clusters"][0]
    assert c["r"] == {"k": "<rep key>", "t": "hello " + EVIL + " world"}
    m = c["m"][0]
    assert m["k"] == 'm"1\'<x>'
    assert side(m["s"], INSERTED) == "hello " + EVIL + " there world"


def test_page_script_never_parses_data_as_html():
    js = report_render.PAGE_SCRIPT
    for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert forbidden not in js
    assert "textContent" in js and "createTextNode" in js


def test_page_is_self_contained_and_csp_allows_only_its_own_script():
    page = evil_page()
    # the texts are on the page twice, in the data and as plain HTML for readers without the script,
    # escaped both times: no element of the page has an attribute that loads anything
    attributes: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            attributes.extend(name for name, _ in attrs)

    Tags().feed(page)
    assert attributes and not {"src", "href"} & set(attributes), "nothing is loaded from anywhere"
    assert EVIL not in page
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp
    code = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    script_src = re.search(r"script-src ([^;]+)", csp).group(1)
    assert "unsafe" not in script_src


# --------------------------------------------------------------------------- content, ordering, paging


def make_clusters(n: int, seed: int = 0):
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        base = " ".join(f"w{rnd.randrange(500)}" for _ in range(60))
        members = []
        for j in range(rnd.choice([1, 1, 2, 4])):
            w = base.split()
            w[rnd.randrange(len(w))] = f"changed{j}"
            members.append({"key": f"c{i}-m{j}", "text": " ".join(w), "distance": rnd.randint(0, 3)})
        out.append({"representative": {"key": f"c{i}", "text": base}, "members": members})
    return out


def test_clusters_sorted_by_size_members_by_distance():
    clusters = [
        ReportCluster(ReportItem("small", "a b"), [ReportItem("s1", "a c", distance=2)]),
        ReportCluster(
            ReportItem("big", "x y z"),
            [ReportItem("b2", "x y", distance=3), ReportItem("b1", "x z", distance=1), ReportItem("b0", "x y z", 0)],
        ),
        ReportCluster(ReportItem("also-small", "q"), [ReportItem("a1", "r", distance=1)]),
    ]
    data = build_report_data(clusters, k=3)
    assert [c["r"]["k"] for c in data["clusters"]] == ["big", "also-small", "small"]
    assert [c["n"] for c in data["clusters"]] == [4, 2, 2]
    assert [m["k"] for m in data["clusters"][0]["m"]] == ["b0", "b1", "b2"]
    assert [m["d"] for m in data["clusters"][0]["m"]] == [0, 1, 3]


def test_accepts_dedup_style_clusters_and_plain_keys():
    from simdb.results import Cluster

    data = build_report_data([Cluster("a", ["a", "b", "c"])])
    c = data["clusters"][0]
    assert c["n"] == 3 and c["r"] == {"k": "a", "t": None}
    assert [m["k"] for m in c["m"]] == ["b", "c"]
    assert all(m["t"] is None and "s" not in m for m in c["m"])  # shown as "text not available"
    data = build_report_data(
        [{"representative": "r", "members": ["r", "x"], "distances": {"x": 2}, "jaccards": {"x": 0.75}}]
    )
    assert data["clusters"][0]["m"] == [{"k": "x", "d": 2, "j": 0.75, "t": None}]


def test_jaccard_shown_when_known():
    page = render_report(
        [ReportCluster(ReportItem("r", "one two three"), [ReportItem("m", "one two four", 2, jaccard=0.3333333)])]
    )
    assert embedded_data(page)["clusters"][0]["m"][0]["j"] == 0.3333


def test_one_similarity_a_member_and_the_clusters_are_chains():
    """A member shows the rule's Jaccard where known, else the Hamming similarity under that name (never
    both, unnamed: "similarity 0.953" next to "Jaccard 0.973" read as two of one measure); the header says
    why a member may be outside the rule to the representative (clusters are connected components)."""
    script = report_render.PAGE_SCRIPT
    assert "Hamming similarity" in script and "\\u00b7 similarity" not in script
    assert "if (!hasJ)" in script
    jaccard = render_report([], rule="Jaccard \u2265 0.8 (chr4-fmix64-v4)", k=3)
    assert re.search(r'<div class="sub" id="chains">Clusters are chains of near-duplicate pairs: a member may be '
                     r"at a Jaccard below the threshold to the representative and above it to another member", jaccard)
    hamming = render_report([], rule="Hamming distance \u2264 3", k=3)
    assert "more than 3 bits from the representative and within 3 of another member" in hamming


def test_rendering_is_lazy_and_paged():
    """The static HTML holds no per-cluster markup; the clusters are data that the page
    script renders one page (50 by default) at a time, with previous/next controls."""
    clusters = make_clusters(10_000)
    page = render_report(clusters, k=3, total_texts=40_000)  # its speed: benchmarks/bench_report.py
    assert "<section" in page  # the summary ...
    scripted = re.sub(r"<noscript>.*?</noscript>", "", page, flags=re.S)  # (not parsed where scripts run)
    assert 'class="cluster"' not in scripted  # ... but no cluster is rendered server side for the script
    data = embedded_data(page)
    assert len(data["clusters"]) == 10_000
    sizes = [c["n"] for c in data["clusters"]]
    assert sizes == sorted(sizes, reverse=True)
    for control in ('id="filter"', 'id="prev"', 'id="next"', 'id="pagesize"', 'id="status"'):
        assert control in page
    assert "size: 50" in report_render.PAGE_SCRIPT
    # about 1 KB per text of this size: 10,000 clusters stay a file a browser opens at once
    assert len(page) < 40_000_000


def test_without_javascript_the_clusters_and_texts_are_plain_html():
    """A text viewer, a mail client or a browser with scripts off shows every cluster and text (escaped)."""
    page = render_report([ReportCluster(ReportItem("rep<1>", "hello " + EVIL + " world"),
                                        [ReportItem("m1", "hello " + EVIL + " there world", 2, 0.85),
                                         ReportItem("m2", "hello " + EVIL + " world", 0, 1.0),
                                         ReportItem("m3", None, 3, why="no file")])], k=3)
    static = re.search(r"<noscript>(.*?)</noscript>", page, flags=re.S).group(1)
    assert "please enable" not in page
    assert static.count('class="cluster"') == 1 and "rep&lt;1&gt;" in static
    assert html.escape("hello " + EVIL + " there world") in static  # the member's own text, rebuilt from its diff
    assert "distance 2, Jaccard 0.850" in static and "(identical text)" in static
    assert "text not available: no file" in static and EVIL not in static


def test_long_texts_are_cut_in_the_file_and_say_so():
    long = "word " * 10_000
    page = render_report(
        [ReportCluster(ReportItem("r", long), [ReportItem("m", "head " + long, 1)])], max_text_chars=1_000
    )
    c = embedded_data(page)["clusters"][0]
    assert c["r"]["cut"] == len(long) and len(c["r"]["t"]) == 1_000
    assert c["m"][0]["cut"] == len(long) + 5
    assert len(side(c["m"][0]["s"], INSERTED)) == 1_000


def test_texts_that_differ_only_past_the_cut_are_not_flagged_identical():
    # two long texts with the same first max_text_chars characters: the page must not say
    # "identical text" (nor "the same text to the rule") from the cut prefixes it shows
    long = "The quick brown fox jumps over the lazy dog. " * 100
    rep = ReportItem("r", long + "end one")
    cluster = ReportCluster(rep, [ReportItem("differs", long + "end two", 1), ReportItem("copy", long + "end one", 0)])
    for fold in (False, True):
        rows = {m["k"]: m for m in build_report_data([cluster], max_text_chars=1_000, fold=fold)["clusters"][0]["m"]}
        assert "same" not in rows["differs"] and "rule_same" not in rows["differs"]
        assert rows["differs"]["cut"] == len(long) + 7 and "s" in rows["differs"]
        assert rows["copy"].get("same") == 1  # identical in full: still flagged


def test_identical_members_are_flagged_and_huge_clusters_keep_texts_for_the_first_members():
    members = [ReportItem("same", "the text", 0)] + [ReportItem(f"m{i:03d}", f"the text {i}", 1) for i in range(10)]
    data = build_report_data([ReportCluster(ReportItem("r", "the text"), members)], max_member_texts=4)
    rows = data["clusters"][0]["m"]
    assert rows[0] == {"k": "same", "d": 0, "same": 1}
    assert all("s" in r for r in rows[1:4])
    assert all(r.get("omit") == 1 and r["t"] is None and "s" not in r for r in rows[4:])
    assert len(rows) == 10 + 1


def test_summary_counts_and_plots():
    clusters = [
        ReportCluster(ReportItem(f"r{i}", "a"), [ReportItem(f"m{i}-{j}", "a", distance=j % 4) for j in range(size - 1)])
        for i, size in enumerate([2, 2, 3, 5, 40])
    ]
    page = render_report(clusters, k=3, total_texts=100, collection="demo")
    s = report_render.summary(embedded_data(page))
    assert s["clusters"] == 5 and s["in_clusters"] == 52 and s["duplicates"] == 47
    assert s["unique"] == 48 and s["largest"] == 40
    labels, values = s["size_bins"]
    assert sum(values) == 5 and labels[0] == "2" and values[0] == 2
    assert s["distances"][0] == ["0", "1", "2", "3"] and sum(s["distances"][1]) == 47
    for plot in ('id="plot-sizes"', 'id="plot-distances"', 'id="plot-unique"'):
        assert plot in page
    assert "unique (no near-duplicate): 48" in page
    assert re.search(r"texts in the collection</td><td class=\"n\">100<", page)


def test_undecodable_text_and_control_characters_are_written_safely(tmp_path):
    bad = b"caf\xe9 \x00 nul".decode("utf-8", "surrogateescape")
    page = render_report([ReportCluster(ReportItem("k\udce9", bad), [ReportItem("m", bad + " more", 1)])])
    page.encode("utf-8")  # writable as UTF-8
    c = embedded_data(page)["clusters"][0]
    assert c["r"]["k"] == "k\ufffd" and c["r"]["t"] == "caf\ufffd \x00 nul"


def test_empty_report():
    page = render_report([], k=3, total_texts=0)
    assert embedded_data(page)["clusters"] == []
    assert "<svg" in page


# --------------------------------------------------------------------------- write_report with a stand-in index


class FakeIndex:
    """Duck-typed stand-in with the public API write_report falls back on (no engine)."""

    def __init__(self, clusters, rows):
        self._clusters = clusters
        self._rows = rows

    def clusters(self, k=3, **kw):
        self.kw = {"k": k, **kw}
        return iter(self._clusters)

    def get(self, key):
        return self._rows.get(key)

    def __len__(self):
        return len(self._rows)


def test_write_report_texts_from_mapping_meta_and_files(tmp_path):
    from simdb.results import Cluster

    doc = tmp_path / "doc-a.txt"
    doc.write_text("the file text of a", encoding="utf-8")
    other = tmp_path / "doc-b.txt"
    other.write_text("the file text of b", encoding="utf-8")
    rows = {
        str(doc): {"key": str(doc), "fp": 0b0000, "meta": None},
        str(other): {"key": str(other), "fp": 0b0011, "meta": None},
        "m": {"key": "m", "fp": 0b0111, "meta": {"text": "text from meta"}},
        "given": {"key": "given", "fp": 0b1, "meta": {"text": "ignored: the mapping wins"}},
        "lonely": {"key": "lonely", "fp": 1 << 60, "meta": None},
    }
    index = FakeIndex([Cluster(str(doc), [str(doc), str(other), "m", "given"])], rows)
    out = tmp_path / "r.html"
    res = write_report(index, out, k=3, min_jaccard=0.5, texts={"given": "from the mapping"}, texts_from=tmp_path)
    assert index.kw == {"k": 3, "min_jaccard": 0.5}
    assert res.clusters == 1 and res.texts_in_clusters == 4 and res.total_texts == 5
    assert res.bytes == len(out.read_bytes())
    data = embedded_data(out.read_text(encoding="utf-8"))
    c = data["clusters"][0]
    assert c["r"]["t"] == "the file text of a"
    by_key = {m["k"]: m for m in c["m"]}
    assert side(by_key[str(other)]["s"], INSERTED) == "the file text of b"
    assert side(by_key["m"]["s"], INSERTED) == "text from meta"
    assert side(by_key["given"]["s"], INSERTED) == "from the mapping"
    assert {k: m["d"] for k, m in by_key.items()} == {str(other): 2, "m": 3, "given": 1}
    assert data["k"] == 3 and data["min_jaccard"] == 0.5 and data["total_texts"] == 5
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".simdb-report-")], "temp file cleaned up"


def test_write_report_keys_filter_and_no_file_reading(tmp_path):
    from simdb.results import Cluster

    doc = tmp_path / "secret.txt"
    doc.write_text("do not read me", encoding="utf-8")
    rows = {k: {"key": k, "fp": 0, "meta": None} for k in ["a", "b", "c", "d", str(doc)]}
    index = FakeIndex([Cluster("a", ["a", "b"]), Cluster("c", ["c", "d", str(doc)])], rows)
    out = tmp_path / "r.html"
    res = write_report(index, out, keys=["d"], read_files=False, texts=lambda key: None)
    data = embedded_data(out.read_text(encoding="utf-8"))
    assert res.clusters == 1 and [c["r"]["k"] for c in data["clusters"]] == ["c"]
    assert "do not read me" not in out.read_text(encoding="utf-8")
    assert data["keys_filter"] == "clusters containing any of 1 given key"


def test_write_report_refuses_keys_the_collection_does_not_hold(tmp_path):
    """A typo in ``keys=`` is an error naming it, not an empty report saying "no near-duplicates";
    a stored key in no cluster is fine (it has none)."""
    from simdb.errors import KeyNotFoundError
    from simdb.results import Cluster

    rows = {k: {"key": k, "fp": 0, "meta": None} for k in ["a", "b", "lonely"]}
    index = FakeIndex([Cluster("a", ["a", "b"])], rows)
    out = tmp_path / "r.html"
    with pytest.raises(KeyNotFoundError, match="'typo'") as err:
        write_report(index, out, keys=["a", "typo"], texts=lambda key: None)
    assert "'a'" not in str(err.value) and not out.exists()
    res = write_report(index, out, keys=["lonely"], texts=lambda key: None)
    assert res.clusters == 0 and out.exists()


# --------------------------------------------------------------------------- write_report on a real index


def test_write_report_from_a_real_index(database_url, collection_name, tmp_path):
    """The sample corpus in PostgreSQL: the report shows exactly index.clusters(k=3),
    texts read from the files named by the keys and from meta["text"], distances
    computed from the stored fingerprints."""
    from simdb import SimhashIndex, hamming

    sample = sorted((Path(__file__).resolve().parent.parent / "examples" / "sample").rglob("*.txt"))
    assert len(sample) >= 20
    typo = next(p for p in sample if p.name == "lion-and-mouse.typo.txt").read_text(encoding="utf-8")
    with SimhashIndex(database_url, collection=collection_name, verify=False) as index:
        index.add_many((str(p), p.read_text(encoding="utf-8")) for p in sample)
        index.add("stored-with-text", typo.replace("ropse", "ropes!"), meta={"text": typo.replace("ropse", "ropes!")})
        wolf = next(p for p in sample if p.name.startswith("01-")).read_text(encoding="utf-8")
        evil, evil2 = EVIL + " " + wolf, EVIL + " " + wolf.replace("violent", "brutal")  # near each other, far from the file
        index.add("injected", evil, meta={"text": evil})
        index.add("injected-copy", evil2, meta={"text": evil2})
        expected = {c.representative: set(c.keys) for c in index.clusters(k=3)}
        out = tmp_path / "report.html"
        res = write_report(index, out, k=3, texts_from=sample[0].parents[1])
        fps = {key: index.get(key).fp for keys in expected.values() for key in keys}
        total = len(index)
    page = out.read_text(encoding="utf-8")
    data = embedded_data(page)
    assert res.clusters == len(expected) == len(data["clusters"]) >= 6
    assert data["total_texts"] == total == len(sample) + 3
    assert data["collection"] == collection_name
    got = {c["r"]["k"]: {c["r"]["k"], *(m["k"] for m in c["m"])} for c in data["clusters"]}
    assert got == expected
    for c in data["clusters"]:
        rep = c["r"]["k"]
        assert c["r"]["t"], f"no text for {rep}"
        for m in c["m"]:
            assert m["d"] == hamming(fps[rep], fps[m["k"]])
            assert m.get("same") or m.get("s"), f"no text for {m['k']}"
    lion = next(c for c in data["clusters"] if "stored-with-text" in {m["k"] for m in c["m"]})
    meta_row = next(m for m in lion["m"] if m["k"] == "stored-with-text")
    assert side(meta_row["s"], INSERTED) == typo.replace("ropse", "ropes!")
    inj = next(c for c in data["clusters"] if c["r"]["k"] == "injected")
    assert inj["r"]["t"] == evil and side(inj["m"][0]["s"], INSERTED) == evil2
    assert marked(inj["m"][0]["s"], DELETED) == ["violent"]
    assert len(re.findall(r"<script\b", page)) == 2

    # only the clusters of the keys just added
    with SimhashIndex(database_url, collection=collection_name) as index:
        res = write_report(index, tmp_path / "new.html", keys=["injected-copy"])
    data = embedded_data((tmp_path / "new.html").read_text(encoding="utf-8"))
    assert res.clusters == 1 and data["clusters"][0]["r"]["k"] == "injected"


def test_write_report_shows_jaccard_of_a_verified_collection(database_url, collection_name, tmp_path):
    from simdb import SimhashIndex

    sample = Path(__file__).resolve().parent.parent / "examples" / "sample"
    a = (sample / "originals" / "04-the-lion-and-the-mouse.txt").read_text(encoding="utf-8")
    b = (sample / "variants" / "lion-and-mouse.typo.txt").read_text(encoding="utf-8")
    with SimhashIndex(database_url, collection=collection_name + "-j") as index:
        index.add("a", a, meta={"text": a})
        index.add("b", b, meta={"text": b})
        res = write_report(index, tmp_path / "j.html", min_jaccard=0.8)
        want = [x.jaccard for x in index.near(b, min_jaccard=0.8) if x.key == "a"]
    assert res.clusters == 1
    m = embedded_data((tmp_path / "j.html").read_text(encoding="utf-8"))["clusters"][0]["m"][0]
    assert m["k"] == "b" and [m["j"]] == [round(j, 4) for j in want] and 0.8 <= m["j"] < 1
    assert marked(m["s"], DELETED) == ["ropes"] and marked(m["s"], INSERTED) == ["ropse"]
