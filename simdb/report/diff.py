"""Word-level diff of two texts for the report: which words two near-duplicates
share and which differ (``difflib`` on word tokens; CJK characters are tokens of
their own, since those scripts do not separate words by spaces)."""

from __future__ import annotations

import difflib
import functools
import re

from simdb.core.sketch.chars import char_stream

__all__ = ["EQUAL", "DELETED", "INSERTED", "RESPACED", "MAX_DIFF_TOKENS", "tokenize_for_diff", "word_diff"]

EQUAL, DELETED, INSERTED, RESPACED = 0, 1, 2, 3
_WS_RUN = re.compile(r"\s+")

# Han, kana, Hangul: each character is its own token (words are not space separated).
_CJK = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002fa1f"
)
_TOKEN = re.compile(rf"\s*(?:[{_CJK}]|[^\W{_CJK}]+|[^\w\s])|\s+")

#: Above this many tokens on either side, the diff runs on lines instead of words.
MAX_DIFF_TOKENS = 30_000


# --------------------------------------------------------------------------- diff


def tokenize_for_diff(text: str) -> list[str]:
    """Split ``text`` into diff tokens: each word, single CJK character or single
    punctuation character together with the whitespace before it (trailing
    whitespace is a token of its own). ``"".join(tokens) == text``.

    Keeping whitespace attached to the next word (rather than as tokens of its
    own) keeps ``difflib`` fast: a lone " " token would match everywhere."""
    return _TOKEN.findall(text)


def _merge(segments: list[list]) -> list[list]:
    out: list[list] = []
    for seg in segments:
        if not seg[1] and (seg[0] != RESPACED or not seg[2]):
            continue
        if out and out[-1][0] == seg[0]:
            out[-1][1] += seg[1]
            if seg[0] == RESPACED:
                out[-1][2] += seg[2]
        else:
            out.append(list(seg))
    return out


def _hoist_space(segments: list[list]) -> list[list]:
    """In a replacement (deleted run then inserted run) that both start with
    whitespace, move that whitespace out in front of them (EQUAL, or RESPACED if
    it differs), so the marks cover words, not the space before them."""
    out: list[list] = []
    i = 0
    while i < len(segments):
        seg = segments[i]
        if seg[0] == DELETED and i + 1 < len(segments) and segments[i + 1][0] == INSERTED:
            text, ins = seg[1], segments[i + 1][1]
            wa = len(text) - len(text.lstrip())
            wb = len(ins) - len(ins.lstrip())
            if 0 < wa < len(text) and 0 < wb < len(ins):
                if text[:wa] == ins[:wb]:
                    out.append([EQUAL, text[:wa]])
                else:
                    out.append([RESPACED, text[:wa], ins[:wb]])
                out.append([DELETED, text[wa:]])
                out.append([INSERTED, ins[wb:]])
                i += 2
                continue
        out.append(seg)
        i += 1
    return _merge(out)


def _key(token: str) -> str:
    """What the diff compares: the token with its whitespace reduced to one space, so a
    re-wrapped or re-indented text does not show every line's first word as changed."""
    c = token[0]
    if not c.isspace() or (c == " " and len(token) > 1 and not token[1].isspace()):
        return token  # the common cases: no whitespace, or exactly one space before a word
    return _WS_RUN.sub(" ", token)


@functools.lru_cache(maxsize=8)  # a representative is diffed against each of its members in turn
def _tokens_and_keys(text: str) -> tuple[list[str], list[str]]:
    tokens = _TOKEN.findall(text)
    # Whitespace runs are whole inside tokens, so the tokens of the text with every
    # run reduced to one space are exactly the keys of the tokens, in order.
    keys = _TOKEN.findall(_WS_RUN.sub(" ", text))
    if len(keys) != len(tokens):  # cannot happen; stay correct if it ever did
        keys = [_key(t) for t in tokens]
    return tokens, keys


def _same_words(ta: list[str], tb: list[str], segments: list[list]) -> None:
    """Append a run of tokens that compare equal: identical ones as EQUAL, ones that
    differ only in whitespace as RESPACED (shown unmarked, each side its own spacing)."""
    if ta == tb:  # the usual case, compared at C speed
        segments.append([EQUAL, "".join(ta)])
        return
    for x, y in zip(ta, tb):
        segments.append([EQUAL, x] if x == y else [RESPACED, x, y])


@functools.lru_cache(maxsize=65_536)
def _rule_key(token: str) -> str:
    """A token as the character and token rules see it: NFKC + casefold, word characters only
    (:func:`simdb.core.sketch.chars.char_stream`); "" for punctuation and whitespace, which they drop."""
    return char_stream(token)


@functools.lru_cache(maxsize=8)
def _rule_units(text: str) -> tuple[list[str], list[str]]:
    """(texts, keys) of the text's units under the rule: each word with the punctuation and
    whitespace after it, after a first unit holding whatever comes before the first word (key
    ``"\x00"``, so two texts' leading punctuation always pairs up)."""
    texts, keys = [""], ["\x00"]
    for token in _TOKEN.findall(text):
        key = _rule_key(token)
        if key:
            texts.append(token)
            keys.append(key)
        else:
            texts[-1] += token
    return texts, keys


def _matched(ka: list[str], kb: list[str], ta: list[str], tb: list[str], at: int, segments: list[list]) -> None:
    """Append the diff of the tokens ``ta``/``tb`` from index ``at`` on, matched by their keys ``ka``/``kb``
    (``difflib``; the keys of the tokens from ``at`` on): equal runs via :func:`_same_words`."""
    sm = difflib.SequenceMatcher(None, ka, kb, autojunk=len(kb) > 2000)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        i1, i2, j1, j2 = i1 + at, i2 + at, j1 + at, j2 + at
        if op == "equal":
            _same_words(ta[i1:i2], tb[j1:j2], segments)
            continue
        if i2 > i1:
            segments.append([DELETED, "".join(ta[i1:i2])])
        if j2 > j1:
            segments.append([INSERTED, "".join(tb[j1:j2])])


def _fold_diff(a: str, b: str) -> list[list]:
    """:func:`word_diff` comparing units by their rule key (see :func:`_rule_units`): a unit whose
    words are the same to the rule is EQUAL if identical, else RESPACED (shown unmarked, each side
    as written: a re-cased or re-punctuated word is not a change)."""
    (ta, ka), (tb, kb) = _rule_units(a), _rule_units(b)
    segments: list[list] = []
    _matched(ka, kb, ta, tb, 0, segments)
    return _hoist_space(_merge(segments))


def word_diff(a: str, b: str, *, fold: bool = False) -> list[list]:
    """Word-level diff of ``a`` (the representative) against ``b`` (a member),
    computed with ``difflib.SequenceMatcher`` on word tokens.

    Returns segments, adjacent ones of the same kind merged:

    * ``[0, text]``: in both (EQUAL);
    * ``[1, text]``: only in ``a`` (DELETED);
    * ``[2, text]``: only in ``b`` (INSERTED);
    * ``[3, text_a, text_b]``: the same words with different whitespace (RESPACED,
      e.g. re-wrapped lines); not marked as a change.

    Joining the ``a`` sides (0, 1, and 3's ``text_a``) gives ``a`` exactly; the
    ``b`` sides (0, 2, and 3's ``text_b``) give ``b``.

    ``fold=True`` compares the way a verified collection's rule does (case, punctuation and
    whitespace ignored; :mod:`simdb.core.sketch.chars`): a re-cased or re-punctuated copy, which the
    rule finds identical (Jaccard 1.0), has no DELETED or INSERTED segment; the words that differ
    only so are RESPACED.
    """
    if a == b:
        return [[EQUAL, a]] if a else []
    (ta, ka), (tb, kb) = _tokens_and_keys(a), _tokens_and_keys(b)
    if fold and len(ta) <= MAX_DIFF_TOKENS and len(tb) <= MAX_DIFF_TOKENS:
        return _fold_diff(a, b)
    if len(ta) > MAX_DIFF_TOKENS or len(tb) > MAX_DIFF_TOKENS:
        ta, tb = a.splitlines(keepends=True), b.splitlines(keepends=True)
        ka, kb = [_key(t) for t in ta], [_key(t) for t in tb]
    # the common prefix and suffix are cheap to strip and are most of a near-duplicate
    p = 0
    limit = min(len(ka), len(kb))
    while p < limit and ka[p] == kb[p]:
        p += 1
    q = 0
    while q < limit - p and ka[len(ka) - 1 - q] == kb[len(kb) - 1 - q]:
        q += 1
    segments: list[list] = []
    _same_words(ta[:p], tb[:p], segments)
    ea, eb = len(ta) - q, len(tb) - q
    _matched(ka[p:ea], kb[p:eb], ta, tb, p, segments)
    _same_words(ta[ea:], tb[eb:], segments)
    return _hoist_space(_merge(segments))
