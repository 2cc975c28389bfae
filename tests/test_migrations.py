"""Alembic: upgrade / downgrade / upgrade on a real database, no drift, CLI, locking, host apps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from simdb.core.bits import to_signed
from simdb.core.fingerprint import Fingerprinter
from simdb.errors import InvalidArgumentError
from simdb.index import SimhashIndex
from simdb.store import migrate as m
from simdb.store.models import metadata

ROOT = Path(__file__).resolve().parents[1]


def _tables(url):
    eng = create_engine(url)
    try:
        return set(inspect(eng).get_table_names())
    finally:
        eng.dispose()


def _functions(url):
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return set(conn.execute(text("SELECT proname FROM pg_proc WHERE proname LIKE 'simdb\\_%'")).scalars())
    finally:
        eng.dispose()


def test_head_constant_matches_scripts():
    assert m.HEAD == m.head_revision()


def test_upgrade_downgrade_upgrade(fresh_database_url):
    url = fresh_database_url
    m.migrate(url)
    assert {"simdb_collections", "simdb_fingerprints", "simdb_alembic_version"} <= _tables(url)
    assert {"simdb_hamming", "simdb_blocks", "simdb_near"} <= _functions(url)
    assert "alembic_version" not in _tables(url)  # simdb keeps its own version table
    m.downgrade(url, "base")
    assert not {"simdb_collections", "simdb_fingerprints"} & _tables(url)
    assert not {"simdb_hamming", "simdb_blocks", "simdb_near"} & _functions(url)
    m.migrate(url)
    eng = create_engine(url)
    with eng.connect() as conn:
        assert m.current_revision(conn) == m.HEAD
    eng.dispose()


def test_models_and_migrations_do_not_drift(database_url):
    """simdb's metadata describes EVERY table (and index) the migrations create, not just the
    ones it knows: each reflected ``simdb_*`` table takes part (only the version table is left out)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    eng = create_engine(database_url)
    with eng.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_name": lambda name, type_, parents: type_ != "table"
                or (name.startswith("simdb_") and name != m.VERSION_TABLE),
            },
        )
        diff = compare_metadata(ctx, metadata)
        reflected = {t for t in inspect(conn).get_table_names() if t.startswith("simdb_")}
    eng.dispose()
    assert diff == []
    assert reflected - {m.VERSION_TABLE} == set(metadata.tables)
    assert "simdb_minhash_bands" not in metadata.tables  # dropped by simdb_0009 (issue 28)


def test_alembic_cli_from_repo_root(fresh_database_url):
    url = fresh_database_url
    env = {**os.environ}
    env.pop("SIMDB_DATABASE_URL", None)
    alembic = [sys.executable, "-m", "alembic"]
    r = subprocess.run([*alembic, "-x", f"url={url}", "upgrade", "head"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([*alembic, "current"], cwd=ROOT, env={**env, "SIMDB_DATABASE_URL": url}, capture_output=True, text=True)
    assert r.returncode == 0 and m.HEAD in r.stdout, r.stderr
    r = subprocess.run([*alembic, "downgrade", "simdb@base"], cwd=ROOT, env={**env, "SIMDB_DATABASE_URL": url}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "simdb_fingerprints" not in _tables(url)
    r = subprocess.run([*alembic, "current"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "SIMDB_DATABASE_URL" in (r.stderr + r.stdout)


def test_concurrent_migrate_is_safe(fresh_database_url):
    errors = []

    def run():
        try:
            m.migrate(fresh_database_url)
        except Exception as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    eng = create_engine(fresh_database_url)
    with eng.connect() as conn:
        assert m.current_revision(conn) == m.HEAD
        assert conn.execute(text("SELECT count(*) FROM simdb_alembic_version")).scalar() == 1
    eng.dispose()


def test_migrate_on_a_connection_from_config_attributes(fresh_database_url):
    """A host app can hand its own connection to simdb's env.py."""
    from alembic import command

    eng = create_engine(fresh_database_url)
    with eng.connect() as conn:
        command.upgrade(m.alembic_config(conn), "head")
        conn.commit()
        assert m.current_revision(conn) == m.HEAD
    eng.dispose()


def test_host_app_includes_simdb_migrations(fresh_database_url, tmp_path):
    """A host application's Alembic history with simdb's versions as a second branch (the recipe in docs/migrations.md)."""
    host = tmp_path / "host"
    (host / "versions").mkdir(parents=True)
    (host / "env.py").write_text(
        """
from alembic import context
from sqlalchemy import create_engine
from simdb.store.models import metadata as simdb_metadata

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"))
with engine.connect() as conn:
    context.configure(connection=conn, target_metadata=[simdb_metadata])
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
"""
    )
    (host / "script.py.mako").write_text((ROOT / "migrations" / "script.py.mako").read_text())
    (host / "versions" / "h001_app.py").write_text(
        '''
revision = "h001"
down_revision = None
branch_labels = ("app",)
depends_on = "simdb_0001"

from alembic import op
import sqlalchemy as sa

def upgrade():
    op.create_table("app_posts", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("fp_row", sa.BigInteger, sa.ForeignKey("simdb_fingerprints.id")))

def downgrade():
    op.drop_table("app_posts")
'''
    )
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(host))
    cfg.set_main_option("version_locations", f"{host / 'versions'} {m.script_location()}/versions")
    cfg.set_main_option("path_separator", "space")
    cfg.set_main_option("sqlalchemy.url", fresh_database_url.replace("%", "%%"))
    command.upgrade(cfg, "heads")
    tables = _tables(fresh_database_url)
    assert {"app_posts", "simdb_fingerprints", "alembic_version"} <= tables
    eng = create_engine(fresh_database_url)
    with eng.connect() as conn:
        heads = set(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
    eng.dispose()
    assert heads == {"h001", m.HEAD}
    command.downgrade(cfg, "app@base")
    assert "app_posts" not in _tables(fresh_database_url)


def test_concurrent_alembic_cli_upgrades_are_safe(fresh_database_url):
    """Issue 31 item 10: two (here four) ``alembic -x url=... upgrade head`` at once on a fresh database
    all succeed (env.py takes simdb's migration lock) instead of one failing with an IntegrityError."""
    env = {**os.environ}
    env.pop("SIMDB_DATABASE_URL", None)
    cmd = [sys.executable, "-m", "alembic", "-x", f"url={fresh_database_url}", "upgrade", "head"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [(p.wait(), p.communicate()[1]) for p in procs]
    assert [rc for rc, _ in results] == [0, 0, 0, 0], [err[-2000:] for _, err in results]
    eng = create_engine(fresh_database_url)
    with eng.connect() as conn:
        assert m.current_revision(conn) == m.HEAD
        assert conn.execute(text("SELECT count(*) FROM simdb_alembic_version")).scalar() == 1
    eng.dispose()


RETIRE = "simdb_0009_retire_legacy"


def _before_retire(url) -> str:
    from alembic.script import ScriptDirectory

    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            down = ScriptDirectory.from_config(m.alembic_config(conn)).get_revision(RETIRE).down_revision
    finally:
        eng.dispose()
    assert isinstance(down, str)
    return down


def test_retire_legacy_converts_jaccard_collections(fresh_database_url):
    """simdb_0009 (issue 28): a legacy MinHash-band collection keeps its keys, fingerprints and meta,
    loses its shingle sets, band rows and ``jaccard`` config, answers by Hamming distance and says so;
    ``convert_to_verified`` then rebuilds it from meta.text. Downgrade gives back an empty band table."""
    url = fresh_database_url
    m.migrate(url, _before_retire(url))
    fper = Fingerprinter(stopwords=False, weighting="tf")  # what the legacy collections recorded
    config = {"fingerprinter": fper.to_dict(), "store": {"blocks": 4},
              "jaccard": {"scheme": "w3c5-xxh32-v1", "minhash": {"num_perm": 100, "bands": 20, "rows": 5}}}
    texts = {"a": "the lion and the mouse went out together", "b": "the lion and the mouse went out together again"}
    eng = create_engine(url)
    with eng.begin() as conn:
        conn.execute(text("INSERT INTO simdb_collections (name, config) VALUES ('legacy', CAST(:c AS jsonb)), "
                          "('plain', CAST(:p AS jsonb))"),
                     {"c": json.dumps(config), "p": json.dumps({"fingerprinter": fper.to_dict()})})
        for name in ("legacy", "plain"):
            for key, t in texts.items():
                conn.execute(text(
                    "INSERT INTO simdb_fingerprints (collection_id, key, fp, meta, shingles) SELECT id, :k, :fp, "
                    "CAST(:meta AS jsonb), ARRAY[1, 2, 3] FROM simdb_collections WHERE name = :n"),
                    {"k": key, "fp": to_signed(fper.fingerprint(t)), "meta": json.dumps({"text": t}), "n": name})
        conn.execute(text("INSERT INTO simdb_minhash_bands (fingerprint_id, collection_id, bands) "
                          "SELECT id, collection_id, ARRAY[7, 8] FROM simdb_fingerprints"))
        before = conn.execute(text("SELECT c.name, f.key, f.fp, f.meta FROM simdb_fingerprints f "
                                   "JOIN simdb_collections c ON c.id = f.collection_id ORDER BY 1, 2")).all()
    m.migrate(url)
    with eng.connect() as conn:
        after = conn.execute(text("SELECT c.name, f.key, f.fp, f.meta FROM simdb_fingerprints f "
                                  "JOIN simdb_collections c ON c.id = f.collection_id ORDER BY 1, 2")).all()
        shingles = dict(conn.execute(text("SELECT c.name, count(f.shingles) FROM simdb_fingerprints f "
                                          "JOIN simdb_collections c ON c.id = f.collection_id GROUP BY 1")).all())
        configs = dict(conn.execute(text("SELECT name, config FROM simdb_collections")).all())
    assert after == before
    assert shingles == {"legacy": 0, "plain": 2}  # only the legacy collection's shingle sets go
    assert "jaccard" not in configs["legacy"] and configs["legacy"]["legacy_minhash"] is True
    assert "legacy_minhash" not in configs["plain"]
    assert "simdb_minhash_bands" not in _tables(url)
    assert not {"simdb_jaccard_pairs", "simdb_near_jaccard_bands"} & _functions(url)
    with pytest.warns(UserWarning, match="simdb convert -c legacy"):
        index = SimhashIndex(url, "legacy")
    with index:
        with pytest.raises(InvalidArgumentError, match="simdb convert"):
            index.near(texts["a"], min_jaccard=0.8)
        assert index.verifier is None
        hits = index.near(texts["a"], k=3)  # by Hamming distance, on the fingerprints the rows kept
        assert (hits[0].key, hits[0].distance) == ("a", 0) and all(x.jaccard is None for x in hits)
        assert index.convert_to_verified() == 2
        assert "legacy_minhash" not in index.config and index.verifier is not None
        assert [x.key for x in index.near(texts["a"])][:1] == ["a"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SimhashIndex(url, "legacy").close()  # converted: no more warning
    m.downgrade(url, _before_retire(url))
    assert "simdb_minhash_bands" in _tables(url)
    assert {"simdb_jaccard_pairs", "simdb_near_jaccard_bands"} <= _functions(url)
    with eng.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM simdb_minhash_bands")).scalar() == 0
    eng.dispose()
    m.migrate(url)
    assert "simdb_minhash_bands" not in _tables(url)

