"""The command line of ``simdb``: every subcommand, its options and their value types.

Options shared by all commands are accepted before and after the subcommand
(``simdb --json query x`` and ``simdb query x --json``); abbreviations are refused
so that ``--k 99`` can never be read as ``--key 99``. Values are checked here with
the library's own checks, so the CLI accepts exactly what :class:`SimhashIndex` does.
"""

from __future__ import annotations

import argparse
import sys

from simdb import __version__
from simdb.cli.dispatch import lazy_module
from simdb.cli.status import EXIT_USAGE, MAX_K, PROG, CliError
from simdb.dataset.defaults import BATCH, FORMATS, KEEP
from simdb.errors import InputError

#: each command's module: its ``cmd_<command>(args, session) -> exit status`` runs the command, imported
#: only then (simdb.cli.dispatch: `simdb --help` stays light)
COMMANDS = {name: lazy_module(f"simdb.cli.{module}") for name, module in {
    "add": "commands_add",
    **dict.fromkeys(("query", "dups", "check"), "commands_search"),
    **dict.fromkeys(("collections", "convert", "drop", "migrate", "psql", "report", "server", "stats", "stop",
                     "url"), "commands_admin"),
    "dedup": "dedup",  # the dedup machinery (SQLAlchemy, numpy); its options need only names and defaults
}.items()}
#: the API's own checks of k, a collection name and a Jaccard threshold (they import numpy)
_validate = lazy_module("simdb.core.validate")
_sketch = lazy_module("simdb.core.sketch")
#: the largest count an option takes (--batch-size, --limit, --workers, --max-text-bytes): far above any
#: useful value, and below what Python's islice() and PostgreSQL's integers accept, so a huge number is
#: refused here with the option's name rather than deep inside with their messages
MAX_COUNT = 2**31 - 1

__all__ = ["COMMANDS", "Parser", "build_parser", "k_value", "positive_int", "jaccard_value", "common_options"]


def positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 to :data:`MAX_COUNT` (argparse names the option)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    if n > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT:,}, got {n}")
    return n


def jaccard_value(text: str) -> float:
    """An argparse type for ``--min-jaccard`` (``query``, ``dups``, ``check``, ``add``, ``report``, ``dedup``).

    Why the API's own check (:func:`simdb.core.sketch.check_min_jaccard`): the option accepts exactly
    the thresholds the library does, (0, 1], so a refused value is refused here, with the option's
    name (argparse adds ``argument --min-jaccard:``), and never later in the library's words."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0 and <= 1, got {text!r}") from None
    try:
        return _sketch.check_min_jaccard(x)
    except ValueError:  # the library's InvalidArgumentError
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 1, got {text}") from None


class Parser(argparse.ArgumentParser):
    """One-line errors; no prefix matching (``--k 99`` must not be read as ``--key 99``)."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, not usage + message
        raise CliError(f"{message} (see '{self.prog} --help')", EXIT_USAGE)


def k_value(text: str) -> int:
    """-k: the API's own check decides (the CLI accepts exactly what SimhashIndex does, 0..11); the
    message is the CLI's, as the API's names its keyword arguments (``min_jaccard=...``)."""
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid k {text!r}: must be an integer from 0 to {MAX_K}") from None
    try:
        return _validate.check_k(k)
    except InputError:
        more = (f" (the block indexes answer Hamming distances up to {MAX_K} exactly; for looser "
                "near-duplicates ask by Jaccard similarity: --min-jaccard J)") if k > MAX_K else ""
        raise argparse.ArgumentTypeError(f"invalid k {k}: must be an integer from 0 to {MAX_K}{more}") from None


class _Collection(argparse.Action):
    """-c NAME: the API's own check of a name given (a blank one is refused before any database is
    touched; the default needs none, so a command that names no collection runs no check)."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            setattr(namespace, self.dest, _validate.check_collection(values))
        except InputError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None


def _add_rule_options(p: argparse.ArgumentParser, hamming: bool = True) -> None:
    """``--min-jaccard`` and (with ``hamming``) ``--hamming``: a search by another rule than the collection's."""
    p.add_argument("--min-jaccard", type=jaccard_value, default=None, metavar="J",
                   help="verified collections: near-duplicates by Jaccard similarity of the collection's "
                   "shingles (character 4-grams by default) >= J (default: the collection's, 0.8)")
    if hamming:
        p.add_argument("--hamming", action="store_true",
                       help="answer by SimHash Hamming distance <= k alone, not by the collection's rule (a "
                       "verified collection's answer is Jaccard-verified by default)")


#: ``add --rule``: the rule of a collection ``add`` creates
RULES = ("verified", "hamming")
#: ``dups --output-format``
OUTPUT_FORMATS = ("table", "json", "csv")


class _DeprecatedFormat(argparse.Action):
    """``dups --format``, simdb 0.1's spelling of ``--output-format``: still read, with a warning on stderr.

    Why renamed: ``--format`` is the *input* format of ``add``, ``check`` and ``dedup`` (``dedup``'s
    output has ``--output-format``), so one option name had two meanings."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{PROG}: warning: dups --format is deprecated: use --output-format {values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_record_fields(p: argparse.ArgumentParser) -> None:
    """How records are keyed and read, the same for ``add``, ``check`` and ``dedup``."""
    p.add_argument("--key-field", default=None, metavar="FIELD",
                   help="the records' field holding the key (default: 'id' if present, else FILE:LINE)")
    p.add_argument("--text-field", default="text", metavar="FIELD",
                   help="the records' field holding the text (default: %(default)s)")
    p.add_argument("--encoding", default="utf-8", help="encoding of text, JSONL and CSV files (default: %(default)s)")
    p.add_argument("--root", default=None, metavar="DIR",
                   help="file paths in keys (a text file's key, FILE in FILE:LINE) are relative to DIR (default: the "
                   "current directory; a file outside DIR: its absolute path; see docs/dedup.md, 'File keys')")


def _add_file_options(p: argparse.ArgumentParser) -> None:
    """Which files ``add`` and ``check`` read, and how: .jsonl/.ndjson and .csv as records."""
    p.add_argument("--glob", default="*", metavar="PATTERN",
                   help="file name pattern inside directories (default: all files; e.g. '*.txt')")
    p.add_argument("--format", choices=["auto", "text", "jsonl", "csv"], default="auto",
                   help="how to read files (default: by extension: .jsonl/.ndjson and .csv as records, "
                   "also .gz-compressed; anything else, .json included, as one text)")
    _add_record_fields(p)


class _CollectionGiven(argparse.Action):
    """``-c NAME`` after ``dedup``: dedup incrementally against NAME (remembered as given)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.collection = values
        namespace.collection_given = True


def _add_dedup(sub, common: list) -> None:
    """Add the ``dedup`` subcommand to the CLI's subparsers (``common``: parents with the shared options,
    not shared with other subcommands: ``-c`` is redefined here with conflict_handler="resolve")."""
    p = sub.add_parser(
        "dedup", parents=common, conflict_handler="resolve",
        help="write a dataset without its near-duplicates (JSONL, CSV, Parquet)",
        description="Read records (JSONL, CSV or Parquet; '-' for stdin), keep one per group of near-duplicates "
        "and write the kept records unchanged to --output, in input order. A record is removed when it is a "
        "near-duplicate of a record kept before it (in --keep order), with the collection's definition of "
        "near-duplicate (-k, --min-jaccard as for the other commands). Without -c the records are decided in "
        "memory (the database is not opened); with -c NAME they are also checked against NAME and the kept ones "
        "are added to it (incremental dedup); with --against NAME they are checked against NAME, which is only "
        "read. See docs/dedup.md.",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL, CSV or Parquet file ('-': stdin)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file ('-': stdout)")
    p.add_argument("--removed", metavar="FILE",
                   help="also write the removal log: JSONL of {removed, kept, jaccard, distance, "
                   "where} ('-': stdout)")
    p.add_argument("--keep", choices=KEEP, default="first",
                   help="which record of a group to keep: the first (default; one pass), the last, or the "
                   "longest text (two passes over a temporary spill file)")
    p.add_argument("-c", "--collection", action=_CollectionGiven, metavar="NAME", default=argparse.SUPPRESS,
                   help="dedup against collection NAME and add the kept records to it (default: in memory, "
                   "nothing stored)")
    p.add_argument("--stats", metavar="FILE", default=None,
                   help="also write the run's summary as JSON to FILE (records, kept, removed, seconds, MB/s)")
    p.add_argument("--against", metavar="NAME", default=None,
                   help="dedup against collection NAME, read only: a record near one of NAME's is removed (the "
                   "log names NAME's key); nothing is stored")
    p.add_argument("--store-text", action="store_true",
                   help="with -c NAME: make NAME keep its texts (as 'simdb add --store-text'; a collection that "
                   "keeps texts keeps the kept records' texts without this flag too)")
    p.add_argument("--format", choices=["auto", *FORMATS], default="auto",
                   help="input format (default: by extension; stdin: jsonl)")
    p.add_argument("--output-format", choices=["auto", *FORMATS], default="auto",
                   help="output format (default: by the output's extension, else the input's)")
    _add_record_fields(p)
    p.add_argument("--batch-size", type=positive_int, default=BATCH, metavar="N",
                   help=f"records per lookup batch (default: {BATCH})")
    p.add_argument("--spill-dir", default=None, metavar="DIR",
                   help="directory for --keep last/longest's spill file (default: the system's temp dir)")
    _add_rule_options(p, hamming=False)
    p.set_defaults(collection_given=False)


def common_options(suppress: bool) -> Parser:
    """Options accepted both before and after the subcommand."""

    def d(value):
        return argparse.SUPPRESS if suppress else value

    p = Parser(add_help=False)  # allow_abbrev=False, as every parser here
    g = p.add_argument_group("common options")
    g.add_argument("--database-url", metavar="URL", default=d(None),
                   help="PostgreSQL URL (default: $SIMDB_DATABASE_URL, else the embedded server)")
    g.add_argument("-c", "--collection", action=_Collection, metavar="NAME", default=d("default"),
                   help="collection to work on (default: %(default)s)" if not suppress else "collection to work on")
    g.add_argument("-k", type=k_value, metavar="K", default=d(None),
                   help="Hamming radius (default: 3; 0..11, exact): the rule of a Hamming-only collection and "
                   "of --hamming answers; in a verified collection, that of rows stored by fingerprint")
    g.add_argument("--json", action="store_true", default=d(False), help="machine-readable JSON output")
    g.add_argument("-q", "--quiet", action="store_true", default=d(False), help="no progress or summary lines")
    g.add_argument("--progress", action="store_true", default=d(False),
                   help="show the progress line even when stderr is not a terminal")
    g.add_argument("--max-text-bytes", type=positive_int, metavar="N", default=d(None),
                   help="largest text (or query) to read, in UTF-8 bytes (default: $SIMDB_MAX_TEXT_BYTES, "
                   "else 10 MiB); larger ones are an error")
    g.add_argument("--debug", action="store_true", default=d(False), help="show tracebacks and debug logging")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Near-duplicate text detection in PostgreSQL. By default two texts are near-duplicates "
        "when the Jaccard similarity of their character 4-grams (case-folded, punctuation and spaces dropped) "
        "is >= 0.8; "
        "answers show it with the SimHash Hamming distance. 'simdb add --rule hamming' makes a collection whose rule "
        "is the Hamming distance alone (<= k). See docs/near-duplicates.md.",
        epilog="Exit status: 0 ok, 1 check found a near-duplicate, 2 bad usage or input, "
        "3 database error, 4 internal error, 130 interrupted.",
        parents=[common_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"simdb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    common = [common_options(suppress=True)]

    p = sub.add_parser("add", parents=common, help="add text files, directories, JSONL or CSV records",
                       description="Add texts. Directories are searched recursively (--glob); .jsonl/.ndjson and "
                       ".csv files hold one record per line/row (--key-field, --text-field); any other file is one "
                       "text whose key is its path; a .gz file is decompressed (notes.txt.gz, rows.jsonl.gz). "
                       "Re-adding a key replaces it.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="file or directory")
    _add_file_options(p)
    p.add_argument("--store-text", action="store_true",
                   help="make the collection keep its texts (compressed; recorded in its config, so every later "
                   "add, dedup or API write keeps them too) so that 'simdb report' can show texts whose key names "
                   "no file (JSONL/CSV records)")
    p.add_argument("--unique", action="store_true",
                   help="keep only texts with no near-duplicate already stored (by the collection's rule, as "
                   "'simdb query'; a text's own key's row is none: re-adding a file replaces its row); atomic per text")
    p.add_argument("--skip-stored", action="store_true",
                   help="leave out a text file already stored under another key (the same file named from another "
                   "directory); without it such a file is added again under its new key, with a warning")
    p.add_argument("--batch-size", type=positive_int, default=50_000, metavar="N",
                   help="texts per transaction (default: %(default)s); an interrupted run keeps whole batches")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="processes that fingerprint while the database loads (default: the usable cores, "
                   "at most 8; 1 disables the pool)")
    p.add_argument("--rule", choices=RULES, default=None,
                   help="the rule of the collection it creates: 'verified' (the default: near-duplicate = Jaccard "
                   "of character 4-grams >= 0.8) or 'hamming' (a Hamming-only collection: near-duplicate = SimHash "
                   "distance <= k, default 3; no verification sketches). An existing collection keeps its rule: "
                   "one that disagrees is an error")
    _add_rule_options(p, hamming=False)

    p = sub.add_parser("query", parents=common, help="near-duplicates of a text",
                       description="Find stored near-duplicates of TEXT, of --file, of a stored --key, or of stdin.")
    p.add_argument("text", nargs="?", metavar="TEXT", help="the text ('-' or nothing: read stdin)")
    p.add_argument("--file", metavar="FILE", help="read the text from FILE")
    p.add_argument("--key", metavar="KEY", help="use the stored text KEY (itself excluded from the answer)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="at most N answers")
    p.add_argument("--encoding", default="utf-8", help="encoding of --file / stdin (default: %(default)s)")
    p.add_argument("--explain", action="store_true",
                   help="show the shared and the differing words of each match (needs texts stored with "
                   "'simdb add --store-text')")
    _add_rule_options(p)

    p = sub.add_parser("dups", parents=common, help="clusters (or pairs) of near-duplicates",
                       description="All clusters of near-duplicates in the collection (connected components of "
                       "the near-duplicate graph; the representative is the earliest added).")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, default=None,
                   help="output format (default: table; json with --json)")
    p.add_argument("--format", choices=OUTPUT_FORMATS, dest="output_format", action=_DeprecatedFormat,
                   help=argparse.SUPPRESS)
    p.add_argument("--pairs", action="store_true", help="list near-duplicate pairs instead of clusters, most similar first")
    _add_rule_options(p)

    p = sub.add_parser("check", parents=common, help="exit 1 if a file is a near-duplicate of a stored text",
                       description="Check files against the collection: exit status 1 if any is a near-duplicate "
                       "of a stored text (for pre-commit hooks and CI). The file itself is never counted: a stored "
                       "text whose key is the file's key (relative to --root), or whose recorded path or key "
                       "names the same file, from any directory. .jsonl/.ndjson and .csv files are read as records, "
                       "as 'simdb add' reads them, each checked apart (never against its own key).")
    p.add_argument("paths", nargs="+", metavar="FILE", help="file or directory")
    _add_file_options(p)
    _add_rule_options(p)

    sub.add_parser("convert", parents=common, help="convert a collection to the verified default",
                   description="Rewrite the collection as a verified collection (near-duplicate = Jaccard of "
                   "character 4-grams >= 0.8), or a verified collection of an older shingle scheme (token "
                   "3-grams) with the current one, from the texts the collection keeps (add --store-text; or meta.text, as older versions stored them). "
                   "Refused, changing nothing, when a row has no stored text: re-add the texts instead.")

    sub.add_parser("stats", parents=common, help="size and configuration of the collection")

    sub.add_parser("collections", parents=common, help="list collections")

    p = sub.add_parser("drop", parents=common, help="delete a collection and all its fingerprints")
    p.add_argument("--yes", action="store_true", help="really delete (required)")

    sub.add_parser("migrate", parents=common, help="create or upgrade simdb's tables (alembic upgrade head)")

    sub.add_parser("url", parents=common, help="print the database URL (and a psql command)",
                   description="Print the connection URL on stdout, e.g. psql \"$(simdb url)\". For the "
                   "embedded server this leaves it running for other clients until 'simdb server stop'.")

    # "resolve" rewrites the parent's -c action in place: give psql and dedup parents of their own
    p = sub.add_parser("psql", parents=[common_options(suppress=True)], conflict_handler="resolve",
                       help="open psql on the database",
                       description="Run psql connected to the database (the embedded server runs meanwhile). "
                       "As in psql, -c SQL runs SQL and exits (here -c is psql's --command, not the collection); "
                       "other arguments for psql go after '--', e.g. simdb psql -- -tA -c 'SELECT 1'.")
    p.add_argument("-c", "--command", dest="sql", action="append", metavar="SQL",
                   help="run SQL (as psql -c; repeatable) and exit with psql's status")
    p.add_argument("psql_args", nargs="*", metavar="ARG", help="arguments passed to psql (after --)")

    # retired (it was 'simdb server stop' twice): parsed, unlisted, so that it answers with the new spelling
    sub.add_parser("stop", parents=common, add_help=False)

    p = sub.add_parser("server", parents=common, help="see or stop the embedded server",
                       description="'status': whether the embedded server runs, its live clients, its reaper and "
                       "idle time (starts nothing). 'stop': stop it now unless a live process uses it. The server "
                       "stays up $SIMDB_EMBEDDED_IDLE seconds (default 60; 0: none) after its last client, so the "
                       "next command finds it warm (docs/getting-started.md).")
    p.add_argument("action", choices=["status", "stop"], help="status or stop")

    _add_dedup(sub, [common_options(suppress=True)])

    p = sub.add_parser("report", parents=common, help="write an HTML review report of the near-duplicate clusters",
                       description="Write a self-contained HTML report of the clusters that 'simdb dups' finds, "
                       "with word-level diffs. Texts are shown by default where simdb has them: the texts the "
                       "collection keeps (add --store-text), and the files 'simdb add' read, from the folders it "
                       "recorded then (nothing outside them is read); elsewhere the page says why a text is missing.")
    p.add_argument("path", nargs="?", metavar="PATH", help="output file (.html); or use --output")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (.html)")
    p.add_argument("--texts-from", metavar="DIR", default=None,
                   help="also show the text of a key that names a file inside DIR (for files added before simdb "
                   "recorded the folders they came from; keys are never read as paths otherwise)")
    _add_rule_options(p, hamming=False)
    return parser
