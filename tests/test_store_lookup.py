"""simdb.store.rows.rows_for_keys: the stored rows of many keys in batches, equal to index.get one key at a time."""

from __future__ import annotations

from simdb.core.bits import MASK64
from simdb.index import SimhashIndex
from simdb.store import rows as store_rows


def test_rows_for_keys_equal_get(database_url, collection_name, monkeypatch):
    monkeypatch.setattr(store_rows, "LOOKUP_BATCH", 3)  # several statements for the 8 keys asked
    with SimhashIndex(database_url, collection=collection_name, verify=False) as index:
        index.add("a", fp=MASK64, meta={"n": 1})  # the top bit set: the answer is unsigned
        index.add("b", fp=5)
        for i in range(5):
            index.add(f"c{i}", text=f"text number {i} of the lookup test")
        asked = ["a", "b", "missing", *(f"c{i}" for i in range(5))]
        got = store_rows.rows_for_keys(index.connection(), index.collection_id, asked)
        assert set(got) == set(asked) - {"missing"}
        for key, row in got.items():
            entry = index.get(key)
            assert row["fp"] == entry.fp and row["meta"] == entry.meta
        assert got["a"]["fp"] == MASK64 and got["a"]["meta"] == {"n": 1}
        assert store_rows.rows_for_keys(index.connection(), index.collection_id, []) == {}
