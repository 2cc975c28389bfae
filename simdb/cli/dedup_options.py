"""The options of ``simdb dedup``: the subcommand's parser, apart from what it runs.

Why a module of its own: ``simdb --help`` builds every subcommand's parser, and
:mod:`simdb.cli.dedup` (the command) imports the dedup machinery (SQLAlchemy,
numpy); the parser needs only names and defaults (issue 29, item 3).
"""

from __future__ import annotations

import argparse

from simdb.cli.dispatch import command
from simdb.cli.status import jaccard_value, positive_int
from simdb.dataset.defaults import BATCH, FORMATS, KEEP

__all__ = ["register"]

cmd_dedup = command("dedup", "cmd_dedup")


class _CollectionGiven(argparse.Action):
    """``-c NAME`` after ``dedup``: dedup incrementally against NAME (remembered as given)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.collection = values
        namespace.collection_given = True


def register(sub, common: list) -> None:
    """Add the ``dedup`` subcommand to the CLI's subparsers (``common``: parents with the shared options,
    not shared with other subcommands: ``-c`` is redefined here with conflict_handler="resolve")."""
    p = sub.add_parser(
        "dedup", parents=common, conflict_handler="resolve",
        help="write a dataset without its near-duplicates (JSONL, CSV, Parquet)",
        description="Read records (JSONL, CSV or Parquet; '-' for stdin), keep one per group of near-duplicates "
        "and write the kept records unchanged to --output, in input order. A record is removed when it is a "
        "near-duplicate of a record kept before it (in --keep order), with the collection's definition of "
        "near-duplicate (-k, --min-jaccard as for the other commands). Without -c the work happens in a "
        "temporary collection, dropped at the end; with -c NAME the records are also checked against NAME "
        "and the kept ones are added to it (incremental dedup). See docs/dedup.md.",
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
                   help="dedup against collection NAME and add the kept records to it (default: a temporary "
                   "collection)")
    p.add_argument("--store-text", action="store_true",
                   help="with -c NAME: make NAME keep its texts (as 'simdb add --store-text'; a collection that "
                   "keeps texts keeps the kept records' texts without this flag too)")
    p.add_argument("--format", choices=["auto", *FORMATS], default="auto",
                   help="input format (default: by extension; stdin: jsonl)")
    p.add_argument("--output-format", choices=["auto", *FORMATS], default="auto",
                   help="output format (default: by the output's extension, else the input's)")
    p.add_argument("--text-field", default="text", metavar="FIELD", help="field holding the text (default: text)")
    p.add_argument("--key-field", default=None, metavar="FIELD",
                   help="field holding the key (default: 'id' if present, else FILE:LINE)")
    p.add_argument("--encoding", default="utf-8", help="encoding of JSONL/CSV input (default: utf-8)")
    p.add_argument("--root", default=None, metavar="DIR",
                   help="FILE in FILE:LINE keys is relative to DIR (default: the current directory)")
    p.add_argument("--batch-size", type=positive_int, default=BATCH, metavar="N",
                   help=f"records per lookup batch (default: {BATCH})")
    p.add_argument("--spill-dir", default=None, metavar="DIR",
                   help="directory for --keep last/longest's spill file (default: the system's temp dir)")
    p.add_argument("--jaccard", action="store_true",
                   help="removed (the legacy MinHash collections): an error naming the conversion")
    p.add_argument("--min-jaccard", type=jaccard_value, default=None, metavar="J",
                   help="near-duplicates by Jaccard similarity of the collection's shingles (character 4-grams by "
                   "default) >= J (default: the collection's, 0.8), as for the other commands")
    p.set_defaults(func=cmd_dedup, collection_given=False)
