"""Keeping texts is a collection option (issue 27 item 3): recorded in the collection's config and
honoured by every write path (add, update, add_many, add_if_unique, simdb.aio), stored compressed in
``text_z``; ``convert`` works from kept texts."""

from __future__ import annotations

import asyncio
import zlib

import pytest
from sqlalchemy import create_engine
from sqlalchemy import text as sa_text

from simdb import SimhashIndex
from simdb.aio import AsyncSimhashIndex
from simdb.core.fingerprint import Fingerprinter
from simdb.core.kept_texts import compress_text, decompress_text, file_roots, keeps_texts
from simdb.errors import CollectionConfigError, InvalidTypeError

LONG = " ".join(f"the river runs past the mill number {i} and the baker sells bread" for i in range(60))
ZH = "这是一个关于重复文本检测的中文句子，用来检查压缩和解压是否保持原样。"


def _raw(url: str, name: str) -> dict:
    """key -> (text_z bytes | None, meta) straight from the table."""
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            rows = conn.execute(sa_text(
                "SELECT f.key, f.text_z, f.meta FROM simdb_fingerprints f JOIN simdb_collections c "
                "ON c.id = f.collection_id WHERE c.name = :n"), {"n": name}).all()
    finally:
        eng.dispose()
    return {k: (None if z is None else bytes(z), m) for k, z, m in rows}


def test_compress_round_trip_and_damage():
    assert decompress_text(compress_text(ZH)) == ZH
    assert decompress_text(compress_text("")) == ""
    assert decompress_text(None) is None
    assert decompress_text(b"not zlib") is None  # a damaged row reads as "no text", not a crash
    assert len(compress_text(LONG)) < len(LONG.encode()) // 3
    with pytest.raises(InvalidTypeError):
        compress_text(b"bytes")  # type: ignore[arg-type]


def test_every_sync_write_path_keeps_the_text(database_url, collection_name):
    with SimhashIndex(database_url, collection_name, store_texts=True) as ix:
        assert ix.store_texts and keeps_texts(ix.config)
        ix.add("add", LONG)
        ix.add("fp-only", fp=12345)
        ix.add_many([("many-1", ZH), {"key": "many-2", "text": "second text of the batch", "meta": {"a": 1}},
                     {"key": "many-fp", "fp": 99}])
        assert ix.add_if_unique("unique", "a text about cats and their long afternoon naps").inserted
        ix.add("upd", "before")
        ix.update("upd", "after the update")
        assert ix.text("add") == LONG
        assert ix.text("many-1") == ZH
        assert ix.text("many-2") == "second text of the batch"
        assert ix.text("unique") == "a text about cats and their long afternoon naps"
        assert ix.text("upd") == "after the update"
        assert ix.text("fp-only") is None and ix.text("many-fp") is None and ix.text("absent") is None
        assert ix.get("many-2").meta == {"a": 1}  # the text is not in meta
    raw = _raw(database_url, collection_name)
    assert zlib.decompress(raw["add"][0]).decode() == LONG and raw["add"][1] is None
    assert len(raw["add"][0]) < len(LONG.encode()) // 3  # compressed


def test_add_many_through_worker_processes_keeps_texts(database_url, collection_name):
    items = [(f"k{i}", f"text number {i} about gardens, rivers and the weather") for i in range(7)]
    with SimhashIndex(database_url, collection_name, store_texts=True) as ix:
        ix.add_many(items, chunk_rows=2, workers=2)
        assert [ix.text(k) for k, _ in items] == [t for _, t in items]


def test_the_option_is_the_collections_not_the_handles(database_url, collection_name):
    with SimhashIndex(database_url, collection_name, store_texts=True):
        pass
    with SimhashIndex(database_url, collection_name) as ix:  # a later writer that says nothing keeps texts too
        assert ix.store_texts
        ix.add("later", "written by a handle that did not ask")
        assert ix.text("later") == "written by a handle that did not ask"
    with pytest.raises(CollectionConfigError, match="keeps its texts"):
        SimhashIndex(database_url, collection_name, store_texts=False)


def test_a_hamming_collection_keeps_texts_and_the_option_can_be_turned_on(database_url, collection_name):
    with SimhashIndex(database_url, collection_name, Fingerprinter()) as ix:
        assert not ix.store_texts
        ix.add("before", "not kept")
        assert ix.add_if_unique("plain", "nothing kept here either").inserted
        assert ix.text("before") is None and ix.text("plain") is None
    with SimhashIndex(database_url, collection_name, store_texts=True) as ix:
        assert ix.store_texts
        assert ix.add_if_unique("hamming-unique", "kept by the hamming add_if_unique path").inserted
        assert ix.text("hamming-unique") == "kept by the hamming add_if_unique path"
        assert ix.text("before") is None  # rows written before the option have none


def test_an_older_rows_meta_text_is_still_read(database_url, collection_name):
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("old", "kept the old way", meta={"text": "kept the old way"})
        assert ix.text("old") == "kept the old way"


def test_async_write_paths_keep_texts(database_url, collection_name):
    async def main():
        async with AsyncSimhashIndex(database_url, collection_name, Fingerprinter(), store_texts=True) as ix:
            await ix.add("a", "async add text")
            await ix.update("a", "async updated text")
            r = await ix.add_if_unique("b", "an async unique text about owls")
            return r.inserted, await ix.text("a"), await ix.text("b")

    assert asyncio.run(main()) == (True, "async updated text", "an async unique text about owls")


def test_async_verified_add_if_unique_keeps_the_text(database_url, collection_name):
    async def main():  # a banded verified collection: its writes run on the sync index in a thread
        async with AsyncSimhashIndex(database_url, collection_name, store_texts=True) as ix:
            await ix.add_if_unique("v", "a verified async text about herons and reeds")
            await ix.add("w", "another verified async text")
            return await ix.text("v"), await ix.text("w")

    assert asyncio.run(main()) == ("a verified async text about herons and reeds", "another verified async text")


def test_convert_works_from_kept_texts(database_url, collection_name):
    with SimhashIndex(database_url, collection_name, Fingerprinter(), store_texts=True) as ix:
        ix.add_many([("a", LONG), ("b", LONG.replace("baker", "Baker")), ("c", ZH)])
        assert ix.verifier is None
        assert ix.convert_to_verified() == 3
        assert ix.verifier is not None and keeps_texts(ix.config)
        assert [m.key for m in ix.near_key("a")] == ["b"]


def test_record_file_root_once(database_url, collection_name, tmp_path):
    with SimhashIndex(database_url, collection_name) as ix:
        assert ix.record_file_root(tmp_path) == str(tmp_path.resolve())
        ix.record_file_root(tmp_path)
        assert file_roots(ix.config) == [str(tmp_path.resolve())]
    with SimhashIndex(database_url, collection_name) as ix:
        assert file_roots(ix.config) == [str(tmp_path.resolve())]


def test_dedup_undo_puts_a_replaced_rows_kept_text_back(database_url, collection_name, tmp_path):
    from simdb.dataset.undo import RunJournal

    with SimhashIndex(database_url, collection_name, store_texts=True) as ix:
        ix.add("a", "the text before the run")
        journal = RunJournal(ix, str(tmp_path))
        journal.before_store(["a", "new"])
        ix.add_many([("a", "the text the run wrote"), ("new", "a row the run added")])
        assert journal.undo() == 2
        journal.close()
        assert ix.text("a") == "the text before the run" and "new" not in ix
