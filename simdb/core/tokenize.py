"""Text -> tokens: the default pipeline's normalisation, word splitting and CJK segmentation.

The pipeline (documented precisely in docs/design.md, "Fingerprints"):

1. ``normalize``: Unicode NFKC, then ``str.casefold()``.
2. ``split``: runs of Han ideographs (``CJK_CLASS``) are segmented as jieba 0.42.1
   cuts them (precise mode, HMM on, jieba's default dictionary; natively by
   ``rjieba`` when installed, see ``simdb.core.segment``); all other text is split
   into Unicode ``\\w+`` words (Python ``re`` semantics), which drops whitespace
   and punctuation. Tokens keep text order.
3. stopwords (``stopwords()``): the English and Chinese lists shipped in
   ``simdb/data/`` are removed.

jieba is imported only when a text actually contains Han characters (or
keyword mode is used), its dictionary is loaded once per process into a
private ``jieba.Tokenizer`` (a caller's changes to the global jieba
dictionary do not change simdb fingerprints), and its logger is kept quiet
while it loads, so nothing is printed.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Collection
from functools import cache, lru_cache
from importlib import resources

from simdb.core.segment import jieba_tokenizer, quiet_jieba, segment_runs
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "CJK_CLASS",
    "char_ngrams",
    "char_stream",
    "jieba_keywords",
    "jieba_tokenizer",
    "mixed_tokens",
    "normalize",
    "split",
    "stopwords",
    "tokenize",
    "word_ngrams",
]

#: Han ideographs handed to jieba: CJK Unified Ideographs Extension A, the
#: URO block, CJK Compatibility Ideographs and planes 2-3 (Extensions B-H).
CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"

WORD_RE = re.compile(r"\w+")
CJK_RE = re.compile(f"[{CJK_CLASS}]")
# A run of Han characters, or a run of word characters that are not Han.
SPLIT_RE = re.compile(f"[{CJK_CLASS}]+|[^\\W{CJK_CLASS}]+")


#: the ``"tokens"`` tokenizer's one-character tokens: Han (incl. extensions), kana, Hangul, bopomofo
TOKEN_CJK_RANGES = (
    "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3100-\u312f"
    "\u3130-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
#: a token of the ``"tokens"`` stream: one such character, or a run of other word characters (not "_")
TOKEN_PATTERN = f"[{TOKEN_CJK_RANGES}]|[^\\W_{TOKEN_CJK_RANGES}]+"
_TOKEN_RE = re.compile(TOKEN_PATTERN)
_ASCII_TOKEN_RE = re.compile(r"[A-Za-z0-9]+")  # the same pattern on ASCII text, without its big classes


def mixed_tokens(text: str) -> list[str]:
    """The ``"tokens"`` tokenizer: one token per Han / kana / Hangul character and one per run of
    other word characters (``_`` splits), in order, of already-normalised ``text``.

    Why it exists next to ``split``: Chinese, English and text mixing both are one token stream
    (no jieba, no "mostly CJK" switch); verified collections shingle it (simdb.core.sketch) and, since
    the token-3-gram scheme ``tok3-xxh64-v3``, fingerprint it too, so a text is tokenized once."""
    if text.isascii():
        return _ASCII_TOKEN_RE.findall(text)
    return _TOKEN_RE.findall(text)


def normalize(text: str) -> str:
    """Unicode NFKC followed by case folding (the default pipeline's first step)."""
    if text.isascii():
        return text.lower()  # NFKC is the identity and casefold == lower on ASCII
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


# --------------------------------------------------------------------------- stopwords


@cache
def stopwords(lang: str | None = None) -> frozenset[str]:
    """The shipped stopword list for ``lang`` ("en" or "zh"), or both when ``lang`` is None.

    Lists live in ``simdb/data/{lang}.txt``: one word per line, ``#`` lines are
    comments. Words are normalised like text (NFKC + casefold).
    """
    if lang is None:
        return stopwords("en") | stopwords("zh")
    if not isinstance(lang, str):
        raise InvalidTypeError(f"lang must be str or None, got {type(lang).__name__}")
    if lang not in ("en", "zh"):
        raise InvalidArgumentError(f"lang must be 'en' or 'zh', got {lang!r}")
    raw = resources.files("simdb.data").joinpath(f"{lang}.txt").read_text(encoding="utf-8")
    words = set()
    for line in raw.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            words.add(normalize(line))
    return frozenset(words)


# --------------------------------------------------------------------------- jieba (lazy)

_JIEBA_LOCK = threading.Lock()
_KEYWORDS = None


def _keyword_extractor():
    global _KEYWORDS
    ext = _KEYWORDS
    if ext is None:
        tok = jieba_tokenizer()
        with _JIEBA_LOCK:
            ext = _KEYWORDS
            if ext is None:
                with quiet_jieba():
                    import jieba.analyse

                    ext = jieba.analyse.TFIDF()
                    ext.tokenizer = tok
                _KEYWORDS = ext
    return ext


# --------------------------------------------------------------------------- splitting


def split(text: str, *, segment_cjk: bool = True) -> list[str]:
    """Tokens of already-normalised ``text`` in order: ``\\w+`` words, Han runs via jieba.

    With ``segment_cjk=False`` Han runs stay whole (no jieba), as plain ``\\w+`` would.
    """
    if not segment_cjk or text.isascii() or CJK_RE.search(text) is None:  # isascii: O(1), no scan
        return WORD_RE.findall(text)
    pieces = SPLIT_RE.findall(text)
    runs = [p for p in pieces if CJK_RE.match(p)]
    if not all(map(WORD_RE.fullmatch, runs)):
        # rare: code points in the Han ranges that are not \w (unassigned) split a run
        pieces = [q for p in pieces for q in (WORD_RE.findall(p) if CJK_RE.match(p) else (p,))]
        runs = [p for p in pieces if CJK_RE.match(p)]
    segmented = iter(segment_runs(runs))
    tokens: list[str] = []
    for p in pieces:
        if CJK_RE.match(p):
            tokens.extend(next(segmented))
        else:
            tokens.append(p)
    return tokens


def tokenize(
    text: str,
    *,
    normalize_text: bool = True,
    stopwords_: bool | frozenset | set = True,
    segment_cjk: bool = True,
) -> list[str]:
    """The default pipeline's tokens for ``text`` (normalised, split, stopwords removed)."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
    if normalize_text:
        text = normalize(text)
    tokens = split(text, segment_cjk=segment_cjk)
    stop: Collection[str]
    if stopwords_ is True:
        stop = stopwords()
    elif stopwords_ is False or stopwords_ is None:
        return tokens
    else:
        stop = stopwords_
    return [t for t in tokens if t not in stop]


def word_ngrams(tokens: list[str], n: int) -> list[str]:
    """Word shingles: each run of ``n`` consecutive tokens joined by one space.

    A non-empty token list shorter than ``n`` gives one shingle of all its tokens.
    """
    if n == 1:
        return list(tokens)
    if not tokens:
        return []
    if len(tokens) <= n:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def char_stream(text: str, *, normalize_text: bool = True) -> str:
    """The ``\\w`` characters of the (normalised) text, concatenated: what character n-grams slide over."""
    if normalize_text:
        text = normalize(text)
    return "".join(WORD_RE.findall(text))


def char_ngrams(text: str, n: int, *, normalize_text: bool = True) -> list[str]:
    """Character shingles: the ``\\w`` characters of the text concatenated, every window of ``n``.

    A non-empty character string shorter than ``n`` gives one shingle; no characters give none.
    """
    s = char_stream(text, normalize_text=normalize_text)
    if not s:
        return []
    if len(s) <= n:
        return [s]
    return [s[i : i + n] for i in range(len(s) - n + 1)]


def jieba_keywords(
    text: str, top_k: int = 20, *, stopwords_: bool = True, normalize_text: bool = True
) -> list[tuple[str, float]]:
    """jieba's TF-IDF keywords (``extract_tags(..., withWeight=True)``) of ``text``.

    With ``stopwords_`` the shipped lists are added to jieba's own stopword set.
    """
    if normalize_text:
        text = normalize(text)
    ext = _keyword_extractor()
    stop = _keyword_stopwords(stopwords_)
    with _JIEBA_LOCK:
        saved = ext.stop_words
        ext.stop_words = stop
        try:
            tags = ext.extract_tags(text, topK=None, withWeight=True)
        finally:
            ext.stop_words = saved
    # jieba keeps multi-character punctuation runs ("--"); a keyword needs a word character.
    tags = [(w, float(s)) for w, s in tags if WORD_RE.search(w)]
    return tags[:top_k] if top_k else tags


@lru_cache(maxsize=2)
def _keyword_stopwords(extra: bool) -> frozenset[str]:
    from jieba.analyse.tfidf import KeywordExtractor

    base = frozenset(KeywordExtractor.STOP_WORDS)
    return base | stopwords() if extra else base
