"""Retire the legacy MinHash-band store (issue 28): its collections become Hamming collections

Revision ID: simdb_0009_retire_legacy
Revises: simdb_0008_bands
Create Date: 2026-11-26

The ``jaccard=True`` collections of issue 8 kept, per row, a shingle set (``shingles``, an
int4[] of another scheme than a verified row's sketch) and MinHash band keys in
``simdb_minhash_bands``. The code that read them is gone, so this revision converts them to
the default store:

* **kept**: every row's key, fingerprint (``fp``, from the collection's recorded candidate
  Fingerprinter, which stays in its config) and ``meta``;
* **cleared**: the rows' shingle sets (the verified code would read them as sketches), the
  ``jaccard`` entry of the collection's config, the band rows, the table and the two SQL
  functions that read it (``simdb_near_jaccard_bands``, ``simdb_jaccard_pairs``);
* **marked**: the config gets ``"legacy_minhash": true``. Such a collection answers by Hamming
  distance, and ``SimhashIndex`` says so when it opens it (a warning naming the command).

Sketches are rebuilt where the texts are at hand, outside this revision: ``simdb convert -c
NAME`` (``SimhashIndex.convert_to_verified``) recomputes fingerprints and sketches from each
row's ``meta.text``, all or nothing, and clears the mark. It is not done here because the
sketch and the fingerprint are Python code (jieba, xxhash), and a revision must mean the same
thing forever: SQL only.

Downgrade restores an empty ``simdb_minhash_bands`` (with its GIN index) and the two
functions, as revision 0002 made them; not the band rows, the shingle sets nor the
collections' ``jaccard`` config: converted collections stay Hamming collections.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op
from sqlalchemy import text

revision: str = "simdb_0009_retire_legacy"
down_revision: str | Sequence[str] | None = "simdb_0008_bands"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the functions of revision 0002 that read the band table
_BAND_FUNCTIONS = (
    "simdb_jaccard_pairs(text, float8)",
    "simdb_near_jaccard_bands(text, int4[], int4[], float8)",
)


def upgrade() -> None:
    op.execute(
        "UPDATE simdb_fingerprints f SET shingles = NULL FROM simdb_collections c "
        "WHERE f.collection_id = c.id AND c.config ? 'jaccard' AND f.shingles IS NOT NULL"
    )
    op.execute(
        "UPDATE simdb_collections SET config = (config - 'jaccard') || jsonb_build_object('legacy_minhash', true) "
        "WHERE config ? 'jaccard'"
    )
    for fn in _BAND_FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    op.execute("DROP TABLE IF EXISTS simdb_minhash_bands")


def _revision_0002():
    """Revision 0002's module, loaded from its file (its name starts with a digit): its frozen DDL."""
    path = Path(__file__).with_name("0002_simdb_jaccard.py")
    spec = importlib.util.spec_from_file_location("simdb_migration_0002", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    schema = op.get_bind().execute(
        text(
            "SELECT quote_ident(n.nspname) FROM pg_extension e "
            "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'intarray'"
        )
    ).scalar_one()
    op.execute(
        """
CREATE TABLE simdb_minhash_bands (
  fingerprint_id bigint PRIMARY KEY REFERENCES simdb_fingerprints(id) ON DELETE CASCADE,
  collection_id int NOT NULL REFERENCES simdb_collections(id) ON DELETE CASCADE,
  bands int4[] NOT NULL
)"""
    )
    op.execute(
        f"CREATE INDEX simdb_minhash_bands_gin ON simdb_minhash_bands USING gin (bands {schema}.gin__int_ops) "
        "WITH (fastupdate = off)"
    )
    # all of 0002's functions are CREATE OR REPLACE: re-running them restores the two dropped above
    for ddl in _revision_0002()._functions(schema):
        op.execute(ddl)
