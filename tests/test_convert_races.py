"""``simdb convert`` while other processes replace existing keys (add_many, incremental dedup).

The bug: a load that replaced keys deleted their rows first (row locks) and checked the collection's
rule last (its row, ``FOR KEY SHARE``), while a conversion locks the collection's row first (``FOR
UPDATE``) and then rewrites every row: each waited for the other, and PostgreSQL broke the cycle with
"deadlock detected" (the CLI's exit 3, not retried). Now a writer that may replace rows takes the
collection's row first, as single-row writes do: one order, so the conversion waits or the writer
waits, and nobody deadlocks. A one-shot iterator is loaded here, so no retry can hide a deadlock.
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from simdb import SimhashIndex
from simdb.aio.pool import libpq_url
from simdb.dataset.dedup import dedup_records
from simdb.errors import CollectionChangedError

pytestmark = pytest.mark.slow

WORDS = ("river stone lantern orchard copper meadow falcon harbor pepper violet thunder candle marble "
         "glacier saddle timber walnut ember prairie quartz").split()
ROWS = 1500


def _text(i: int, version: int) -> str:
    """Key ``i``'s text in ``version``: never a near-duplicate of another key's text in any version (the
    version is its own part of each number), so the incremental dedup never removes a key as a copy of
    another, and every key is stored at the end whatever the interleaving."""
    return " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{(i * 31 + j * 17) % 997 + 1000 * version}" for j in range(24))


def _collection(url: str) -> str:
    """A plain collection that keeps its texts (so it can be converted), ROWS rows."""
    name = f"race_{uuid.uuid4().hex[:10]}"
    with SimhashIndex(url, name, verify=False, store_texts=True) as ix:
        ix.add_many([(f"k{i}", _text(i, 0)) for i in range(ROWS)])
    return name


@pytest.mark.parametrize("round_", range(3))
def test_convert_racing_writers_that_replace_keys_never_deadlocks(database_url, round_):
    name = _collection(database_url)
    loader, deduper = SimhashIndex(database_url, name), SimhashIndex(database_url, name)
    stop = threading.Event()
    errors: list[BaseException] = []
    done = {"load": 0, "dedup": 0}

    def load() -> None:
        version = 0
        while not stop.is_set() or version < 3:
            version += 1
            try:  # every key again: each load replaces ROWS stored rows
                loader.add_many(iter([(f"k{i}", _text(i, version)) for i in range(ROWS)]))
                done["load"] += 1
            except CollectionChangedError:
                pass  # refused whole (an iterator cannot be read again): the next one follows the new rule

    def dedup() -> None:
        version = 100
        while not stop.is_set() or version < 103:
            version += 1
            records = [{"id": f"k{i}", "text": _text(i, version)} for i in range(0, ROWS, 3)]
            try:
                for _ in dedup_records(records, index=deduper, batch_size=200):
                    pass
                done["dedup"] += 1
            except CollectionChangedError:
                pass

    def guarded(fn):
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
        return run

    threads = [threading.Thread(target=guarded(f)) for f in (load, dedup)]
    for t in threads:
        t.start()
    try:
        with SimhashIndex(database_url, name) as converter:
            assert converter.convert_to_verified() >= ROWS and converter.bands
    finally:
        stop.set()
        for t in threads:
            t.join(300)
    try:
        assert not errors, errors
        assert done["load"] >= 1 and done["dedup"] >= 1
        with psycopg.connect(libpq_url(loader.engine)) as conn:
            total, old_rule = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE bands IS NULL OR shingles IS NULL) FROM simdb_fingerprints "
                "WHERE collection_id = %s", (loader.collection_id,)).fetchone()
        assert total == ROWS and old_rule == 0, (total, old_rule)
        for key in ("k0", "k3", "k700", f"k{ROWS - 1}"):  # each row is found by its own kept text
            assert key in [m.key for m in loader.near(loader.text(key))], key
    finally:
        loader.close()
        deduper.close()
