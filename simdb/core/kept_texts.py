"""The texts a collection keeps (issue 27): compressed for the ``text_z`` column, and the
collection-config entries that say what a report may show.

Why keep texts at all: simdb stores fingerprints, so a report, a diff or an explanation of a match
needs the texts from somewhere. An application that has no text table of its own can ask the
collection to keep them (``SimhashIndex(..., store_texts=True)``, ``simdb add --store-text``): the
option is recorded in the collection's config, so every writer (``add``, ``add_many``,
``add_if_unique``, ``simdb.aio``, the CLI, ``simdb dedup``) honours it without being told again.

Why zlib (the standard library): no new dependency, and a text's UTF-8 compressed at level 6 is 60 %
of its size on the 30 short fables of ``examples/sample`` (17,761 bytes -> 10,732; longer texts
compress better); the codec's name is recorded beside the option, so another one can be added
without guessing what old rows hold.

Pure: no database. The store (:mod:`simdb.store.collections`) reads and writes the config entries.
"""

from __future__ import annotations

import zlib
from typing import Any

from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "CODEC",
    "FILE_ROOTS_KEY",
    "TEXTS_KEY",
    "compress_text",
    "decompress_text",
    "file_roots",
    "keeps_texts",
    "texts_config",
]

#: config key of the option: ``{"keep": true, "codec": "zlib"}``
TEXTS_KEY = "texts"
#: the one codec so far
CODEC = "zlib"
#: config key of the folders ``simdb add`` read text files from (real paths): the only places a
#: report reads a row's file from (:mod:`simdb.util.confined_files`)
FILE_ROOTS_KEY = "file_roots"

_LEVEL = 6


def texts_config() -> dict[str, Any]:
    """The config entry of a collection that keeps its texts."""
    return {"keep": True, "codec": CODEC}


def keeps_texts(config: Any) -> bool:
    """Whether a collection's stored config says it keeps its texts."""
    entry = config.get(TEXTS_KEY) if isinstance(config, dict) else None
    return isinstance(entry, dict) and entry.get("keep") is True


def file_roots(config: Any) -> list[str]:
    """The folders recorded by ``simdb add`` (absent or malformed: none)."""
    roots = config.get(FILE_ROOTS_KEY) if isinstance(config, dict) else None
    return [r for r in roots if isinstance(r, str)] if isinstance(roots, list) else []


def compress_text(text: str, where: str = "text") -> bytes:
    """``text`` as stored in ``text_z``: its UTF-8, zlib-compressed.

    A lone surrogate (bytes decoded with ``surrogateescape``) is an ``InvalidArgumentError`` naming
    ``where``, as in a key. Why: it used to be stored as ``?``, so the text kept was not the text
    given, and nothing said so."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"{where} must be a str, got {type(text).__name__}")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{where} contains a lone surrogate {text[exc.start]!r} at position {exc.start} (not valid Unicode, e.g. "
            "bytes decoded with errors='surrogateescape'), which a kept text cannot store"
        ) from None
    return zlib.compress(data, _LEVEL)


def decompress_text(blob: bytes | memoryview | None) -> str | None:
    """The text of a ``text_z`` value (None for NULL, and for a value that is not zlib data:
    a report shows "text not available" rather than failing on one damaged row)."""
    if blob is None:
        return None
    try:
        return zlib.decompress(bytes(blob)).decode("utf-8", "replace")
    except zlib.error:
        return None
