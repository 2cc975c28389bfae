"""The commands that manage collections and the database: ``stats``, ``collections``, ``drop``,
``convert``, ``migrate``, ``url``, ``psql``, ``server`` and ``report`` (and the retired ``stop``).

Their SQL lives in the store (:mod:`simdb.store.collections`, :mod:`simdb.store.migrate`);
these functions only choose what to run and how to print it.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import signal
import subprocess
from pathlib import Path

from simdb.cli import warm_home
from simdb.cli.output import counted, err, human_bytes, out, print_json, table
from simdb.cli.results import criterion, k_of
from simdb.cli.session import Session
from simdb.cli.status import EXIT_FOUND, EXIT_OK, EXIT_USAGE, CliError
from simdb.database import display_url
from simdb.embedded import data_dir, keep_running, libpq_url, psql_command, server_status, stop_server
from simdb.report import write_report
from simdb.store.collections import CollectionStats, collection_stats, drop_named_collection, list_collections
from simdb.store.connect import in_transaction
from simdb.store.convert import is_current
from simdb.store.migrate import migrate, schema_revision

__all__ = [
    "cmd_stats", "cmd_collections", "cmd_drop", "cmd_convert", "cmd_migrate", "cmd_url", "cmd_psql", "cmd_stop",
    "cmd_server", "cmd_report",
]


def _stats_dict(args, session: Session, s: CollectionStats) -> dict:
    return {
        "collection": args.collection,
        "texts": s.texts,
        "texts_without_features": s.texts_without_features,
        "created_at": s.created_at.isoformat() if s.created_at else None,
        "last_added_at": s.last_added_at.isoformat() if s.last_added_at else None,
        "config": s.config,
        "database": "embedded" if session.embedded else display_url(session.url),
        "server_version": s.server_version,
        "fingerprint_table_bytes": s.table_bytes,
        "fingerprint_index_bytes": s.index_bytes,
    }


def _print_stats(stats: dict) -> None:
    config = stats["config"]
    out(f"collection        {stats['collection']}")
    out(f"texts             {stats['texts']:,}")
    out(f"without features  {stats['texts_without_features']:,}  (empty texts: stored, never matched)")
    out(f"created           {stats['created_at']}")
    out(f"last added        {stats['last_added_at'] or '-'}")
    out(f"database          {stats['database']} (PostgreSQL {stats['server_version']})")
    out(f"storage           table {human_bytes(stats['fingerprint_table_bytes'])}, "
        f"indexes {human_bytes(stats['fingerprint_index_bytes'])} (all collections)")
    if isinstance(config, dict) and "fingerprinter" in config:
        out(f"fingerprinter     {json.dumps(config['fingerprinter'], sort_keys=True, default=str)}")
        rest = {k: v for k, v in config.items() if k != "fingerprinter"}
        if rest:
            out(f"store options     {json.dumps(rest, sort_keys=True, default=str)}")
    else:
        out(f"config            {json.dumps(config, sort_keys=True, default=str)}")


def cmd_stats(args, session: Session) -> int:
    with in_transaction(session.engine) as conn:
        found = collection_stats(conn, args.collection)
    if found is None:
        raise CliError(f"no collection '{args.collection}' (see 'simdb collections')")
    stats = _stats_dict(args, session, found)
    if args.json:
        print_json(stats)
    else:
        _print_stats(stats)
    return EXIT_OK


def cmd_collections(args, session: Session) -> int:
    with in_transaction(session.engine) as conn:
        rows = list_collections(conn)
    if args.json:
        print_json([{"name": r.name, "texts": r.texts, "created_at": r.created_at.isoformat() if r.created_at else None}
                    for r in rows])
        return EXIT_OK
    if not rows:
        if not args.quiet:
            out("no collections yet (simdb add creates one)")
        return EXIT_OK
    out(table(["collection", "texts", "created"], [[r.name, f"{r.texts:,}", f"{r.created_at:%Y-%m-%d %H:%M}"]
                                                   for r in rows], right=(1,)))
    return EXIT_OK


def cmd_drop(args, session: Session) -> int:
    if not args.yes:
        raise CliError(f"'simdb drop' deletes collection '{args.collection}' and all its fingerprints: add --yes")
    with in_transaction(session.engine) as conn:
        deleted = drop_named_collection(conn, args.collection)
    if args.json:
        print_json({"collection": args.collection, "dropped": deleted})
    elif not args.quiet:
        out(f"dropped collection '{args.collection}'" if deleted else f"no collection '{args.collection}'")
    return EXIT_OK


def cmd_convert(args, session: Session) -> int:
    session.require_collection()
    index = session.index
    if is_current(index.verifier):
        if not args.quiet:
            out(f"collection '{args.collection}' is already a verified collection of the current scheme")
        return EXIT_OK
    n = index.convert_to_verified()
    verifier = index.verifier
    assert verifier is not None  # convert_to_verified sets it
    if args.json:
        print_json({"collection": args.collection, "converted": n})
    elif not args.quiet:
        out(f"converted {n:,} rows of collection '{args.collection}' to a verified collection "
            f"(near-duplicate = Jaccard of character 4-grams >= {verifier.min_jaccard:g})")
    return EXIT_OK


def cmd_migrate(args, session: Session) -> int:
    url = session.url  # the embedded default is migrated when it is resolved
    if not session.embedded:
        migrate(url)
    with in_transaction(session.engine) as conn:
        revision, _table = schema_revision(lambda sql: conn.execute(sql).fetchall())
    where = "the embedded database" if session.embedded else display_url(url)
    if args.json:
        print_json({"database": where, "revision": revision})
    elif not args.quiet:
        out(f"{where} is at simdb schema revision {revision} (head)")
    return EXIT_OK


def cmd_url(args, session: Session) -> int:
    url = session.url
    if session.embedded:
        keep_running()
    plain = libpq_url(url)
    cmd = psql_command(url)
    shown = " ".join(shlex.quote(c) for c in cmd)
    if args.json:
        print_json({"url": plain, "sqlalchemy_url": url, "embedded": session.embedded, "psql": cmd})
        return EXIT_OK
    out(plain)
    if not args.quiet:
        err(f"psql:  {shown}")
        if session.embedded:
            err("the embedded server stays running for other clients; 'simdb server stop' stops it")
    return EXIT_OK


def cmd_psql(args, session: Session) -> int:
    cmd = psql_command(session.url) + [a for sql in (args.sql or []) for a in ("-c", sql)]
    cmd += list(args.psql_args or [])
    # Ctrl-C belongs to psql (it cancels the running query); simdb keeps the server up meanwhile.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.call(cmd, preexec_fn=_default_sigint)
    except FileNotFoundError:
        raise CliError(f"psql not found ({cmd[0]})") from None
    finally:
        signal.signal(signal.SIGINT, previous)


def _default_sigint():  # in the psql child: Ctrl-C handled as psql itself wants
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _embedded_only(session: Session, what: str) -> None:
    if session.configured_url() is not None:
        raise CliError(f"'simdb {what}' is about the embedded server; a --database-url / SIMDB_DATABASE_URL "
                       "server is not managed by simdb")


def cmd_server(args, session: Session) -> int:
    if args.action == "stop":
        return _stop_server(args, session)
    _embedded_only(session, "server status")
    info = server_status()
    info["warm"] = warm_home.warm_pid(Path(info["home"]))  # the warm command process (simdb.cli.warm)
    if args.json:
        print_json(info)
    elif not args.quiet:
        if info["running"]:
            clients = ", ".join(map(str, info["clients"])) or "none (stops after the idle time)"
            keep = "; kept running for other clients ('simdb url')" if info["keep_running"] else ""
            warm = f"; warm command process: pid {info['warm']}" if info["warm"] else ""
            out(f"embedded server running in {info['home']} (pid {info['pid']}); clients: {clients}; "
                f"idle time {info['idle_seconds']:g} s{keep}{warm}")
        else:
            out(f"embedded server is not running ({info['home']})")
    return EXIT_OK


def cmd_stop(args, session: Session) -> int:
    """``simdb stop``, retired (it was ``simdb server stop`` under a second name): a usage error (exit 2)
    naming ``simdb server stop``, and nothing stopped."""
    raise CliError("'simdb stop' was removed: use 'simdb server stop' (the same: it stops the embedded server)",
                   EXIT_USAGE)


def _stop_server(args, session: Session) -> int:
    _embedded_only(session, "server stop")
    state = stop_server()
    warm_home.stop(data_dir())  # the warm command process goes with the server (simdb.cli.warm)
    if args.json:
        print_json({"embedded_server": state})
    elif not args.quiet:
        messages = {
            "stopped": "embedded server stopped",
            "not running": "embedded server is not running",
            "in use": "embedded server is in use by another process; it stops once no process uses it and the "
                      "idle time has passed",
        }
        out(messages[state])
    # refused: a script's 'simdb server stop && rm -rf "$SIMDB_HOME"' must not go on as if it had stopped
    return EXIT_FOUND if state == "in use" else EXIT_OK


def cmd_report(args, session: Session) -> int:
    if args.path is None and args.output is None:
        raise CliError("simdb report needs the output file: simdb report -c NAME FILE.html (or --output FILE.html)")
    if args.path is not None and args.output is not None:
        raise CliError("give the output file once: simdb report FILE.html or simdb report --output FILE.html, not both")
    path = Path(args.output or args.path)
    if path.parent and not path.parent.exists():
        raise CliError(f"no such directory: {path.parent}")
    session.require_collection()
    if args.texts_from is not None and not Path(args.texts_from).is_dir():
        raise CliError(f"--texts-from: not a directory: {args.texts_from}")
    result = write_report(session.index, path, k=k_of(args), texts_from=args.texts_from, min_jaccard=args.min_jaccard)
    if args.json:
        print_json(dataclasses.asdict(result))
    elif not args.quiet:
        out(f"wrote {path}: {counted(result.clusters, 'cluster')}, {counted(result.texts_in_clusters, 'text')} "
            f"({criterion(args, session.index)})")
    return EXIT_OK
