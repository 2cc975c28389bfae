"""The default text pipeline: normalisation, \\w+ words, jieba for Han runs, stopwords, n-grams."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.core import tokenize as T


def test_normalize_nfkc_and_casefold():
    assert T.normalize("Ｈｅｌｌｏ　ＷＯＲＬＤ") == "hello world"  # full-width -> ASCII
    assert T.normalize("Straße") == "strasse"  # casefold, not lower
    assert T.normalize("ﬁne") == "fine"  # ligature
    assert T.normalize("Ω") == "ω"
    assert T.normalize("ABC def") == "abc def"


def test_word_characters_are_isalnum_or_underscore():
    # docs/design.md defines \w this way for other implementations
    w = T.WORD_RE
    for cp in range(0x30000):
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        assert bool(w.fullmatch(c)) == (c.isalnum() or c == "_"), hex(cp)


def test_split_words_drops_punctuation_and_whitespace():
    assert T.split("hello, world!  it's 2024_q1\n") == ["hello", "world", "it", "s", "2024_q1"]
    assert T.split("") == []
    assert T.split(" ,.;!? \t") == []


def test_split_segments_han_runs_with_jieba():
    toks = T.split("我们今天去公园散步")
    assert "".join(toks) == "我们今天去公园散步"
    assert "公园" in toks and "散步" in toks and len(toks) >= 4


def test_mixed_text_keeps_order():
    toks = T.split("python是一种编程语言，version 3.11发布了")
    assert toks[0] == "python"
    assert toks.index("python") < toks.index("编程语言") < toks.index("version") < toks.index("发布")
    assert "3" in toks and "11" in toks


def test_segment_cjk_off_keeps_runs_whole():
    assert T.split("我们今天去公园散步 ok", segment_cjk=False) == ["我们今天去公园散步", "ok"]


def test_stopword_lists():
    en, zh = T.stopwords("en"), T.stopwords("zh")
    assert {"the", "and", "of", "t", "don"} <= en and "python" not in en
    assert {"的", "了", "是", "我们"} <= zh and "公园" not in zh
    assert 150 <= len(en) <= 400 and 150 <= len(zh) <= 400
    assert T.stopwords() == en | zh
    for lang in ("en", "zh"):
        raw = resources.files("simdb.data").joinpath(f"{lang}.txt").read_text(encoding="utf-8")
        assert raw.startswith("#")


# The stopword lists are part of the fingerprint definition: changing them changes
# every fingerprint, so it must come with a Fingerprinter version bump.
PINNED_DIGESTS = {
    "en": "c21676be1a590fc6c766142b6c50ea824b75d8218b62d3e5773e5313be1172dd",
    "zh": "5e56917b093e072e171f6abf350f61a339893e08edb483de04e55637b350eef6",
}


def test_stopword_lists_are_pinned():
    from simdb.core.fingerprint import FINGERPRINT_VERSION

    assert FINGERPRINT_VERSION == 1
    for lang in ("en", "zh"):
        words = sorted(T.stopwords(lang))
        digest = hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()
        assert digest == PINNED_DIGESTS[lang], (
            f"simdb/data/{lang}.txt changed: fingerprints change with it; bump FINGERPRINT_VERSION "
            "and update this digest"
        )


def test_tokenize_removes_stopwords():
    assert T.tokenize("The cat and the hat") == ["cat", "hat"]
    assert T.tokenize("The cat and the hat", stopwords_=False) == ["the", "cat", "and", "the", "hat"]
    assert T.tokenize("我们的公园") == ["公园"]
    with pytest.raises(TypeError, match="text"):
        T.tokenize(b"bytes")


def test_word_ngrams():
    assert T.word_ngrams(["a", "b", "c", "d"], 2) == ["a b", "b c", "c d"]
    assert T.word_ngrams(["a", "b"], 3) == ["a b"]
    assert T.word_ngrams([], 3) == []
    assert T.word_ngrams(["a", "b"], 1) == ["a", "b"]


def test_char_ngrams():
    assert T.char_ngrams("Hello, World", 4) == ["hell", "ello", "llow", "lowo", "owor", "worl", "orld"]
    assert T.char_ngrams("ab!", 4) == ["ab"]
    assert T.char_ngrams("  ..", 4) == []
    assert T.char_ngrams("中文分词", 2) == ["中文", "文分", "分词"]


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_split_properties(text):
    norm = T.normalize(text)
    toks = T.split(norm)
    for t in toks:
        assert T.WORD_RE.fullmatch(t), t  # only word characters survive
    # jieba only cuts Han runs further: the same characters, in the same order
    plain = T.split(norm, segment_cjk=False)
    assert "".join(toks) == "".join(plain) == "".join(T.WORD_RE.findall(norm))
    for t in toks:
        assert bool(T.CJK_RE.match(t)) == bool(T.CJK_RE.search(t))  # never mixed Han / non-Han


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_importing_simdb_does_not_import_jieba():
    r = _run(
        "import sys, simdb\n"
        "fp = simdb.Fingerprinter()\n"
        "simdb.simhash('plain english text only')\n"
        "fp.fingerprint('more english'); fp.many(['a b c', 'd e f'])\n"
        "assert 'jieba' not in sys.modules and 'rjieba' not in sys.modules, 'segmenter imported'\n"
        "simdb.simhash('中文')\n"
        "from simdb.core import segment\n"
        "assert segment.backend() in sys.modules\n"
        "print('ok')\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_jieba_prints_nothing():
    r = _run(
        "import simdb\n"
        "simdb.simhash('我们今天去公园散步，天气很好。')\n"
        "simdb.Fingerprinter(tokenizer='keywords').fingerprint('我们今天去公园散步，天气很好。')\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""


def test_jieba_tokenizer_is_private_and_cached():
    import jieba

    tok = T.jieba_tokenizer()
    assert tok is T.jieba_tokenizer()
    assert tok is not jieba.dt


def test_keywords():
    kw = T.jieba_keywords("我们今天去公园散步，公园里的花开了，天气很好。", 5)
    words = [w for w, _ in kw]
    assert "公园" in words and len(kw) <= 5
    assert all(isinstance(s, float) and s > 0 for _, s in kw)
    assert kw == T.jieba_keywords("我们今天去公园散步，公园里的花开了，天气很好。", 5)
