"""Django's verified model (simdb.django.verified) against the plain SimhashModel, in one run.

What a Django app pays per post: ``NotNearDuplicate`` and ``save_unless_near_duplicate`` run
``Model.objects.near_duplicates(text)`` once per submitted text. The same real paragraphs as
bench_model_verified.py (its ``paragraphs()``: bench_quality's English and Chinese corpora) are
written with ``bulk_create`` into two tables of a fresh database, one per abstract model, so each row
gets its fingerprint, sketch, rule and band keys as the model computes them on save. Queries are
copies of stored paragraphs with 1 % of their tokens replaced (bench_verify.edit_tokens). Per query,
interleaved, on one connection: ``list(PlainPost.objects.near_duplicates(text))`` (k=3) and
``list(VerifiedPost.objects.near_duplicates(text))``, timed whole, from the text (fingerprint,
sketches, band keys, the ORM's compilation, psycopg, PostgreSQL, the model instances); "signature"
is the part of the verified time spent computing the text's fingerprint, sketches and keys in
Python (timed apart, the same calls), so total minus signature compares with
bench_model_verified.py, which times the SQL from precomputed values.
Reports recall of the original and p50/p90 milliseconds; read the ratio, not the absolute numbers
(the machine is shared).

    python benchmarks/bench_django_verified.py [--n 10000] [--queries 300] [--server-side-binding]

``--server-side-binding``: the connection's ``OPTIONS["server_side_binding"] = True`` (psycopg 3
sends the values apart from the SQL text; Django's default renders them into it).
Uses $SIMDB_DATABASE_URL's server, else the embedded one; the run's database is dropped at the end.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).parent))
from bench_model_verified import fresh_db, paragraphs, pct  # noqa: E402
from bench_verify import edit_tokens  # noqa: E402
from server import bench_server  # noqa: E402

from simdb.core.model_verifier import MODEL_RULE, MODEL_RULES, model_fingerprinter, model_sketch_and_keys  # noqa: E402
from simdb.django.database import database_from_url  # noqa: E402


def configure(url: str, server_side_binding: bool) -> None:
    """Django's settings for this script alone (no project): one database, no installed app."""
    import django
    from django.conf import settings

    db = database_from_url(url)
    if server_side_binding:
        db.setdefault("OPTIONS", {})["server_side_binding"] = True
    settings.configure(DATABASES={"default": db}, INSTALLED_APPS=[], USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField")
    django.setup()


def define_models():
    """The two host models (after ``django.setup()``: a model class needs the app registry)."""
    from django.db import models

    from simdb.django.models import SimhashModel
    from simdb.django.verified import VerifiedSimhashModel

    class PlainPost(SimhashModel):
        simhash_source = "body"
        body = models.TextField()

        class Meta:
            app_label = "simdb_bench"

    class VerifiedPost(VerifiedSimhashModel):
        simhash_source = "body"
        body = models.TextField()

        class Meta:
            app_label = "simdb_bench"

    return PlainPost, VerifiedPost


def signature(q: str) -> None:
    """What ``VerifiedPost.objects.near_duplicates(q)`` computes from the text in Python before any SQL."""
    model_fingerprinter().fingerprint(q, empty=None)
    for number, rule in MODEL_RULES.items():
        if number != MODEL_RULE:
            rule.verifier().sketch(q)
    model_sketch_and_keys(q)  # the model rule's sketch and the band keys, one pass (as the model does)


def load(n: int, nq: int, log):
    """The two tables filled and analysed; returns the models and the (original id, edited copy) queries."""
    from django.db import connection

    PlainPost, VerifiedPost = define_models()
    rng = random.Random(21)
    texts, en, zh = paragraphs(rng, n)
    log(f"{len(texts)} distinct real paragraphs ({len(en)} English / {len(zh)} Chinese available)")
    with connection.schema_editor() as editor:
        editor.create_model(PlainPost)
        editor.create_model(VerifiedPost)
    PlainPost.objects.bulk_create([PlainPost(id=i, body=t) for i, t in enumerate(texts)], batch_size=1000)
    VerifiedPost.objects.bulk_create([VerifiedPost(id=i, body=t) for i, t in enumerate(texts)], batch_size=1000)
    with connection.cursor() as cur:
        for table in (PlainPost._meta.db_table, VerifiedPost._meta.db_table):
            cur.execute(f"ANALYZE {table}")
    words = [w for p in en[:2000] for w in p.split()][:20000]
    hans = [ch for p in zh[:500] for ch in p if "\u4e00" <= ch <= "\u9fff"][:5000]
    picks = rng.sample(range(len(texts)), min(nq, len(texts)))
    return PlainPost, VerifiedPost, [(i, edit_tokens(texts[i], 0.01, rng, words, hans)) for i in picks]


def run(n: int, nq: int, log) -> None:
    PlainPost, VerifiedPost, queries = load(n, nq, log)
    tp, tv, ts, hit_p, hit_v, answers_v = [], [], [], 0, 0, 0
    for i, q in queries:
        t0 = time.perf_counter()
        rows_p = list(PlainPost.objects.near_duplicates(q))
        t1 = time.perf_counter()
        rows_v = list(VerifiedPost.objects.near_duplicates(q))
        t2 = time.perf_counter()
        signature(q)
        t3 = time.perf_counter()
        tp.append(t1 - t0)
        tv.append(t2 - t1)
        ts.append(t3 - t2)
        hit_p += any(r.pk == i for r in rows_p)
        hit_v += any(r.pk == i for r in rows_v)
        answers_v += len(rows_v)
    log(f"queries: {len(queries)} (1 % of tokens replaced)")
    log(f"plain    k=3 : recall {hit_p / len(queries):.3f}  p50 {pct(tp, .5):.2f} ms  p90 {pct(tp, .9):.2f} ms")
    log(f"verified K=11|2 keys: recall {hit_v / len(queries):.3f}  p50 {pct(tv, .5):.2f} ms  p90 {pct(tv, .9):.2f} ms"
        f"  ({answers_v / len(queries):.2f} answers/query)")
    log(f"  of which signature (Python): p50 {pct(ts, .5):.2f} ms  p90 {pct(ts, .9):.2f} ms")
    log(f"p50 ratio verified/plain: {pct(tv, .5) / pct(tp, .5):.2f}x")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--server-side-binding", action="store_true")
    a = ap.parse_args(argv)
    with bench_server() as url:
        db_url = fresh_db(url)
        configure(db_url, a.server_side_binding)
        try:
            run(a.n, a.queries, lambda s: print(s, flush=True))
        finally:
            drop_db(url, db_url)


def drop_db(server_url: str, db_url: str) -> None:
    """Drop the run's database (Django's connections closed first): a shared server keeps no copy."""
    from django.db import connections

    connections.close_all()
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE "{make_url(db_url).database}"'))
    admin.dispose()


if __name__ == "__main__":
    main()
