"""The DDL of a load (:mod:`simdb.store.bulk`): its stage table, and the indexes and constraints a
bulk COPY into an empty table drops first and builds again after.

Why a module of its own: the stage's columns are those of the COPY rows
(:mod:`simdb.store.encode`), and both the load's stage and the extra COPY streams' tables
(:mod:`simdb.store.parallel_copy`) must have exactly them: one definition for both.
"""

from __future__ import annotations

from simdb.store import sql as _sql

__all__ = ["ADD_UNIQUE", "COLUMNS", "DROP_FOR_BULK", "drop_for_bulk", "STAGE", "STAGE_COLUMNS", "STAGE_DDL", "rebuild_ddl"]

FINGERPRINTS = _sql.FINGERPRINTS
COLLECTIONS = _sql.COLLECTIONS

STAGE = "simdb_stage_v4"  # v2: with the shingles (sketch) column of verified collections; v3: bands; v4: text_z
#: the stage's columns (also those of the extra COPY streams' tables: simdb.store.parallel_copy)
STAGE_COLUMNS = "key text COLLATE \"C\" NOT NULL, fp bigint, meta jsonb, shingles int4[], bands int4[], text_z bytea"
STAGE_DDL = f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({STAGE_COLUMNS})"
#: the columns of the COPY rows (simdb.store.encode) and of the stage
COLUMNS = "key, fp, meta, shingles, bands, text_z"


def drop_for_bulk(bands: bool = True, sketchless: bool = True) -> list[str]:
    """What a bulk load drops before its COPY: the unique key, the foreign key, the block indexes,
    and the band and sketchless indexes only where its rows enter them (``bands``: the rows carry band
    keys; ``sketchless``: rows without a sketch, i.e. a plain collection's).

    Why not always all: the band indexes are partial (``bands IS NOT NULL``) and the sketchless one
    too (``SKETCHLESS_WHERE``); a row outside an index's predicate costs it one predicate test at
    insertion, but building a partial index again scans the whole table. A plain load of 1M fingerprints
    rebuilt 14 band indexes that stay empty (0.48-0.71 of the COPY + index floor; 0.83-0.97 without
    them: docs/performance.md), and a banded load rebuilt a sketchless index none of its text rows enter. An index left in place
    is maintained by PostgreSQL, so a row that does enter it (an item given by fp in a verified
    collection) is still indexed: the choice is speed only, never the answer."""
    return [
        *(f"DROP INDEX {name}" for name in _sql.BLOCK_INDEXES),
        *((f"DROP INDEX {name}" for name in _sql.BANDS_INDEXES) if bands else ()),
        *((f"DROP INDEX IF EXISTS {_sql.SKETCHLESS_INDEX}",) if sketchless else ()),
        f"ALTER TABLE {FINGERPRINTS} DROP CONSTRAINT {_sql.UNIQUE_KEY}",
        f"ALTER TABLE {FINGERPRINTS} DROP CONSTRAINT {_sql.COLLECTION_FK}",
    ]


#: everything a bulk load may drop (:func:`drop_for_bulk` of a load that drops all)
DROP_FOR_BULK = drop_for_bulk()

ADD_UNIQUE = f"ALTER TABLE {FINGERPRINTS} ADD CONSTRAINT {_sql.UNIQUE_KEY} UNIQUE (collection_id, key)"


def rebuild_ddl(bands: bool = True, sketchless: bool = True) -> list[str]:
    """What a bulk load builds again after its COPY: the block indexes, the band and sketchless
    indexes it dropped (:func:`drop_for_bulk`, same arguments), the foreign key."""
    return [
        *(f"CREATE INDEX {name} ON {FINGERPRINTS} ({', '.join(cols)})" for name, cols in _sql.BLOCK_INDEXES.items()),
        *((f"CREATE INDEX {name} ON {FINGERPRINTS} ({', '.join(cols)}) WHERE bands IS NOT NULL"
           for name, cols in _sql.BANDS_INDEXES.items()) if bands else ()),
        *((f"CREATE INDEX {_sql.SKETCHLESS_INDEX} ON {FINGERPRINTS} (collection_id) WHERE {_sql.SKETCHLESS_WHERE}",)
          if sketchless else ()),
        f"ALTER TABLE {FINGERPRINTS} ADD CONSTRAINT {_sql.COLLECTION_FK} FOREIGN KEY (collection_id) "
        f"REFERENCES {COLLECTIONS} (id) ON DELETE CASCADE",
    ]
