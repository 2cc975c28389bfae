"""Seconds per large post through Django's form validator and atomic save, against the text's
features computed once (what the verified model must compute anyway).

A ``ModelForm`` with ``NotNearDuplicate`` on a ``VerifiedSimhashModel``, then
``save_unless_near_duplicate(form.save(commit=False))``, as docs/django.md's view does; each post a
fresh ``--mb`` MB text (bench_web_post.texts); the median of ``--repeat`` posts. "signature" is the
model's features of the text computed once: the candidate fingerprint, a sketch per model rule, the
band keys (bench_django_verified.signature). Uses $SIMDB_DATABASE_URL's server, else the embedded one,
in a table of its own, dropped at the end::

    .venv/bin/python benchmarks/bench_django_post.py --mb 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

import django
from django.conf import settings

sys.path.insert(0, str(Path(__file__).parent))
from bench_django_verified import signature  # noqa: E402
from bench_web_post import texts  # noqa: E402

from simdb.database import resolve_url  # noqa: E402
from simdb.django.database import database_from_url  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings.configure(DATABASES={"default": database_from_url(resolve_url()[0])}, INSTALLED_APPS=[], USE_TZ=True,
                       DEFAULT_AUTO_FIELD="django.db.models.BigAutoField")
    django.setup()
    from django import forms
    from django.db import connection, models

    from simdb.django.validators import NearDuplicateFormMixin, NotNearDuplicate, save_unless_near_duplicate
    from simdb.django.verified import VerifiedSimhashModel

    table = f"bench_post_{uuid.uuid4().hex[:8]}"

    class Post(VerifiedSimhashModel):
        simhash_source = "body"
        body = models.TextField()

        class Meta:
            app_label = "simdb_bench"
            db_table = table

    class PostForm(NearDuplicateFormMixin, forms.ModelForm):
        body = forms.CharField(validators=[NotNearDuplicate(Post)])

        class Meta:
            model = Post
            fields = ["body"]

    items = texts(args.mb, args.repeat)
    with connection.schema_editor() as editor:
        editor.create_model(Post)
    try:
        floor, seconds = [], []
        for t in items:
            t0 = time.perf_counter()
            signature(t)
            floor.append(time.perf_counter() - t0)
        for t in items:
            t0 = time.perf_counter()
            form = PostForm({"body": t})
            assert form.is_valid(), form.errors
            save_unless_near_duplicate(form.save(commit=False))
            seconds.append(time.perf_counter() - t0)
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(Post)
    print(json.dumps({"mb": args.mb, "repeat": args.repeat, "seconds": {
        "signature (features once)": round(statistics.median(floor), 3),
        "django (form.is_valid + save_unless_near_duplicate)": round(statistics.median(seconds), 3)}}, indent=2))


if __name__ == "__main__":
    main()
