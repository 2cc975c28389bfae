"""Incremental dedup killed outright (SIGKILL: the OOM killer, ``kill -9``): the re-run gives the output of
one uninterrupted run.

The bug: a killed run could not undo anything, so its stored rows stayed, and the same command run
again removed most records as "near-duplicates" of their own rows (13,000 of 15,000 missing, exit 0
with a warning). Now the run's journal is a file that outlives it (simdb.dataset.undo), and the next
run into the collection undoes it first. The moments are seeded fractions of an uninterrupted run's
duration; ``SIMDB_TEST_KILL_MOMENTS`` sets how many (the default suite: 3; the promise is checked with 20).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time

import pytest
from cli_support import base_env, simdb_argv

from simdb import SimhashIndex

pytestmark = pytest.mark.slow

WORDS = ("river stone lantern orchard copper meadow falcon harbor pepper violet thunder candle marble "
         "glacier saddle timber walnut ember prairie quartz").split()
RECORDS = 1500
MOMENTS = int(os.environ.get("SIMDB_TEST_KILL_MOMENTS", "3"))


def _dataset(n: int) -> list[bytes]:
    """``n`` JSONL lines, a third of them near-copies (one word changed) of an earlier line."""
    rng = random.Random(5)
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < 0.35:
            words = rng.choice(texts).split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            texts.append(" ".join(words))
        else:
            texts.append(" ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(40)))
    return [(json.dumps({"id": f"d{i}", "text": t}) + "\n").encode() for i, t in enumerate(texts)]


def _prepare(url: str, name: str) -> None:
    """The collection before the run: rows under some of the input's keys (other texts: the run replaces
    them) and rows of keys it does not have."""
    rng = random.Random(6)
    with SimhashIndex(url, name, store_texts=True) as ix:
        ix.add_many([(f"d{i}", " ".join(rng.choice(WORDS) + str(rng.randrange(900)) for _ in range(30)))
                     for i in range(0, RECORDS, 5)]
                    + [(f"other{i}", " ".join(rng.choice(WORDS) + str(rng.randrange(900)) for _ in range(30)))
                       for i in range(100)])


def _contents(url: str, name: str) -> list[tuple]:
    with SimhashIndex(url, name) as ix:
        return sorted(ix.connection().execute(
            "SELECT key, fp, shingles, bands, text_z, meta::text FROM simdb_fingerprints WHERE collection_id = %s",
            (ix.collection_id,)).fetchall())


def _names(journals) -> set:
    return set(journals.iterdir()) if journals.is_dir() else set()


def _began(proc: subprocess.Popen, journals, before: set) -> bool:
    """Wait until the run ``proc`` has created its journal (its work begins); False if it ended first."""
    while proc.poll() is None:
        if _names(journals) - before:
            return True
        time.sleep(0.005)
    return False


def _dedup(url: str, name: str, src, out) -> list:
    return [*simdb_argv(), "dedup", str(src), "-o", str(out), "-c", name, "--batch-size", "100",
            "--database-url", url]


def test_a_rerun_after_sigkill_gives_the_uninterrupted_output(database_url, collection_name, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"".join(_dataset(RECORDS)))
    env = base_env(SIMDB_HOME=str(tmp_path / "home"))
    journals = tmp_path / "home" / "dedup-journals"
    once = collection_name + "_once"
    _prepare(database_url, once)
    proc = subprocess.Popen(_dedup(database_url, once, data, tmp_path / "once.jsonl"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    began = _began(proc, journals, set())
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=600)
    work = time.monotonic() - t0  # from the journal's creation (the run's start) to its end
    assert proc.returncode == 0 and began, err
    expected = (tmp_path / "once.jsonl").read_bytes()
    assert 0 < expected.count(b"\n") < RECORDS  # the data has near-duplicates
    expected_rows = _contents(database_url, once)

    rng = random.Random(20)
    killed = tries = 0
    finished_then_killed = False
    while killed < MOMENTS:
        tries += 1
        assert tries <= 4 * MOMENTS, f"only {killed} of {tries - 1} runs were still running at their moment"
        name = f"{collection_name}_k{tries}"
        _prepare(database_url, name)
        out = tmp_path / f"o{tries}.jsonl"
        before = _names(journals)
        proc = subprocess.Popen(_dedup(database_url, name, data, out), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        _began(proc, journals, before)
        time.sleep(rng.uniform(0.0, 0.95) * work)  # a moment of the run's work (its start is python's import)
        if proc.poll() is not None:  # finished before its moment: no kill to recover from; the machine is
            work /= 2                # less loaded than when ``work`` was measured, so aim earlier from now on
            continue
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(60) == -signal.SIGKILL
        if out.exists():  # killed after its output was committed: it had finished (its journal may be left)
            finished_then_killed = True
            work /= 2
            continue
        killed += 1
        again = subprocess.run(_dedup(database_url, name, data, out), capture_output=True, text=True, env=env,
                               timeout=600)
        assert again.returncode == 0, again.stderr
        assert "same key" not in again.stderr, again.stderr
        assert out.read_bytes() == expected, tries
        assert _contents(database_url, name) == expected_rows, tries
    assert finished_then_killed or not _names(journals)  # every journal undone or finished
