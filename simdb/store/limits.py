"""PostgreSQL's size limits, reported as simdb's typed errors naming the key.

Why here and not as an up-front check: a key is stored in a btree (the
``(collection_id, key)`` unique constraint) whose rows are limited to 2,704
bytes *after compression*, so a 100 kB key of repeated characters fits while a
3 kB random one does not. Only the server knows; this turns its
``program_limit_exceeded`` (SQLSTATE 54000, "index row size ... exceeds ...")
into :class:`~simdb.errors.InputTooLargeError` instead of a raw driver error
(which the CLI reported as a database problem, exit 3).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

from simdb.errors import InputTooLargeError

__all__ = ["PROGRAM_LIMIT_EXCEEDED", "key_size_errors", "names_oversized_key"]

PROGRAM_LIMIT_EXCEEDED = "54000"
_HINT = "keys of up to about 2,600 bytes of UTF-8 always fit; longer ones only if they compress well"


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None)


@contextmanager
def key_size_errors(where: str):
    """Re-raise PostgreSQL's 'index row size exceeds' as InputTooLargeError naming ``where``."""
    try:
        yield
    except Exception as exc:
        if _sqlstate(exc) != PROGRAM_LIMIT_EXCEEDED:
            raise
        detail = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]
        raise InputTooLargeError(f"{where} is too large for PostgreSQL's key index ({detail}); {_HINT}") from None


def _short(value: object) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def names_oversized_key(method):
    """Decorator for ``method(self, key, ...)``: an oversized key is an InputTooLargeError naming it."""

    @functools.wraps(method)
    def wrapper(self, key, *args, **kwargs):
        with key_size_errors(f"key {_short(key)}"):
            return method(self, key, *args, **kwargs)

    return wrapper
