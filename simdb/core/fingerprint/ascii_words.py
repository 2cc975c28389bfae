"""Word tokens as ``bytes``, by one ``bytes.translate`` and one ``bytes.split``, for text whose words are ASCII.

Why: on English short paragraphs, ``re.findall(r"\\w+")`` was the largest cost of
fingerprinting (~20 ns a character, more than the token-cache lookups and the bit
sums together); a translate table and a whitespace split do the same cut at a few
ns a character, and the token cache (:mod:`simdb.core.fingerprint.token_cache`) looks ``bytes`` tokens
up as the ``str`` tokens they spell.

Exact: on ASCII characters ``\\w`` (Python ``re``, str patterns) is ``[A-Za-z0-9_]``,
``simdb.core.tokenize.normalize`` is ``str.lower`` (A-Z -> a-z, nothing else), and the
``"tokens"`` tokenizer's ASCII pattern is ``[A-Za-z0-9]+``. The table keeps the word
bytes (lower-casing A-Z when normalising) and turns every other byte into a space,
so the whitespace split yields exactly the maximal runs the regular expressions
match, in order. Text with non-ASCII characters (curly quotes, dashes, emoji in
English posts) takes the same route when every such character separates words for
every word tokenizer (not ``\\w``, not Han / kana / Hangul): the encoder's error
handler turns each run of them into a space, and gives up (None: the caller uses
the regular expressions) at the first one that could be part of a token. Tests
compare both routes with the regular expressions on random text.
"""

from __future__ import annotations

import codecs
import re

from simdb.core.tokenize import CJK_CLASS, TOKEN_CJK_RANGES

__all__ = ["ascii_table", "ascii_words"]

_LOWER = bytes(range(ord("a"), ord("z") + 1))
_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_DIGITS = b"0123456789"
#: a non-ASCII character some word tokenizer may keep in a token
_WORDLIKE = re.compile(f"[^\\W\\x00-\\x7f]|[{CJK_CLASS}{TOKEN_CJK_RANGES}]")
_HANDLER = "simdb.core.fingerprint.ascii_words"


def _table(keep: bytes, lower: bool) -> bytes:
    table = bytearray(b" " * 256)
    for c in keep:
        table[c] = c
    if lower:
        for c in _UPPER:
            table[c] = c + 32
    return bytes(table)


#: (tokenizer, normalize) -> translate table; word tokenizers only
_TABLES = {
    (tokenizer, normalize): _table(_LOWER + _UPPER + _DIGITS + (b"_" if tokenizer != "tokens" else b""), normalize)
    for tokenizer in ("default", "words", "tokens")
    for normalize in (True, False)
}


class _WordLike(Exception):
    """A non-ASCII character that may belong to a token: the text needs the regular expressions."""


def _separators(err: UnicodeError) -> tuple[str, int]:
    """Encoder error handler: a run of non-ASCII separators -> one space; else give up."""
    if not isinstance(err, UnicodeEncodeError) or _WORDLIKE.search(err.object, err.start, err.end) is not None:
        raise _WordLike
    return " ", err.end


codecs.register_error(_HANDLER, _separators)


def ascii_table(tokenizer: str, normalize: bool) -> bytes | None:
    """The translate table for a word tokenizer (``"default"``, ``"words"``, ``"tokens"``) with or
    without normalisation; None for other tokenizers."""
    return _TABLES.get((tokenizer, normalize))


def ascii_words(text: str, table: bytes) -> list[bytes] | None:
    """The word tokens of ``text`` (already normalised unless it is ASCII) as the UTF-8 bytes of the
    ``str`` tokens; None when a non-ASCII character of ``text`` may be part of a token."""
    try:
        data = text.encode("ascii", _HANDLER)
    except _WordLike:
        return None
    return data.translate(table).split()
