"""docs/django.md, run as its reader would: a new project, this page's files, its tests, on the embedded default.

Why a project in a subprocess and not the docs runner (tests/test_docs_examples.py): the page's
code is a Django project's files, and Django's settings can be configured once per process (the
suite's own Django is tests/conftest.py's). So this test does what the page says: ``django-admin
startproject``, ``startapp``, writes each ```python block whose first line names a file
(``# comments/models.py``) there, then ``makemigrations``, ``migrate`` and ``test``, with no
database URL anywhere: the settings start simdb's embedded PostgreSQL (in a temporary
``SIMDB_HOME``). The Django REST framework section's files join when ``rest_framework`` imports.
The upgrade section's data migration (``comments/migrations/...``) is written after
``makemigrations`` made the ``0001_initial`` it depends on, so ``migrate`` runs it (on the empty
table: its import, historical model and query; tests/test_django_verified.py runs it on rows).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("django")

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "django.md"
FILE_BLOCK_RE = re.compile(r"^```python\n# ([\w/]+\.py)\n(.*?)^```", re.S | re.M)
DRF_HEADING = "## Django REST framework"


def page_files(with_drf: bool) -> dict[str, str]:
    """The page's files in order (a later block of the same file replaces the earlier one)."""
    text = PAGE.read_text(encoding="utf-8")
    drf_at = text.index(DRF_HEADING)
    files: dict[str, str] = {}
    for m in FILE_BLOCK_RE.finditer(text):
        if m.start() > drf_at and not with_drf:
            continue
        files[m.group(1)] = f"# {m.group(1)}\n{m.group(2)}"
    return files


def test_the_page_names_its_files():
    assert list(page_files(with_drf=False)) == [
        "mysite/settings.py", "comments/models.py", "comments/forms.py", "comments/views.py", "mysite/urls.py",
        "comments/tests.py", "comments/migrations/0002_comment_rule_2.py",
    ]
    assert {"comments/api.py", "comments/test_api.py"} <= set(page_files(with_drf=True))


def test_the_page_runs_as_a_project_on_the_embedded_default(tmp_path):
    with_drf = importlib.util.find_spec("rest_framework") is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_") and k != "DATABASE_URL"}
    env.update(SIMDB_HOME=str(tmp_path / "home"), PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    project = tmp_path / "project"
    project.mkdir()

    def run(*argv):
        p = subprocess.run([sys.executable, *argv], cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"{argv}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        return p

    run("-m", "django", "startproject", "mysite", ".")
    run("manage.py", "startapp", "comments")
    files = page_files(with_drf)
    for name, code in files.items():
        if "/migrations/" not in name:
            (project / name).write_text(code, encoding="utf-8")
    if with_drf:  # the section's one settings change
        settings = project / "mysite" / "settings.py"
        settings.write_text(settings.read_text(encoding="utf-8").replace('"comments"]', '"rest_framework", "comments"]'),
                            encoding="utf-8")
    run("manage.py", "makemigrations", "comments")
    for name, code in files.items():
        if "/migrations/" in name:
            (project / name).write_text(code, encoding="utf-8")
    migrated = run("manage.py", "migrate", "-v", "2")
    assert "Applying comments.0002_comment_rule_2... OK" in migrated.stdout, migrated.stdout[-2000:]
    tested = run("manage.py", "test", "comments", "-v", "2")
    ran = re.search(r"Ran (\d+) tests?", tested.stderr)
    assert ran and int(ran.group(1)) == (4 if with_drf else 3), tested.stderr[-2000:]
    assert (tmp_path / "home" / "pgdata").is_dir()  # the embedded server, not some other database
