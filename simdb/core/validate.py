"""Argument checks shared by the public API, the CLI and the integrations.

Why one module: the same value (a key, a fingerprint, a text, k) enters simdb
through ``SimhashIndex`` methods, ``add_many`` items, ``simdb.index.duplicates``,
``simdb.jaccard`` and the command line. Each check lives here once, raises a
typed error from :mod:`simdb.errors` whose message names the argument or item
(``where``), and catches what PostgreSQL would otherwise reject deep inside the
driver with a message about a COPY buffer offset or an index row size.

Pure: no database imports (the layering of issue 14).
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Any

from simdb.core.bits import MASK64, MAX_K, to_signed
from simdb.errors import InputTooLargeError, InvalidArgumentError, InvalidTypeError, KeyNotFoundError

__all__ = [
    "DEFAULT_K",
    "check_min_jaccard",
    "check_query",
    "verified_args",
    "DEFAULT_MAX_TEXT_BYTES",
    "ENV_MAX_TEXT_BYTES",
    "MAX_KEY_BYTES",
    "check_collection",
    "check_fp",
    "check_k",
    "check_key",
    "check_limit",
    "check_new_key",
    "check_text_or_fp",
    "check_max_text_bytes",
    "check_queries",
    "check_text",
    "dump_meta",
    "key_not_found",
    "max_text_bytes",
    "unicode_problem",
]

DEFAULT_K = 3

#: A key is stored in a btree (the (collection_id, key) unique constraint), whose rows are limited
#: to 2,704 bytes after compression: keys of up to this many bytes of UTF-8 always fit (longer ones only
#: if they compress; simdb.store.connect.key_size_errors reports a refused key as InputTooLargeError naming it).
MAX_KEY_BYTES = 2600

#: Default maximum size of one text (UTF-8 bytes): 10 MiB. Fingerprinting holds the text, its
#: tokens and one 8-byte hash per token, so this bounds the memory one text can take.
DEFAULT_MAX_TEXT_BYTES = 10 * 1024 * 1024
ENV_MAX_TEXT_BYTES = "SIMDB_MAX_TEXT_BYTES"


def _short(value: str, n: int = 60) -> str:
    r = repr(value)
    return r if len(r) <= n else r[: n - 3] + "..."


def unicode_problem(value: str) -> str | None:
    """Why PostgreSQL text cannot store ``value`` (a NUL or a lone surrogate), or None."""
    if "\x00" in value:
        return f"contains a NUL character (position {value.index(chr(0))}), which PostgreSQL text cannot store"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains a lone surrogate {value[exc.start]!r} at position {exc.start} (not valid Unicode, e.g. "
            "bytes decoded with errors='surrogateescape'), which PostgreSQL text cannot store"
        )
    return None


def check_key(key: object, where: str = "key") -> str:
    """A key as stored: a str (an int is turned into its decimal str) that is valid Unicode without NUL."""
    if isinstance(key, str):
        pass
    elif isinstance(key, numbers.Integral) and not isinstance(key, bool):
        key = str(int(key))
    else:
        raise InvalidTypeError(f"{where} must be a str (or int), got {type(key).__name__}")
    problem = unicode_problem(key)
    if problem:
        raise InvalidArgumentError(f"{where} {_short(key)} {problem}")
    # No byte limit here: the key index limits rows *after compression* (a 100 kB key of one repeated
    # character fits); simdb.store.connect.key_size_errors names the key when PostgreSQL refuses it.
    return key


def check_new_key(key: object, where: str = "key") -> str:
    """A key a writer stores (add, add_many, add_if_unique, update): :func:`check_key`, and not empty.

    Why only writers: "" is no one's key (records without a key are numbered ``#N``, collections must not
    be blank), so storing it is a mistake; readers still accept it, so that a row stored under "" by an
    earlier simdb can be read and removed."""
    key = check_key(key, where)
    if not key:
        raise InvalidArgumentError(f"{where} must be a non-empty str, got ''")
    return key


def check_text_or_fp(text: object, fp: object) -> None:
    """A single-row write (add, update, add_if_unique) takes ``text`` or ``fp``, not both: a row has one
    fingerprint, and with both the text was silently ignored (no sketch, no kept text). ``add_many``
    differs on purpose: its items document "fp wins over text"."""
    if text is not None and fp is not None:
        raise InvalidArgumentError(
            "give text or fp, not both: the row would be stored with fp and the text ignored "
            "(fp=None to fingerprint the text)"
        )


def key_not_found(key: str, collection: str) -> KeyNotFoundError:
    """The error of a write or query that needs ``key`` stored (update, near_key): a KeyError, as before,
    whose message says where it was looked for."""
    return KeyNotFoundError(f"key {_short(key)} is not in collection {_short(collection)}")


def check_collection(name: object) -> str:
    """A collection name: a non-empty str PostgreSQL can store."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"collection must be a non-empty str, got {type(name).__name__}")
    if not name.strip():  # "   " would be a collection no one can tell apart from "" in a listing
        raise InvalidArgumentError(f"collection must be a non-blank str, got {name!r}")
    return check_key(name, "collection")


def check_fp(fp: object, where: str = "fp") -> int:
    """Unsigned 64-bit fingerprint -> the signed bigint PostgreSQL stores."""
    if isinstance(fp, bool) or not isinstance(fp, numbers.Integral):
        raise InvalidTypeError(f"{where} must be an int fingerprint in [0, 2**64), got {type(fp).__name__}")
    fp = int(fp)
    if not 0 <= fp <= MASK64:
        raise InvalidArgumentError(f"{where} must be an unsigned 64-bit fingerprint in [0, 2**64), got {fp}")
    return to_signed(fp)


def check_limit(limit: object, where: str = "limit") -> int | None:
    """At most ``limit`` answers: None (all) or an int >= 1. 0 is refused, as the CLI's ``--limit`` refuses it:
    a search asked for no answers is a mistake, and one verdict everywhere is easier to rely on (issue 31)."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral):
        raise InvalidTypeError(f"{where} must be None or an int >= 1, got {type(limit).__name__}")
    if limit < 1:
        raise InvalidArgumentError(f"{where} must be None or an int >= 1, got {limit!r}")
    return int(limit)


def check_query(query: Any, limit: object, max_bytes: int) -> tuple[Any, int | None]:
    """A search's query and limit, checked in one call: a text (:func:`check_text`; a fingerprint is its
    rule's to check) and the limit (:func:`check_limit`)."""
    if isinstance(query, str):
        query = check_text(query, "query", max_bytes)
    return query, check_limit(limit)


def check_k(k: object, default: int | None = DEFAULT_K) -> int:
    """A Hamming radius 0..11, what the four 16-bit block indexes answer exactly (:data:`simdb.core.bits.MAX_K`;
    ``None`` means ``default``, the same in every method; ``default=None``: refused). The one check of
    ``k``: every front end and integration calls it, and the error says what to do instead."""
    if k is None and default is not None:
        return default
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise InvalidTypeError(f"k must be an int (a Hamming distance 0..{MAX_K}), got {type(k).__name__}")
    k = int(k)
    if k < 0:
        raise InvalidArgumentError(f"k must be >= 0 (a Hamming distance), got {k}")
    if k > MAX_K:
        raise InvalidArgumentError(
            f"k={k} is too large: the four 16-bit block indexes answer Hamming distances up to "
            f"{MAX_K} exactly. For k > {MAX_K}, scan the collection in SQL "
            "(WHERE collection_id = ... AND simdb_hamming(fp, q) <= k, a sequential scan), or search by "
            "Jaccard similarity on shingles (min_jaccard=...) for looser near-duplicates"
        )
    return k


def check_min_jaccard(value: object, where: str = "min_jaccard") -> float:
    """A Jaccard threshold: a number in (0, 1] (here, with ``k``'s check: the argument rules of a search in one place)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{where} must be a number in (0, 1], got {type(value).__name__}")
    t = float(value)
    if not 0.0 < t <= 1.0:
        raise InvalidArgumentError(f"{where} must be in (0, 1], got {value!r}")
    return t


def verified_args(k: object, min_jaccard: object, verifier: Any) -> tuple[int, int, float]:
    """(candidate radius, Hamming k for rows without a sketch, Jaccard threshold) of a verified
    search, ``k`` and ``min_jaccard`` checked here, once a call: the radius is the collection's K
    (``verifier.k``), or ``k`` when a caller asks for more; ``min_jaccard`` None: the collection's."""
    hk = check_k(k)
    t = verifier.min_jaccard if min_jaccard is None else check_min_jaccard(min_jaccard)
    return max(verifier.k, hk), hk, t


def check_max_text_bytes(value: object, where: str = "max_text_bytes") -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{where} must be an int number of bytes, got {type(value).__name__}")
    if value < 1:
        raise InvalidArgumentError(f"{where} must be at least 1 byte, got {value}")
    return int(value)


def max_text_bytes(value: object = None) -> int:
    """The maximum text size in UTF-8 bytes: ``value``, else ``$SIMDB_MAX_TEXT_BYTES``, else 10 MiB."""
    if value is not None:
        return check_max_text_bytes(value)
    env = os.environ.get(ENV_MAX_TEXT_BYTES, "").strip()
    if not env:
        return DEFAULT_MAX_TEXT_BYTES
    try:
        n = int(env.replace("_", ""))
    except ValueError:
        raise InvalidArgumentError(f"${ENV_MAX_TEXT_BYTES} must be a number of bytes, got {env!r}") from None
    return check_max_text_bytes(n, f"${ENV_MAX_TEXT_BYTES}")


def check_text(text: object, where: str = "text", limit: int | None = None) -> str:
    """A text to fingerprint: a str of at most ``limit`` UTF-8 bytes (default :func:`max_text_bytes`)."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"{where} must be a str, got {type(text).__name__}")
    if limit is None:
        limit = max_text_bytes()
    n = len(text)
    if n * 4 > limit:  # a character is 1 to 4 bytes of UTF-8: count only when it may matter
        size = n if n > limit else len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InputTooLargeError(
                f"{where} is {'at least ' if n > limit else ''}{size:,} bytes of UTF-8, more than the maximum "
                f"text size of {limit:,} bytes (raise it with max_text_bytes=... or ${ENV_MAX_TEXT_BYTES})"
            )
    return text


def check_queries(queries: object, where: str = "queries", max_bytes: int | None = None) -> list:
    """The queries of ``near_many``: an iterable of texts / fingerprints, not one text; with
    ``max_bytes``, each text too (:func:`check_text`, named by its position)."""
    if isinstance(queries, (str, bytes, bytearray)):
        raise InvalidTypeError(
            f"{where} must be an iterable of texts or fingerprints, not a single {type(queries).__name__} "
            "(wrap one text in a list: near_many([text]))"
        )
    try:
        checked = list(queries)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidTypeError(f"{where} must be an iterable of texts or fingerprints, got {type(queries).__name__}") from None
    if max_bytes is not None:
        for i, query in enumerate(checked):
            if isinstance(query, str):
                check_text(query, f"{where}[{i}]", max_bytes)
    return checked


def check_items(items: object, where: str = "items", of: str = "(key, text) pairs or mappings") -> None:
    """A batch that is streamed (``add_many``, ``dedup_records``): an iterable, not one text, checked
    at the call (the items themselves are read later, each named by its position if bad)."""
    if isinstance(items, (str, bytes, bytearray)):
        raise InvalidTypeError(f"{where} must be an iterable of {of}, not a single {type(items).__name__}")
    try:
        iter(items)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidTypeError(f"{where} must be an iterable of {of}, got {type(items).__name__}") from None


def dump_meta(meta: Any, where: str = "meta") -> str | None:
    """``meta`` as the JSON text stored in the jsonb column, or None."""
    if meta is None:
        return None
    try:
        out = json.dumps(meta, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{where} is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidArgumentError(f"{where} is nested too deeply to serialise as JSON") from None
    if "\\u0000" in out:
        raise InvalidArgumentError(f"{where} contains a NUL character (\\u0000), which PostgreSQL jsonb cannot store")
    try:
        out.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{where} contains a lone surrogate {out[exc.start]!r} (not valid Unicode), which PostgreSQL jsonb "
            "cannot store"
        ) from None
    return out
