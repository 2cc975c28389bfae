"""docs/alembic.md's recipes, run as written, in a host application's Alembic project in a temp dir,
against a real PostgreSQL: upgrade head, downgrade base, upgrade head, `alembic check` clean, for each
documented setup; then simdb's CLI and SimhashIndex on the result (issue 18)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from simdb.store import migrate as m

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "alembic.md").read_text()


def doc_block(first_line: str) -> str:
    """The fenced code block of docs/alembic.md whose first line is ``first_line``."""
    for _lang, body in re.findall(r"```(\w+)\n(.*?)```", DOC, re.S):
        if body.startswith(first_line + "\n"):
            return body
    raise AssertionError(f"docs/alembic.md has no code block starting with {first_line!r}")


MODELS = '''
from sqlalchemy import Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from simdb.sqlalchemy import SimhashMixin


class Base(DeclarativeBase):
    pass


class Note(SimhashMixin, Base):
    __tablename__ = "notes"
    __simdb_text__ = "body"
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str] = mapped_column(Text)
'''

REV_0001 = '''
import sqlalchemy as sa
from alembic import op

revision = "0001_app"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("notes", sa.Column("id", sa.Integer, primary_key=True), sa.Column("body", sa.Text, nullable=False))
    op.execute("INSERT INTO notes (body) VALUES ('the quick brown fox jumps over the lazy dog'), ('')")


def downgrade():
    op.drop_table("notes")
'''

# after simdb's revision: the mixin's columns on the host's own, populated table
REV_0003 = '''
from simdb.alembic import add_simhash_columns, drop_simhash_columns

revision = "0003_app"
down_revision = "0002_simdb"
branch_labels = None
depends_on = None


def upgrade():
    add_simhash_columns("notes", source="body")


def downgrade():
    drop_simhash_columns("notes")
'''


def make_project(tmp_path: Path, url: str | None, env_py: str | None = None) -> Path:
    proj = tmp_path / "hostapp"
    (proj / "versions").mkdir(parents=True)
    (proj / "myapp").mkdir()
    (proj / "myapp" / "__init__.py").write_text("")
    (proj / "myapp" / "models.py").write_text(MODELS)
    ini = "[alembic]\nscript_location = %(here)s\npath_separator = os\n"
    if url is not None:
        ini += "sqlalchemy.url = " + url.replace("%", "%%") + "\n"
    (proj / "alembic.ini").write_text(ini)
    (proj / "env.py").write_text(env_py if env_py is not None else doc_block("# env.py"))
    (proj / "versions" / "0001_app.py").write_text(REV_0001)
    (proj / "versions" / "0002_simdb.py").write_text(doc_block("# versions/0002_simdb.py"))
    (proj / "versions" / "0003_app.py").write_text(REV_0003)
    return proj


def alembic(proj: Path, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**(env if env is not None else _env_without_urls()), "PYTHONPATH": str(proj)}
    r = subprocess.run([sys.executable, "-m", "alembic", "-c", str(proj / "alembic.ini"), *args],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, f"alembic {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r


def simdb_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # cwd outside the checkout: `-m` puts the cwd first on sys.path, and the tests must use the
    # simdb that is installed (a wheel in scripts/check-min-versions.sh)
    return subprocess.run([sys.executable, "-m", "simdb.cli", *args], env=env if env is not None else _env_without_urls(),
                          capture_output=True, text=True, timeout=300, cwd=Path(sys.executable).parent)


def _env_without_urls() -> dict:
    env = dict(os.environ)
    env.pop("SIMDB_DATABASE_URL", None)
    return env


def state(url: str) -> dict:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            host = list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars()) \
                if "alembic_version" in tables else []
            return {"tables": tables, "host_versions": host, "simdb": m.current_revision(conn)}
    finally:
        eng.dispose()


def round_trip(proj: Path, url: str, env: dict | None = None) -> None:
    """The issue's target for each setup: upgrade head, downgrade base, upgrade head, check clean."""
    alembic(proj, "upgrade", "head", env=env)
    s = state(url)
    assert s["host_versions"] == ["0003_app"]  # one head: simdb added no branch to the host's history
    assert s["simdb"] == m.HEAD and {"simdb_fingerprints", "notes"} <= s["tables"] and "simdb_minhash_bands" not in s["tables"]
    alembic(proj, "downgrade", "base", env=env)
    s = state(url)
    assert s["host_versions"] == [] and s["simdb"] is None
    assert not {t for t in s["tables"] if t.startswith("simdb_") and t != m.VERSION_TABLE} and "notes" not in s["tables"]
    alembic(proj, "upgrade", "head", env=env)
    assert state(url)["host_versions"] == ["0003_app"]
    r = alembic(proj, "check", env=env)
    assert "No new upgrade operations detected" in r.stdout + r.stderr


ENV_INCLUDE_NAME = ("include_object=include_object,", "include_name=include_name,")
ENV_WITH_SIMDB_METADATA = ("target_metadata=Base.metadata,", "target_metadata=[Base.metadata, simdb_metadata],")


def env_variant(setup: str) -> str:
    env_py = doc_block("# env.py")
    if setup == "include_name":
        env_py = env_py.replace("import include_object,", "import include_name,")
        env_py = env_py.replace(*ENV_INCLUDE_NAME)
        assert "include_name=include_name" in env_py
    elif setup == "with_simdb_metadata":
        env_py = env_py.replace(*ENV_WITH_SIMDB_METADATA)
        env_py = "from simdb.store.models import metadata as simdb_metadata\n" + env_py
        assert "simdb_metadata]" in env_py
    return env_py


@pytest.mark.parametrize("setup", ["documented", "include_name", "with_simdb_metadata"])
def test_own_server_recipe_round_trip_and_check_clean(tmp_path, fresh_database_url, setup):
    proj = make_project(tmp_path, fresh_database_url, env_variant(setup))
    round_trip(proj, fresh_database_url)


def test_database_simdb_already_migrated_is_recognised(tmp_path, fresh_database_url):
    """`simdb url` / SimhashIndex had migrated the database first: no DuplicateTable, data kept."""
    from simdb.index import SimhashIndex

    with SimhashIndex(fresh_database_url, collection="before") as idx:
        idx.add("k1", "an existing text stored by simdb before the host app adopted it")
    proj = make_project(tmp_path, fresh_database_url)
    alembic(proj, "upgrade", "head")
    assert state(fresh_database_url)["host_versions"] == ["0003_app"]
    eng = create_engine(fresh_database_url)
    with eng.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM simdb_fingerprints")).scalar() == 1
    eng.dispose()
    assert "No new upgrade operations" in alembic(proj, "check").stdout + alembic(proj, "check").stderr


def test_without_include_object_autogenerate_would_drop_simdb_tables(tmp_path, fresh_database_url):
    """Why the hook is in the recipe: without it `alembic check` reports simdb's tables for removal."""
    env_py = doc_block("# env.py").replace("include_object=include_object,", "")
    proj = make_project(tmp_path, fresh_database_url, env_py)
    alembic(proj, "upgrade", "head")
    r = alembic(proj, "check", check=False)
    assert r.returncode != 0
    assert "remove_table" in r.stdout + r.stderr and "simdb_fingerprints" in r.stdout + r.stderr


def test_simdb_cli_and_index_work_after_the_host_migrated(tmp_path, fresh_database_url):
    from simdb.index import SimhashIndex

    url = fresh_database_url
    proj = make_project(tmp_path, url)
    alembic(proj, "upgrade", "head")
    text_a = "PostgreSQL is a powerful open source object relational database system with a strong reputation"
    r = simdb_cli("--database-url", url, "add", "-c", "docs", "--json", str(_file(tmp_path, "a.txt", text_a)))
    assert r.returncode == 0, r.stderr
    r = simdb_cli("--database-url", url, "query", "-c", "docs", "--json", text_a + ".")
    assert r.returncode == 0, r.stderr
    keys = [hit["key"] for hit in json.loads(r.stdout)]
    assert len(keys) == 1 and keys[0].endswith("a.txt")
    with SimhashIndex(url, collection="docs") as idx:
        assert [mt.key for mt in idx.near(text_a)] == keys
    # the host's history is unchanged, and simdb recorded nothing new
    s = state(url)
    assert s["host_versions"] == ["0003_app"] and s["simdb"] == m.HEAD
    assert "No new upgrade operations" in alembic(proj, "check").stdout + alembic(proj, "check").stderr


def test_read_only_commands_never_migrate(tmp_path, fresh_database_url):
    url = fresh_database_url
    older = "simdb_0004_spark_results"
    m.migrate(url, older)
    for args in (["query", "-c", "docs", "some words here"], ["collections"], ["dups", "-c", "docs"],
                 ["stats", "-c", "docs"]):
        simdb_cli("--database-url", url, *args)
        eng = create_engine(url)
        with eng.connect() as conn:
            assert m.current_revision(conn) == older, args
        eng.dispose()
    r = simdb_cli("--database-url", url, "add", "-c", "docs", str(_file(tmp_path, "b.txt", "a few words to store")))
    assert r.returncode == 0, r.stderr
    eng = create_engine(url)
    with eng.connect() as conn:
        assert m.current_revision(conn) == m.HEAD  # writing commands bring the schema to head
    eng.dispose()


def test_embedded_default_recipe(tmp_path):
    """No URL anywhere: the recipe's env.py uses simdb's embedded server (a temp SIMDB_HOME)."""
    env = _env_without_urls()
    env["SIMDB_HOME"] = str(tmp_path / "simdb-home")
    proj = make_project(tmp_path, None)
    r = simdb_cli("url", "--json", env=env)  # what a user would run first: migrates simdb itself
    assert r.returncode == 0, r.stderr
    url = json.loads(r.stdout)["sqlalchemy_url"]
    assert url.startswith("postgresql+psycopg://")
    try:
        round_trip(proj, url, env=env)
        r = simdb_cli("add", "-c", "notes", "--json", str(_file(tmp_path, "c.txt", "embedded texts are fingerprinted")),
                      env=env)
        assert r.returncode == 0, r.stderr
        r = simdb_cli("query", "-c", "notes", "--json", "embedded texts are fingerprinted", env=env)
        assert r.returncode == 0 and len(json.loads(r.stdout)) == 1, r.stderr
    finally:
        simdb_cli("server", "stop", env=env)


def test_older_recipe_branch_in_host_history_is_recognised(tmp_path, fresh_database_url):
    """simdb's revisions in the host's alembic_version (version_locations by package reference)."""
    from alembic import command
    from alembic.config import Config

    from simdb.errors import SchemaManagedElsewhereError
    from simdb.index import SimhashIndex

    url = fresh_database_url
    host = tmp_path / "legacy"
    (host / "versions").mkdir(parents=True)
    (host / "env.py").write_text(
        "from alembic import context\nfrom sqlalchemy import create_engine\n"
        "from simdb.alembic import include_object\n"
        "engine = create_engine(context.config.get_main_option('sqlalchemy.url'))\n"
        "with engine.connect() as conn:\n"
        "    context.configure(connection=conn, target_metadata=None, include_object=include_object)\n"
        "    with context.begin_transaction():\n"
        "        context.run_migrations()\n"
        "engine.dispose()\n"
    )
    ini_line = doc_block("# alembic.ini (path_separator = space)").splitlines()[1]
    assert ini_line.split(" = ", 1)[1].split()[1] == m.versions_location()
    cfg = Config()
    cfg.set_main_option("script_location", str(host))
    cfg.set_main_option("path_separator", "space")
    cfg.set_main_option("version_locations", f"{host / 'versions'} {m.versions_location()}")
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.upgrade(cfg, "simdb@head")
    assert state(url)["simdb"] is None  # recorded in the host's alembic_version only
    with SimhashIndex(url, collection="legacy") as idx:  # no migrate=False needed, no DuplicateTable
        idx.add("a", "texts in a database whose history the host app owns")
        assert [mt.key for mt in idx.near("texts in a database whose history the host app owns")] == ["a"]
    r = simdb_cli("--database-url", url, "migrate", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["revision"] == m.HEAD, r.stderr
    command.downgrade(cfg, "simdb_0004_spark_results")
    with pytest.raises(SchemaManagedElsewhereError, match="alembic upgrade heads"):
        m.migrate(url)
    r = simdb_cli("--database-url", url, "migrate")
    assert r.returncode == 3 and "Alembic history" in r.stderr and "Traceback" not in r.stderr


def _file(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path
