"""simdb.django and the example project (examples/django_project) against a real PostgreSQL.

Django is configured once per test session by the ``django_site`` fixture of
tests/conftest.py (settings.configure with the example's settings and a database
of its own), so these tests neither depend on nor disturb the order of other modules.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from simdb.core.bits import MASK64, blocks, hamming, to_signed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "examples" / "django_project"




@pytest.fixture(scope="module")
def site(django_site):
    """Django configured once per test session (tests/conftest.py), whatever module asks first."""
    return django_site


@pytest.fixture
def Post(site):
    return site["Post"]


@pytest.fixture
def client(site):
    from django.test import Client

    return Client()


LONG = (
    "PostgreSQL is a powerful open source object relational database system with over thirty years of active "
    "development that has earned it a strong reputation for reliability, feature robustness and performance. "
    "It runs on all major operating systems and supports advanced data types and performance optimization features."
)


def _post(client, title, body):
    return client.post("/posts/", data=json.dumps({"title": title, "body": body}), content_type="application/json")


def test_schema_generated_blocks_and_indexes(site):
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type, is_generated FROM information_schema.columns "
            "WHERE table_name = 'posts_post' AND column_name IN ('fp', 'b0', 'b1', 'b2', 'b3') ORDER BY column_name"
        )
        cols = cur.fetchall()
        cur.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'posts_post'")
        indexes = [r[0] for r in cur.fetchall()]
        # rows written with plain SQL get the same blocks (PostgreSQL derives them)
        cur.execute(
            "INSERT INTO posts_post (fp, title, body, created_at) VALUES (%s, 'sql', 'sql', now()) RETURNING b0, b1, b2, b3",
            [to_signed(0xFEDC_BA98_7654_3210)],
        )
        assert cur.fetchone() == blocks(0xFEDC_BA98_7654_3210)
        cur.execute("DELETE FROM posts_post WHERE title = 'sql'")
    assert cols == [
        ("b0", "integer", "ALWAYS"),
        ("b1", "integer", "ALWAYS"),
        ("b2", "integer", "ALWAYS"),
        ("b3", "integer", "ALWAYS"),
        ("fp", "bigint", "NEVER"),
    ]
    for i in range(4):
        assert any(d.endswith(f"btree (b{i})") for d in indexes), indexes


def test_fingerprint_field_round_trip(Post):
    for v in (0, 1, 2**63 - 1, 2**63, MASK64):
        p = Post(title="t", body="x")
        p.simhash_source = None  # store the explicit fp
        p.fp = v
        p.save()
        got = Post.objects.get(pk=p.pk)
        assert got.fp == v
        assert (got.b0, got.b1, got.b2, got.b3) == blocks(v)
        assert Post.objects.filter(fp=v, pk=p.pk).exists()
        got.delete()


def test_example_app_refuses_near_duplicates_with_409(client, Post):
    r = _post(client, "pg", LONG)
    assert r.status_code == 201, r.content
    first = r.json()
    assert first["fp"] is not None
    cosmetic = LONG.upper().replace(",", " ;").replace(".", "!  ")
    r = _post(client, "copy", cosmetic)
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "near-duplicate" and body["distance"] == 0
    assert body["match"]["id"] == first["id"] and body["match"]["body"] == LONG
    assert Post.objects.filter(title="copy").count() == 0
    assert client.get(f"/posts/{first['id']}/").json()["title"] == "pg"
    assert client.get("/posts/999999/").status_code == 404
    # unrelated and featureless posts are accepted (featureless: fp NULL, never matched)
    assert _post(client, "cats", "Cats sleep most of the day and hunt at night in gardens.").status_code == 201
    for _ in range(2):
        r = _post(client, "empty", "!!! ???")
        assert r.status_code == 201 and r.json()["fp"] is None
    assert _post(client, 1, None).status_code == 400


def test_concurrent_identical_posts_only_one_wins(site):
    from django.db import connection
    from django.test import Client

    body = "A brand new announcement about the spring community meetup in the old library hall on Saturday."
    statuses = []
    barrier = threading.Barrier(4)

    def worker():
        try:
            c = Client()
            barrier.wait()
            statuses.append(_post(c, "meetup", body).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201, 409, 409, 409]


def _planted(rng, base, dist):
    fp = base
    for bit in rng.sample(range(64), dist):
        fp ^= 1 << bit
    return fp


@pytest.mark.parametrize("k", [0, 1, 3, 5, 8, 11])
def test_near_duplicates_queryset_equals_brute_force(Post, k):
    from simdb.django.functions import HammingDistance

    rng = random.Random(100 + k)
    q = rng.getrandbits(64)
    values = [rng.getrandbits(64) for _ in range(200)]
    values += [_planted(rng, q, d) for d in range(0, k + 3) for _ in range(2)]
    values += [0, MASK64, 2**63]
    objs = [Post(title=f"k{k}", body="x", fp=v) for v in values]
    Post.simhash_source = None
    try:
        Post.objects.bulk_create(objs)
    finally:
        Post.simhash_source = "body"
    base = Post.objects.filter(title=f"k{k}")
    got = [(p.fp, p.distance) for p in base.near_duplicates(q, k)]
    expected = sorted(((v, hamming(v, q)) for v in values if hamming(v, q) <= k), key=lambda t: t[1])
    assert sorted(got) == sorted(expected)
    assert [d for _, d in got] == sorted(d for _, d in got)
    # the lookup alone and the database function agree
    assert sorted(base.filter(fp__near=(q, k)).values_list("fp", flat=True)) == sorted(v for v, _ in expected)
    ann = dict(base.annotate(d=HammingDistance("fp", q)).values_list("fp", "d"))
    assert all(ann[v] == hamming(v, q) for v in values)
    base.delete()


def test_near_duplicates_uses_block_indexes(Post):
    from django.db import connection

    rng = random.Random(9)
    Post.simhash_source = None
    try:
        Post.objects.bulk_create([Post(title="bulk", body="x", fp=rng.getrandbits(64)) for _ in range(20000)])
    finally:
        Post.simhash_source = "body"
    with connection.cursor() as cur:
        cur.execute("ANALYZE posts_post")
    for k in (3, 7):
        plan = Post.objects.near_duplicates(rng.getrandbits(64), k).explain()
        assert "Seq Scan" not in plan, plan
        assert plan.count("Bitmap Index Scan") == 4, plan
    Post.objects.filter(title="bulk").delete()


def test_similar_endpoint_and_text_queries(client, Post):
    a = Post.objects.create(title="a", body="the committee approved the new budget for the city library on monday")
    assert a.fp is not None
    b = Post(title="b", body="x")
    b.simhash_source = None
    b.fp = a.fp ^ 0b101
    b.save()
    r = client.get(f"/posts/{a.pk}/similar/?k=2")
    assert [(x["id"], x["distance"]) for x in r.json()["results"]] == [(b.pk, 2)]
    assert [p.pk for p in Post.objects.near_duplicates(a.body.upper(), 0)] == [a.pk]
    assert list(Post.objects.near_duplicates("   ", 3)) == []
    assert not Post.objects.filter(fp__near=("...", 3)).exists()
    with pytest.raises(ValueError, match="too large"):
        Post.objects.near_duplicates(1, 12)


def test_install_simdb_functions_operation(site):
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT simdb_hamming(%s, %s)", [to_signed(MASK64), 0])
        assert cur.fetchone()[0] == 64
        cur.execute("SELECT simdb_blocks(%s)", [to_signed(0x0001_0002_0003_0004)])
        assert cur.fetchone()[0] == [1, 2, 3, 4]
    from django.core.management import call_command

    call_command("migrate", "posts", "0001", verbosity=0)  # reverse: functions dropped
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_proc WHERE proname IN ('simdb_hamming', 'simdb_blocks')")
        assert cur.fetchone()[0] == 0
    call_command("migrate", verbosity=0)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_proc WHERE proname IN ('simdb_hamming', 'simdb_blocks')")
        assert cur.fetchone()[0] == 2


def test_request_path_does_not_import_sqlalchemy(site):
    code = f"""
import os, sys
sys.path.insert(0, {str(PROJECT)!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "dupsite.settings"
os.environ["DATABASE_URL"] = {site["url"]!r}
import django
django.setup()
import posts.models, posts.views, simdb.django.fields, simdb.django.functions, simdb.django.models, simdb.django.verified
assert "sqlalchemy" not in sys.modules, "sqlalchemy imported"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


# ---------------------------------------------------------------- the example's README, as written (issue 18)

README = PROJECT / "README.md"


def readme_requests() -> list[tuple[dict, int]]:
    """The README's curl requests: (JSON body, the status code the README says comes back)."""
    import re

    found = re.findall(r"-d '(\{.*?\})'\n# (\d{3})\n", README.read_text())
    return [(json.loads(body), int(status)) for body, status in found]


def test_readme_shows_new_near_duplicate_unrelated():
    assert [status for _, status in readme_requests()] == [201, 409, 201]


def test_readme_requests(client, Post):
    Post.objects.all().delete()  # the README starts from an empty table
    answers = [_post(client, body["title"], body["body"]) for body, _ in readme_requests()]
    assert [r.status_code for r in answers] == [status for _, status in readme_requests()]
    assert answers[1].json()["match"]["id"] == answers[0].json()["id"]


def test_readme_runs_with_no_url_on_the_embedded_server(tmp_path):
    """`python manage.py migrate`, no DATABASE_URL: simdb's embedded PostgreSQL."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SIMDB_DATABASE_URL")}
    env["SIMDB_HOME"] = str(tmp_path / "home")
    r = subprocess.run([sys.executable, "manage.py", "migrate"], cwd=PROJECT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    code = f"""
import json, os, sys
sys.path.insert(0, {str(PROJECT)!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "dupsite.settings"
import django
django.setup()
from django.test import Client
client = Client()
print(json.dumps([client.post("/posts/", data=json.dumps(b), content_type="application/json").status_code
                  for b in {[b for b, _ in readme_requests()]!r}]))
"""
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [201, 409, 201]
