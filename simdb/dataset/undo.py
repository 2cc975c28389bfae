"""What an incremental dedup run changed in its collection, so that an unfinished run can be undone.

Why (issue 31): incremental dedup stores each batch's kept records in the collection
(the next batch must see them), and each batch commits. A run stopped half-way (Ctrl-C,
SIGTERM, an error in the input) left its kept rows behind, so the same command run
again found every one of those records "a near-duplicate" of its own row ("removed d0
kept d0") and dropped it from the new output: records were lost across the re-run.
An unfinished run is therefore all-or-nothing: :class:`RunJournal` notes, before each
batch is stored, which keys the batch adds and the rows it replaces (a key already
stored), and :meth:`RunJournal.undo` deletes the added keys and puts the replaced rows
back (fingerprint, metadata, verification sketch and band keys, as they were). The re-run then
starts from the collection as it was, and gives the output of one uninterrupted run.

The journal is a spill file (one JSON line per stored key; the replaced rows with it),
not memory: a run of millions of records keeps one batch in memory, as before. A
process killed outright (SIGKILL, power loss) cannot undo anything; its rows stay, as
``docs/dedup.md`` says.
"""

from __future__ import annotations

import base64
import json
import tempfile
from typing import Any

from simdb.core.bits import to_signed
from simdb.store import lookup as _lookup
from simdb.store import write as _write

__all__ = ["RunJournal", "UNDO_BATCH"]

#: keys deleted or rows restored per transaction while undoing
UNDO_BATCH = 5000


class RunJournal:
    """The keys an incremental run stored, and the rows it replaced (see the module doc)."""

    def __init__(self, index: Any, spill_dir: str | None = None):
        self.index = index
        self.stored = 0
        self._file = tempfile.TemporaryFile(mode="w+", encoding="utf-8", dir=spill_dir, prefix="simdb-dedup-undo-")

    def before_store(self, keys: list[str]) -> None:
        """Note ``keys`` (about to be stored), with the rows they will replace, before anything is written."""
        old = _lookup.rows_for_keys(self.index.connection(), self.index.collection_id, keys)
        for row in old.values():  # a kept text's compressed bytes travel through the JSON lines as base64
            row["text_z"] = None if row["text_z"] is None else base64.b64encode(row["text_z"]).decode("ascii")
        for key in keys:
            self._file.write(json.dumps({"k": key, "old": old.get(key)}, ensure_ascii=False) + "\n")
        self._file.flush()
        self.stored += len(keys)

    def undo(self) -> int:
        """Delete the keys this run stored and put back the rows it replaced; the number of keys undone.

        A key stored twice by the run (a later batch replacing an earlier one's row) is restored
        to its state before the run: only a key's first entry holds that."""
        self._file.seek(0)
        seen: set[str] = set()
        batch: list[dict] = []
        undone = 0
        for line in self._file:
            entry = json.loads(line)
            if entry["k"] in seen:
                continue
            seen.add(entry["k"])
            batch.append(entry)
            if len(batch) >= UNDO_BATCH:
                undone += self._undo_batch(batch)
                batch = []
        return undone + (self._undo_batch(batch) if batch else 0)

    def _undo_batch(self, entries: list[dict]) -> int:
        cid = self.index.collection_id
        with self.index.transaction() as conn:
            for entry in entries:
                row = entry["old"]
                if row is None:
                    _write.delete_row(conn, cid, entry["k"])
                else:
                    fp = None if row["fp"] is None else to_signed(row["fp"])
                    meta = None if row["meta"] is None else json.dumps(row["meta"], ensure_ascii=False)
                    bands = row.get("bands")
                    bands = None if bands is None else "{" + ",".join(map(str, bands)) + "}"
                    text_z = None if row.get("text_z") is None else base64.b64decode(row["text_z"])
                    _write.upsert_row(conn, cid, entry["k"], fp, meta, row["shingles"], bands, text_z,
                                      version=self.index.config_version)
        return len(entries)

    def close(self) -> None:
        self._file.close()
