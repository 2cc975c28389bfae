"""simdb_0015: ``simdb_collection_unchanged``, the guard that keeps writers on a collection's current rule.

Why: ``simdb convert`` rewrites a collection's rows under a new configuration (fingerprinter, sketches,
band keys), but a process that had opened the collection before kept its old configuration: its
writes after the conversion stored rows the new rule cannot find (no band keys, fingerprints of the
old fingerprinter), silently and for good. Each write now calls this function in its own
transaction with the version of the configuration it computed its rows by
(``simdb_collection_rule(config)``: a digest of the whole config but the folders recorded for the report,
``file_roots``, which ``simdb add DIR`` appends to and no row depends on); the function takes ``FOR KEY
SHARE`` on the collection row and raises SQLSTATE ``SDB01`` when the version differs.

Why it is exact: ``convert`` takes ``FOR UPDATE`` on the collection row first, which conflicts with
``FOR KEY SHARE``, so a conversion waits for the writers in flight, and a writer that arrives during
a conversion waits for it; once it commits, the locking read re-checks the updated row (READ
COMMITTED's rule for a row updated meanwhile), finds another version and raises. The lock is the
one a foreign-key check on the row already takes, so writers block nothing new.

Readers: a trigger announces a change of rule (``NOTIFY simdb_rule_changes``, the collection id as
payload, sent when the changing transaction commits) to every connection of an open index, which
listens; the index follows the new configuration and answers again a query whose statement saw it.
A dropped collection is announced the same way, and an open index's reads then raise instead of
answering "no near-duplicates" from a collection that is gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0015_collection_guard"
down_revision: str | Sequence[str] | None = "simdb_0014_band_reach"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RULE_DDL = """
CREATE OR REPLACE FUNCTION simdb_collection_rule(config jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT md5((config - 'file_roots')::text) $$
"""

GUARD_DDL = """
CREATE OR REPLACE FUNCTION simdb_collection_unchanged(cid int4, seen text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM 1 FROM simdb_collections WHERE id = cid AND simdb_collection_rule(config) = seen FOR KEY SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'simdb: collection % changed its configuration after this writer read it', cid
      USING ERRCODE = 'SDB01', HINT = 'reopen the collection (simdb does so itself) and write again';
  END IF;
  RETURN true;
END $$
"""


NOTIFY_DDL = """
CREATE OR REPLACE FUNCTION simdb_collection_rule_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('simdb_rule_changes', (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END)::text);
  RETURN NULL;
END $$
"""

TRIGGER_DDL = """
CREATE TRIGGER simdb_collection_rule_changed AFTER UPDATE OF config ON simdb_collections
FOR EACH ROW WHEN (simdb_collection_rule(OLD.config) IS DISTINCT FROM simdb_collection_rule(NEW.config))
EXECUTE FUNCTION simdb_collection_rule_changed()
"""

#: a dropped collection is announced too: an open index's reads then say so instead of answering []
DROP_TRIGGER_DDL = """
CREATE TRIGGER simdb_collection_dropped AFTER DELETE ON simdb_collections
FOR EACH ROW EXECUTE FUNCTION simdb_collection_rule_changed()
"""


def upgrade() -> None:
    op.execute(RULE_DDL)
    op.execute(GUARD_DDL)
    op.execute(NOTIFY_DDL)
    op.execute(TRIGGER_DDL)
    op.execute(DROP_TRIGGER_DDL)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS simdb_collection_dropped ON simdb_collections")
    op.execute("DROP TRIGGER IF EXISTS simdb_collection_rule_changed ON simdb_collections")
    op.execute("DROP FUNCTION IF EXISTS simdb_collection_rule_changed()")
    op.execute("DROP FUNCTION IF EXISTS simdb_collection_unchanged(int4, text)")
    op.execute("DROP FUNCTION IF EXISTS simdb_collection_rule(jsonb)")
