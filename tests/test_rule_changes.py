"""Writers that opened a collection before ``simdb convert`` changed its rule (simdb.store.collection_guard).

The bug: an index (a web app's, another process's) opened before a conversion kept the old rule, and
every row it wrote afterwards was computed by it: no band keys, the old fingerprinter's fingerprint,
so the new rule never found those rows, silently and for good. Now each write carries the version of
the configuration it was computed by and the store refuses a stale one; the index follows the new
configuration and writes again (a load of an iterator, which cannot be read twice, raises instead).
Two SimhashIndex objects on one collection stand for two processes: each keeps its own configuration.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import psycopg
import pytest

from simdb import SimhashIndex
from simdb.aio import AsyncSimhashIndex
from simdb.aio.pool import libpq_url
from simdb.errors import CollectionChangedError

BASE = [
    "the lion and the mouse became friends after the mouse freed the lion from the hunters net",
    "a crow dropped pebbles into the pitcher until the water rose high enough for it to drink",
    "the tortoise won the race because the hare stopped to sleep under a tree near the finish",
    "an ant worked all summer while the grasshopper sang and then had nothing to eat in winter",
]
NEW = "the fox could not reach the grapes hanging high on the vine and said they were sour anyway"
TYPO = "the fox could not reach the grapes hanging high on the vine and said they were sour anyways"


def plain_collection(url: str) -> str:
    """A Hamming-only collection that keeps its texts (so that it can be converted), four rows."""
    name = f"rule_{uuid.uuid4().hex[:10]}"
    with SimhashIndex(url, name, verify=False, store_texts=True) as ix:
        for i, text in enumerate(BASE):
            ix.add(f"b{i}", text)
    return name


def converted_by_another(url: str, name: str) -> SimhashIndex:
    """Convert ``name`` to the banded default through an index of its own (another process's, in effect)."""
    other = SimhashIndex(url, name)
    assert other.convert_to_verified() >= len(BASE) and other.bands
    return other


def band_keys_of(ix: SimhashIndex, key: str):
    return ix.connection().execute(
        "SELECT bands, shingles IS NOT NULL FROM simdb_fingerprints WHERE collection_id = %s AND key = %s",
        (ix.collection_id, key)).fetchone()


@pytest.mark.parametrize("write", ["add", "update", "add_if_unique", "add_many_list"])
def test_a_writer_opened_before_a_conversion_writes_by_the_new_rule(database_url, write):
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as stale:
        assert not stale.bands  # opened while the collection was Hamming-only
        if write == "update":
            stale.add("new", BASE[0] + " and more")  # before the conversion: converted with the rest
        other = converted_by_another(database_url, name)
        try:
            if write in ("add", "update"):
                getattr(stale, write)("new", NEW)
            elif write == "add_if_unique":
                assert stale.add_if_unique("new", NEW).inserted
            else:
                assert stale.add_many([("new", NEW)]) == 1
            assert stale.bands and stale.config == other.config  # it follows the collection's rule now
            bands, sketched = band_keys_of(stale, "new")
            assert bands and sketched  # the row the new rule needs: band keys and a sketch
            assert [m.key for m in other.near(TYPO)] == ["new"]  # found by the rule of the collection
        finally:
            other.close()


def test_a_load_of_an_iterator_is_refused_whole_and_the_next_one_stored(database_url):
    """An iterator cannot be read twice: the load is refused before any row is written, says so, and
    the index follows the new rule, so running it again stores it right."""
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as stale:
        converted_by_another(database_url, name).close()
        with pytest.raises(CollectionChangedError, match="nothing of this write .its transaction. was stored"):
            stale.add_many(iter([("new", NEW), ("new2", BASE[0] + " again")]))
        assert "new" not in stale and stale.bands
        assert stale.add_many(iter([("new", NEW)])) == 1
        assert band_keys_of(stale, "new")[0]


def test_add_if_unique_of_a_stale_writer_judges_by_the_new_rule(database_url):
    """A one-typo copy of a stored text is refused by the new (verified) rule once followed."""
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as stale:
        converted_by_another(database_url, name).close()
        result = stale.add_if_unique("copy", BASE[1].replace("pebbles", "pebles"))
        assert not result.inserted and [m.key for m in result.matches] == ["b1"]
        assert result.matches[0].jaccard is not None  # judged by Jaccard: the verified rule


def test_a_write_waiting_for_a_conversion_is_computed_by_its_rule(database_url):
    """The exact case: a conversion holds the collection row (FOR UPDATE, as simdb convert does) and
    has changed the config but not committed; a write arriving meanwhile waits, and once the
    conversion commits, is refused and written again by the new rule (never stored by the old one)."""
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as stale, SimhashIndex(database_url, name) as peek:
        converted = converted_by_another(database_url, name)
        new_config = converted.config
        converted.close()
        # put the old config back by hand, then replay the conversion's config change in a held transaction
        with psycopg.connect(libpq_url(peek.engine), autocommit=True) as conn:
            conn.execute("UPDATE simdb_collections SET config = %s WHERE id = %s",
                         (psycopg.types.json.Jsonb(stale.config), stale.collection_id))
        conversion = psycopg.connect(libpq_url(peek.engine))
        try:
            conversion.execute("SELECT id FROM simdb_collections WHERE id = %s FOR UPDATE", (stale.collection_id,))
            conversion.execute("UPDATE simdb_collections SET config = %s WHERE id = %s",
                               (psycopg.types.json.Jsonb(new_config), stale.collection_id))
            done: list = []
            writer = threading.Thread(target=lambda: done.append(stale.add("new", NEW)))
            writer.start()
            assert wait_blocked(peek, conversion.info.backend_pid), "the write did not wait for the conversion"
            assert not done
            conversion.commit()
            writer.join(60)
            assert done and not writer.is_alive()
        finally:
            conversion.close()
        assert stale.bands and band_keys_of(stale, "new")[0]


def wait_blocked(ix: SimhashIndex, blocker_pid: int, deadline_s: float = 60.0) -> bool:
    """Whether some backend waits for a lock ``blocker_pid`` holds, within the deadline (polled)."""
    import time

    end = time.monotonic() + deadline_s
    conn = ix.connection()
    while time.monotonic() < end:
        if conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND %s = ANY(pg_blocking_pids(pid))",
                        (blocker_pid,)).fetchone()[0]:
            return True
        time.sleep(0.05)
    return False


def test_the_folders_simdb_add_records_are_no_change_of_rule(database_url, tmp_path):
    """``simdb add DIR`` records its folder in the config (for the report); no row depends on it, so
    another writer's rows stay valid and its loads are not refused for it."""
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as writer, SimhashIndex(database_url, name) as adder:
        version = writer.config_version
        adder.record_file_root(str(tmp_path))
        assert adder.config_version == version
        assert writer.add_many(iter([("new", NEW)])) == 1  # an iterator: a refusal would have raised


def test_an_async_writer_follows_the_new_rule(database_url):
    """AsyncSimhashIndex writes a Hamming-only collection; after another index converts it to the
    banded default, its writes go through the banded path."""
    name = plain_collection(database_url)

    async def main():
        async with AsyncSimhashIndex(database_url, name) as stale:
            assert stale.sync is not None and stale.sync.rule.async_batched
            other = converted_by_another(database_url, name)
            try:
                await stale.add("new", NEW)
                result = await stale.add_if_unique("copy", TYPO)
                assert not result.inserted and [m.key for m in result.matches] == ["new"]
                assert band_keys_of(other, "new")[0]
            finally:
                other.close()

    asyncio.run(main())


def test_a_reader_opened_before_a_conversion_answers_by_the_new_rule(database_url):
    """A read-only process (a search API) never writes, so no write is refused to tell it: the
    conversion's commit is announced to its connections, and its next query follows the new rule."""
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as reader:
        assert reader.near(BASE[2]) and not reader.bands  # its connection is open and listening
        other = converted_by_another(database_url, name)
        try:
            other.add("new", NEW)
            found = reader.near(TYPO)
            assert [m.key for m in found] == ["new"] and found[0].jaccard is not None  # the verified rule
            assert reader.bands and reader.config == other.config
            assert [[m.key for m in ms] for ms in reader.near_many([TYPO, BASE[3]])] == [["new"], ["b3"]]
            assert [m.key for m in reader.near_key("new")] == []  # its only near-duplicate would be itself
        finally:
            other.close()


def test_an_async_reader_answers_by_the_new_rule(database_url):
    """The async index's own pool listens too: its batched near follows the conversion."""
    name = plain_collection(database_url)

    async def main():
        async with AsyncSimhashIndex(database_url, name) as reader:
            assert await reader.near(BASE[2])  # a pool connection is open and listening
            other = converted_by_another(database_url, name)
            try:
                other.add("new", NEW)
                found = await reader.near(TYPO)
                assert [m.key for m in found] == ["new"] and found[0].jaccard is not None
            finally:
                other.close()

    asyncio.run(main())


def test_writers_racing_a_conversion_leave_no_row_of_the_old_rule(database_url):
    """Four stale writers (add, add_if_unique, update, a list load) write while another index converts
    the collection: afterwards every row has the new rule's sketch and band keys (the conversion
    rewrote the rows committed before it; the guard refused, and the writers redid, every later one)."""
    name = plain_collection(database_url)
    writers = [SimhashIndex(database_url, name) for _ in range(4)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(w: int, ix: SimhashIndex) -> None:
        i = 0
        try:
            while not stop.is_set() or i < 5:
                text = f"writer {w} text number {i} about " + BASE[(w + i) % len(BASE)]
                if w == 0:
                    ix.add(f"w0-{i}", text)
                elif w == 1:
                    ix.add_if_unique(f"w1-{i}", text + f" {i} {i}")
                elif w == 2:
                    ix.add(f"w2-{i % 3}", text)
                    ix.update(f"w2-{i % 3}", text + " updated")
                else:
                    ix.add_many([(f"w3-{i}-{j}", f"{text} part {j}") for j in range(3)])
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, ix)) for w, ix in enumerate(writers)]
    for t in threads:
        t.start()
    try:
        converted_by_another(database_url, name).close()
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    try:
        assert not errors, errors
        assert all(ix.bands for ix in writers)
        with psycopg.connect(libpq_url(writers[0].engine)) as conn:
            total, old_rule = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE bands IS NULL OR shingles IS NULL) FROM simdb_fingerprints "
                "WHERE collection_id = %s", (writers[0].collection_id,)).fetchone()
        assert total > len(BASE) and old_rule == 0, (total, old_rule)
    finally:
        for ix in writers:
            ix.close()


def test_a_collection_dropped_elsewhere_is_an_error_not_an_empty_answer(database_url):
    """Another process drops the collection: an open index's reads and writes say so, by name,
    instead of answering "no near-duplicates" (reads) or failing on a foreign key (writes)."""
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as reader, SimhashIndex(database_url, name) as writer:
        assert reader.near(BASE[0]) and writer.near(BASE[1])  # open, listening connections
        with SimhashIndex(database_url, name) as admin:
            assert admin.drop()
        with pytest.raises(CollectionChangedError, match=f"'{name}' was dropped"):
            reader.near(BASE[0])
        with pytest.raises(CollectionChangedError, match=f"'{name}' was dropped"):
            writer.add("new", NEW)
        for call in (lambda: len(reader), lambda: "b0" in reader, lambda: reader.get("b0"), lambda: reader.text("b0")):
            with pytest.raises(CollectionChangedError, match=f"'{name}' was dropped"):
                call()  # they answered 0, False, None, None


def test_a_server_that_refuses_listen_leaves_the_index_usable(database_url, monkeypatch):
    """A hot standby refuses LISTEN ("cannot execute LISTEN during recovery"): an index reading from
    one must work as before, without announcements (a standby is never converted through)."""
    from simdb.store import collection_guard

    monkeypatch.setattr(collection_guard, "LISTEN_SQL", "SELECT 1 / 0")  # refused, as a standby refuses it
    name = plain_collection(database_url)
    with SimhashIndex(database_url, name) as ix:
        assert [m.key for m in ix.near(BASE[0])] == ["b0"]
        conn = ix.connection()
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is not left in an aborted state
