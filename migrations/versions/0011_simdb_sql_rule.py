"""The SQL functions answer by the collection's rule; the Hamming answer keeps a name that says so

Revision ID: simdb_0011_sql_rule
Revises: simdb_0010_kept_texts
Create Date: 2026-11-26

The SQL lives here, frozen, so that this revision means the same thing forever.

Why: ``simdb_pairs('c', 3)`` returned the pairs within Hamming distance 3 whatever the
collection, while ``SimhashIndex.pairs()``, ``simdb dups`` and every other surface of a verified
collection answer by its rule (Jaccard of shingle sets >= the threshold, checked on the stored
sketches). An analyst got another answer than the application for the same question. Everything
the rule needs is stored (the sketch in ``shingles``, the band keys in ``bands``, the parameters in
the collection's config) and ``simdb_sketch_jaccard`` (revision 0006) computes the Jaccard the
Python verification stage computes, so SQL can give the rule's answer itself:

- ``simdb_pairs_hamming(collection, k)``: what ``simdb_pairs`` was (revision 0005's function
  under a name that says what it answers): every pair within Hamming distance ``k`` (0..11).
- ``simdb_pairs(collection, k DEFAULT 3, min_jaccard DEFAULT NULL)``, now
  ``(key_a, key_b, distance, jaccard)``: ``SimhashIndex.pairs(k, min_jaccard=...)``. A verified
  collection: the candidate pairs (rows sharing a band key in a banded collection, else rows within
  the collection's candidate radius K) kept when their sketch Jaccard is >= ``min_jaccard``
  (default the collection's); a pair with a row stored without a sketch (added by fingerprint) by
  distance <= ``k``, jaccard NULL. A plain collection: ``simdb_pairs_hamming`` with jaccard NULL.
  Sorted most similar first (jaccard, then distance, then keys); ``key_a`` was added before ``key_b``.
- ``simdb_near_key(collection, stored_key, k DEFAULT 3, min_jaccard DEFAULT NULL)``
  ``(key, fp, distance, jaccard)``: ``SimhashIndex.near_key``: the near-duplicates of the row
  stored under ``stored_key`` (itself excluded) by the rule, from its stored sketch and band keys; a row
  without a sketch, or a plain collection: the rows within Hamming distance ``k``.

``simdb_near(collection, fingerprint, k)`` is unchanged: it is given a fingerprint, and a
fingerprint query is answered by Hamming distance on every surface (``near(fp)`` too).
``simdb_near_verified`` is unchanged (its candidates are the rows within K, not band keys: the
docs say so); ``simdb_near_key`` is the rule's answer for a stored row.

Downgrade drops the three and restores revision 0005's ``simdb_pairs``.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "simdb_0011_sql_rule"
down_revision: str | Sequence[str] | None = "simdb_0010_kept_texts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the band count of revision 0008 (one btree per band)
_BANDS = range(1, 15)


def _revision_0005():
    """Revision 0005's module, loaded from its file (its name starts with a digit): its frozen DDL."""
    path = Path(__file__).with_name("0005_simdb_pairs_k11.py")
    spec = importlib.util.spec_from_file_location("simdb_migration_0005", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hamming_ddl() -> str:
    ddl = _revision_0005().PAIRS_DDL
    assert "FUNCTION simdb_pairs(" in ddl
    return ddl.replace("FUNCTION simdb_pairs(", "FUNCTION simdb_pairs_hamming(", 1)


#: the lookups shared by the two functions: the collection, its verify config, the thresholds
_PREAMBLE = """
  IF k IS NULL THEN
    RAISE EXCEPTION 'simdb: k must not be NULL' USING ERRCODE = '22004';
  END IF;
  PERFORM simdb_radii(k);  -- raises for k outside 0..11, with a hint
  SELECT c.id, c.config -> 'verify', c.config ? 'bands' INTO cid, cfg, banded
  FROM simdb_collections c WHERE c.name = collection;
  IF cid IS NULL THEN
    RAISE EXCEPTION 'simdb: no collection named %', quote_literal(collection) USING ERRCODE = '42704';
  END IF;
  IF cfg IS NULL AND min_jaccard IS NOT NULL THEN
    RAISE EXCEPTION 'simdb: collection % is not a verified collection: min_jaccard needs one',
      quote_literal(collection) USING ERRCODE = '22023';
  END IF;
  IF cfg IS NOT NULL THEN
    ck := greatest((cfg ->> 'k')::int, k);
    sz := (cfg ->> 'sketch')::int;
    t := coalesce(min_jaccard, (cfg ->> 'min_jaccard')::float8);
    IF t <= 0 OR t > 1 THEN
      RAISE EXCEPTION 'simdb: min_jaccard must be in (0, 1], got %', t USING ERRCODE = '22023';
    END IF;
  END IF;
"""

_DECLARE = """
DECLARE
  cid int;
  cfg jsonb;
  banded boolean;
  ck int;
  sz int;
  t float8;
"""

#: candidate pairs (id_a < id_b) of a banded collection: rows sharing the key of some band
_BAND_PAIRS = "\n        UNION\n".join(
    f"        SELECT a.id AS ida, b.id AS idb FROM simdb_fingerprints a JOIN simdb_fingerprints b "
    f"ON b.collection_id = cid AND b.bands IS NOT NULL AND b.bands[{i}] = a.bands[{i}] AND b.id > a.id "
    f"WHERE a.collection_id = cid AND a.bands IS NOT NULL"
    for i in _BANDS
)

PAIRS_DDL = f"""
CREATE FUNCTION simdb_pairs(collection text, k int DEFAULT 3, min_jaccard float8 DEFAULT NULL)
RETURNS TABLE(key_a text, key_b text, distance int, jaccard float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
#variable_conflict use_column
{_DECLARE}
BEGIN
{_PREAMBLE}
  IF cfg IS NULL THEN
    RETURN QUERY SELECT h.key_a, h.key_b, h.distance, NULL::float8
      FROM simdb_pairs_hamming(collection, k) h ORDER BY h.distance, h.key_a, h.key_b;
    RETURN;
  END IF;
  RETURN QUERY
    WITH cand AS (
      SELECT a.id AS ida, b.id AS idb
      FROM simdb_pairs_hamming(collection, CASE WHEN banded THEN k ELSE ck END) h
      JOIN simdb_fingerprints a ON a.collection_id = cid AND a.key = h.key_a
      JOIN simdb_fingerprints b ON b.collection_id = cid AND b.key = h.key_b
      WHERE NOT banded OR a.shingles IS NULL OR b.shingles IS NULL
      UNION
      SELECT ida, idb FROM (
{_BAND_PAIRS}
      ) bp WHERE banded
    ), judged AS (
      SELECT a.key AS ka, b.key AS kb, bit_count((a.fp # b.fp)::bit(64))::int AS d,
             CASE WHEN a.shingles IS NULL OR b.shingles IS NULL THEN NULL
                  ELSE simdb_sketch_jaccard(a.shingles, b.shingles, sz) END AS j
      FROM cand
      JOIN simdb_fingerprints a ON a.id = cand.ida
      JOIN simdb_fingerprints b ON b.id = cand.idb
      WHERE a.fp IS NOT NULL AND b.fp IS NOT NULL
    )
    SELECT ka, kb, d, j FROM judged
    WHERE CASE WHEN j IS NULL THEN d <= k ELSE j >= t END
    ORDER BY j DESC NULLS LAST, d, ka, kb;
END $$
"""

#: candidates (ids) of the row x of a banded collection: rows sharing the key of some band
_BAND_NEAR = "\n        UNION\n".join(
    f"        SELECT f.id FROM simdb_fingerprints f WHERE f.collection_id = cid AND f.bands IS NOT NULL "
    f"AND f.bands[{i}] = xb[{i}]"
    for i in _BANDS
)

NEAR_KEY_DDL = f"""
CREATE FUNCTION simdb_near_key(collection text, stored_key text, k int DEFAULT 3, min_jaccard float8 DEFAULT NULL)
RETURNS TABLE(key text, fp bigint, distance int, jaccard float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
#variable_conflict use_column
{_DECLARE}
  xid bigint;
  xfp bigint;
  xsk int4[];
  xb int4[];
BEGIN
{_PREAMBLE}
  SELECT f.id, f.fp, f.shingles, f.bands INTO xid, xfp, xsk, xb
  FROM simdb_fingerprints f WHERE f.collection_id = cid AND f.key = stored_key;
  IF xid IS NULL THEN
    RAISE EXCEPTION 'simdb: no key % in collection %', quote_literal(stored_key), quote_literal(collection)
      USING ERRCODE = '42704';
  END IF;
  IF xfp IS NULL THEN
    RETURN;  -- a featureless text has no near-duplicates
  END IF;
  IF cfg IS NULL OR xsk IS NULL OR cardinality(xsk) = 0 THEN
    IF min_jaccard IS NOT NULL THEN
      RAISE EXCEPTION 'simdb: min_jaccard needs the stored sketch of %', quote_literal(stored_key)
        USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT n.key, n.fp, n.distance, NULL::float8
      FROM simdb_near(collection, xfp, k) n WHERE n.key <> stored_key ORDER BY n.distance, n.key;
    RETURN;
  END IF;
  RETURN QUERY
    WITH cand AS (
      SELECT f.id FROM simdb_near(collection, xfp, CASE WHEN banded THEN k ELSE ck END) n
      JOIN simdb_fingerprints f ON f.collection_id = cid AND f.key = n.key
      WHERE NOT banded OR f.shingles IS NULL
      UNION
      SELECT id FROM (
{_BAND_NEAR}
      ) bn WHERE banded AND xb IS NOT NULL
    ), judged AS (
      SELECT f.key AS kk, f.fp AS ff, bit_count((f.fp # xfp)::bit(64))::int AS d,
             CASE WHEN f.shingles IS NULL THEN NULL ELSE simdb_sketch_jaccard(f.shingles, xsk, sz) END AS j
      FROM cand JOIN simdb_fingerprints f ON f.id = cand.id
      WHERE f.id <> xid AND f.fp IS NOT NULL
    )
    SELECT kk, ff, d, j FROM judged
    WHERE CASE WHEN j IS NULL THEN d <= k ELSE j >= t END
    ORDER BY j DESC NULLS LAST, d, kk;
END $$
"""


def upgrade() -> None:
    op.execute(_hamming_ddl())
    op.execute("DROP FUNCTION IF EXISTS simdb_pairs(text, int)")
    op.execute(PAIRS_DDL)
    op.execute(NEAR_KEY_DDL)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS simdb_near_key(text, text, int, float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_pairs(text, int, float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_pairs_hamming(text, int)")
    op.execute(_revision_0005().PAIRS_DDL)
