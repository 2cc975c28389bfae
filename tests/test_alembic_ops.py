"""simdb.alembic with a real Alembic environment in a temp dir and a real PostgreSQL:
autogenerate renders the mixin's columns (incl. Computed) and indexes, the result
migrates and does not drift, and add_simhash_columns backfills a populated table."""

from __future__ import annotations

import random
import sys
import textwrap
import uuid
import zlib
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

ENV_PY = """
import sys
sys.path.insert(0, {here!r})
from alembic import context
from sqlalchemy import create_engine
import {models} as models
from simdb.alembic import render_item

config = context.config
url = config.get_main_option("sqlalchemy.url")
if context.is_offline_mode():
    context.configure(url=url, target_metadata=models.Base.metadata, literal_binds=True, render_item=render_item)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=models.Base.metadata,
            render_item=render_item,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
"""

MODELS_PY = """
import zlib
from sqlalchemy import BigInteger, ForeignKey, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from simdb.sqlalchemy import SimhashMixin

BATCHES = []


class WordsFingerprinter:
    def fingerprint(self, text, empty=0):
        words = text.split()
        if not words:
            return empty
        fp = 0
        for w in words:
            fp |= 1 << (zlib.crc32(w.encode()) % 64)
        return fp


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))


class Post(SimhashMixin, Base):
    __tablename__ = "posts"
    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"))
    body: Mapped[str] = mapped_column(Text)
"""

ARTICLE_MODELS_PY = """
import zlib
from sqlalchemy import BigInteger, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from simdb.sqlalchemy import SimhashMixin

BATCHES = []


class WordsFingerprinter:
    def fingerprint(self, text, empty=0):
        words = text.split()
        if not words:
            return empty
        fp = 0
        for w in words:
            fp |= 1 << (zlib.crc32(w.encode()) % 64)
        return fp


class Base(DeclarativeBase):
    pass


class Article(SimhashMixin, Base):
    __tablename__ = "articles"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)
"""

BACKFILL_MIGRATION = '''
"""add simhash columns to articles"""
from alembic import op
import {models} as models
from simdb.alembic import add_simhash_columns, drop_simhash_columns

revision = "a1b2c3d4e5f6"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    add_simhash_columns(
        "articles",
        source={source},
        fingerprinter=models.WordsFingerprinter(),
        batch_size=100,
        concurrently={concurrently},
        on_batch=models.BATCHES.append,
    )


def downgrade():
    drop_simhash_columns("articles")
'''


def words_fp(text, empty=None):
    words = text.split()
    if not words:
        return empty
    fp = 0
    for w in words:
        fp |= 1 << (zlib.crc32(w.encode()) % 64)
    return fp




def _alembic_env(tmp_path, url, models_source):
    models = "host_models_" + uuid.uuid4().hex[:8]
    (tmp_path / f"{models}.py").write_text(models_source)
    cfg = Config(str(tmp_path / "alembic.ini"))
    command.init(cfg, str(tmp_path / "migrations"))
    (tmp_path / "migrations" / "env.py").write_text(ENV_PY.format(here=str(tmp_path), models=models))
    cfg = Config(str(tmp_path / "alembic.ini"))
    cfg.set_main_option("script_location", str(tmp_path / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg, models


@pytest.fixture
def host_url(create_database):
    return create_database("simdb_alembic_")


def test_autogenerate_renders_columns_computed_and_indexes(tmp_path, host_url):
    cfg, models = _alembic_env(tmp_path, host_url, MODELS_PY)
    script = command.revision(cfg, message="initial", autogenerate=True)
    source = Path(script.path).read_text()
    assert "import simdb.sqlalchemy" in source
    assert "sa.Column('fp', simdb.sqlalchemy.Fingerprint(), nullable=True)" in source
    for i, shift in enumerate(["((fp >> 48) & 65535)::int", "((fp >> 32) & 65535)::int", "((fp >> 16) & 65535)::int", "(fp & 65535)::int"]):
        assert f"sa.Column('b{i}', sa.Integer(), sa.Computed('{shift}', persisted=True)" in source, source
        assert f"op.create_index(op.f('ix_posts_b{i}'), 'posts', ['b{i}'], unique=False)" in source, source

    command.upgrade(cfg, "head")
    eng = create_engine(host_url)
    try:
        insp = inspect(eng)
        cols = {c["name"]: c for c in insp.get_columns("posts")}
        assert str(cols["fp"]["type"]) == "BIGINT"
        for i in range(4):
            assert cols[f"b{i}"]["computed"]["persisted"] is True
        assert {ix["name"] for ix in insp.get_indexes("posts")} >= {f"ix_posts_b{i}" for i in range(4)}
        with eng.begin() as conn:
            conn.execute(text("INSERT INTO authors (id, name) VALUES (1, 'a')"))
            conn.execute(text("INSERT INTO posts (author_id, body, fp) VALUES (1, 'x', -1)"))
            assert conn.execute(text("SELECT b0, b1, b2, b3 FROM posts")).one() == (65535, 65535, 65535, 65535)
    finally:
        eng.dispose()
    # the models and the migrated database do not drift
    command.check(cfg)
    command.downgrade(cfg, "base")
    eng = create_engine(host_url)
    assert "posts" not in inspect(eng).get_table_names()
    eng.dispose()
    sys.modules.pop(models, None)


@pytest.mark.parametrize("concurrently", [False, True])
def test_add_simhash_columns_backfills_populated_table(tmp_path, host_url, concurrently):
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(40)]
    bodies = [" ".join(rng.choices(vocab, k=rng.randint(1, 8))) for _ in range(1234)]
    bodies[5] = ""  # no features -> NULL fp
    bodies[7] = None
    eng = create_engine(host_url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE articles (id bigserial PRIMARY KEY, body text)"))
        conn.execute(text("INSERT INTO articles (body) VALUES (:b)"), [{"b": b} for b in bodies])
        conn.execute(text("DELETE FROM articles WHERE id % 97 = 0"))  # gaps in the key
    cfg, models = _alembic_env(tmp_path, host_url, ARTICLE_MODELS_PY)
    (tmp_path / "migrations" / "versions" / "a1b2c3d4e5f6_add_simhash.py").write_text(
        textwrap.dedent(BACKFILL_MIGRATION.format(models=models, concurrently=concurrently, source='"body"'))
    )
    command.upgrade(cfg, "head")
    mod = sys.modules[models]
    n_rows = len([i for i in range(1, 1235) if i % 97])
    assert sum(mod.BATCHES) == n_rows
    assert max(mod.BATCHES) == 100 and len(mod.BATCHES) == -(-n_rows // 100)

    with eng.connect() as conn:
        rows = conn.execute(text("SELECT id, body, fp, b0, b1, b2, b3 FROM articles ORDER BY id")).all()
        assert len(rows) == n_rows
        for id_, body, fp, *bl in rows:
            expected = None if body is None else words_fp(body)
            if expected is None:
                assert fp is None and bl == [None] * 4
            else:
                from simdb.core.bits import blocks, to_signed

                assert fp == to_signed(expected)
                assert tuple(bl) == blocks(expected)
        valid = conn.execute(
            text("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                 "WHERE c.relname LIKE 'ix_articles_b%' AND i.indisvalid")
        ).scalar()
        assert valid == 4
    # a model using the mixin matches the migrated table exactly
    command.check(cfg)

    # and the near-duplicate helper works on it through the indexes
    from sqlalchemy.orm import Session

    Article = mod.Article
    Article.__simdb_fingerprinter__ = mod.WordsFingerprinter()
    with Session(eng) as s:
        hits = s.execute(Article.near_duplicates(bodies[0], 0)).all()
        assert hits and all(a.body is not None and words_fp(a.body) == words_fp(bodies[0]) for a, _ in hits)
        assert {a.id for a, _ in hits} == {i + 1 for i, b in enumerate(bodies) if b and (i + 1) % 97 and words_fp(b) == words_fp(bodies[0])}

    command.downgrade(cfg, "base")
    cols = {c["name"] for c in inspect(eng).get_columns("articles")}
    assert cols == {"id", "body"}
    eng.dispose()
    sys.modules.pop(models, None)


def test_backfill_fingerprints_default_fingerprinter(host_url):
    from simdb.alembic import backfill_fingerprints
    from simdb.core.bits import to_signed
    from simdb.core.fingerprint import Fingerprinter
    from simdb.errors import InvalidArgumentError, InvalidTypeError

    texts = ["The quick brown fox", "", None, "Le renard brun rapide", "快速的棕色狐狸跳过了懒狗", "a fox, quick and brown"]
    eng = create_engine(host_url)
    with eng.begin() as conn:
        conn.execute(text('CREATE TABLE "My Notes" (note_id text PRIMARY KEY, txt text, fp bigint)'))
        conn.execute(text('INSERT INTO "My Notes" VALUES (:i, :t, NULL)'), [{"i": f"n{i:02d}", "t": t} for i, t in enumerate(texts)])
        conn.execute(text('UPDATE "My Notes" SET fp = 42 WHERE note_id = \'n05\''))
        batches = []
        n = backfill_fingerprints(conn, "My Notes", "txt", batch_size=2, on_batch=batches.append)
        assert n == 5 and batches == [2, 2, 1]  # n05 already had a fingerprint
        got = dict(conn.execute(text('SELECT note_id, fp FROM "My Notes"')).all())
    fpr = Fingerprinter()
    for i, t in enumerate(texts[:5]):
        want = None if t is None else fpr.fingerprint(t, empty=None)
        assert got[f"n{i:02d}"] == (None if want is None else to_signed(want))
    assert got["n05"] == 42
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        with eng.connect() as conn:
            backfill_fingerprints(conn, "My Notes", "txt", batch_size=0)
    with pytest.raises(InvalidTypeError, match="batch_size must be an int"):
        with eng.connect() as conn:
            backfill_fingerprints(conn, "My Notes", "txt", batch_size="100")
    eng.dispose()


def test_add_simhash_columns_offline_sql(tmp_path, host_url, capsys):
    cfg, models = _alembic_env(tmp_path, host_url, ARTICLE_MODELS_PY)
    path = tmp_path / "migrations" / "versions" / "a1b2c3d4e5f6_add_simhash.py"
    path.write_text(textwrap.dedent(BACKFILL_MIGRATION.format(models=models, concurrently=False, source=None)))
    command.upgrade(cfg, "head", sql=True)
    sql = capsys.readouterr().out
    assert "ALTER TABLE articles ADD COLUMN fp BIGINT" in sql
    assert 'ADD COLUMN b0 integer GENERATED ALWAYS AS (((fp >> 48) & 65535)::int) STORED, ADD COLUMN b1' in sql
    assert "CREATE INDEX ix_articles_b3 ON articles (b3)" in sql
    # a backfill cannot be written as SQL: a clear error
    path.write_text(textwrap.dedent(BACKFILL_MIGRATION.format(models=models, concurrently=False, source='"body"')))
    with pytest.raises(RuntimeError, match="offline"):
        command.upgrade(cfg, "head", sql=True)
    sys.modules.pop(models, None)
