"""Settings for the simdb example project (PostgreSQL from DATABASE_URL, else simdb's embedded server)."""

import os

from simdb.django.database import database_from_url

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "simdb-example-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
ROOT_URLCONF = "dupsite.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "posts"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]


def default_database_url() -> str:
    """``DATABASE_URL``, else simdb's embedded PostgreSQL (started on demand; data in ``$SIMDB_HOME``).

    The project needs none of simdb's own tables (its posts carry the fingerprint
    columns themselves), hence ``server_url()`` (the server, not migrated); and no SQLAlchemy is imported.
    """
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    from simdb.embedded import server_url

    return server_url()


# host and port may come as query parameters (a Unix-socket server): simdb keeps them all
DATABASES = {"default": database_from_url(default_database_url())}

# near-duplicate radius for new posts (Hamming distance between 64-bit SimHashes)
SIMDB_K = 3
