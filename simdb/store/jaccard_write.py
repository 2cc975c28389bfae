"""The legacy Jaccard collections' writes: ``add`` / ``update`` keep the row, its shingle set
and its band keys in step (one transaction), and ``add_many`` streams them through COPY."""

from __future__ import annotations

from simdb import validate as _validate
from simdb.minhash import MinHasher
from simdb.shingles import shingles as _shingles
from simdb.store.bulk_locks import ADD_LOCK
from simdb.store.encode import describe_item, item_error, parse_item
from simdb.store.jaccard_search import BANDS_TABLE, text_parts

__all__ = ["BULK_BANDS_ROWS", "add", "add_many", "update"]

_JSTAGE = "simdb_jaccard_stage"


#: add_many of at least this many items goes through the GIN pending list (see add_many)
BULK_BANDS_ROWS = 50_000


_JSTAGE_DDL = (
    f'CREATE TEMP TABLE IF NOT EXISTS {_JSTAGE} (key text COLLATE "C" NOT NULL, fp bigint, meta jsonb, '
    "shingles int4[], bands int4[])"
)


def _items(items, fingerprinter, mh: MinHasher, chunk_rows: int, max_text_bytes: int | None = None):
    """Validate items and yield chunks of rows (key, fp signed, meta json, shingles, bands)."""
    chunk: list[list] = []
    texts: list[str] = []

    def flush():
        need = [r for r in chunk if r[5] is not None]
        if need:
            fps = fingerprinter.many([r[5] for r in need], empty=None)
            sets = [_shingles(r[5]) for r in need]
            sigs = mh.signatures(sets)
            for r, fp, sh, sig in zip(need, fps, sets, sigs):
                if r[1] is None and fp is not None:
                    r[1] = fp - (1 << 64) if fp >> 63 else fp
                r[3] = sh or None
                r[4] = mh.band_keys(sig) or None
        out = [tuple(r[:5]) for r in chunk]
        chunk.clear()
        texts.clear()
        return out

    for i, item in enumerate(items):
        try:
            key, text, fp, meta = parse_item(item)
            key = _validate.check_key(key)
            meta_json = _validate.dump_meta(meta)
            if text is not None:
                _validate.check_text(text, "text", max_text_bytes)
            if fp is None and text is None:
                raise ValueError("give text or fp")
            signed = _validate.check_fp(fp) if fp is not None else None
        except (TypeError, ValueError) as exc:
            raise item_error(exc, f"add_many: {describe_item(i, item)}: {exc}") from None
        # [key, fp, meta, shingles, bands, text]; a text also gives the shingles when fp is given
        chunk.append([key, signed, meta_json, None, None, text])
        if len(chunk) >= chunk_rows:
            yield flush()
    if chunk:
        yield flush()


def add_many(index, items, *, chunk_rows: int = 20_000) -> int:
    """``SimhashIndex.add_many`` for a Jaccard collection: fingerprints, shingle sets and
    band keys in one transaction (all or nothing), streamed through COPY in chunks of
    ``chunk_rows`` items. Existing keys are replaced; within a call the last item wins."""
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
    mh = index.minhasher
    cid = index.collection_id
    conn = index.connection()
    total = 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", (ADD_LOCK, cid))
        conn.execute(_JSTAGE_DDL)
        conn.execute(f"TRUNCATE {_JSTAGE}")
        with conn.cursor() as cur:
            with cur.copy(f"COPY {_JSTAGE} (key, fp, meta, shingles, bands) FROM STDIN") as cp:
                for rows in _items(items, index.fingerprinter, mh, chunk_rows, index.max_text_bytes):
                    for r in rows:
                        cp.write_row(r)
                    total += len(rows)
        conn.execute(f"DELETE FROM {_JSTAGE} a USING {_JSTAGE} b WHERE a.key = b.key AND a.ctid < b.ctid")
        conn.execute(
            f"DELETE FROM simdb_fingerprints f USING {_JSTAGE} s WHERE f.collection_id = %s::int4 AND f.key = s.key",
            (cid,),
        )
        conn.execute(
            "INSERT INTO simdb_fingerprints (collection_id, key, fp, meta, shingles) "
            f"SELECT %s::int4, key, fp, meta, shingles FROM {_JSTAGE}",
            (cid,),
        )
        # A big load fills the GIN index through its pending list and merges it once
        # (about 2x faster than entry-by-entry inserts), at the price of an ACCESS
        # EXCLUSIVE lock on the index until commit: readers wait, as for the
        # drop-and-rebuild path of plain collections.
        bulk = total >= BULK_BANDS_ROWS
        if bulk:
            conn.execute(f"ALTER INDEX {BANDS_TABLE}_gin SET (fastupdate = on)")
            conn.execute("SET LOCAL gin_pending_list_limit = '256MB'")
        conn.execute(
            f"INSERT INTO {BANDS_TABLE} (fingerprint_id, collection_id, bands) "
            f"SELECT f.id, f.collection_id, s.bands FROM {_JSTAGE} s "
            "JOIN simdb_fingerprints f ON f.collection_id = %s::int4 AND f.key = s.key WHERE s.bands IS NOT NULL",
            (cid,),
        )
        if bulk:
            conn.execute(f"SELECT gin_clean_pending_list('{BANDS_TABLE}_gin'::regclass)")
            conn.execute(f"ALTER INDEX {BANDS_TABLE}_gin SET (fastupdate = off)")
        conn.execute(f"TRUNCATE {_JSTAGE}")
    return total


def add(index, key: str, text, fp, meta) -> int | None:
    """``SimhashIndex.add`` for a Jaccard collection: row, shingle set and band keys together."""
    key = _validate.check_key(key)
    signed, sh, bands = text_parts(index, text, fp)
    meta_json = _validate.dump_meta(meta)
    with index.transaction() as conn:
        conn.execute(
            "INSERT INTO simdb_fingerprints (collection_id, key, fp, meta, shingles) "
            "VALUES (%(c)s::int4, %(key)s, %(fp)s::int8, %(meta)s::jsonb, %(sh)s::int4[]) "
            "ON CONFLICT (collection_id, key) DO UPDATE "
            "SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, created_at = now()",
            {"c": index.collection_id, "key": key, "fp": signed, "meta": meta_json, "sh": sh},
        )
        _store_bands_psycopg(conn, index.collection_id, key, bands)
    return None if signed is None else signed & ((1 << 64) - 1)


def update(index, key: str, text, fp, meta, unset) -> int | None:
    """``SimhashIndex.update`` for a Jaccard collection (KeyError if ``key`` is absent)."""
    key = _validate.check_key(key)
    signed, sh, bands = text_parts(index, text, fp)
    params = {"c": index.collection_id, "key": key, "fp": signed, "sh": sh}
    sets = "fp = %(fp)s::int8, shingles = %(sh)s::int4[], created_at = now()"
    if meta is not unset:
        params["meta"] = _validate.dump_meta(meta)
        sets += ", meta = %(meta)s::jsonb"
    with index.transaction() as conn:
        cur = conn.execute(
            f"UPDATE simdb_fingerprints SET {sets} WHERE collection_id = %(c)s::int4 AND key = %(key)s", params
        )
        if cur.rowcount == 0:
            raise KeyError(key)
        _store_bands_psycopg(conn, index.collection_id, key, bands)
    return None if signed is None else signed & ((1 << 64) - 1)


def _store_bands_psycopg(conn, collection_id: int, key: str, bands) -> None:
    if bands:
        conn.execute(
            f"INSERT INTO {BANDS_TABLE} (fingerprint_id, collection_id, bands) "
            "SELECT id, collection_id, %(b)s::int4[] FROM simdb_fingerprints WHERE collection_id = %(c)s::int4 AND key = %(k)s "
            "ON CONFLICT (fingerprint_id) DO UPDATE SET bands = EXCLUDED.bands",
            {"b": bands, "c": collection_id, "k": key},
        )
    else:
        conn.execute(
            f"DELETE FROM {BANDS_TABLE} b USING simdb_fingerprints f WHERE f.id = b.fingerprint_id "
            "AND f.collection_id = %(c)s::int4 AND f.key = %(k)s",
            {"c": collection_id, "k": key},
        )
