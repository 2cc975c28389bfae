"""``SimhashIndex``'s kept texts (issue 27): a collection that keeps its texts stores each one,
compressed, with its row (:mod:`simdb.core.kept_texts`), whichever method writes the row.

A mixin of :class:`simdb.index.SimhashIndex`, kept apart so that the facade stays a page long; it
holds no SQL (the statements run in :mod:`simdb.store.collections`).
"""

from __future__ import annotations

import os
from typing import Any

from simdb.core import validate as _validate
from simdb.core.kept_texts import compress_text
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.index.key_methods import KeySearchMixin
from simdb.index.search_methods import by_current_rule
from simdb.store import collections as _collections

__all__ = ["TextsMixin"]


class TextsMixin(KeySearchMixin):
    """text, record_file_root and the kept text of a write, for :class:`simdb.index.SimhashIndex`."""

    #: whether this collection keeps its texts (its config's ``"texts"`` option; set on open)
    store_texts: bool = False
    config: Any  # the collection's stored config (set by SimhashIndex.__init__)

    def _text_z(self, text: Any, fp: Any) -> bytes | None:
        """The compressed text a write stores with its row: only in a collection that keeps texts, and
        only for a row given by its text (a row given by ``fp`` has no text to keep)."""
        if not self.store_texts or fp is not None or not isinstance(text, str):
            return None
        return compress_text(text)

    @by_current_rule
    def text(self, key: str) -> str | None:
        """The text kept for ``key`` (a collection that keeps texts; or, for rows written before that
        option, the text in ``meta["text"]``), or None: no such key, or no text kept for it."""
        key = _validate.check_key(key)
        return _collections.kept_text(self.connection(), self.collection_id, key)

    def record_file_root(self, path: str | os.PathLike[str]) -> str:
        """Record ``path`` (its real path: a folder, or a file named by itself) as a place this
        collection's text files come from, so that a report may read a row's file there (only there:
        :func:`simdb.util.confined_files.read_recorded`). ``simdb add`` does this; returns the recorded path."""
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError(f"path must be a file or directory path, got {type(path).__name__}")
        real = os.path.realpath(path)
        if not (os.path.isdir(real) or os.path.isfile(real)):
            raise InvalidArgumentError(f"path {os.fspath(path)!r} is not a directory or a regular file")
        config = _collections.record_file_root(self.connection(), self.collection_id, real)
        if config is not None:
            self.config = config
        return real
