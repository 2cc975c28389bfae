"""The SQL of Django's verified query (simdb.django.verified): its arrays travel as the text of
``int4[]`` values, one parameter each (:func:`simdb.django._common.int4_array`: cheap for psycopg to
bind client-side, Django's default), and the same statement and parameters give the same rows when
bound server-side. That the rows are the right ones is tests/test_django_verified.py's brute force."""

from __future__ import annotations

import pytest

from simdb.core.bits import probes
from simdb.core.model_verifier import model_verifier
from simdb.django._common import int4_array

ORIGINAL = "I really enjoyed reading this article about database indexing and will try these ideas soon"
COPY = ORIGINAL.replace("article", "artcile")
OTHER = "Shipping took three weeks and the box arrived damaged, but support replaced it quickly"


@pytest.fixture(scope="module")
def Note(django_site):
    from django.db import connection
    from django.db import models as dj

    from simdb.django.verified import VerifiedSimhashModel

    class StatementNote(VerifiedSimhashModel):
        simhash_source = "body"
        body = dj.TextField(null=True)

        class Meta:
            app_label = "simdb_statement_tests"

    with connection.schema_editor() as editor:
        editor.create_model(StatementNote)
    StatementNote.objects.bulk_create([StatementNote(pk=1, body=ORIGINAL), StatementNote(pk=2, body=COPY), StatementNote(pk=3, body=OTHER)])
    yield StatementNote
    with connection.schema_editor() as editor:
        editor.delete_model(StatementNote)


def test_arrays_are_text_parameters(Note):
    sql, params = Note.objects.near_duplicates(COPY).query.sql_with_params()
    assert not [p for p in params if isinstance(p, (list, tuple))]
    assert sql.count("= ANY(%s::int4[])") == 4
    fp = Note.simhash_fingerprinter.fingerprint(COPY)
    for block in probes(fp, model_verifier().k):  # K = 11: every block probed, 548 values in all
        assert params.count(int4_array(block)) == 1
    for n in (1, 2):  # the query's sketch under each rule
        assert int4_array(model_verifier(n).sketch(COPY)) in params


def test_the_same_statement_bound_server_side_gives_the_same_rows(Note):
    import psycopg
    from django.db import connection

    qs = Note.objects.near_duplicates(COPY)
    expected = [(n.pk, n.distance, n.jaccard) for n in qs]
    assert [pk for pk, _, _ in expected] == [2, 1]
    sql, params = qs.query.sql_with_params()
    with connection.cursor():  # connected
        with psycopg.Cursor(connection.connection) as cur:  # psycopg's own cursor binds server-side
            cur.execute(sql, params)
            names = [c.name for c in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
    assert [(r["id"], r["distance"], r["jaccard"]) for r in rows] == expected
