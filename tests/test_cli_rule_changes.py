"""``simdb add`` and ``simdb dedup -c`` while another process changes the collection's rule or drops it.

The bug: the store refused the batch in flight (computed by the old rule) and the CLI ended with exit 4,
"internal error, please report it", its message saying that nothing of the write was stored when the
earlier batches were (14,000 of 30,000 rows). Now a batch is loaded again by the new rule (the run
ends normally, every row by the new rule), and what cannot be redone (the collection dropped) is a
database error (exit 3) that says what was stored.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
import uuid

import psycopg
import pytest
from cli_support import base_env, simdb_argv

from simdb import SimhashIndex
from simdb.embedded import libpq_url

pytestmark = pytest.mark.slow

WORDS = ("river stone lantern orchard copper meadow falcon harbor pepper violet thunder candle marble "
         "glacier saddle timber walnut ember prairie quartz").split()
LINES = 40_000


def _data(path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    path.write_text("".join(json.dumps({"id": f"t{i}", "text": " ".join(
        rng.choice(WORDS) + str(rng.randrange(5000)) for _ in range(12))}) + "\n" for i in range(n)))


def _collection(url: str, *, texts: bool) -> str:
    name = f"cli_rule_{uuid.uuid4().hex[:10]}"
    with SimhashIndex(url, name, verify=False, store_texts=texts) as ix:
        ix.add_many([(f"base{i}", " ".join(WORDS[i:] + WORDS[:i])) for i in range(10)])
    return name


def _rows(url: str, name: str) -> tuple[int, int]:
    """(rows, rows without the banded rule's sketch and band keys) of collection ``name``."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE bands IS NULL OR shingles IS NULL) FROM simdb_fingerprints f "
            "JOIN simdb_collections c ON c.id = f.collection_id WHERE c.name = %s", (name,)).fetchone()


def _started(url: str, name: str, cmd: list, at_least: int) -> subprocess.Popen:
    """``cmd`` running, once the collection holds ``at_least`` rows (some batches committed)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and _rows(url, name)[0] < at_least:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()  # still running: the change comes mid-run
    return proc


def _add(url: str, name: str, data) -> list:
    return [*simdb_argv(), "add", str(data), "-c", name, "--batch-size", "2000", "--database-url", url]


def test_add_racing_a_conversion_finishes_by_the_new_rule(database_url, tmp_path):
    name = _collection(database_url, texts=True)
    _data(tmp_path / "d.jsonl", LINES, 1)
    proc = _started(database_url, name, _add(database_url, name, tmp_path / "d.jsonl"), 4000)
    with SimhashIndex(database_url, name) as other:
        assert other.convert_to_verified() >= 4000
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "internal error" not in err
    assert _rows(database_url, name) == (LINES + 10, 0)


def test_add_while_texts_are_kept_from_now_on_finishes(database_url, tmp_path):
    name = _collection(database_url, texts=False)
    _data(tmp_path / "d.jsonl", LINES, 2)
    proc = _started(database_url, name, _add(database_url, name, tmp_path / "d.jsonl"), 4000)
    SimhashIndex(database_url, name, store_texts=True).close()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    with SimhashIndex(database_url, name) as ix:
        assert len(ix) == LINES + 10 and ix.store_texts
        assert ix.text(f"t{LINES - 1}") is not None  # the last batch, stored by the new rule


def test_add_into_a_collection_dropped_meanwhile_says_what_happened(database_url, tmp_path):
    name = _collection(database_url, texts=False)
    _data(tmp_path / "d.jsonl", LINES, 3)
    proc = _started(database_url, name, _add(database_url, name, tmp_path / "d.jsonl"), 4000)
    with SimhashIndex(database_url, name) as other:
        other.drop()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err
    assert "internal error" not in err and "Traceback" not in err
    assert f"collection '{name}' was dropped" in err and "texts this command had added went with it" in err, err


def test_dedup_racing_a_conversion_gives_the_output_of_the_new_rule(database_url, tmp_path):
    """Incremental dedup: the batch in flight is decided again by the new rule; the run finishes, every
    row by the new rule, and the output has no record near-duplicate of another by it."""
    name = _collection(database_url, texts=True)
    _data(tmp_path / "d.jsonl", LINES // 2, 4)
    cmd = [*simdb_argv(), "dedup", str(tmp_path / "d.jsonl"), "-o", str(tmp_path / "o.jsonl"), "-c", name,
           "--batch-size", "500", "--database-url", database_url]
    proc = _started(database_url, name, cmd, 2000)
    with SimhashIndex(database_url, name) as other:
        assert other.convert_to_verified() >= 2000
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    kept = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    total, old_rule = _rows(database_url, name)
    assert old_rule == 0 and total == len(kept) + 10
    with SimhashIndex(database_url, name) as ix:
        for rec in kept[::500]:  # each kept record's nearest stored row is itself
            assert [m.key for m in ix.near(rec["text"])][:1] == [rec["id"]], rec
