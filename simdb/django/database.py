"""A PostgreSQL URL -> Django's ``DATABASES`` entry, with every libpq parameter kept.

Why here and not in each project's settings: a URL such as
``postgresql://app@/db?host=/run/pg&port=55432`` (a Unix-socket server, libpq's own URI
form) carries its host and port as *query parameters*; a hand-written parser that reads
only the netloc loses the port and Django then connects to 5432, i.e. another server or
none. :func:`database_from_url` reads what libpq reads: the netloc, then the query
parameters ``host``, ``port``, ``user``, ``password`` and ``dbname`` (a value given in both
places must agree, else :class:`~simdb.errors.InvalidArgumentError`), and passes every other
query parameter (``sslmode``, ``connect_timeout``, ``application_name`` ...) through
``OPTIONS`` to psycopg. No Django import: settings modules call it before Django is set up.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["database_from_url"]

_SCHEMES = ("postgres", "postgresql", "postgresql+psycopg", "postgresql+psycopg2")
#: query parameters that map onto DATABASES keys (libpq name -> Django key)
_FIELDS = {"host": "HOST", "port": "PORT", "user": "USER", "password": "PASSWORD", "dbname": "NAME"}


def database_from_url(url: str, **extra) -> dict:
    """Django ``DATABASES`` entry (``ENGINE`` django.db.backends.postgresql) for a PostgreSQL URL.

    ``extra`` keys (e.g. ``CONN_MAX_AGE=60``) are added to the entry as given.
    """
    if not isinstance(url, str):
        raise InvalidTypeError(f"url must be a str, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    if parts.scheme not in _SCHEMES:
        raise InvalidArgumentError(f"url must be a PostgreSQL URL ({', '.join(s + '://' for s in _SCHEMES)}), got scheme {parts.scheme!r}")
    try:
        netloc_port = parts.port
    except ValueError as exc:
        raise InvalidArgumentError(f"url has a bad port: {exc}") from None
    entry: dict[str, Any] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": unquote(parts.hostname or ""),
        "PORT": "" if netloc_port is None else str(netloc_port),
    }
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        key = _FIELDS.get(name)
        if key is None:
            options[name] = value
            continue
        if entry[key] and entry[key] != value:
            raise InvalidArgumentError(
                f"url gives {name} twice with different values ({entry[key]!r} in the URL, {value!r} as ?{name}=)"
            )
        entry[key] = value
    if entry["PORT"] and not entry["PORT"].isdigit():
        raise InvalidArgumentError(f"url port must be a number, got {entry['PORT']!r}")
    if options:
        entry["OPTIONS"] = options
    entry.update(extra)
    return entry
