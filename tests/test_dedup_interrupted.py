"""Incremental dedup across an interruption (issue 31, item 4): an unfinished run is undone, so the same
command run again gives exactly the output of one uninterrupted run (no record lost as "a near-duplicate
of its own row"), and the interrupted run says what the collection holds."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time

import pytest
from cli_support import base_env, popen_interruptible, simdb_argv
from sqlalchemy import create_engine, text

from simdb import SimhashIndex
from simdb.dataset.dedup import DedupStats, dedup_records

WORDS = ("river stone lantern orchard copper meadow falcon harbor pepper violet thunder candle marble "
         "glacier saddle timber walnut ember prairie quartz").split()


def _dataset(n: int) -> list[bytes]:
    """``n`` JSONL lines, a third of them near-copies (one word changed) of an earlier line."""
    rng = random.Random(31)
    texts: list[str] = []
    for i in range(n):
        if texts and rng.random() < 0.35:
            words = rng.choice(texts).split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            texts.append(" ".join(words))
        else:
            texts.append(" ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(40)))
    return [(json.dumps({"id": f"d{i}", "text": t}) + "\n").encode() for i, t in enumerate(texts)]


def _rows(url: str, collection: str) -> int:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM simdb_fingerprints f JOIN simdb_collections c "
                                     "ON c.id = f.collection_id WHERE c.name = :n"), {"n": collection}).scalar()
    finally:
        eng.dispose()


def _dedup(url, collection, src, out, *extra, **kwargs):
    return [*simdb_argv(), "dedup", str(src), "-o", str(out), "-c", collection, "--batch-size", "200",
            "--database-url", url, *extra]


def _exists(url: str, collection: str) -> bool:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM simdb_collections WHERE name = :n"),
                                {"n": collection}).scalar() == 1
    finally:
        eng.dispose()


@pytest.mark.parametrize("existing", [False, True])
def test_a_rerun_after_ctrl_c_gives_the_uninterrupted_output(database_url, collection_name, tmp_path, existing):
    """``existing``: the collection was there (empty) before the run, else the run created it: then the
    interrupted run removes it again (as ``simdb add`` does), and says so."""
    lines = _dataset(1200)
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"".join(lines))
    once = subprocess.run(_dedup(database_url, collection_name + "_once", data, tmp_path / "once.jsonl"),
                          capture_output=True, text=True, env=base_env(), timeout=300)
    assert once.returncode == 0, once.stderr
    expected = (tmp_path / "once.jsonl").read_bytes()
    assert 0 < expected.count(b"\n") < len(lines)  # the data has near-duplicates

    # the interrupted run reads stdin: half the records, then Ctrl-C while it waits for more
    inc = collection_name + "_inc"
    if existing:
        SimhashIndex(database_url, inc).close()
    proc = popen_interruptible(_dedup(database_url, inc, "-", tmp_path / "o.jsonl"), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env())
    proc.stdin.write(b"".join(lines[:600]))
    proc.stdin.flush()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and _rows(database_url, inc) < 300:
        time.sleep(0.1)
    assert _rows(database_url, inc) >= 300  # batches were committed before the interruption
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 130, err
    if existing:
        assert f"collection '{inc}' is as it was before this run (0 rows)" in err and "Traceback" not in err
    else:
        assert (f"collection '{inc}' was removed (this run created it); the " in err
                and "records it had stored were taken out first" in err and "Traceback" not in err), err
    assert _rows(database_url, inc) == 0 and _exists(database_url, inc) == existing
    assert not (tmp_path / "o.jsonl").exists()

    again = subprocess.run(_dedup(database_url, inc, data, tmp_path / "o.jsonl"), capture_output=True,
                           text=True, env=base_env(), timeout=300)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "o.jsonl").read_bytes() == expected


def test_closing_an_unfinished_run_restores_the_replaced_and_removes_the_added(database_url, collection_name):
    rng = random.Random(7)
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("kept-before", "an entirely different text about glaciers and quartz and walnut trees", meta={"m": 1})
        before = ix.get("kept-before")
        records = [{"id": "kept-before", "text": "copper lantern orchard falcon harbor pepper violet thunder"},
                   *({"id": f"n{i}", "text": " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(12))}
                     for i in range(10))]  # unrelated records (a rotation of one word list is one text for character grams)
        stats = DedupStats()
        run = dedup_records(records, index=ix, batch_size=4, stats=stats)
        assert next(run)["id"] == "kept-before"
        for _ in range(5):
            next(run)
        assert len(ix) > 1 and ix.get("kept-before").fp != before.fp  # stored and replaced while running
        run.close()
        assert stats.undone is not None and stats.undone >= 6
        assert len(ix) == 1
        after = ix.get("kept-before")
        assert (after.fp, after.meta) == (before.fp, before.meta)
        assert ix.near("an entirely different text about glaciers and quartz and walnut trees")[0].key == "kept-before"


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(40)) for _ in range(n)]


def _one_word_changed(text: str) -> str:
    words = text.split()
    words[len(words) // 2] = "zebra" + words[len(words) // 2]
    return " ".join(words)


def _old_rule_rows(ix: SimhashIndex) -> int:
    return ix.connection().execute(
        "SELECT count(*) FILTER (WHERE bands IS NULL OR shingles IS NULL) FROM simdb_fingerprints "
        "WHERE collection_id = %s", (ix.collection_id,)).fetchone()[0]


def test_an_undo_after_a_conversion_elsewhere_puts_the_rows_back_by_the_new_rule(database_url, collection_name):
    """Another process converts the collection while an incremental run goes on; the run is then closed
    unfinished. The rows it replaced were read under the old rule (no sketch, no band keys): they are
    put back re-encoded from their kept texts, so each is found by the new rule like any other row."""
    originals = dict(zip((f"r{i}" for i in range(60)), _texts(60, 1)))
    with SimhashIndex(database_url, collection_name, verify=False, store_texts=True) as ix:
        ix.add_many(list(originals.items()))
    records = [{"id": key, "text": text} for key, text in zip(originals, _texts(60, 2))]
    records += [{"id": f"n{i}", "text": text} for i, text in enumerate(_texts(60, 3))]
    with SimhashIndex(database_url, collection_name) as ix:
        stats = DedupStats()
        run = dedup_records(records, index=ix, batch_size=10, stats=stats)
        for _ in range(25):  # batches stored by the old rule
            next(run)
        with SimhashIndex(database_url, collection_name) as other:
            assert other.convert_to_verified() > 0 and other.bands
        for _ in range(40):  # and by the new one, which the run follows
            next(run)
        assert ix.bands
        run.close()
        assert stats.undone is not None and stats.undone >= 60 and stats.unrestored == 0
        assert len(ix) == len(originals) and _old_rule_rows(ix) == 0
        assert {key: ix.text(key) for key in originals} == originals
        for key, text in originals.items():
            assert key in [m.key for m in ix.near(_one_word_changed(text))], key


def test_an_undo_after_texts_are_kept_elsewhere_puts_the_rows_back_as_they_were(database_url, collection_name):
    """Keeping texts from now on is a change of rule too, but not of the rows' features: the replaced rows
    (which kept no text) are put back as they were, under the new version."""
    originals = dict(zip((f"r{i}" for i in range(30)), _texts(30, 4)))
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add_many(list(originals.items()))
        before = {key: ix.get(key) for key in originals}
    records = [{"id": key, "text": text} for key, text in zip(originals, _texts(30, 5))]
    with SimhashIndex(database_url, collection_name) as ix:
        stats = DedupStats()
        run = dedup_records(records, index=ix, batch_size=10, stats=stats)
        for _ in range(12):
            next(run)
        SimhashIndex(database_url, collection_name, store_texts=True).close()
        for _ in range(5):
            next(run)
        run.close()
        assert stats.undone is not None and stats.unrestored == 0
        assert {key: (ix.get(key).fp, ix.get(key).meta) for key in originals} == {
            key: (row.fp, row.meta) for key, row in before.items()}
        for key, text in originals.items():
            assert key in [m.key for m in ix.near(_one_word_changed(text))], key
