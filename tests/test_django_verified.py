"""simdb.django.verified against a real PostgreSQL: ``VerifiedSimhashModel.objects.near_duplicates``
equals brute force (the definition in Python, recomputed from the texts), and the docs example runs.

Django is configured once per session by tests/conftest.py::django_site. The test models live in
an app label of their own that is not installed (so no migration of the example project sees
them); their tables are created here with the schema editor and dropped at the end.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verified_support import AT_THRESHOLD, CFP, K, corpus, expected_order, flip, judge, sk

from simdb.errors import CollectionConfigError, InvalidArgumentError

SLOW = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
DOC = Path(__file__).resolve().parents[1] / "docs" / "verified-models.md"


@pytest.fixture(scope="module")
def models(django_site):
    from django.db import connection
    from django.db import models as dj

    from simdb.django.verified import VerifiedSimhashModel

    class VerifiedNote(VerifiedSimhashModel):
        simhash_source = "body"
        body = dj.TextField(null=True)

        class Meta:
            app_label = "simdb_verified_tests"

    with connection.schema_editor() as editor:
        editor.create_model(VerifiedNote)
    yield {"Note": VerifiedNote}
    with connection.schema_editor() as editor:
        editor.delete_model(VerifiedNote)


@SLOW
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, K), t=st.sampled_from([None, 0.5, 0.8, 0.95]))
def test_near_duplicates_equal_brute_force(models, seed, k, t):
    from django.db import transaction

    Note = models["Note"]
    rng = random.Random(seed)
    texts = corpus(rng, rng.randint(1, 4), 30)
    queries = [rng.choice(texts) for _ in range(3)]
    queries.append(" ".join(rng.choice(texts).split()[::-1]))
    q_fps = [CFP.fingerprint(q, empty=None) for q in queries[:2]]
    fp_rows = [flip(rng, fp, rng.randint(0, K + 1)) for fp in q_fps if fp is not None]
    thr = 0.8 if t is None else t
    with transaction.atomic():
        truth = {}
        for text in texts:
            n = Note.objects.create(body=text)
            truth[n.pk] = (CFP.fingerprint(text, empty=None), sk(text))
        for fp in fp_rows:  # stored by fingerprint: no text, no sketch
            n = Note(body=None)
            n.simhash_source = None
            n.fp = fp
            n.save()
            truth[n.pk] = (fp, None)
        for q in queries + [fp for fp in q_fps if fp is not None]:
            q_fp = q if isinstance(q, int) else CFP.fingerprint(q, empty=None)
            q_sk = sk(q) if isinstance(q, str) else None
            want = []
            for pk, (fp, row_sk) in truth.items():
                keep, d, j = judge(Note.simhash_verifier, fp, row_sk, q_fp, q_sk, k, thr)
                if keep:
                    want.append((pk, d, j))
            want = expected_order(want)
            got = [(n.pk, n.distance, n.jaccard) for n in Note.objects.near_duplicates(q, k, min_jaccard=t)]
            assert [g[:2] for g in got] == [w[:2] for w in want]
            for (_, _, gj), (_, _, wj) in zip(got, want):
                assert gj == (None if wj is None else pytest.approx(wj, abs=1e-12))
        transaction.set_rollback(True)


def test_save_fills_fp_and_sketch_from_the_text(models):
    Note = models["Note"]
    text = "the committee approved the new budget for the city library on monday morning"
    n = Note.objects.create(body=text)
    n.refresh_from_db()
    assert n.fp == CFP.fingerprint(text) and n.simdb_sketch == sk(text)
    n.body = "!!!"
    n.save()
    n.refresh_from_db()
    assert n.fp is None and n.simdb_sketch is None
    n.delete()


def test_typed_errors(models):
    from django.db import models as dj

    from simdb.django.verified import VerifiedSimhashModel

    Note = models["Note"]
    with pytest.raises(InvalidArgumentError, match="min_jaccard"):
        Note.objects.near_duplicates("a text", min_jaccard=0)
    with pytest.raises(InvalidArgumentError, match="too large"):
        Note.objects.near_duplicates("a text", k=12)
    with pytest.raises(CollectionConfigError, match="candidate Fingerprinter"):

        class Other(VerifiedSimhashModel):
            simhash_fingerprinter = object()
            body = dj.TextField()

            class Meta:
                app_label = "simdb_verified_tests"


def docs_django_blocks() -> list[str]:
    """The Django examples of docs/verified-models.md (test_docs_examples skips them: they need Django)."""
    blocks = re.findall(r"<!-- skip-test: [^\n]*test_django_verified[^\n]*-->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2, "docs/verified-models.md: the Django model block, then the query block"
    return blocks


def test_docs_example_runs(django_site):
    """The docs example as written: the model block runs in a module of the example project's
    installed app (where a reader's models.py would be), its table is created as a migration
    would, then the query block runs and prints what its ``# ->`` comments say."""
    from django.apps import apps
    from django.db import connection

    model_block, query_block = docs_django_blocks()
    ns: dict = {"__name__": "posts.docs_verified_example"}
    exec(compile(model_block, str(DOC), "exec"), ns)
    Article = ns["Article"]
    with connection.schema_editor() as editor:
        editor.create_model(Article)
    try:
        out: list[str] = []
        ns["print"] = lambda *a: out.append(" ".join(map(str, a)))
        exec(compile(query_block, str(DOC), "exec"), ns)
        assert out == re.findall(r"# -> (.*)", query_block)
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(Article)
        apps.all_models["posts"].pop("article", None)
        apps.clear_cache()


def test_a_pair_exactly_at_the_threshold_is_kept(models):
    from django.db import transaction

    Note = models["Note"]
    a, b = AT_THRESHOLD
    with transaction.atomic():
        n = Note.objects.create(body=a)
        assert [(x.pk, x.jaccard) for x in Note.objects.near_duplicates(b)] == [(n.pk, 0.8)]
        assert not Note.objects.near_duplicates(b, min_jaccard=0.81).exists()
        transaction.set_rollback(True)


def test_text_query_uses_the_block_indexes(models):
    from django.db import connection, transaction

    Note = models["Note"]
    rng = random.Random(7)
    words = [f"w{i}" for i in range(200)]
    with transaction.atomic():
        Note.objects.bulk_create([Note(body=" ".join(rng.choices(words, k=25))) for _ in range(3000)])
        assert not Note.objects.filter(simdb_sketch__isnull=True).exists()  # bulk_create fills it too
        with connection.cursor() as cur:
            cur.execute(f"ANALYZE {Note._meta.db_table}")
        plan = Note.objects.near_duplicates(" ".join(words[:25])).explain()
        assert "Seq Scan" not in plan, plan
        assert plan.count("Bitmap Index Scan") == 4, plan
        transaction.set_rollback(True)
