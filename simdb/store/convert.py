"""Convert an existing collection to the verified default (issue 13).

Why texts are needed: a verified collection's ``fp`` comes from the candidate
Fingerprinter (stopwords kept, TF weights) and each row keeps a sketch of its
token 3-gram shingles; both are computed from the text. A plain collection kept
only fingerprints (as does a legacy MinHash-band collection of issue 8 once migration
simdb_0009 has converted it: its shingle sets of another scheme are dropped), so neither
can be converted from what it stores. simdb converts
from the texts kept in each row's ``meta.text`` (``simdb add --store-text``, or
``meta={"text": ...}``); a collection with a row lacking it is refused (nothing
changes) and is converted by re-adding its texts into a new collection instead.

All or nothing: one transaction rewrites every row's ``fp`` and ``shingles`` and records
the new configuration (clearing the mark migration simdb_0009 left on a converted legacy
collection).
"""

from __future__ import annotations

import json

from simdb import sketch as _sketch
from simdb.bits import to_signed
from simdb.errors import InvalidArgumentError
from simdb.store import sql as _sql
from simdb.store.collections import LEGACY_KEY
from simdb.verified_features import candidate_fingerprinter, fingerprints_and_sketches, sketch_texts

__all__ = ["convert_to_verified"]

_BATCH = 5_000


def convert_to_verified(index) -> int:
    """Rewrite ``index``'s collection as a verified collection; returns the number of rows.

    Raises :class:`~simdb.errors.InvalidArgumentError` (naming a key) when a row has no
    ``meta.text``. A collection that is already verified is left as it is (returns 0)."""
    if index.verifier is not None:
        return 0
    fper = candidate_fingerprinter()
    verifier = _sketch.Verifier()
    cid = index.collection_id
    with index.transaction() as conn:
        conn.execute(f"SELECT id FROM {_sql.COLLECTIONS} WHERE id = %s FOR UPDATE", (cid,))
        missing = conn.execute(
            f"SELECT key FROM {_sql.FINGERPRINTS} WHERE collection_id = %s "
            "AND jsonb_typeof(meta -> 'text') IS DISTINCT FROM 'string' ORDER BY id LIMIT 1",
            (cid,),
        ).fetchone()
        if missing is not None:
            raise InvalidArgumentError(
                f"collection {index.collection!r}: row {missing[0]!r} has no stored text (meta.text), so it "
                "cannot be converted; re-add its texts into a new collection (simdb add), or store them with "
                "--store-text"
            )
        n = 0
        last = -1
        while True:
            rows = conn.execute(
                f"SELECT id, meta ->> 'text' FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND id > %s "
                "ORDER BY id LIMIT %s",
                (cid, last, _BATCH),
            ).fetchall()
            if not rows:
                break
            texts = [t for _, t in rows]
            got, sketches = fingerprints_and_sketches(texts, fper, verifier)
            fps = [None if f is None else to_signed(f) for f in got]
            conn.execute(
                f"UPDATE {_sql.FINGERPRINTS} f SET fp = x.fp, shingles = x.sh::int4[] "
                "FROM unnest(%s::int8[], %s::int8[], %s::text[]) AS x(id, fp, sh) WHERE f.id = x.id",
                ([r[0] for r in rows], fps, sketch_texts(sketches)),
            )
            n += len(rows)
            last = rows[-1][0]
        config = dict(index.config)
        config.pop(LEGACY_KEY, None)
        config["fingerprinter"] = json.loads(json.dumps(fper.to_dict(), sort_keys=True))
        config["verify"] = verifier.to_dict()
        conn.execute(f"UPDATE {_sql.COLLECTIONS} SET config = %s::jsonb WHERE id = %s", (json.dumps(config), cid))
    index.config = config
    index.fingerprinter = fper
    index.verifier = verifier
    index.refresh_stats()
    return n
