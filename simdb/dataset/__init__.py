"""Deduplicating datasets (``simdb dedup``, :func:`simdb.dedup_records`): reading and writing
records (JSONL, CSV, Parquet), the greedy rule that decides them, the order they are decided in,
and the undo of an interrupted incremental run. The package itself imports nothing, so
``simdb --help`` can read its defaults."""
