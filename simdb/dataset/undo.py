"""What an incremental dedup run changed in its collection, so that an unfinished run can be undone,
also one killed outright.

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

Killed outright (SIGKILL, the OOM killer): nothing runs in the dying process, so the journal is a
file that outlives it, in a private folder of the user (:func:`journal_dir`), named after the
collection (:func:`collection_identity`: database, id, name and creation time) and held under an
``flock`` for as long as its run lives. The next incremental dedup into the collection (the
re-run) first finds the journals whose lock it can take (their run is dead: the kernel drops the
lock however a process dies), undoes them and deletes them (:func:`undo_abandoned`). Each line
is flushed before its batch is stored, so a journal lists at least what its run stored (a torn
last line belongs to a batch that was never stored, and is skipped). A finished run deletes its
journal. Where the folder cannot be used safely (another user's, a link), the journal is an
unnamed temporary file as before, and a warning says that a killed run would not be undone.

A change of rule during the run (``simdb convert``, texts kept from now on, by another process): a
replaced row is put back only under the rule it was computed by. Each journal line names the
configuration version its rows were read under; a row of an older rule is re-encoded from its text
(the kept text, else ``meta.text``) under the collection's current rule; one whose rule differs only in
whether texts are kept is put back as it was (its features are the current rule's); one without any
text cannot be rebuilt, so the run's own row (of the current rule) stays for that key and the undo
says how many (:attr:`RunJournal.unrestored`). Every write of the undo locks the collection's row first
and carries the version it was computed by, so a conversion in progress is waited for, never written
past (:mod:`simdb.store.collection_guard`).

The journal is a file (one JSON line per stored key; the replaced rows with it), not memory: a run of
millions of records keeps one batch in memory, as before.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import IO, Any

from simdb.core.bits import to_signed
from simdb.core.kept_texts import FILE_ROOTS_KEY, TEXTS_KEY, decompress_text
from simdb.errors import CollectionChangedError
from simdb.store import collection_guard as _guard
from simdb.store import collections as _collections
from simdb.store import rows as _rows
from simdb.util.private_dirs import open_private_dir

__all__ = ["JOURNAL_DIR", "UNDO_BATCH", "RunJournal", "collection_identity", "journal_dir", "undo_abandoned"]

#: keys deleted or rows restored per transaction while undoing
UNDO_BATCH = 5000
#: the journals' folder inside simdb's data directory (:func:`journal_dir`)
JOURNAL_DIR = "dedup-journals"
#: tries of an undo batch refused because the collection's rule changed meanwhile
_RETRIES = 5
_SUFFIX = ".jsonl"


def journal_dir() -> Path:
    """Where journals live: ``<SIMDB_HOME>/dedup-journals`` (the embedded server's data directory:
    ``SIMDB_HOME``, else ``$XDG_DATA_HOME/simdb``, else ``~/.local/share/simdb``)."""
    home = os.environ.get("SIMDB_HOME", "").strip()
    if home:
        return Path(home).expanduser() / JOURNAL_DIR
    base = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.expanduser("~/.local/share")
    return Path(base) / "simdb" / JOURNAL_DIR


def collection_identity(index: Any) -> str:
    """A name for the collection that no other collection has (the same name on another server, or the
    collection dropped and created anew, included): a digest of the database's name, the collection's
    id, name and creation time."""
    row = _collections.identity(index.connection(), index.collection_id)
    if row is None:
        raise CollectionChangedError(f"collection {index.collection!r} was dropped after this index opened it")
    raw = "\0".join(str(x.isoformat() if hasattr(x, "isoformat") else x) for x in row)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _open_journal(dir_fd: int, name: str, *, create: bool) -> IO[str] | None:
    """A journal file of the folder ``dir_fd`` (a regular file of the user, no link followed), or None."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else 0)
    try:
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError:
        if create:
            raise
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        return None
    return open(fd, "r+", encoding="utf-8", newline="\n")


class RunJournal:
    """The keys an incremental run stored, and the rows it replaced (see the module doc)."""

    def __init__(self, index: Any, spill_dir: str | None = None, *, folder: Path | None = None):
        self.index = index
        self.stored = 0
        #: keys whose replaced row could not be put back (a change of rule, and no text to rebuild it from)
        self.unrestored = 0
        self.unrestored_keys: list[str] = []
        self._versions: set[str] = set()
        self._name: str | None = None
        self._dir_fd: int | None = None
        self.durable = False  # whether a killed run is undone by the next one (the journal is a named file)
        try:
            self._dir_fd = open_private_dir(folder or journal_dir(), create=True)
            self._name = f"{collection_identity(index)}-{os.getpid()}-{os.urandom(4).hex()}{_SUFFIX}"
            file = _open_journal(self._dir_fd, self._name, create=True)
            assert file is not None  # created, or OSError
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)
            self._file = file
            self.durable = True
        except OSError as exc:
            if self._dir_fd is not None:
                os.close(self._dir_fd)
            self._dir_fd, self._name = None, None
            warnings.warn(f"simdb dedup: no journal file can be kept ({exc}): a run killed outright (SIGKILL) "
                          "would leave its rows in the collection", RuntimeWarning, stacklevel=2)
            self._file = tempfile.TemporaryFile(mode="w+", encoding="utf-8", dir=spill_dir,
                                                prefix="simdb-dedup-undo-")
        self._write({"journal": 1, "collection": index.collection, "pid": os.getpid()})

    def _write(self, entry: dict) -> None:
        self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def before_store(self, keys: list[str]) -> None:
        """Note ``keys`` (about to be stored), with the rows they will replace, before anything is written."""
        version, config = self.index.config_version, self.index.config  # read first: the rows are of it or newer
        old = _rows.rows_for_keys(self.index.connection(), self.index.collection_id, keys)
        for row in old.values():  # a kept text's compressed bytes travel through the JSON lines as base64
            row["text_z"] = None if row["text_z"] is None else base64.b64encode(row["text_z"]).decode("ascii")
        if version not in self._versions:
            self._versions.add(version)
            self._write({"rule": version, "config": config})
        for key in keys:
            self._write({"k": key, "old": old.get(key), "v": version})
        self._file.flush()  # in the kernel's hands before the batch is stored: a SIGKILL loses nothing
        self.stored += len(keys)

    def undo(self) -> int:
        """Delete the keys this run stored and put back the rows it replaced; the number of keys undone.

        A key stored twice by the run (a later batch replacing an earlier one's row) is restored
        to its state before the run: only a key's first entry holds that."""
        self._file.seek(0)
        return _undo_lines(self.index, self._file, self)

    def close(self, *, keep: bool = False) -> None:
        """Close the journal: deleted (the run finished, or was undone) unless ``keep`` (an undo that
        failed: the next run undoes it)."""
        try:
            if self._name is not None and self._dir_fd is not None and not keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._name, dir_fd=self._dir_fd)
        finally:
            self._file.close()  # releases the lock
            if self._dir_fd is not None:
                os.close(self._dir_fd)
                self._dir_fd = None


def _rule_of(config: Any) -> Any:
    """What a row's features depend on: the config but whether texts are kept and the recorded folders."""
    return {k: v for k, v in config.items() if k not in (TEXTS_KEY, FILE_ROOTS_KEY)} if isinstance(config, dict) \
        else config


def _undo_lines(index: Any, lines: IO[str], counts: Any) -> int:
    """Undo the journal ``lines`` on ``index`` (a key's first entry: its state before the run);
    ``counts.unrestored`` / ``counts.unrestored_keys`` tell the rows that could not be put back."""
    seen: set[str] = set()
    configs: dict[str, Any] = {}
    batch: list[dict] = []
    undone = 0
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # a torn last line (killed while writing it): its batch was never stored
            break
        if "rule" in entry:
            configs[entry["rule"]] = entry.get("config")
            continue
        if "k" not in entry or entry["k"] in seen:
            continue
        seen.add(entry["k"])
        batch.append(entry)
        if len(batch) >= UNDO_BATCH:
            undone += _undo_batch(index, batch, configs, counts)
            batch = []
    return undone + (_undo_batch(index, batch, configs, counts) if batch else 0)


def _undo_batch(index: Any, entries: list[dict], configs: dict[str, Any], counts: Any) -> int:
    """One transaction: the collection's row locked first (the order every writer keeps, so that a
    conversion in progress is waited for), then the added keys deleted and the replaced rows of the
    current rule put back under its version; the rows of an older rule are re-encoded after it."""
    cid = index.collection_id
    for attempt in range(_RETRIES):
        rebuild: list[dict] = []
        try:
            with index.transaction() as conn:
                now = _guard.current(conn, cid)
                if now is None:
                    raise CollectionChangedError(f"collection {index.collection!r} was dropped while its "
                                                 "dedup run was being undone")
                config, version = now
                _guard.check(conn, cid, version)  # the collection's row, FOR KEY SHARE: kept to the commit
                for entry in entries:
                    row = entry["old"]
                    if row is None:
                        _rows.delete_row(conn, cid, entry["k"])
                    elif entry.get("v", version) == version or (
                            entry.get("v") in configs and _rule_of(configs[entry["v"]]) == _rule_of(config)):
                        _restore(conn, cid, entry["k"], row, version)
                    else:
                        rebuild.append(entry)
            break
        except CollectionChangedError:
            if attempt == _RETRIES - 1 or _guard.current(index.connection(), cid) is None:
                raise
    if rebuild:
        _rebuild(index, rebuild, counts)
    return len(entries)


def _restore(conn: Any, cid: int, key: str, row: dict, version: str) -> None:
    fp = None if row["fp"] is None else to_signed(row["fp"])
    meta = None if row["meta"] is None else json.dumps(row["meta"], ensure_ascii=False)
    bands = row.get("bands")
    bands = None if bands is None else "{" + ",".join(map(str, bands)) + "}"
    text_z = None if row.get("text_z") is None else base64.b64decode(row["text_z"])
    _rows.upsert_row(conn, cid, key, fp, meta, row["shingles"], bands, text_z, version=version)


def _rebuild(index: Any, entries: list[dict], counts: Any) -> None:
    """Replaced rows of an older rule, put back re-encoded from their texts under the current one (a
    list load: the index follows a rule changed meanwhile and loads it again); a row without a text
    cannot be, and the run's row stays for its key (counted)."""
    items = []
    for entry in entries:
        row = entry["old"]
        text = None if row.get("text_z") is None else decompress_text(base64.b64decode(row["text_z"]))
        meta = row.get("meta")
        if text is None and isinstance(meta, dict) and isinstance(meta.get("text"), str):
            text = meta["text"]
        if text is None:
            counts.unrestored += 1
            if len(counts.unrestored_keys) < 3:
                counts.unrestored_keys.append(entry["k"])
            continue
        items.append({"key": entry["k"], "text": text, "meta": meta})
    if items:
        index.add_many(items, workers=1)


class _Counts:
    unrestored = 0

    def __init__(self) -> None:
        self.unrestored_keys: list[str] = []


def undo_abandoned(index: Any, folder: Path | None = None) -> tuple[int, int]:
    """Undo the journals of this collection's runs that died without undoing themselves (killed
    outright), and delete them: (keys undone, rows that could not be put back). A journal whose
    lock is held belongs to a live run, and is left alone; no usable folder: nothing to undo."""
    try:
        dir_fd = open_private_dir(folder or journal_dir())
    except OSError:
        return 0, 0
    undone, counts = 0, _Counts()
    try:
        prefix = collection_identity(index) + "-"
        for name in sorted(os.listdir(dir_fd)):
            if not (name.startswith(prefix) and name.endswith(_SUFFIX)):
                continue
            file = _open_journal(dir_fd, name, create=False)
            if file is None:
                continue
            with file:
                try:
                    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its run is alive
                if os.fstat(file.fileno()).st_nlink == 0:
                    continue  # undone and deleted by another run meanwhile
                undone += _undo_lines(index, file, counts)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return undone, counts.unrestored
