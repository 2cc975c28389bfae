"""The defaults of dataset dedup that both the library and the CLI's option table name.

A module with no imports because ``simdb --help`` builds every subcommand's options
(``--keep``'s choices, ``--batch-size``'s default) and must not import the dedup
machinery (SQLAlchemy, numpy) to do it (issue 29, item 3).
"""

from __future__ import annotations

__all__ = ["BATCH", "BATCH_CHARS", "FORMATS", "KEEP", "MAX_BATCH"]

#: which record of a group of near-duplicates is kept
KEEP = ("first", "last", "longest")
#: records per batch: near_many is efficient from a few thousand queries, and a
#: smaller batch means fewer within-batch duplicates added then removed again
BATCH = 5_000
#: a batch also ends once its texts hold this many characters (a record above that is a batch by
#: itself). Why: 800 records of 2 MiB were one batch of 1.6 GB, held twice (a batch is read ahead
#: while the last one is decided): ``simdb dedup`` of a 1.65 MB ``.jsonl.gz`` peaked at 6.6 GB
BATCH_CHARS = 16 << 20
#: the largest batch_size taken (a batch is held in memory; beyond this, Python's islice() refuses)
MAX_BATCH = 2**31 - 1
#: the record formats read and written (simdb.dataset.records)
FORMATS = ("jsonl", "csv", "parquet")
