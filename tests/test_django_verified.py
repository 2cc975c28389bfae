"""simdb.django.verified against a real PostgreSQL: ``VerifiedSimhashModel.objects.near_duplicates``
equals brute force (the definition in Python, recomputed from the texts, each row under its own
model rule: rule 2 for rows written now, rule 1 for rows written before ``simdb_rule`` existed),
``recompute_sketches`` moves old rows, and the docs examples run.

Django is configured once per session by tests/conftest.py::django_site. The test models live in
an app label of their own that is not installed (so no migration of the example project sees
them); their tables are created here with the schema editor and dropped at the end.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from verified_support import AT_THRESHOLD, CFP, K, corpus, expected_order, flip, judge, sk

from simdb.core.bits import hamming
from simdb.core.model_verifier import BAND_COLUMNS, model_band_keys, model_verifier
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError

SLOW = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
DOC = Path(__file__).resolve().parents[1] / "docs" / "verified-models.md"
DJANGO_DOC = Path(__file__).resolve().parents[1] / "docs" / "django.md"
V1, V2 = model_verifier(1), model_verifier(2)

#: two texts whose rule-2 Jaccard is exactly 0.8 (12 word characters, the last replaced: 8 shared
#: character 4-grams of 10), 9 bits apart: the threshold is inclusive (>=), so each finds the other.
AT_THRESHOLD_RULE2 = ("w0 w1 w2 w3 w4 w5", "w0 w1 w2 w3 w4 w6")
#: a 23-word comment and a copy with one typo ("jacket" -> "jakcet"), 3 bits apart: 3 of its 21
#: token 3-grams change (rule 1: Jaccard 0.75, not a near-duplicate), 4 of its ~90 character
#: 4-grams (rule 2: 0.90, a near-duplicate). What rule 2 is for.
COMMENT = (
    "I ordered the blue jacket two weeks ago and it still has not arrived, "
    "could someone please check the tracking number for me?"
)
TYPO = COMMENT.replace("jacket", "jakcet")
#: one-typo copies of 12-13-word comments, well inside the rule (Jaccard >= 0.8) but 12-14 bits apart,
#: beyond K = 11: the validators let such copies through (about 7 % of them) until the band keys; the
#: first is the audit's own, the others its typos ("Lovely"->"Loevly", ...) in comments of the same length.
AUDIT = [
    ("Does this charger also work with the older model of the tablet?",
     "Does this charger also work with the older model of the atblet?"),
    ("This kettle saved me a lot of money compared to the store brand.",
     "This kettle asved me a lot of money compared to the store brand."),
    ("Lovely kettle and quick delivery, I will order from this shop again.",
     "Loevly kettle and quick delivery, I will order from this shop again."),
    ("The kettle is surprisingly heavy for its size, but it feels very solid.",
     "The kettle is surprsiingly heavy for its size, but it feels very solid."),
    ("I waited twenty minutes for the blender and nobody came to help me.",
     "I waited twenty miuntes for the blender and nobody came to help me."),
]


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

    class OwnRuleNote(VerifiedSimhashModel):  # its own verifier: model rule 1's, every row under it
        simhash_source = "body"
        simhash_verifier = model_verifier(1)
        body = dj.TextField(null=True)

        class Meta:
            app_label = "simdb_verified_tests"

    with connection.schema_editor() as editor:
        editor.create_model(VerifiedNote)
        editor.create_model(OwnRuleNote)
    yield {"Note": VerifiedNote, "OwnNote": OwnRuleNote}
    with connection.schema_editor() as editor:
        editor.delete_model(VerifiedNote)
        editor.delete_model(OwnRuleNote)


#: a row's band columns all NULL (a row written before they existed, or under rule 1)
NO_BANDS = dict.fromkeys(BAND_COLUMNS)


def age(Note, pk, text):
    """Make row ``pk`` as a row written before rule 2: its sketch under rule 1, ``simdb_rule`` NULL, no band keys."""
    Note.objects.filter(pk=pk).update(simdb_sketch=None if text is None else V1.sketch(text), simdb_rule=None, **NO_BANDS)


def bands_of(row):
    """A row's band columns, as stored (a list of 14; all None on a row without keys)."""
    return [getattr(row, name) for name in BAND_COLUMNS]


@SLOW
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, K), t=st.sampled_from([None, 0.5, 0.8, 0.95]))
@example(seed=35, k=3, t=None)  # a rule-2 row 12 bits from a query at Jaccard 0.83: a band candidate only
@example(seed=231, k=0, t=0.5)  # rows 19 bits away kept at 0.53: the band keys' S-curve, below the default rule
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
        truth = {}  # pk -> (fp, sketch, rule: 2 now, 1 written before rule 2, 0 another verifier's, band keys)
        for text in texts:
            n = Note.objects.create(body=text)
            rule = rng.choice([2, 2, 1, 0])
            if rule == 1:
                age(Note, n.pk, text)
            elif rule == 0:  # keeps its band keys: they make it a candidate, but nothing verifies it
                Note.objects.filter(pk=n.pk).update(simdb_rule=0)
            keys = model_band_keys(text) if rule == 2 else None
            truth[n.pk] = (CFP.fingerprint(text, empty=None), sk(text, V1) if rule == 1 else sk(text), rule, keys)
        for fp in fp_rows:  # stored by fingerprint: no text, no sketch, no keys
            n = Note(body=None)
            n.simhash_source = None
            n.fp = fp
            n.save()
            truth[n.pk] = (fp, None, 1, None)
        for q in queries + [fp for fp in q_fps if fp is not None]:
            q_fp = q if isinstance(q, int) else CFP.fingerprint(q, empty=None)
            q_sks = {1: sk(q, V1), 2: sk(q), 0: None} if isinstance(q, str) else {1: None, 2: None, 0: None}
            q_keys = model_band_keys(q) if isinstance(q, str) else None
            want = []
            for pk, (fp, row_sk, rule, keys) in truth.items():
                keep, d, j = judge(V1 if rule == 1 else V2, fp, row_sk, q_fp, q_sks[rule], k, thr, keys, q_keys)
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
    assert n.fp == CFP.fingerprint(text) and n.simdb_sketch == sk(text) and n.simdb_rule == 2
    assert len(n.simdb_sketch) <= 256 and Note.simhash_verifier == model_verifier(2)
    assert bands_of(n) == model_band_keys(text) and len(bands_of(n)) == 14
    age(Note, n.pk, text)
    n.refresh_from_db()
    n.save()  # a save of an old row rewrites it under the current rule
    n.refresh_from_db()
    assert n.simdb_sketch == sk(text) and n.simdb_rule == 2 and bands_of(n) == model_band_keys(text)
    n.body = "!!!"
    n.save()
    n.refresh_from_db()
    assert n.fp is None and n.simdb_sketch is None and n.simdb_rule == 2 and bands_of(n) == [None] * 14
    n.delete()


def test_the_rule_column_is_a_plain_nullable_smallint(models):
    """What ``makemigrations`` writes for it: Django's own field, so a project's migration needs no
    simdb import for it, and a project that forgets it fails with "column does not exist"."""
    name, path, args, kwargs = models["Note"]._meta.get_field("simdb_rule").deconstruct()
    assert (name, path, args) == ("simdb_rule", "django.db.models.SmallIntegerField", [])
    assert kwargs == {"null": True, "blank": True, "editable": False}


def test_the_band_columns_are_plain_indexed_nullable_ints(models):
    """14 of them, named as simdb.core.model_verifier names them, in order after ``simdb_rule`` (so
    the keys that ``SketchField.pre_save`` sets are the ones written)."""
    fields = [f.name for f in models["Note"]._meta.concrete_fields]
    assert fields[fields.index("simdb_rule") + 1:][:14] == [f"simdb_band{i}" for i in range(14)] == list(BAND_COLUMNS)
    for name in BAND_COLUMNS:
        field_name, path, args, kwargs = models["Note"]._meta.get_field(name).deconstruct()
        assert (field_name, path, args) == (name, "django.db.models.IntegerField", [])
        assert kwargs == {"null": True, "blank": True, "editable": False, "db_index": True}


def test_typed_errors(models):
    from django.db import models as dj

    from simdb.django.verified import VerifiedSimhashModel, recompute_sketches

    Note = models["Note"]
    for bad, err in [(0, InvalidArgumentError), (-5, InvalidArgumentError), (True, InvalidTypeError), ("9", InvalidTypeError)]:
        with pytest.raises(err, match="batch_size"):
            recompute_sketches(Note, batch_size=bad)
    with pytest.raises(InvalidArgumentError, match="source"):
        recompute_sketches(Note, source="nope")
    with pytest.raises(InvalidArgumentError, match="source"):
        recompute_sketches(Note, source="")
    with pytest.raises(InvalidTypeError, match="model"):
        recompute_sketches("simdb_verified_tests.VerifiedNote")
    with pytest.raises(InvalidTypeError, match="verifier"):
        recompute_sketches(Note, verifier="tok3")
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
    """Under each rule (a new row: rule 2's pair; an old row: rule 1's), in the same table."""
    from django.db import transaction

    Note = models["Note"]
    assert V2.similarity(sk(AT_THRESHOLD_RULE2[0]), sk(AT_THRESHOLD_RULE2[1])) == 0.8
    with transaction.atomic():
        for (a, b), old in [(AT_THRESHOLD_RULE2, False), (AT_THRESHOLD, True)]:
            n = Note.objects.create(body=a)
            if old:
                age(Note, n.pk, a)
            assert [(x.pk, x.jaccard) for x in Note.objects.near_duplicates(b)] == [(n.pk, 0.8)]
            assert not Note.objects.near_duplicates(b, min_jaccard=0.81).exists()
            n.delete()
        transaction.set_rollback(True)


def test_old_rows_answer_by_rule_1_new_rows_by_rule_2_in_one_query(models):
    from django.db import transaction

    Note = models["Note"]
    with transaction.atomic():
        old = Note.objects.create(body=COMMENT)
        age(Note, old.pk, COMMENT)
        new = Note.objects.create(body=COMMENT)
        got = {x.pk: (x.simdb_rule, x.jaccard) for x in Note.objects.near_duplicates(COMMENT.upper(), min_jaccard=0.5)}
        assert got == {old.pk: (None, 1.0), new.pk: (2, 1.0)}
        # each compared with the query's sketch of its own rule: the Jaccard of rule 1 for the old row
        got = {x.pk: x.jaccard for x in Note.objects.near_duplicates(TYPO, min_jaccard=0.5)}
        assert got == {old.pk: V1.similarity(V1.sketch(COMMENT), V1.sketch(TYPO)), new.pk: V2.similarity(sk(COMMENT), sk(TYPO))}
        transaction.set_rollback(True)


def test_a_one_typo_copy_is_found_under_rule_2_and_not_rule_1(models):
    """The point of rule 2, with the validators that call ``near_duplicates``: a one-typo copy of a
    23-word comment is refused next to a row written now, and let through next to a row written
    under rule 1 (until ``recompute_sketches`` moves it; then it is refused too)."""
    from django.core.exceptions import ValidationError
    from django.db import transaction

    from simdb.django.validators import NotNearDuplicate, nearest_duplicate, save_unless_near_duplicate
    from simdb.django.verified import recompute_sketches

    Note = models["Note"]
    assert V1.similarity(V1.sketch(COMMENT), V1.sketch(TYPO)) == 0.75
    assert V2.similarity(sk(COMMENT), sk(TYPO)) >= 0.9 and hamming(CFP.fingerprint(COMMENT), CFP.fingerprint(TYPO)) <= K
    with transaction.atomic():
        n = Note.objects.create(body=COMMENT)
        with pytest.raises(ValidationError) as refused:
            save_unless_near_duplicate(Note(body=TYPO))
        (error,) = refused.value.error_dict["body"]
        assert error.code == "near_duplicate" and error.params["pk"] == n.pk
        age(Note, n.pk, COMMENT)
        assert nearest_duplicate(Note, TYPO) is None
        NotNearDuplicate(Note)(TYPO)  # no error
        assert recompute_sketches(Note) == 1
        assert nearest_duplicate(Note, TYPO).pk == n.pk
        transaction.set_rollback(True)


def test_recompute_sketches_moves_rule_1_rows_to_rule_2(models):
    from django.db import transaction

    from simdb.django.verified import recompute_sketches

    Note = models["Note"]
    texts = [f"{COMMENT} {i}" for i in range(7)] + [None, "!!!"]
    with transaction.atomic():
        rows = Note.objects.bulk_create([Note(body=t) for t in texts])
        current = rows[0]
        for n, t in zip(rows[1:], texts[1:]):
            age(Note, n.pk, t)
        assert Note.objects.filter(simdb_rule__isnull=True).count() == len(texts) - 1
        assert recompute_sketches(Note, batch_size=3) == len(texts) - 1
        for n, t in zip(rows, texts):
            n.refresh_from_db()
            assert n.simdb_rule == 2 and n.simdb_sketch == (None if t is None else model_verifier().sketch(t)), t
            assert bands_of(n) == (model_band_keys(t) or [None] * 14), t
        assert current.simdb_sketch == sk(texts[0])
        assert recompute_sketches(Note) == 0
        # a historical model (RunPython): no simhash_source, so source= names the text field
        Note.objects.filter(pk=current.pk).update(simdb_rule=0)
        assert recompute_sketches(Note, source="body", using="default") == 1
        transaction.set_rollback(True)


def test_a_model_with_its_own_verifier_compares_every_row_under_it(models):
    from django.db import transaction

    from simdb.django.verified import recompute_sketches

    Own = models["OwnNote"]
    with transaction.atomic():
        n = Own.objects.create(body=COMMENT)
        n.refresh_from_db()
        assert n.simdb_rule == 0 and n.simdb_sketch == sk(COMMENT, V1) and bands_of(n) == [None] * 14
        assert '."simdb_band0" = ' not in str(Own.objects.near_duplicates(COMMENT).query)  # no band part
        old = Own.objects.create(body=TYPO)
        Own.objects.filter(pk=old.pk).update(simdb_rule=None)  # whatever its simdb_rule: under the model's verifier
        got = [(x.pk, x.jaccard) for x in Own.objects.near_duplicates(COMMENT, min_jaccard=0.5)]
        assert got == [(n.pk, 1.0), (old.pk, 0.75)]
        assert [x.pk for x in Own.objects.near_duplicates(TYPO)] == [old.pk]  # rule 1's verdict: 0.75 < 0.8
        assert recompute_sketches(Own) == 1 and recompute_sketches(Own) == 0
        old.refresh_from_db()
        assert old.simdb_rule == 0 and old.simdb_sketch == sk(TYPO, V1) and bands_of(old) == [None] * 14
        transaction.set_rollback(True)


def test_the_docs_data_migration_runs(models):
    """docs/django.md's upgrade migration, its ``RunPython`` function called as ``migrate`` would
    (with an app registry that gives the model): old rows are moved to rule 2."""
    from django.db import transaction

    block = re.search(r"```python\n(# comments/migrations/\S+\n.*?)```", DJANGO_DOC.read_text(), re.S).group(1)
    ns: dict = {"__name__": "comments.migrations.upgrade"}
    exec(compile(block, str(DJANGO_DOC), "exec"), ns)
    (operation,) = ns["Migration"].operations
    Note = models["Note"]

    class Apps:
        @staticmethod
        def get_model(app_label, name):
            assert (app_label, name) == ("comments", "Comment")
            return Note

    with transaction.atomic():
        n = Note.objects.create(body=COMMENT)
        age(Note, n.pk, COMMENT)
        operation.code(Apps, None)
        n.refresh_from_db()
        assert n.simdb_rule == 2 and n.simdb_sketch == sk(COMMENT)
        transaction.set_rollback(True)


def index_scans(plan: str, table: str) -> set[str]:
    """The columns whose index an EXPLAIN scans (Django's index names: ``<table>_<column>_<hash>``)."""
    return set(re.findall(rf"Index Scan on {table}_(\w+)_[0-9a-f]{{8}}\b", plan))


def test_text_query_uses_the_block_and_band_indexes(models):
    from django.db import connection, transaction

    Note = models["Note"]
    table = Note._meta.db_table
    rng = random.Random(7)
    words = [f"w{i}" for i in range(200)]
    with transaction.atomic():
        Note.objects.bulk_create([Note(body=" ".join(rng.choices(words, k=25))) for _ in range(3000)])
        assert not Note.objects.filter(simdb_sketch__isnull=True).exists()  # bulk_create fills it too
        assert not Note.objects.exclude(simdb_rule=2).exists()  # and the rule
        assert not Note.objects.filter(simdb_band13__isnull=True).exists()  # and the band keys
        with connection.cursor() as cur:
            cur.execute(f"ANALYZE {table}")
        plan = Note.objects.near_duplicates(" ".join(words[:25])).explain()
        assert "Seq Scan" not in plan, plan
        assert index_scans(plan, table) == {"b0", "b1", "b2", "b3", *BAND_COLUMNS}, plan
        # a query by fingerprint has no band part: the block indexes only
        plan = Note.objects.near_duplicates(CFP.fingerprint(" ".join(words[:25]))).explain()
        assert index_scans(plan, table) == {"b0", "b1", "b2", "b3"}, plan
        transaction.set_rollback(True)


def test_the_band_condition_is_answered_from_the_band_indexes(models):
    """Whatever the table's size: with sequential scans priced out, the plan reads the 14 band indexes
    (the OR of the 14 equalities is what makes the count of shared keys an index condition)."""
    from django.db import connection, transaction

    Note = models["Note"]
    table = Note._meta.db_table
    with transaction.atomic():
        Note.objects.bulk_create([Note(body=a) for a, _ in AUDIT])
        with connection.cursor() as cur:
            cur.execute(f"ANALYZE {table}")
            cur.execute("SET LOCAL enable_seqscan = off")
        plan = Note.objects.near_duplicates(AUDIT[0][1]).explain()
        assert set(BAND_COLUMNS) <= index_scans(plan, table), plan
        transaction.set_rollback(True)


def test_one_typo_copies_of_short_comments_beyond_k_bits_are_refused(models):
    """The audit's cases: each copy is more than K bits from its comment, well inside the rule, and
    shares two band keys with it, so ``near_duplicates`` finds it and the validators refuse it."""
    from django.core.exceptions import ValidationError
    from django.db import transaction

    from simdb.django.validators import NotNearDuplicate, save_unless_near_duplicate

    Note = models["Note"]
    with transaction.atomic():
        for comment, copy in AUDIT:
            assert len(comment.split()) in (12, 13) and hamming(CFP.fingerprint(comment), CFP.fingerprint(copy)) > K
            assert V2.similarity(sk(comment), sk(copy)) >= 0.8, copy
            n = Note.objects.create(body=comment)
            assert [x.pk for x in Note.objects.near_duplicates(copy)] == [n.pk], copy
            with pytest.raises(ValidationError):
                NotNearDuplicate(Note)(copy)
            with pytest.raises(ValidationError) as refused:
                save_unless_near_duplicate(Note(body=copy))
            assert refused.value.error_dict["body"][0].params["pk"] == n.pk
            n.delete()
        transaction.set_rollback(True)


def test_recompute_sketches_fills_the_band_keys_of_rule_2_rows_without_them(models):
    """Rule-2 rows written before the band columns existed (keys NULL) are candidates within K bits
    only; ``recompute_sketches`` fills their keys, and then the copy beyond K bits is found."""
    from django.db import transaction

    from simdb.django.verified import recompute_sketches

    Note = models["Note"]
    comment, copy = AUDIT[0]
    with transaction.atomic():
        rows = Note.objects.bulk_create([Note(body=t) for t in (comment, COMMENT, "!!!", None)])
        Note.objects.update(**NO_BANDS)
        assert not Note.objects.near_duplicates(copy).exists()
        assert recompute_sketches(Note) == 2  # the two with text: "!!!" and None have no keys to fill
        for n, t in zip(rows, (comment, COMMENT)):
            n.refresh_from_db()
            assert n.simdb_rule == 2 and bands_of(n) == model_band_keys(t)
        assert recompute_sketches(Note) == 0
        assert [x.pk for x in Note.objects.near_duplicates(copy)] == [rows[0].pk]
        transaction.set_rollback(True)


def test_a_text_is_read_once_for_its_sketch_and_band_keys(models, monkeypatch):
    """A query and the save of a text need its rule-2 sketch and its band keys: one pass over its
    character grams gives both (the keys used to normalise, encode and hash the text a second time)."""
    import uuid

    from simdb.core.sketch import chars

    Note = models["Note"]
    text = f"{COMMENT} Order {uuid.uuid4().hex}."  # a text of its own: none of its features remembered yet
    streams: list[str] = []
    real = chars.char_stream

    def counted(t):
        streams.append(t)
        return real(t)

    monkeypatch.setattr(chars, "char_stream", counted)
    assert list(Note.objects.near_duplicates(text)) == []
    note = Note.objects.create(body=text)
    try:
        assert streams.count(text) == 1
        assert note.simdb_sketch == V2.sketch(text) and bands_of(note) == model_band_keys(text)
    finally:
        note.delete()
