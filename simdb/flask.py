"""Flask extension: ``SimDB(app)`` or ``simdb_ext.init_app(app)``.

For example:

    from flask_sqlalchemy import SQLAlchemy
    from simdb.flask import SimDB

    db = SQLAlchemy()
    simdb_ext = SimDB(db=db)         # reuse Flask-SQLAlchemy's engine

    def create_app():
        app = Flask(__name__)
        app.config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://..."
        app.config["SIMDB_K"] = 3
        db.init_app(app)
        simdb_ext.init_app(app)
        return app

Configuration keys (all optional):

``SIMDB_DATABASE_URL``
    Database for simdb's own store. Default: the Flask-SQLAlchemy engine when the
    extension was given ``db=``, else ``SQLALCHEMY_DATABASE_URI``, else simdb's
    usual resolution (``SIMDB_DATABASE_URL`` environment variable, embedded server).
``SIMDB_COLLECTION``
    Collection used by :attr:`SimDB.index` (default ``"default"``).
``SIMDB_K``
    Default ``k`` of :meth:`SimDB.near` / :meth:`SimDB.near_duplicates` (default 3): the Hamming
    radius of a plain collection or model, and in a verified one the radius of rows stored without
    a sketch (a text is answered by the rule).
``SIMDB_FINGERPRINTER``
    A :class:`simdb.Fingerprinter`, its ``to_dict()`` or its JSON. Default: for
    :attr:`SimDB.index`, the collection's own configuration (a new one is a verified
    collection: :meth:`SimDB.near` answers by its rule, as ``SimhashIndex.near``); for
    :meth:`SimDB.fingerprint`, ``Fingerprinter()``. Setting it makes a new collection a plain
    (Hamming) one, as ``SimhashIndex(fingerprinter=...)`` does.
``SIMDB_AUTO_MIGRATE``
    Let :attr:`SimDB.index` create simdb's tables on first use (default ``True``, as
    :class:`simdb.SimhashIndex`); set ``False`` to require ``flask simdb migrate``.

Two ways to use it: on the app's own models through
:class:`simdb.sqlalchemy.SimhashMixin` (:meth:`SimDB.near_duplicates` adds the
configured ``k``), or through simdb's store (:attr:`SimDB.index`, a
:class:`simdb.SimhashIndex` per app, sharing the app's engine).
"""

from __future__ import annotations

import threading
from typing import Any

import click
from flask import Flask, current_app, g
from flask.cli import AppGroup

from simdb.core.fingerprint import Fingerprinter
from simdb.database import resolve_engine
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.index import SimhashIndex
from simdb.store.migrate import migrate
from simdb.validators import PENDING

__all__ = ["SimDB"]

_DEFAULTS = {
    "SIMDB_DATABASE_URL": None,
    "SIMDB_COLLECTION": "default",
    "SIMDB_K": 3,
    "SIMDB_FINGERPRINTER": None,
    "SIMDB_AUTO_MIGRATE": True,
}


class _State:
    """One app's simdb objects, made on first use."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.engine = None  # an engine the extension created itself (not Flask-SQLAlchemy's)
        self.index = None
        self.fingerprinter = None

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None


class SimDB:
    """The simdb Flask extension (``init_app`` pattern; state lives in ``app.extensions["simdb"]``)."""

    def __init__(self, app: Flask | None = None, *, db: Any = None):
        self.db = db
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, *, db: Any = None) -> None:
        if db is not None:
            self.db = db
        for key, value in _DEFAULTS.items():
            app.config.setdefault(key, value)
        k = app.config["SIMDB_K"]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 11:
            raise InvalidArgumentError(f"SIMDB_K must be an int in 0..11, got {k!r}")
        app.extensions["simdb"] = _State()
        app.cli.add_command(_make_cli(self))
        app.teardown_request(_roll_back_pending)

    # -- per-app state -------------------------------------------------------------

    def _state(self, app: Flask | None = None) -> _State:
        app = app or current_app._get_current_object()  # type: ignore[attr-defined]  # the proxy's real app
        try:
            return app.extensions["simdb"]
        except KeyError:
            raise RuntimeError("simdb.flask.SimDB was not initialised for this app: call init_app(app)") from None

    @property
    def config(self) -> dict:
        return {k: current_app.config[k] for k in _DEFAULTS}

    @property
    def k(self) -> int:
        return current_app.config["SIMDB_K"]

    @property
    def engine(self):
        """The Engine simdb uses for this app: Flask-SQLAlchemy's unless ``SIMDB_DATABASE_URL`` is set."""
        state = self._state()
        url = current_app.config["SIMDB_DATABASE_URL"]
        if url is None and self.db is not None:
            return self.db.engine
        with state.lock:
            if state.engine is None:
                url = url or current_app.config.get("SQLALCHEMY_DATABASE_URI")
                state.engine, _ = resolve_engine(url)
            return state.engine

    def _configured_fingerprinter(self):
        conf = current_app.config["SIMDB_FINGERPRINTER"]
        if conf is None or isinstance(conf, Fingerprinter):
            return conf
        if isinstance(conf, dict):
            return Fingerprinter.from_dict(conf)
        if isinstance(conf, (str, bytes)):
            return Fingerprinter.from_json(conf)
        raise InvalidTypeError(f"SIMDB_FINGERPRINTER must be a Fingerprinter, dict or JSON string, got {type(conf).__name__}")

    @property
    def fingerprinter(self):
        """The configured :class:`simdb.Fingerprinter` (``SIMDB_FINGERPRINTER``, default ``Fingerprinter()``)."""
        state = self._state()
        if state.fingerprinter is None:
            state.fingerprinter = self._configured_fingerprinter() or Fingerprinter()
        return state.fingerprinter

    def fingerprint(self, text: str) -> int | None:
        """Fingerprint ``text`` with the configured Fingerprinter (None if it has no features)."""
        return self.fingerprinter.fingerprint(text, empty=None)

    def migrate(self) -> None:
        """Create or upgrade simdb's own tables and SQL functions in :attr:`engine`'s database."""
        migrate(self.engine)

    @property
    def index(self):
        """A :class:`simdb.SimhashIndex` on :attr:`engine` for ``SIMDB_COLLECTION`` (one per app)."""
        state = self._state()
        with state.lock:
            if state.index is None:
                state.index = SimhashIndex(
                    database=self.engine,
                    collection=current_app.config["SIMDB_COLLECTION"],
                    fingerprinter=self._configured_fingerprinter(),
                    migrate=bool(current_app.config["SIMDB_AUTO_MIGRATE"]),
                )
            return state.index

    def near(self, query: Any, k: int | None = None, **kw):
        """``index.near(query, k)`` with ``SIMDB_K`` as the default ``k``: the collection's rule
        for a text in a verified collection (the default), Hamming distance otherwise."""
        return self.index.near(query, self.k if k is None else k, **kw)

    def near_duplicates(self, model: Any, query: Any, k: int | None = None):
        """``model.near_duplicates(query, k)`` (a Select) with ``SIMDB_K`` as the default radius.

        ``model`` uses :class:`simdb.sqlalchemy.SimhashMixin` (Hamming ``<= k``) or, recommended
        for new models, :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin` (the model rules of
        :mod:`simdb.core.model_verifier`; ``k`` is then the radius of rows without a comparable
        sketch, and the Select also yields ``jaccard``).
        """
        return model.near_duplicates(query, self.k if k is None else k)

    def close(self, app: Flask | None = None) -> None:
        """Close the app's index and dispose of any engine the extension created."""
        self._state(app).close()


def _roll_back_pending(exc: BaseException | None) -> None:
    """At the end of every request: the texts the request's validators reserved (:mod:`simdb.wtforms`)
    and its response did not finish, rolled back. Why: a request that raised makes no response (with
    ``PROPAGATE_EXCEPTIONS``, as under ``TESTING``), so the commit-or-roll-back after the response never
    ran, and a held text would keep its locks until collected; a failed request stores nothing."""
    for _form, reservation in g.pop(PENDING, []):
        reservation.rollback()


def _make_cli(ext: SimDB) -> AppGroup:
    group = AppGroup("simdb", help="simdb near-duplicate store.")

    @group.command("migrate")
    def migrate_command():
        """Create or upgrade simdb's tables and SQL functions."""
        ext.migrate()
        click.echo("simdb: database is at head")

    return group
