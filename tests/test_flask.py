"""simdb.flask and the example app (examples/flask_app) through Flask's test client,
against a real PostgreSQL."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import text
from sqlalchemy.engine import make_url

from simdb.core.bits import hamming
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.flask import SimDB

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flask_app" / "app.py"




@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("simdb_example_flask_app", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def app(example, create_database):
    url = create_database("simdb_flask_")
    app = example.create_app({"SQLALCHEMY_DATABASE_URI": url, "TESTING": True, "SIMDB_K": 3})
    with app.app_context():
        example.db.create_all()
    yield app
    with app.app_context():
        example.db.engine.dispose()


@pytest.fixture
def client(app):
    return app.test_client()


LONG = (
    "PostgreSQL is a powerful open source object relational database system with over thirty years of active "
    "development that has earned it a strong reputation for reliability, feature robustness and performance. "
    "It runs on all major operating systems and supports advanced data types and performance optimization features."
)


def test_post_then_exact_and_cosmetic_duplicates_get_409(client):
    r = client.post("/posts", json={"title": "pg", "body": LONG})
    assert r.status_code == 201, r.json
    first = r.json
    assert first["fp"] is not None
    # same words, different case / punctuation / spacing: same fingerprint
    cosmetic = LONG.upper().replace(",", " ;").replace(".", "!  ")
    r = client.post("/posts", json={"title": "copy", "body": cosmetic})
    assert r.status_code == 409
    assert r.json["error"] == "near-duplicate"
    assert r.json["distance"] == 0
    assert r.json["match"]["id"] == first["id"]
    assert r.json["match"]["body"] == LONG
    # the refused post was not stored
    assert client.get(f"/posts/{first['id'] + 1}").status_code == 404


def test_small_edit_is_judged_by_hamming_distance(client, example):
    base = LONG.replace("PostgreSQL", "Postgres")
    r = client.post("/posts", json={"title": "base", "body": base})
    assert r.status_code in (201, 409)
    stored_id = r.json["id"] if r.status_code == 201 else r.json["match"]["id"]
    edited = base + " Really."
    d = hamming(example.Post.fingerprint_text(base), example.Post.fingerprint_text(edited))
    r = client.post("/posts", json={"title": "edited", "body": edited})
    if d <= 3:
        assert r.status_code == 409 and r.json["distance"] <= 3
        assert r.json["match"]["id"] == stored_id or r.json["distance"] <= d
    else:
        assert r.status_code in (201, 409)


def test_unrelated_and_featureless_posts_are_accepted(client):
    r1 = client.post("/posts", json={"title": "cats", "body": "Cats sleep most of the day and hunt at night in gardens."})
    r2 = client.post("/posts", json={"title": "tax", "body": "Quarterly tax filings are due before the end of April each year."})
    assert r1.status_code == 201 and r2.status_code == 201
    # texts with no features are stored with fp NULL and never match each other
    for _ in range(2):
        r = client.post("/posts", json={"title": "empty", "body": "!!! ???"})
        assert r.status_code == 201
        assert r.json["fp"] is None
    assert client.get(f"/posts/{r1.json['id']}").json["title"] == "cats"
    assert client.post("/posts", json={"title": 1}).status_code == 400


def test_concurrent_identical_posts_only_one_wins(app):
    body = "A brand new announcement about the spring community meetup in the old library hall on Saturday."
    statuses = []
    barrier = threading.Barrier(4)

    def worker():
        c = app.test_client()
        barrier.wait()
        statuses.append(c.post("/posts", json={"title": "meetup", "body": body}).status_code)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201, 409, 409, 409]


def test_extension_reuses_flask_sqlalchemy_engine_and_config(app, example):
    with app.app_context():
        assert example.simdb_ext.engine is example.db.engine
        assert example.simdb_ext.k == 3
        assert app.config["SIMDB_COLLECTION"] == "default"
        stmt = example.simdb_ext.near_duplicates(example.Post, LONG)
        rows = example.db.session.execute(stmt).all()
        assert rows and rows[0].distance == 0


def test_extension_init_app_pattern_and_own_engine(server_url):
    ext = SimDB()
    app = Flask("a")
    app.config["SIMDB_DATABASE_URL"] = server_url
    app.config["SIMDB_K"] = 5
    ext.init_app(app)
    other = Flask("b")
    db = SQLAlchemy()
    other.config["SQLALCHEMY_DATABASE_URI"] = server_url
    db.init_app(other)
    ext.init_app(other, db=db)
    with app.app_context():
        eng = ext.engine
        assert eng is ext.engine  # cached per app
        assert eng.url.render_as_string(hide_password=False) == make_url(server_url).render_as_string(hide_password=False)
        with eng.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        assert ext.k == 5
        ext.close()
    with other.app_context():
        assert ext.engine is db.engine
        assert ext.k == 3
    with pytest.raises(ValueError, match="SIMDB_K"):
        bad = Flask("c")
        bad.config["SIMDB_K"] = 12
        SimDB(bad)
    with pytest.raises(RuntimeError, match="init_app"):
        with Flask("d").app_context():
            SimDB().engine


def test_cli_migrate_and_store_index(create_database):
    url = create_database("simdb_flask_")
    app = Flask("store")
    app.config.update(SQLALCHEMY_DATABASE_URI=url, SIMDB_COLLECTION="flask-posts", SIMDB_AUTO_MIGRATE=False)
    db = SQLAlchemy()
    db.init_app(app)
    ext = SimDB(app, db=db)
    with app.app_context():  # without migrations and with auto-migrate off, the index cannot open
        with pytest.raises(Exception):
            ext.index
    result = app.test_cli_runner().invoke(args=["simdb", "migrate"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        ext.index.add("p1", LONG)
        matches = ext.near(LONG.upper())
        assert [m.key for m in matches] == ["p1"]
        assert matches[0].distance == 0
        # a new store collection with no SIMDB_FINGERPRINTER is verified (issue 13): its fp comes from the
        # candidate Fingerprinter; the model columns keep SIMDB_FINGERPRINTER's (default Fingerprinter())
        from simdb.core.sketch.features import candidate_fingerprinter

        assert ext.index.verifier is not None and ext.index.fingerprinter == candidate_fingerprinter()
        assert matches[0].jaccard == 1.0
        ext.close()
        db.engine.dispose()
    # a second app with a configured Fingerprinter (as a dict) on a fresh database: auto-migrates
    from simdb.core.fingerprint import Fingerprinter

    url2 = create_database("simdb_flask_")
    app2 = Flask("store2")
    app2.config.update(SIMDB_DATABASE_URL=url2, SIMDB_FINGERPRINTER=Fingerprinter().to_dict())
    ext2 = SimDB(app2)
    with app2.app_context():
        ext2.index.add("a", LONG)
        assert [m.key for m in ext2.near(LONG, k=0)] == ["a"]
        assert ext2.fingerprint(LONG) == Fingerprinter().fingerprint(LONG)
        ext2.close()


# ---------------------------------------------------------------- the example's README, as written (issue 18)

README = EXAMPLE.with_name("README.md")


def readme_requests() -> list[tuple[dict, int]]:
    """The README's curl requests: (JSON body, the status code the README says comes back)."""
    found = re.findall(r"-d '(\{.*?\})'\n# (\d{3})\n", README.read_text())
    return [(json.loads(body), int(status)) for body, status in found]


def test_readme_shows_new_near_duplicate_unrelated():
    assert [status for _, status in readme_requests()] == [201, 409, 201]


def test_readme_requests_on_a_fresh_database(example, create_database):
    url = create_database("simdb_flask_readme_")
    app = example.create_app({"SQLALCHEMY_DATABASE_URI": url, "TESTING": True})
    with app.app_context():
        example.db.create_all()
    client = app.test_client()
    answers = [client.post("/posts", json=body) for body, _ in readme_requests()]
    assert [r.status_code for r in answers] == [status for _, status in readme_requests()]
    assert answers[1].json["match"]["id"] == answers[0].json["id"]
    with app.app_context():
        example.db.engine.dispose()


def test_readme_runs_with_no_url_on_the_embedded_server(tmp_path):
    """`flask --app examples/flask_app/app.py init-db`, no URL anywhere: simdb's embedded PostgreSQL."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SQLALCHEMY_DATABASE_URI", "DATABASE_URL", "SIMDB_DATABASE_URL")}
    env["SIMDB_HOME"] = str(tmp_path / "home")
    r = subprocess.run([sys.executable, "-m", "flask", "--app", str(EXAMPLE), "init-db"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    code = f"""
import json, sys
sys.path.insert(0, {str(EXAMPLE.parent)!r})
import app
client = app.create_app().test_client()
print(json.dumps([client.post("/posts", json=b).status_code for b in {[b for b, _ in readme_requests()]!r}]))
"""
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [201, 409, 201]


def test_bad_config_is_a_typed_error_naming_the_key():
    """SIMDB_K and SIMDB_FINGERPRINTER are checked with simdb's typed errors (still ValueError / TypeError)."""
    app = Flask(__name__)
    app.config["SIMDB_K"] = 12
    with pytest.raises(InvalidArgumentError, match="SIMDB_K"):
        SimDB(app)
    app = Flask(__name__)
    app.config["SIMDB_FINGERPRINTER"] = 3
    ext = SimDB(app)
    with app.app_context(), pytest.raises(InvalidTypeError, match="SIMDB_FINGERPRINTER"):
        _ = ext.fingerprinter
