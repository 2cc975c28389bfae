"""The defaults of dataset dedup that both the library and the CLI's option table name.

A module with no imports because ``simdb --help`` builds every subcommand's options
(``--keep``'s choices, ``--batch-size``'s default) and must not import the dedup
machinery (SQLAlchemy, numpy) to do it (issue 29, item 3).
"""

from __future__ import annotations

__all__ = ["BATCH", "FORMATS", "KEEP", "MAX_BATCH"]

#: which record of a group of near-duplicates is kept
KEEP = ("first", "last", "longest")
#: records per batch: near_many is efficient from a few thousand queries, and a
#: smaller batch means fewer within-batch duplicates added then removed again
BATCH = 5_000
#: the largest batch_size taken (a batch is held in memory; beyond this, Python's islice() refuses)
MAX_BATCH = 2**31 - 1
#: the record formats read and written (simdb.dataset.records)
FORMATS = ("jsonl", "csv", "parquet")
