"""The native segmenter (rjieba) must cut every Han run exactly as jieba 0.42.1 does.

jieba is the reference: the words it gives are what the pinned fingerprints of
Chinese text are made of. Compared on real Chinese text (gettext / Django
translations on this machine, when present), on every 10th word of jieba's own
dictionary, on random phrases of dictionary words and on random mixtures of all
Han ranges simdb sends to the segmenter (``CJK_CLASS``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.core import segment
from simdb.core.tokenize import CJK_RE, SPLIT_RE, WORD_RE, normalize

rjieba = pytest.importorskip("rjieba")

ROOT = Path(__file__).resolve().parent.parent


def reference(text: str) -> list[str]:
    return list(segment.jieba_tokenizer().cut(text, cut_all=False, HMM=True))


@lru_cache(maxsize=1)
def native():
    return rjieba.Jieba()


def cut(text: str) -> list[str]:
    return segment._cut_native(native(), text)


@lru_cache(maxsize=1)
def dictionary_words() -> list[str]:
    import jieba

    path = Path(jieba.__file__).parent / "dict.txt"
    return [line.split(" ", 1)[0] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def han_runs(text: str) -> list[str]:
    return [p for p in SPLIT_RE.findall(normalize(text)) if CJK_RE.match(p) and WORD_RE.fullmatch(p)]


def test_dictionary_words_cut_alike():
    words = [w for w in dictionary_words()[::10] if han_runs(w) == [w]]
    assert len(words) > 20_000
    bad = [w for w in words if cut(w) != reference(w)]
    assert bad == []


def test_random_phrases_of_dictionary_words():
    words = [w for w in dictionary_words() if han_runs(w) == [w]]
    rnd = random.Random(17)
    for _ in range(3000):
        text = "".join(rnd.choice(words) for _ in range(rnd.randint(1, 12)))
        assert cut(text) == reference(text), text


def test_real_chinese_text():
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.corpus import chinese_pieces
    finally:
        sys.path.remove(str(ROOT))
    pieces = chinese_pieces()
    runs = [r for p in pieces[:4000] for r in han_runs(p)]
    if len(runs) < 500:
        pytest.skip("no Chinese translation catalogues on this machine")
    text = "\n".join(runs)
    assert cut(text) == reference(text)


# every Han range of CJK_CLASS, jieba's own range weighted most (it is what real text holds)
_han = st.one_of(
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5),
    st.characters(min_codepoint=0x9FD6, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x3400, max_codepoint=0x4DBF),
    st.characters(min_codepoint=0xF900, max_codepoint=0xFAFF),
    st.characters(min_codepoint=0x20000, max_codepoint=0x3FFFF),
)


@st.composite
def mixtures(draw):
    words = dictionary_words()
    parts = draw(
        st.lists(
            st.one_of(
                st.integers(0, len(words) - 1).map(lambda i: words[i]),
                st.text(_han, min_size=1, max_size=6),
                st.just("\n"),
            ),
            max_size=25,
        )
    )
    return "".join(parts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixtures())
def test_random_mixtures(text):
    # what simdb sends: Han runs that are \w, joined by "\n"
    runs = [r for line in text.split("\n") for r in han_runs(line)]
    joined = "\n".join(runs)
    assert cut(joined) == reference(joined)
    if runs:
        assert segment.segment_runs(runs) == [reference(r) for r in runs]


def test_backend_is_native_when_installed():
    assert segment.backend() == "rjieba"


def test_fingerprints_equal_with_either_backend():
    """The same Chinese texts fingerprint identically under rjieba and under jieba (SIMDB_SEGMENTER=jieba)."""
    code = (
        "import json, sys\n"
        "from simdb import Fingerprinter\nfrom simdb.core import segment\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps([segment.backend(), Fingerprinter().many(texts),"
        " Fingerprinter(ngram=3).many(texts), Fingerprinter(tokenizer='default', stopwords=False).many(texts)]))\n"
    )
    words = [w for w in dictionary_words() if han_runs(w) == [w]]
    rnd = random.Random(3)
    texts = [
        "".join(rnd.choice(words) + rnd.choice(["", "，", " ", "abc ", "。\n", "㐀", "\U00020001"]) for _ in range(40))
        for _ in range(200)
    ]
    import json

    out = {}
    for name in ("jieba", ""):
        env = dict(os.environ, SIMDB_SEGMENTER=name)
        r = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True, env=env, check=True
        )
        backend, *fps = json.loads(r.stdout)
        out[backend] = fps
    assert set(out) == {"jieba", "rjieba"}
    assert out["jieba"] == out["rjieba"]


def test_use_switches_backend_and_checks_its_argument():
    from simdb import Fingerprinter
    from simdb.errors import InvalidArgumentError

    text = "我们今天去公园散步，天气很好。㐀㐁中国人民"
    try:
        segment.use("jieba")
        assert segment.backend() == "jieba"
        slow = Fingerprinter().fingerprint(text)
        segment.use("rjieba")
        assert segment.backend() == "rjieba"
        assert Fingerprinter().fingerprint(text) == slow
        with pytest.raises(InvalidArgumentError, match="name"):
            segment.use("cppjieba")
    finally:
        segment.use(None)
