"""Settings for the simdb example project (PostgreSQL from DATABASE_URL, else simdb's embedded server)."""

import os
from urllib.parse import parse_qs, unquote, urlsplit

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "simdb-example-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
ROOT_URLCONF = "dupsite.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "posts"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]


def database_from_url(url: str) -> dict:
    """``postgresql[+psycopg]://user:pass@host:port/name[?host=/socket/dir]`` -> Django DATABASES entry."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query.get("host", [parts.hostname or ""])[0],
        "PORT": str(parts.port or ""),
    }


def default_database_url() -> str:
    """``DATABASE_URL``, else simdb's embedded PostgreSQL (started on demand; data in ``$SIMDB_HOME``).

    The project needs none of simdb's own tables (its posts carry the fingerprint
    columns themselves), hence ``migrate=False``; and no SQLAlchemy is imported.
    """
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    from simdb.embedded import embedded_url

    return embedded_url(migrate=False)


DATABASES = {"default": database_from_url(default_database_url())}

# near-duplicate radius for new posts (Hamming distance between 64-bit SimHashes)
SIMDB_K = 3
