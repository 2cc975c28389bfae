"""simdb's errors: one base class, each subclass also the built-in it refines.

Why both: callers that know simdb catch :class:`SimdbError` (or a specific
subclass); callers that do not still catch what Python would raise for the same
mistake (``ValueError`` for a bad value, ``TypeError`` for a wrong type,
``OSError`` for an unreadable input). Every message names the argument, item or
input line at fault, so a user can fix the input without reading a traceback.

The CLI maps :class:`InputError` (and its subclasses) to exit status 2 and
:class:`DatabaseError` to exit status 3.
"""

from __future__ import annotations

__all__ = [
    "SimdbError",
    "InputError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "InputTooLargeError",
    "CollectionConfigError",
    "DatabaseError",
    "SchemaManagedElsewhereError",
    "UnsafeHomeError",
    "IndexClosedError",
    "KeyNotFoundError",
    "CollectionChangedError",
]


class SimdbError(Exception):
    """Base class of every error simdb raises on purpose."""


class InputError(SimdbError, ValueError):
    """Bad input from the caller: an argument, an item of a batch, a line of a file."""


class InvalidArgumentError(InputError):
    """A value out of range or malformed (a ``ValueError``)."""


class InvalidTypeError(SimdbError, TypeError):
    """An argument of the wrong type (a ``TypeError``)."""


class InputTooLargeError(InputError):
    """A text, key or input larger than the configured maximum."""


class CollectionConfigError(InputError):
    """A collection was opened with a configuration other than the one it was created with."""


class KeyNotFoundError(SimdbError, KeyError):
    """A key that must be stored is not (``update``, ``near_key``): a ``KeyError``, so ``except KeyError``
    keeps working, whose message names the key and the collection."""

    def __str__(self) -> str:
        # KeyError's own str() is the repr of its argument: a sentence would print in quotes
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class IndexClosedError(SimdbError, RuntimeError):
    """An index used after ``close()`` (or an async index before it was opened): every method refuses,
    rather than answering from a pool the engine would reopen. A ``RuntimeError``, as before."""


class CollectionChangedError(SimdbError, RuntimeError):
    """A collection's configuration changed (``simdb convert``, texts kept from now on) after this
    index opened it, and a write could not simply be redone under the new one (``add_many`` of an
    iterator already read): nothing of the write was stored, and the index now follows the new
    configuration, so running the write again stores it right. Single-row writes and re-readable
    loads are redone by the index itself and never raise it for a change of rule. Also raised by
    any call that reads or writes the rows of an index whose collection another process has dropped."""


class DatabaseError(SimdbError, RuntimeError):
    """The database could not be used (unreachable, permissions, server trouble)."""


class SchemaManagedElsewhereError(DatabaseError):
    """simdb's tables are recorded in another Alembic history (a host application's
    ``alembic_version``), so simdb must not migrate them itself."""


class UnsafeHomeError(DatabaseError):
    """The embedded server's home or data directory is controlled by someone else (another user owns or can
    write it, a link, a cluster simdb did not initialise): simdb refuses to start, chown or use it."""
