"""simdb.django.database.database_from_url: what libpq reads from a URL reaches Django's settings.

Needs no Django (settings modules call it before Django is set up). The end-to-end check
is tests/test_django.py, whose site fixture goes through this function with the test
server's URL (on the PostgreSQL 15 pass that URL carries host and port as query parameters).
"""

from __future__ import annotations

import pytest

from simdb.django.database import database_from_url
from simdb.errors import InvalidArgumentError, InvalidTypeError


def test_socket_url_keeps_host_and_port_from_the_query():
    got = database_from_url("postgresql://postgres@/db?host=/tmp/dir&port=55432")
    assert got == {
        "ENGINE": "django.db.backends.postgresql", "NAME": "db", "USER": "postgres", "PASSWORD": "",
        "HOST": "/tmp/dir", "PORT": "55432",
    }


def test_netloc_url_with_driver_password_and_options():
    got = database_from_url("postgresql+psycopg://u%40x:p%2Fw@db.example:6543/my%20db?sslmode=require&connect_timeout=5",
                            CONN_MAX_AGE=60)
    assert (got["USER"], got["PASSWORD"], got["HOST"], got["PORT"], got["NAME"]) == ("u@x", "p/w", "db.example", "6543", "my db")
    assert got["OPTIONS"] == {"sslmode": "require", "connect_timeout": "5"}
    assert got["CONN_MAX_AGE"] == 60


def test_same_value_twice_is_fine_different_values_are_an_error():
    assert database_from_url("postgres://h:5433/d?port=5433")["PORT"] == "5433"
    with pytest.raises(InvalidArgumentError, match="port twice"):
        database_from_url("postgres://h:5433/d?port=5434")


@pytest.mark.parametrize("url, error", [
    ("mysql://h/d", InvalidArgumentError),
    ("postgres://h/d?port=abc", InvalidArgumentError),
    ("postgres://h:99999999/d", InvalidArgumentError),
    (b"postgres://h/d", InvalidTypeError),
])
def test_bad_urls_are_typed_errors(url, error):
    with pytest.raises(error):
        database_from_url(url)
