"""simdb.alembic with a real Alembic environment and PostgreSQL: a populated host table
(plain, or already a SimhashMixin table with Fingerprinter() fingerprints) becomes exactly what a
VerifiedSimhashMixin model maps (``alembic check`` finds nothing), every row's fp and sketch are
the candidate Fingerprinter's and simdb.core.sketch's, and the verified query answers on it; and a
table made verified before model rules were versioned gets ``simdb_rule`` (add_rule_column), its
rows answering by rule 1 until recomputed."""

from __future__ import annotations

import random
import sys
import textwrap

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.orm import Session
from test_alembic_ops import _alembic_env
from verified_support import AUDIT, CFP, ONE_TYPO, keys, sk

from simdb.core import sketch as S
from simdb.core.bits import hamming, to_signed
from simdb.core.fingerprint import Fingerprinter
from simdb.core.model_verifier import BAND_COLUMNS, model_verifier

MODELS_PY = """
from sqlalchemy import BigInteger, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from simdb.sqlalchemy.verified import VerifiedSimhashMixin

BATCHES = []

class Base(DeclarativeBase):
    pass

class Article(VerifiedSimhashMixin, Base):
    __tablename__ = "articles"
    __simdb_text__ = "body"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)
"""

MIGRATION = '''
"""make articles verified"""
import {models} as models
from simdb.alembic import add_verified_columns, drop_verified_columns

revision = "b1b2c3d4e5f6"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    add_verified_columns("articles", source={source}, batch_size=100, on_batch=models.BATCHES.append, concurrently={concurrently})


def downgrade():
    drop_verified_columns("articles", drop_simhash={drop}{dsource})
'''


@pytest.fixture
def host_url(create_database):
    return create_database("simdb_alembic_v_")


def _bodies():
    rng = random.Random(4)
    vocab = [f"w{i}" for i in range(40)]
    bodies = [" ".join(rng.choices(vocab, k=rng.randint(1, 30))) for _ in range(345)]
    bodies[3], bodies[9] = "!!!", None
    bodies[0] = " ".join(f"w{i}" for i in range(30))
    bodies[10] = " ".join(f"w{i}" for i in range(29)) + " w99"  # a near-duplicate of row 1 (J = 27/29)
    return bodies


@pytest.mark.parametrize("start", ["plain table", "SimhashMixin table"])
def test_add_verified_columns_backfills_and_matches_the_model(tmp_path, host_url, start):
    bodies = _bodies()
    eng = create_engine(host_url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE articles (id bigserial PRIMARY KEY, body text)"))
        conn.execute(text("INSERT INTO articles (body) VALUES (:b)"), [{"b": b} for b in bodies])
    if start == "SimhashMixin table":  # fingerprints of Fingerprinter(): must be recomputed
        from alembic.migration import MigrationContext
        from alembic.operations import Operations

        from simdb.alembic import add_simhash_columns

        with eng.begin() as conn:
            with Operations.context(MigrationContext.configure(conn)):
                add_simhash_columns("articles", source="body")
            old = dict(conn.execute(text("SELECT id, fp FROM articles WHERE body = :b"), {"b": bodies[0]}).all())
            assert old == {1: to_signed(Fingerprinter().fingerprint(bodies[0]))}
    cfg, models = _alembic_env(tmp_path, host_url, MODELS_PY)
    (tmp_path / "migrations" / "versions" / "b1b2c3d4e5f6_verified.py").write_text(
        textwrap.dedent(MIGRATION.format(models=models, source='"body"', drop=start == "plain table", concurrently=start == "plain table",
                                         dsource="" if start == "plain table" else ', source="body"'))
    )
    command.upgrade(cfg, "head")
    mod = sys.modules[models]
    assert sum(mod.BATCHES) == len(bodies) and max(mod.BATCHES) == 100
    cfp = CFP
    with eng.connect() as conn:
        bands = ", ".join(BAND_COLUMNS)
        rows = conn.execute(text(f"SELECT id, body, fp, simdb_sketch, simdb_rule, {bands} FROM articles ORDER BY id")).all()
        indexes = {i["name"] for i in inspect(conn).get_indexes("articles")}
    for _, body, fp, stored_sk, rule, *stored_keys in rows:
        want_fp = None if body is None else cfp.fingerprint(body, empty=None)
        assert fp == (None if want_fp is None else to_signed(want_fp))
        assert stored_sk == (None if body is None else sk(body)) and rule == 2
        assert stored_keys == (keys(body) or [None] * 14)
    assert {f"ix_articles_{c}" for c in BAND_COLUMNS} <= indexes
    command.check(cfg)  # the migrated table is exactly what the model declares

    Article = mod.Article
    with Session(eng) as s:
        got = [(a.id, j) for a, _, j in s.execute(Article.near_duplicates(bodies[0]))]
    assert hamming(cfp.fingerprint(bodies[0]), cfp.fingerprint(bodies[10])) <= 11  # a candidate
    assert got == [(1, 1.0), (11, pytest.approx(S.sketch_jaccard(sk(bodies[0]), sk(bodies[10]), 256)))]

    command.downgrade(cfg, "base")
    cols = {c["name"] for c in inspect(eng).get_columns("articles")}
    assert cols == ({"id", "body"} if start == "plain table" else {"id", "body", "fp", "b0", "b1", "b2", "b3"})
    if start == "SimhashMixin table":  # the plain model's fingerprints again, not the candidate ones
        with eng.connect() as conn:
            back = conn.execute(text("SELECT body, fp FROM articles ORDER BY id")).all()
        plain = Fingerprinter()
        assert back == [(b, None if b is None or plain.fingerprint(b, empty=None) is None
                         else to_signed(plain.fingerprint(b))) for b in bodies]
    eng.dispose()
    sys.modules.pop(models, None)


def test_a_table_with_fingerprints_needs_a_source(tmp_path, host_url):
    from simdb.errors import InvalidArgumentError

    eng = create_engine(host_url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE articles (id bigserial PRIMARY KEY, body text, fp bigint)"))
    cfg, models = _alembic_env(tmp_path, host_url, MODELS_PY)
    (tmp_path / "migrations" / "versions" / "b1b2c3d4e5f6_verified.py").write_text(
        textwrap.dedent(MIGRATION.format(models=models, source=None, drop=False, concurrently=False, dsource=""))
    )
    with pytest.raises(InvalidArgumentError, match="source="):
        command.upgrade(cfg, "head")
    assert "simdb_sketch" not in {c["name"] for c in inspect(eng).get_columns("articles")}
    eng.dispose()
    sys.modules.pop(models, None)


RULE_MIGRATION = '''
"""simdb_rule on articles"""
from simdb.alembic import add_rule_column, drop_rule_column

revision = "c1c2c3d4e5f6"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    add_rule_column("articles", source={source}, batch_size=2)


def downgrade():
    drop_rule_column("articles")
'''


@pytest.mark.parametrize("source", [None, '"body"'])
def test_add_rule_column_upgrades_an_old_verified_table(tmp_path, host_url, source):
    """An articles table as add_verified_columns made it before model rules were versioned (fp of
    the candidate Fingerprinter, rule-1 sketches, no simdb_rule). Without source its rows stay
    NULL and answer by rule 1 next to new rule-2 rows; with source they are recomputed now."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    from simdb.alembic import add_verified_columns

    original, typo = ONE_TYPO
    bodies = [original, "a different comment about something else entirely", None, "!!!", AUDIT[0][0]]
    v1 = model_verifier(1)
    eng = create_engine(host_url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE articles (id bigserial PRIMARY KEY, body text)"))
        conn.execute(text("INSERT INTO articles (body) VALUES (:b)"), [{"b": b} for b in bodies])
        with Operations.context(MigrationContext.configure(conn)):
            add_verified_columns("articles", source="body")
        conn.execute(text("ALTER TABLE articles DROP COLUMN simdb_rule"))
        conn.execute(text("ALTER TABLE articles " + ", ".join(f"DROP COLUMN {c}" for c in BAND_COLUMNS)))
        conn.execute(
            text("UPDATE articles SET simdb_sketch = CAST(:sk AS int4[]) WHERE id = :id"),
            [{"id": i + 1, "sk": None if b is None else v1.sketch(b)} for i, b in enumerate(bodies)],
        )
    cfg, models = _alembic_env(tmp_path, host_url, MODELS_PY)
    (tmp_path / "migrations" / "versions" / "c1c2c3d4e5f6_rule.py").write_text(
        textwrap.dedent(RULE_MIGRATION.format(source=source))
    )
    command.upgrade(cfg, "head")
    command.check(cfg)  # the upgraded table is exactly what the model declares
    with eng.connect() as conn:
        stored = conn.execute(text("SELECT body, simdb_sketch, simdb_rule, simdb_band0 FROM articles ORDER BY id")).all()
    if source is None:  # rule 1: no keys
        assert stored == [(b, None if b is None else sk(b, v1), None, None) for b in bodies]
    else:
        assert stored == [(b, None if b is None else sk(b), 2, (keys(b) or [None])[0]) for b in bodies]

    Article = sys.modules[models].Article
    with Session(eng) as s:
        s.add(Article(id=100, body=original))  # a new row: rule 2
        s.flush()
        got = [(a.id, a.simdb_rule) for a, _, _ in s.execute(Article.near_duplicates(typo))]
        # the one-typo copy is near under rule 2 only: the old row finds it once recomputed
        assert got == ([(100, 2)] if source is None else [(1, 2), (100, 2)])
        assert Article.recompute_sketches(s) == (len(bodies) if source is None else 0)
        assert [a.id for a, _, _ in s.execute(Article.near_duplicates(typo))] == [1, 100]
        # 13 bits apart, beyond K: found by the band keys, which the recomputed row has
        assert [a.id for a, _, _ in s.execute(Article.near_duplicates(AUDIT[0][1]))] == [5]
        s.rollback()

    command.downgrade(cfg, "base")
    cols = {c["name"] for c in inspect(eng).get_columns("articles")}
    assert "simdb_rule" not in cols and not cols & set(BAND_COLUMNS)
    eng.dispose()
    sys.modules.pop(models, None)


def test_alembic_helpers_name_their_bad_arguments():
    from simdb.alembic import add_rule_column, backfill_verified
    from simdb.errors import InvalidArgumentError, InvalidTypeError

    with pytest.raises(InvalidTypeError, match="table"):
        add_rule_column(None)
    with pytest.raises(InvalidTypeError, match="source"):
        add_rule_column("articles", source=3)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        add_rule_column("articles", batch_size=0)
    with pytest.raises(InvalidTypeError, match="verifier"):
        backfill_verified(None, "articles", "body", verifier="rule 2")


def test_a_downgrade_keeping_fingerprints_needs_a_source(tmp_path, host_url):
    """Downgrading a SimhashMixin table made verified, as docs/verified-models.md showed it
    (``drop_verified_columns("posts")``), kept the candidate Fingerprinter's fp values: the plain
    model then found none of a text's exact copies, silently. Without ``source`` such a
    downgrade is now refused, and nothing of it is applied (the migration's transaction)."""
    from simdb.errors import InvalidArgumentError

    eng = create_engine(host_url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE articles (id bigserial PRIMARY KEY, body text)"))
        conn.execute(text("INSERT INTO articles (body) VALUES (:b)"), [{"b": b} for b in _bodies()[:20]])
    cfg, models = _alembic_env(tmp_path, host_url, MODELS_PY)
    (tmp_path / "migrations" / "versions" / "b1b2c3d4e5f6_verified.py").write_text(
        textwrap.dedent(MIGRATION.format(models=models, source='"body"', drop=False, concurrently=False, dsource=""))
    )
    command.upgrade(cfg, "head")
    with pytest.raises(InvalidArgumentError, match="source="):
        command.downgrade(cfg, "base")
    assert "simdb_sketch" in {c["name"] for c in inspect(eng).get_columns("articles")}
    command.check(cfg)  # still the verified table, at head
    eng.dispose()
    sys.modules.pop(models, None)
