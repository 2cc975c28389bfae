"""The word tokens of ASCII text as ``bytes``, by one ``bytes.translate`` and one ``bytes.split``.

Why: on English short paragraphs, ``re.findall(r"\\w+")`` was the largest cost of
fingerprinting (~20 ns a character, more than the token-cache lookups and the bit
sums together); a translate table and a whitespace split do the same cut at a few
ns a character, and the token cache (:mod:`simdb.token_cache`) looks ``bytes`` tokens
up as the ``str`` tokens they spell.

Exact: on ASCII text ``\\w`` (Python ``re``, str patterns) is ``[A-Za-z0-9_]``,
``simdb.tokenize.normalize`` is ``str.lower`` (A-Z -> a-z, nothing else), and the
``"tokens"`` tokenizer's ASCII pattern is ``[A-Za-z0-9]+``. The table keeps the word
bytes (lower-casing A-Z when normalising) and turns every other byte into a space,
so the whitespace split yields exactly the maximal runs the regular expressions
match, in order (a test compares the two on random ASCII text). Pure Python.
"""

from __future__ import annotations

__all__ = ["ascii_table", "ascii_words"]

_LOWER = bytes(range(ord("a"), ord("z") + 1))
_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_DIGITS = b"0123456789"


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


def ascii_table(tokenizer: str, normalize: bool) -> bytes | None:
    """The translate table for a word tokenizer (``"default"``, ``"words"``, ``"tokens"``) with or
    without normalisation; None for other tokenizers."""
    return _TABLES.get((tokenizer, normalize))


def ascii_words(text: str, table: bytes) -> list[bytes]:
    """The word tokens of ASCII ``text`` (``str.isascii()``), as the UTF-8 bytes of the ``str`` tokens."""
    return text.encode("ascii").translate(table).split()
