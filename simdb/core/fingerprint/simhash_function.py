"""``simhash(text_or_features, **options)`` and ``query_fingerprint``: the one-call front doors
to :class:`simdb.core.fingerprint.Fingerprinter`, kept apart so that the configuration class stays
a module of its own size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from simdb.core.bits import MASK64
from simdb.core.fingerprint import Fingerprinter
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["query_fingerprint", "simhash"]


@lru_cache(maxsize=64)
def _fingerprinter_for(items: tuple) -> Fingerprinter:
    return Fingerprinter(**dict(items))


_TEXT_ONLY = ("tokenizer", "ngram", "stopwords", "weighting", "idf", "top_k", "normalize")


def simhash(text_or_features: Any, *, empty: Any = 0, **options: Any) -> Any:
    """64-bit SimHash (int in [0, 2^64)) of a text or of weighted features.

    A ``str`` goes through ``Fingerprinter(**options)`` (the default pipeline
    when no options are given). A ``Mapping[str, number]`` or an iterable of
    ``str`` / ``(str, weight)`` pairs is hashed directly (options: ``seed``,
    ``algorithm``). No features -> ``empty`` (default 0).
    """
    try:
        fp = _fingerprinter_for(tuple(sorted(options.items())))
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
        fp = Fingerprinter(**options)
    if isinstance(text_or_features, str):
        return fp.fingerprint(text_or_features, empty=empty)
    if isinstance(text_or_features, (bytes, bytearray)) or not isinstance(text_or_features, (Mapping, Iterable)):
        raise InvalidTypeError(
            "text_or_features must be a str, a Mapping[str, number] or an iterable of str / (str, weight), "
            f"got {type(text_or_features).__name__}"
        )
    bad = [k for k in options if k in _TEXT_ONLY]
    if bad:
        raise InvalidArgumentError(f"option {bad[0]!r} applies to text input only, not to features")
    return fp.fingerprint_features(text_or_features, empty=empty)


def query_fingerprint(query: Any, fingerprinter: Fingerprinter | None = None) -> int | None:
    """A search's query as an unsigned fingerprint: an int is taken as is, a str is fingerprinted.

    Returns None for a text with no features (it matches nothing). Shared by the
    SQLAlchemy and Django integrations, so both read a query the same way.
    """
    if isinstance(query, bool):
        raise InvalidTypeError("query must be a text or an int fingerprint, got bool")
    if isinstance(query, int):
        if not 0 <= query <= MASK64:
            raise InvalidArgumentError(f"fingerprint must be in [0, 2**64), got {query}")
        return query
    if isinstance(query, str):
        return (fingerprinter or Fingerprinter()).fingerprint(query, empty=None)
    raise InvalidTypeError(f"query must be a text or an int fingerprint, got {type(query).__name__}")
