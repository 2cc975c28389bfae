"""The SQL rule's band candidates share two keys in band scheme oph-b14r5-m2-v3 (issue 26)

Revision ID: simdb_0013_two_band_keys
Revises: simdb_0012_sketchless_gate
Create Date: 2026-11-27

The SQL lives here, frozen, so that this revision means the same thing forever.

Why: new collections record the band scheme ``oph-b14r5-m2-v3`` (``simdb.core.sketch.bands``): the
same 14 keys as ``oph-b14r5-v2``, but a row is a candidate when it shares at least two of them with
the query, not one. Unrelated English paragraphs share one key often enough (their character
4-grams overlap at Jaccard 0.06-0.11) that a query drew ~24 false candidates at 1M rows, a number
that grows with the collection; sharing two cuts them about 60-fold. ``simdb_near_key`` and
``simdb_pairs`` answer what ``near`` and ``pairs()`` answer, so they read the collection's band
scheme too: two keys for v3, one for every older scheme (those collections answer as before).

No table changes: the keys stored are the same. Downgrade restores revision 0012's
``simdb_near_key`` and revision 0011's ``simdb_pairs`` (one shared key for every collection).
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "simdb_0013_two_band_keys"
down_revision: str | Sequence[str] | None = "simdb_0012_sketchless_gate"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the band scheme whose candidates share two keys (simdb.core.sketch.bands.BAND_SCHEME at this revision)
TWO_KEY_SCHEME = "oph-b14r5-m2-v3"
_SEPARATOR = "\n        UNION\n"  # between the 14 band probes of revision 0011's functions
_DECLARED = "  banded boolean;\n"
_SHARED = (
    f"  SELECT CASE WHEN c.config ->> 'bands' = '{TWO_KEY_SCHEME}' THEN 2 ELSE 1 END INTO shared\n"
    "  FROM simdb_collections c WHERE c.id = cid;\n"
)


def _revision(number: str, name: str):
    """An earlier revision's module, loaded from its file (its name starts with a digit): its frozen DDL."""
    path = Path(__file__).with_name(f"{number}_{name}.py")
    spec = importlib.util.spec_from_file_location(f"simdb_migration_{number}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _counted(ddl: str, old_tail: str, new_tail: str) -> str:
    """``ddl`` with its band probes kept per probe (UNION ALL), counted per candidate (``new_tail``
    replacing ``old_tail``), and the shared-key count read after the collection's config."""
    assert ddl.count(_SEPARATOR) == 13 and ddl.count(old_tail) == 1 and ddl.count(_DECLARED) == 1
    ddl = ddl.replace(_SEPARATOR, "\n        UNION ALL\n").replace(old_tail, new_tail)
    ddl = ddl.replace(_DECLARED, _DECLARED + "  shared int;\n")
    after_cid = "  IF cfg IS NULL AND min_jaccard IS NOT NULL THEN\n"  # the collection exists by then
    assert ddl.count(after_cid) == 1
    ddl = ddl.replace(after_cid, _SHARED + after_cid)
    return ddl.replace("CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", 1)


def near_key_ddl() -> str:
    """Revision 0012's ``simdb_near_key``, its band candidates sharing ``shared`` keys."""
    return _counted(_revision("0012", "simdb_sketchless_gate").near_key_ddl().replace(
        "CREATE OR REPLACE FUNCTION ", "CREATE FUNCTION ", 1),
        "      ) bn WHERE banded AND xb IS NOT NULL\n",
        "      ) bn WHERE banded AND xb IS NOT NULL GROUP BY id HAVING count(*) >= shared\n")


def pairs_ddl() -> str:
    """Revision 0011's ``simdb_pairs``, its band candidate pairs sharing ``shared`` keys."""
    return _counted(_revision("0011", "simdb_sql_rule").PAIRS_DDL,
                    "      ) bp WHERE banded\n",
                    "      ) bp WHERE banded GROUP BY ida, idb HAVING count(*) >= shared\n")


def upgrade() -> None:
    op.execute(near_key_ddl())
    op.execute(pairs_ddl())


def downgrade() -> None:
    op.execute(_revision("0012", "simdb_sketchless_gate").near_key_ddl())
    op.execute(_revision("0011", "simdb_sql_rule").PAIRS_DDL.replace(
        "CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", 1))
