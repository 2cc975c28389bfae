"""simdb_0014: ``simdb_near_key`` and ``simdb_pairs`` refuse a threshold below the band keys' reach.

Why: a banded collection's SQL functions find their candidates by the band keys at every threshold, and a
pair's chance of sharing the keys falls fast below the rule they were made for (two keys of 14: 0.97 of
the pairs at Jaccard 0.8, 0.71 at 0.7, 0.07 at 0.5; ``simdb.core.sketch.bands.s_curve``). So
``simdb_pairs('c', 3, 0.5)`` silently returned a few percent of its pairs. The Python API refuses such a
threshold for pairs and answers one text by comparing every row (``simdb.store.scan_search``); in SQL both
functions now raise (SQLSTATE 22023) below ``simdb.core.sketch.bands.reliable_threshold``: 0.79 where a
candidate shares two keys, 0.72 where it shares one (collections banded before ``oph-b14r5-m2-v3``).
Collections without band keys (verified by the Hamming radius K, or Hamming-only) are unchanged.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "simdb_0014_band_reach"
down_revision: str | Sequence[str] | None = "simdb_0013_two_band_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the end of the threshold checks of revision 0011's preamble, after which ``t`` and ``shared`` are known
_AFTER_T = (
    "      RAISE EXCEPTION 'simdb: min_jaccard must be in (0, 1], got %', t USING ERRCODE = '22023';\n"
    "    END IF;\n"
)
#: simdb.core.sketch.bands.reliable_threshold of each scheme at this revision (two keys: 0.79, one: 0.72);
#: the CASE in parentheses: PL/pgSQL ends an IF's condition at the first THEN outside them
_REACH = (
    "    IF banded AND t < (CASE WHEN shared = 2 THEN 0.79 ELSE 0.72 END) THEN\n"
    "      RAISE EXCEPTION 'simdb: min_jaccard=% is below %, the lowest threshold collection % answers exactly: "
    "its candidates share % of 14 band keys, which fewer than 95%% of the pairs at % do', t, "
    "(CASE WHEN shared = 2 THEN 0.79 ELSE 0.72 END), quote_literal(collection), shared, t\n"
    "        USING ERRCODE = '22023', HINT = 'use min_jaccard >= the threshold named; for one text at a lower "
    "threshold, near(text, min_jaccard=...) in Python or simdb query --min-jaccard compares every row';\n"
    "    END IF;\n"
)


def _revision_0013():
    path = Path(__file__).with_name("0013_simdb_two_band_keys.py")
    spec = importlib.util.spec_from_file_location("simdb_migration_0013", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _with_reach(ddl: str) -> str:
    assert ddl.count(_AFTER_T) == 1 and "  shared int;\n" in ddl
    return ddl.replace(_AFTER_T, _AFTER_T + _REACH)


def near_key_ddl() -> str:
    return _with_reach(_revision_0013().near_key_ddl())


def pairs_ddl() -> str:
    return _with_reach(_revision_0013().pairs_ddl())


def upgrade() -> None:
    op.execute(near_key_ddl())
    op.execute(pairs_ddl())


def downgrade() -> None:
    op.execute(_revision_0013().near_key_ddl())
    op.execute(_revision_0013().pairs_ddl())
