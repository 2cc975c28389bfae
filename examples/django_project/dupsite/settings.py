"""Settings for the simdb example project (PostgreSQL from DATABASE_URL)."""

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

# host and port may come as query parameters (a Unix-socket server): simdb keeps them all
DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL", "postgresql://localhost/simdb_example"))}

# near-duplicate radius for new posts (Hamming distance between 64-bit SimHashes)
SIMDB_K = 3
