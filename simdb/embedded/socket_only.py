"""simdb's connections to its embedded server go to its socket, whatever libpq's environment says.

Why (security audit): libpq prefers ``hostaddr`` to a socket ``host``, and fills every parameter a
connection leaves unset from the environment (``PGHOSTADDR``) or from the service a ``PGSERVICE``
names (a service file's ``hostaddr=127.0.0.1``). Either sent simdb's own connections, and the texts
they carry, to 127.0.0.1:5432, where any local user can listen and pose as the server. An explicitly
empty ``hostaddr`` is set, so neither applies, and libpq then connects to ``host``, the socket.

A URL alone cannot carry it to every client: libpq's own URI parser keeps ``hostaddr=`` (``psql``,
``psycopg.connect``), but SQLAlchemy's URL parser drops a blank query value. So the embedded URL
carries ``hostaddr=`` for libpq tools, :func:`pin_to_socket` adds it again to a libpq URL rendered
from a SQLAlchemy one, and a ``do_connect`` listener on every SQLAlchemy engine (sync and async)
adds it to the parameters of a connection to an embedded server. Such a connection is recognised by
the ``options`` that only simdb's embedded URLs set (:data:`EMBEDDED_OPTIONS`), so no other
connection of the process is touched.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from sqlalchemy import Engine, event

__all__ = ["EMBEDDED_OPTIONS", "EMBEDDED_OPTIONS_QUERY", "pin_to_socket"]

#: the libpq ``options`` of simdb's connections to its own server: a no-op custom setting, so that
#: ``PGOPTIONS`` (e.g. ``-c search_path=...``) does not reach them, and the mark by which they are
#: recognised here. Written ``-cname=value``, with no space: some URL layers (SQLAlchemy's async
#: engines) render a space as ``+``, which PostgreSQL would then read as part of the setting's name
EMBEDDED_OPTIONS = "-csimdb.embedded=on"
#: the same, as a URL query value
EMBEDDED_OPTIONS_QUERY = quote(EMBEDDED_OPTIONS, safe="")


def pin_to_socket(url: str) -> str:
    """``url`` (a libpq URI) with an empty ``hostaddr`` added when it names an embedded server
    (libpq then ignores ``PGHOSTADDR`` and a service's ``hostaddr``); any other URL unchanged."""
    query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    if query.get("options") != EMBEDDED_OPTIONS or "hostaddr" in query:
        return url
    return url + ("&" if "?" in url else "?") + "hostaddr="


@event.listens_for(Engine, "do_connect")
def _socket_only(dialect: Any, conn_rec: Any, cargs: Any, cparams: dict[str, Any]) -> None:
    """Before each SQLAlchemy connection: an embedded server's gets ``hostaddr=''`` (see the module)."""
    if cparams.get("options") == EMBEDDED_OPTIONS:
        cparams.setdefault("hostaddr", "")
