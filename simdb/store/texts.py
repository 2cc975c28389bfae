"""A collection's kept texts in the store: the ``"texts"`` option and the recorded file roots in
its config (:mod:`simdb.core.kept_texts` says what they mean), and the texts of rows read back.

Why the option lives in the config and not in each call: a collection that keeps texts must keep
them whoever writes to it (the API, ``simdb.aio``, the CLI, ``simdb dedup``); a per-call flag
(``--store-text`` used to put the text in each row's ``meta``) is forgotten by the next writer.
"""

from __future__ import annotations

import json
from typing import Any

from simdb.core.kept_texts import FILE_ROOTS_KEY, TEXTS_KEY, decompress_text, keeps_texts, texts_config
from simdb.errors import CollectionConfigError, InvalidTypeError
from simdb.store.sql import COLLECTIONS, FINGERPRINTS

__all__ = ["KEPT_TEXT_SQL", "kept_text", "open_texts_option", "record_file_root"]

# jsonb ``||`` on the stored config: a concurrent writer's other keys are kept
_SET_KEY_SQL = f"UPDATE {COLLECTIONS} SET config = config || %s::jsonb WHERE id = %s RETURNING config"

# appends the root unless it is there already (one statement: two concurrent adds do not lose one)
_ADD_ROOT_SQL = (
    f"UPDATE {COLLECTIONS} SET config = jsonb_set(config, ARRAY[%(k)s], "
    "COALESCE(CASE WHEN jsonb_typeof(config -> %(k)s) = 'array' THEN config -> %(k)s END, '[]'::jsonb) "
    "|| to_jsonb(%(root)s::text)) "
    "WHERE id = %(c)s AND NOT COALESCE(config -> %(k)s @> to_jsonb(%(root)s::text), false) RETURNING config"
)

#: one row's kept text (compressed) and meta, by key
KEPT_TEXT_SQL = f"SELECT text_z, meta FROM {FINGERPRINTS} WHERE collection_id = %s::int4 AND key = %s"


def open_texts_option(conn, collection_id: int, name: str, config: Any, want: bool | None) -> Any:
    """The collection's config after applying ``store_texts=want`` (psycopg connection).

    None: as recorded. True: keep texts from now on (recorded in the config, so every later writer
    keeps them; rows written before have none). False on a collection that keeps them: refused,
    since another writer would still keep them (turning the option off is a config change, not a
    per-handle choice)."""
    if want is not None and not isinstance(want, bool):
        raise InvalidTypeError(f"store_texts must be a bool or None, got {type(want).__name__}")
    if want is None or want == keeps_texts(config):
        return config
    if not want:
        raise CollectionConfigError(
            f"collection {name!r} keeps its texts (its config says so, for every writer); open it with "
            "store_texts=None"
        )
    row = conn.execute(_SET_KEY_SQL, (json.dumps({TEXTS_KEY: texts_config()}), int(collection_id))).fetchone()
    return row[0] if row is not None else config


def record_file_root(conn, collection_id: int, root: str) -> Any:
    """Record ``root`` (a real directory path) as a folder this collection's text files were added
    from, unless it is recorded already: the only places a report reads a row's file from. Returns
    the new config (None: it was recorded already)."""
    row = conn.execute(_ADD_ROOT_SQL, {"k": FILE_ROOTS_KEY, "root": root, "c": int(collection_id)}).fetchone()
    return None if row is None else row[0]


def kept_text(conn, collection_id: int, key: str) -> str | None:
    """``key``'s kept text (``text_z``, else an older row's ``meta.text``), or None."""
    row = conn.execute(KEPT_TEXT_SQL, (int(collection_id), key)).fetchone()
    if row is None:
        return None
    text = decompress_text(row[0])
    if text is None and isinstance(row[1], dict) and isinstance(row[1].get("text"), str):
        text = row[1]["text"]
    return text
