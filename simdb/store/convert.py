"""Convert an existing collection to the verified default: a Hamming collection (a plain one, or a
legacy MinHash-band collection of simdb 0.1.0 once migration simdb_0009 has converted it) becomes a
banded verified collection; a verified collection gets the current sketch size and band keys.

Why texts are needed: a verified collection's ``fp`` comes from the candidate
Fingerprinter (stopwords at 2/3 weight) and each row keeps a sketch of its
character 4-gram shingles; both are computed from the text. A plain collection kept
only fingerprints (as does a legacy collection: its shingle sets of another scheme were dropped by
simdb_0009), so neither can be converted from what it stores. simdb converts
from the texts the collection keeps (``text_z``: a collection created with ``store_texts=True`` or
``simdb add --store-text``, :mod:`simdb.core.kept_texts`), else each row's ``meta.text`` (what
``--store-text`` stored before, or ``meta={"text": ...}``); a collection with a row lacking both
is refused (nothing changes) and is converted by re-adding its texts into a new collection instead.

A verified collection of another sketch size is re-sketched at :data:`simdb.core.sketch.SKETCH_SIZE`
values and keeps its candidate radius and threshold; its texts are needed for the same reason.

All or nothing: one transaction rewrites every row's ``fp``, ``shingles`` and band keys
(``bands``, :mod:`simdb.core.sketch.bands`) and records the new configuration (clearing the mark
migration simdb_0009 left on a converted legacy collection).

Values in, values out: the functions take a connection, the collection's id, name, config and
verification settings, and return what they did (:class:`Converted`: the rows rewritten and the new
config); the caller (``SimhashIndex.convert_to_verified``) adopts the new config itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from simdb.core import sketch as _sketch
from simdb.core.bits import to_signed
from simdb.core.kept_texts import decompress_text
from simdb.core.sketch import bands as _bands
from simdb.core.sketch.features import candidate_fingerprinter, fingerprints_and_sketches, sketch_texts
from simdb.errors import InvalidArgumentError
from simdb.store import sql as _sql
from simdb.store.collections import LEGACY_KEY

__all__ = ["Converted", "convert_to_verified", "is_current"]

_BATCH = 5_000
_BANDS_KEY = "bands"  # simdb.index.rules.BANDS_KEY (the store sits below the facade)


class Converted(NamedTuple):
    """What a conversion did: the rows rewritten, and the collection's new config (None: unchanged)."""

    rows: int
    config: dict | None


def is_current(verifier: _sketch.Verifier | None) -> bool:
    """Is a collection with this verifier verified by the current default scheme and sketch size
    (nothing for ``simdb convert`` to do)?"""
    return verifier is not None and verifier.scheme == _sketch.SCHEME and verifier.size == _sketch.SKETCH_SIZE


def convert_to_verified(
    conn: Any, collection_id: int, collection: str, config: dict, verifier: _sketch.Verifier | None,
) -> Converted:
    """Rewrite the collection (``collection_id``, named ``collection``, with ``config`` and ``verifier``,
    None if a Hamming collection) as a banded verified collection of the current scheme, in one
    transaction on ``conn``.

    Raises :class:`~simdb.errors.InvalidArgumentError` (naming a key) when a row has no
    ``meta.text``. A collection that is already verified with the current scheme and sketch
    size is left as it is (returns 0); one of another sketch size keeps its ``k`` and threshold."""
    if is_current(verifier):
        return Converted(0, None)
    fper = candidate_fingerprinter()
    old = verifier
    verifier = _sketch.Verifier() if old is None else _sketch.Verifier(k=old.k, min_jaccard=old.min_jaccard)
    cid = collection_id
    with conn.transaction():
        conn.execute(f"SELECT id FROM {_sql.COLLECTIONS} WHERE id = %s FOR UPDATE", (cid,))
        missing = conn.execute(
            f"SELECT key FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND text_z IS NULL "
            "AND jsonb_typeof(meta -> 'text') IS DISTINCT FROM 'string' ORDER BY id LIMIT 1",
            (cid,),
        ).fetchone()
        if missing is not None:
            raise InvalidArgumentError(
                f"collection {collection!r}: row {missing[0]!r} has no stored text (kept or meta.text), so it "
                "cannot be converted; re-add its texts into a new collection (simdb add), or store them with "
                "--store-text"
            )
        n = 0
        for rows in _row_batches(conn, cid):
            texts = [_row_text(collection, key, tz, mt) for _, key, tz, mt in rows]
            hook = _bands.BlockBandKeys(len(texts))
            got, sketches = fingerprints_and_sketches(texts, fper, verifier, hook)
            fps = [None if f is None else to_signed(f) for f in got]
            keys = hook.keys()
            conn.execute(
                f"UPDATE {_sql.FINGERPRINTS} f SET fp = x.fp, shingles = x.sh::int4[], bands = x.bk::int4[] "
                "FROM unnest(%s::int8[], %s::int8[], %s::text[], %s::text[]) AS x(id, fp, sh, bk) WHERE f.id = x.id",
                ([r[0] for r in rows], fps, sketch_texts(sketches), [_bands.band_keys_text(k) for k in keys]),
            )
            n += len(rows)
        config = dict(config)
        config.pop(LEGACY_KEY, None)
        config["fingerprinter"] = json.loads(json.dumps(fper.to_dict(), sort_keys=True))
        config["verify"] = verifier.to_dict()
        config[_BANDS_KEY] = _bands.BAND_SCHEME
        conn.execute(f"UPDATE {_sql.COLLECTIONS} SET config = %s::jsonb WHERE id = %s", (json.dumps(config), cid))
    return Converted(n, config)


def _row_batches(conn: Any, cid: int) -> Iterator[list]:
    """The collection's rows, ``_BATCH`` at a time in id order: ``(id, key, text_z, meta.text)`` each."""
    last = -1
    while rows := conn.execute(
        f"SELECT id, key, text_z, meta ->> 'text' FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND id > %s ORDER BY id LIMIT %s",
        (cid, last, _BATCH),
    ).fetchall():
        yield rows
        last = rows[-1][0]


def _row_text(collection: str, key: str, text_z: bytes | None, meta_text: str | None) -> str:
    """A row's text for re-sketching: the kept text, else ``meta.text`` (an unreadable kept text and
    no ``meta.text``: named, nothing changes)."""
    text = decompress_text(text_z)
    if text is None:
        text = meta_text
    if text is None:
        raise InvalidArgumentError(
            f"collection {collection!r}: row {key!r} has a kept text that cannot be read (not zlib data) "
            "and no meta.text, so it cannot be converted; re-add its texts into a new collection (simdb add)"
        )
    return text
