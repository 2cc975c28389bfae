"""A collection that a failed or interrupted command created: removed again, so the command leaves nothing.

Why a module of its own: ``simdb add`` and ``simdb dedup -c NAME`` both open (and so create) their
collection before the first record is read, and both can stop before storing anything, or store
and take it out again (dedup's journal undoes an unfinished run). Either way a collection the
run created would stay behind, empty, listed by ``simdb collections`` as if it had been made on
purpose; a failed transaction leaves nothing, and so must a failed command.
"""

from __future__ import annotations

from simdb.store.collections import drop_collection_if_empty
from simdb.store.connect import in_transaction

__all__ = ["DISCARD_WAIT_MS", "discard_if_new"]

#: how long a failed command waits for another writer of the collection it created before it keeps the
#: collection (that writer is filling it) instead of removing it
DISCARD_WAIT_MS = 2000


def discard_if_new(engine, index, added: int) -> bool:
    """Remove ``index``'s collection when this run created it (``index.created``) and it holds nothing
    this run added (``added``: what the run left stored). Only if it is still empty
    (:func:`simdb.store.collections.drop_collection_if_empty` waits for concurrent writers first, here at
    most DISCARD_WAIT_MS). Best effort: True if it was removed; a database that fails here too keeps the
    original error, which is the one to report. Closes ``index`` first (an interrupted statement may have
    left its transaction open, holding the locks waited for)."""
    if added or not index.created:
        return False
    index.close()
    try:
        with in_transaction(engine) as conn:
            return drop_collection_if_empty(conn, index.collection_id, lock_timeout_ms=DISCARD_WAIT_MS)
    except Exception:
        return False
