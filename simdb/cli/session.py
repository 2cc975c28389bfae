"""The database, engine and index one command uses, and database errors as one clear line.

The URL comes from ``--database-url``, else ``SIMDB_DATABASE_URL``, else the embedded
PostgreSQL server (started on demand). Everything is created lazily: ``simdb server stop``
or ``simdb url`` must not start what they do not need.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

import psycopg
from sqlalchemy import Engine, create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from simdb.cli.results import shingle_words
from simdb.cli.status import EXIT_DATABASE, EXIT_USAGE, CliError, first_line
from simdb.core.sketch import DEFAULT_MIN_JACCARD, SCHEME
from simdb.core.sketch.bands import BAND_SCHEME, BANDS, min_shared, reliable_threshold, s_curve
from simdb.database import ENV_URL, display_url, embedded_url, normalize_url
from simdb.embedded import data_dir, libpq_url
from simdb.errors import CollectionChangedError, CollectionConfigError, DatabaseError, InputError
from simdb.index import SimhashIndex
from simdb.index.rules import VERIFY_KEY
from simdb.store.collections import collection_exists, find_collection
from simdb.store.connect import in_transaction
from simdb.store.urls import CLIENT_ENCODING

__all__ = [
    "DEFAULT_RULE", "MIGRATING_COMMANDS", "Session", "database_error", "refuse_rule_options",
]

#: the default rule in words, from the scheme and threshold of new collections (so that it follows them)
DEFAULT_RULE = f"Jaccard of {shingle_words(SCHEME)} >= {DEFAULT_MIN_JACCARD:g}"

#: the commands that judge through the band keys alone (a scan per row would be quadratic), so a
#: --min-jaccard below the keys' reach is refused: how each is named in the refusal
_BAND_KEY_COMMANDS = {"dups": "'simdb dups'", "report": "'simdb report'", "add": "'simdb add --unique'",
                      "dedup": "'simdb dedup'"}


def _min_jaccard_used(args) -> bool:
    """Does this command judge by ``--min-jaccard``? ``add`` only with ``--unique``: a plain add
    stores every text, so there it is refused (it would be ignored)."""
    if getattr(args, "min_jaccard", None) is None:
        return False
    if getattr(args, "command", None) == "add" and not getattr(args, "unique", False):
        raise CliError("--min-jaccard applies with --unique (keep only texts with no near-duplicate at that "
                       "threshold): a plain add stores every text; add --unique, or leave out --min-jaccard")
    return True


def _below_reach(args, index: SimhashIndex | None) -> CliError | None:
    """``--min-jaccard`` below the band keys' reach in a command that answers from the keys only: the
    API's refusal (``check_reach``, naming its methods and keyword) in the CLI's words. Without ``index``,
    for ``dedup``: its temporary collection (``dedup`` without ``-c``), a new one, of the default band scheme."""
    what = _BAND_KEY_COMMANDS.get(getattr(args, "command", ""))
    if what is None:
        return None
    if index is not None:
        rule = index.rule
        reach, shared, scheme = getattr(rule, "reach", None), getattr(rule, "shared", 1), index.band_scheme
        where = f"collection '{args.collection}'"
    elif args.command == "dedup":
        scheme = BAND_SCHEME
        reach, shared = reliable_threshold(scheme), min_shared(scheme)
        where = "its temporary collection (a new one)"
    else:
        return None
    t = args.min_jaccard
    if reach is None or t >= reach:
        return None
    return CliError(
        f"--min-jaccard {t:g} is below {reach:g}, the lowest threshold {what} answers exactly in {where}: its "
        f"candidates share {shared} of {BANDS} band keys (scheme {scheme}), which only "
        f"{s_curve(t, shared=shared):.0%} of the pairs at {t:g} do; use --min-jaccard {reach:g} or more here "
        "('simdb query' and 'simdb check' answer a lower threshold by comparing every row)"
    )


def refuse_rule_options(args, index: SimhashIndex | None = None) -> None:
    """Options that ask for a rule the collection cannot answer, as a CLI error naming the options.

    Why here and not the API's errors: those name keyword arguments and methods (``min_jaccard needs a
    verified collection``, ``open it with verify=None``, ``the lowest threshold clusters() answers``),
    which are right for Python callers and mean nothing at a shell. Without ``index``: the checks of the
    arguments alone (before a collection is opened, so that ``add`` creates nothing for a refused
    command); with it, those of its collection's rule."""
    if not _min_jaccard_used(args):
        return
    if getattr(args, "rule", None) == "hamming":
        raise CliError("--min-jaccard with --rule hamming: --rule hamming makes a Hamming-only collection "
                       "(near-duplicate = Hamming distance <= k, set by -k), which has no Jaccard to compare with "
                       "--min-jaccard: give one of them")
    if getattr(args, "hamming", False):
        raise CliError("--min-jaccard with --hamming: --hamming answers by Hamming distance <= k alone (set by -k), "
                       "which has no Jaccard to compare with --min-jaccard: give one of them")
    if index is not None and index.verifier is None:
        name = args.collection
        raise CliError(
            f"--min-jaccard needs a verified collection, and '{name}' is Hamming-only (near-duplicate = "
            f"Hamming distance <= k, set by -k; it keeps no sketches): leave out --min-jaccard, or make it verified with "
            f"'simdb convert -c {name}' (from the texts it keeps: added with --store-text), else "
            f"'simdb drop -c {name} --yes' and add the texts again without --rule hamming"
        )
    error = _below_reach(args, index)
    if error is not None:
        raise error


def _rule_refused(engine, name: str, rule: str) -> CliError | None:
    """``add --rule R`` into an existing collection of the other rule (the API says 'open it with
    verify=None'): the error in the CLI's words, or None when the collection's rule is R (another
    configuration error, reported as it is)."""
    with in_transaction(engine) as conn:
        row = find_collection(conn, name)
    if row is None or not isinstance(row[1], dict):
        return None
    verified = row[1].get(VERIFY_KEY) is not None
    if rule == "hamming" and verified:
        return CliError(
            f"--rule hamming: collection '{name}' is a verified collection (near-duplicate = Jaccard of shingles), "
            f"and --rule only sets the rule of a new collection: add without --rule (for answers by distance "
            f"alone: 'simdb query --hamming'), add to a new collection, or remove this one first: "
            f"'simdb drop -c {name} --yes'"
        )
    if rule == "verified" and not verified:
        return CliError(
            f"--rule verified: collection '{name}' is Hamming-only (near-duplicate = Hamming distance <= k), and "
            f"--rule only sets the rule of a new collection: add without --rule, make it verified with "
            f"'simdb convert -c {name}' (from the texts it keeps: added with --store-text), or add to a new collection"
        )
    return None


#: the commands that create or upgrade simdb's tables when missing or old in a configured database;
#: every other command (query, dups, check, stats, collections, report, drop, ...) only reads what is
#: there, so it never migrates one (a schema migrated through a host application's Alembic history
#: stays as is). The embedded server's database is simdb's own: every command migrates it on first
#: use (a fresh home's first 'simdb collections' answered "run 'simdb migrate'", though the docs say
#: the embedded server needs no setup)
MIGRATING_COMMANDS = frozenset({"add", "migrate", "url"})


class Session:
    """The database, engine and index that one command uses; released on exit."""

    def __init__(self, args) -> None:
        self.args = args
        self._url: str | None = None
        self._embedded = False
        self._engine: Engine | None = None
        self._index: SimhashIndex | None = None

    @property
    def resolved_url(self) -> str | None:
        """The URL if it has been resolved already (never starts the embedded server)."""
        return self._url

    @property
    def url(self) -> str:
        if self._url is None:
            configured = self.configured_url()
            self._url = configured if configured is not None else self._start_embedded()
            self._embedded = configured is None
        return self._url

    def _start_embedded(self) -> str:
        try:
            return embedded_url(migrate=True)  # simdb's own database: see MIGRATING_COMMANDS
        except Exception as exc:
            if isinstance(exc, InputError) or database_error(exc, None) is not None:
                raise  # a bad setting (exit 2), or e.g. the first-use migration failed (a database error, 3)
            detail = first_line(exc)
            try:
                where = str(data_dir())
            except Exception:
                where = "$SIMDB_HOME"
            raise CliError(f"cannot start the embedded PostgreSQL in {where}: {detail}", EXIT_DATABASE) from None

    @property
    def embedded(self) -> bool:
        _ = self.url
        return self._embedded

    def configured_url(self) -> str | None:
        """``--database-url``, else ``$SIMDB_DATABASE_URL``; None: the embedded default (not started)."""
        raw = self.args.database_url
        if raw is None:
            raw = os.environ.get(ENV_URL) or None
        if raw is None:
            return None
        try:
            url = normalize_url(raw)
            make_url(url)
            return url
        except (ValueError, sa_exc.ArgumentError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else repr(raw)
            raise CliError(f"invalid database URL: {detail}") from exc

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            url = self.url
            try:
                self._engine = create_engine(url, connect_args={"connect_timeout": 10, "client_encoding": CLIENT_ENCODING})
            except sa_exc.ArgumentError as exc:  # NoSuchModuleError (an unknown driver) included
                raise CliError(f"invalid database URL: {exc}") from exc
        return self._engine

    def require_collection(self) -> None:
        """Fail with one line if the collection does not exist (read-only commands never create one)."""
        with in_transaction(self.engine) as conn:
            found = collection_exists(conn, self.args.collection)
        if not found:
            raise CliError(f"no collection '{self.args.collection}' (see 'simdb collections'; "
                           f"'simdb add -c {self.args.collection} ...' creates it)")

    @property
    def index(self) -> SimhashIndex:
        if self._index is None:
            kwargs: dict = {}
            rule = getattr(self.args, "rule", None) if self.args.command == "add" else None
            if rule is not None:  # the rule of the collection add creates; an existing one must have it
                kwargs = {"verify": rule == "verified"}
            if getattr(self.args, "store_text", False) and self.args.command == "add":  # keep texts from now on
                kwargs["store_texts"] = True
            refuse_rule_options(self.args)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", UserWarning)
                try:
                    self._index = SimhashIndex(self.engine, collection=self.args.collection,
                                               migrate=self.args.command in MIGRATING_COMMANDS,
                                               max_text_bytes=self.args.max_text_bytes, **kwargs)
                except CollectionConfigError:
                    error = _rule_refused(self.engine, self.args.collection, rule) if rule is not None else None
                    if error is None:
                        raise
                    raise error from None
            for w in caught:  # e.g. a converted legacy collection: Hamming answers until simdb convert
                if issubclass(w.category, UserWarning):
                    print(f"simdb: note: {w.message}", file=sys.stderr)
            refuse_rule_options(self.args, self._index)
        return self._index

    def close(self) -> None:
        if self._index is not None:
            with contextlib.suppress(Exception):
                self._index.close()
        if self._engine is not None:
            self._engine.dispose()


def _where(session: Session | None) -> str:
    """' (embedded server)' or ' postgresql://user@host/db' (no password), once the URL is known."""
    if session is None or session.resolved_url is None:
        return ""
    if session._embedded:
        return " (embedded server)"
    return " " + libpq_url(display_url(session.resolved_url))


def database_error(exc: BaseException, session: Session | None) -> CliError | None:
    """Translate a database exception (SQLAlchemy's, psycopg's or simdb's own) into one clear line,
    or None if it is not one."""
    # simdb's own, already one clear message; a collection dropped meanwhile, or converted again and again,
    # is no bug of ours
    if isinstance(exc, (DatabaseError, CollectionChangedError)):
        return CliError(first_line(exc), EXIT_DATABASE)
    where, detail = _where(session), first_line(exc)
    orig = getattr(exc, "orig", None)
    sqlstate = getattr(orig if orig is not None else exc, "sqlstate", None) or ""
    if sqlstate in ("42P01", "42883", "3F000"):  # undefined table / function / schema
        return CliError(f"the database{where} has no simdb tables (or an old schema): run 'simdb migrate' "
                        f"({detail})", EXIT_DATABASE)
    if sqlstate.startswith("22"):  # data exception: a bad value from the command line
        return CliError(detail, EXIT_USAGE)
    if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError, psycopg.OperationalError)) or (
        isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
    ):
        return CliError(f"cannot use the database{where}: {detail}", EXIT_DATABASE)
    if isinstance(exc, sa_exc.ArgumentError):
        return CliError(f"invalid database URL: {exc}", EXIT_USAGE)
    if isinstance(exc, (sa_exc.SQLAlchemyError, psycopg.Error)):
        return CliError(f"database error{where}: {detail}", EXIT_DATABASE)
    return None
