"""add_if_unique under concurrency: many threads and processes, separate connections, many rounds.

Families of variants: members of a family are within k of each other, families
are far apart. Every writer tries to insert its share of the members at the
same time; afterwards exactly one member per family is stored, it is the one
whose writer was told ``inserted=True``, and every refused member was shown a
stored near-duplicate.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time
import uuid

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from simdb.core.bits import hamming
from simdb.index import duplicates
from simdb.store.unique import lock_keys

BARRIER_TIMEOUT = 300  # seconds: a writer that never arrives breaks the barrier and fails the test


def _collection(engine) -> int:
    return _named_collection(engine)[0]


def _named_collection(engine) -> tuple[int, str]:
    from simdb import SimhashIndex

    name = f"conc-{uuid.uuid4().hex[:10]}"
    with SimhashIndex(engine, collection=name) as idx:
        return idx.collection_id, name


def make_families(rng: random.Random, n_fam: int, size: int, k: int):
    """(key, fp, family) items: members within k of each other, families more than 2k + 2 apart."""
    spread = k // 2  # members within spread of the center: pairwise <= 2 * spread <= k
    centers: list[int] = []
    while len(centers) < n_fam:
        c = rng.getrandbits(64)
        if all(hamming(c, o) > 2 * k + 2 for o in centers):
            centers.append(c)
    items = []
    for f, c in enumerate(centers):
        for m in range(size):
            v = c
            for b in rng.sample(range(64), rng.randint(0, spread)):
                v ^= 1 << b
            items.append((f"f{f}-m{m}", v, f))
    return items


def _race(items, barrier_wait, windows, write):
    """Write ``items`` racing the other writers; record this writer's (start, end) in ``windows``.

    All writers start together (a barrier), and each waits again after its first
    write, so no writer can finish before every other one has started: the
    windows overlap by construction, and ``_assert_overlapped`` checks that they
    did. A writer that never arrives breaks the barrier (``BARRIER_TIMEOUT``) and
    the test fails instead of silently not racing.
    """
    barrier_wait()
    start = time.monotonic()
    for n, item in enumerate(items):
        write(item)
        if n == 0:
            barrier_wait()
    if not items:
        barrier_wait()
    windows.append((start, time.monotonic()))


def _run_overlapped(threads, windows, writers):
    """Start the writers' threads, wait for them, and check that they ran at the same time."""
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _assert_overlapped(windows, writers)


def _assert_overlapped(windows, writers):
    assert len(windows) == writers, f"{len(windows)} of {writers} writers finished"
    assert max(s for s, _ in windows) < min(e for _, e in windows), "some writer finished before another started"


def _insert_all(engine, cid, items, k, results, barrier_wait, windows):
    """Insert through simdb.index.duplicates on SQLAlchemy connections of ``engine``."""

    def write(item):
        key, fp, _fam = item
        try:
            with engine.begin() as conn:
                res = duplicates.add_if_unique(conn, cid, key, fp, k)
        except (OperationalError, psycopg.OperationalError) as exc:  # a deadlock would be a bug: report it
            results.append(("error", key, str(exc)))
            return
        results.append((key, res.inserted, [m.key for m in res.matches]))

    _race(items, barrier_wait, windows, write)


def _insert_all_index(idx, items, k, results, barrier_wait, windows):
    """Insert through one SimhashIndex shared by all threads."""

    def write(item):
        key, fp, _fam = item
        res = idx.add_if_unique(key, fp=fp, k=k)
        results.append((key, res.inserted, [m.key for m in res.matches]))

    _race(items, barrier_wait, windows, write)


def _process_main(url, name, items, k, barrier, queue):
    """A separate process inserting through the public API (its own SimhashIndex and connection)."""
    from simdb import SimhashIndex

    out: list = []
    windows: list = []
    try:
        with SimhashIndex(url, collection=name) as idx:

            def write(item):
                key, fp, _fam = item
                res = idx.add_if_unique(key, fp=fp, k=k)
                out.append((key, res.inserted, [m.key for m in res.matches]))

            _race(items, lambda: barrier.wait(BARRIER_TIMEOUT), windows, write)
    except Exception as exc:
        out.append(("error", repr(exc), ""))
    finally:
        queue.put((out, windows))


def _check(engine, cid, items, results, k):
    errors = [r for r in results if r[0] == "error"]
    assert not errors, errors[:3]
    fam_of = {key: fam for key, _, fam in items}
    fp_of = {key: fp for key, fp, _ in items}
    assert sorted(r[0] for r in results) == sorted(fam_of), "every item answered exactly once"
    with engine.connect() as conn:
        stored = dict(conn.execute(
            text("SELECT key, fp FROM simdb_fingerprints WHERE collection_id = :c"), {"c": cid}).all())
    inserted = {r[0] for r in results if r[1]}
    assert set(stored) == inserted, "stored rows are exactly those reported inserted (none lost, none extra)"
    per_family: dict[int, int] = {}
    for key in stored:
        per_family[fam_of[key]] = per_family.get(fam_of[key], 0) + 1
    assert per_family == {f: 1 for f in set(fam_of.values())}, "exactly one member per family"
    for key, ins, matches in results:
        if not ins:
            assert matches, f"{key} refused without a match"
            for m in matches:
                assert m in stored and fam_of[m] == fam_of[key]
                assert hamming(fp_of[m], fp_of[key]) <= k


@pytest.mark.parametrize("k,api", [(3, "dedup"), (7, "dedup"), (3, "index"), (1, "index")])
def test_threads_one_member_per_family(database_url, k, api):
    from simdb import SimhashIndex

    engine = create_engine(database_url, pool_size=12, max_overflow=4)
    rng = random.Random(1000 + k)
    try:
        for _round in range(6):
            cid, name = _named_collection(engine)
            idx = SimhashIndex(engine, collection=name) if api == "index" else None
            items = make_families(rng, n_fam=12, size=8, k=k)
            rng.shuffle(items)
            n_threads = 8
            shares = [items[i::n_threads] for i in range(n_threads)]
            results: list = []
            windows: list = []
            barrier = threading.Barrier(n_threads, timeout=BARRIER_TIMEOUT)
            if idx is None:
                threads = [threading.Thread(target=_insert_all,
                                            args=(engine, cid, s, k, results, barrier.wait, windows))
                           for s in shares]
            else:
                threads = [threading.Thread(target=_insert_all_index,
                                            args=(idx, s, k, results, barrier.wait, windows))
                           for s in shares]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if idx is not None:
                idx.close()
            _assert_overlapped(windows, n_threads)
            _check(engine, cid, items, results, k)
    finally:
        engine.dispose()


def test_processes_and_threads_one_member_per_family(database_url):
    """Separate processes (each its own connection) plus threads, all on the same families."""
    k = 3
    engine = create_engine(database_url, pool_size=6)
    ctx = mp.get_context("spawn")
    rng = random.Random(77)
    try:
        for _round in range(4):
            cid, name = _named_collection(engine)
            items = make_families(rng, n_fam=10, size=10, k=k)
            rng.shuffle(items)
            n_proc, n_thr = 4, 4
            shares = [items[i::n_proc + n_thr] for i in range(n_proc + n_thr)]
            queue = ctx.Queue()
            # one barrier for the processes and the threads: the race starts when all
            # of them are ready, however long the spawned interpreters take to import
            barrier = ctx.Barrier(n_proc + n_thr)
            procs = [ctx.Process(target=_process_main, args=(database_url, name, shares[i], k, barrier, queue))
                     for i in range(n_proc)]
            for p in procs:
                p.start()
            results: list = []
            windows: list = []
            threads = [threading.Thread(
                target=_insert_all,
                args=(engine, cid, shares[n_proc + i], k, results, lambda: barrier.wait(BARRIER_TIMEOUT), windows))
                for i in range(n_thr)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for _ in procs:
                out, proc_windows = queue.get(timeout=2 * BARRIER_TIMEOUT)
                results.extend(out)
                windows.extend(proc_windows)
            for p in procs:
                p.join(timeout=30)
                assert p.exitcode == 0
            _assert_overlapped(windows, n_proc + n_thr)
            _check(engine, cid, items, results, k)
    finally:
        engine.dispose()


def test_same_item_from_many_writers_is_stored_once(database_url):
    """The very same (key, fp) from 8 writers at once: one row. The key's own row is no near-duplicate
    of it (it is the row a re-add replaces), so every writer is told ``inserted``."""
    engine = create_engine(database_url, pool_size=10)
    try:
        for _round in range(5):
            cid = _collection(engine)
            results: list = []
            windows: list = []
            barrier = threading.Barrier(8, timeout=BARRIER_TIMEOUT)
            items = [("same", 0xDEAD_BEEF_0000_0001, 0)]
            threads = [threading.Thread(target=_insert_all,
                                        args=(engine, cid, items, 3, results, barrier.wait, windows))
                       for _ in range(8)]
            _run_overlapped(threads, windows, 8)
            assert [r[1:] for r in results] == [(True, [])] * 8
            with engine.connect() as conn:
                assert conn.execute(text("SELECT count(*) FROM simdb_fingerprints WHERE collection_id = :c"),
                                    {"c": cid}).scalar() == 1
    finally:
        engine.dispose()


def test_rewriting_keys_keeps_one_member_per_family(database_url):
    """Writers that re-add one key with different variants race writers of other keys of the same
    family: a key's own row never refuses it (its re-add replaces it), and still exactly one member
    per family is stored, written by a writer of its key that was told ``inserted``; every refusal
    names another key's row of the family."""
    k = 3
    engine = create_engine(database_url, pool_size=10)
    rng = random.Random(4242)
    try:
        for _round in range(4):
            cid = _collection(engine)
            items = [(f"f{fam}-same" if int(key.rsplit("m", 1)[1]) % 2 else key, fp, fam)
                     for key, fp, fam in make_families(rng, n_fam=8, size=8, k=k)]
            rng.shuffle(items)
            results: list = []
            windows: list = []
            barrier = threading.Barrier(8, timeout=BARRIER_TIMEOUT)

            def write(item, results=results, cid=cid):
                key, fp, fam = item
                with engine.begin() as conn:
                    res = duplicates.add_if_unique(conn, cid, key, fp, k)
                results.append((key, fp, fam, res.inserted, [(m.key, m.fp) for m in res.matches]))

            threads = [threading.Thread(target=_race, args=(items[i::8], barrier.wait, windows, write))
                       for i in range(8)]
            _run_overlapped(threads, windows, 8)
            assert len(results) == len(items)
            with engine.connect() as conn:
                stored = dict(conn.execute(
                    text("SELECT key, fp FROM simdb_fingerprints WHERE collection_id = :c"), {"c": cid}).all())
            fam_of = {key: fam for key, _, fam in items}
            assert sorted(fam_of[key] for key in stored) == list(range(8)), "exactly one member per family"
            for key, fp, fam, inserted, matches in results:
                if not inserted:
                    assert matches and all(m != key and fam_of[m] == fam and hamming(f, fp) <= k for m, f in matches)
            for key, fp in stored.items():  # the row is one the writers of its key were told they stored
                assert (fp & (2**64 - 1)) in {f for kk, f, _, ins, _ in results if kk == key and ins}
    finally:
        engine.dispose()


def test_far_writers_do_not_wait_near_writers_do(database_url):
    """No global lock: a writer holding its transaction open blocks only near fingerprints."""
    engine = create_engine(database_url, pool_size=4)
    cid = _collection(engine)
    a = 0x0123_4567_89AB_CDEF
    far = a ^ 0xFFFF_FFFF_FFFF_FFFF
    near = a ^ (1 << 5)
    try:
        with engine.begin() as holder:
            assert duplicates.add_if_unique(holder, cid, "a", a, 3).inserted
            # far: completes while `holder` is still open
            with engine.begin() as conn:
                conn.execute(text("SET LOCAL lock_timeout = '3s'"))
                assert duplicates.add_if_unique(conn, cid, "far", far, 3).inserted
            # near: must wait for holder's locks
            with engine.begin() as conn:
                conn.execute(text("SET LOCAL lock_timeout = '300ms'"))
                with pytest.raises(psycopg.errors.LockNotAvailable, match="lock timeout"):
                    duplicates.add_if_unique(conn, cid, "near", near, 3)
        # after holder committed, the near writer sees "a"
        with engine.begin() as conn:
            res = duplicates.add_if_unique(conn, cid, "near", near, 3)
        assert not res.inserted and [m.key for m in res.matches] == ["a"]
        assert res.matches[0].distance == 1
    finally:
        engine.dispose()


def test_mixed_k_writers_share_a_lock(database_url):
    """A k=3 writer and a k=7 writer 5 bits apart: the k=7 writer waits for the k=3 one."""
    engine = create_engine(database_url, pool_size=4)
    cid = _collection(engine)
    a = 0x0F0F_F0F0_3C3C_C3C3
    b = a ^ 0b11111  # distance 5: beyond 3, within 7
    try:
        with engine.begin() as holder:
            assert duplicates.add_if_unique(holder, cid, "a", a, 3).inserted
            with engine.begin() as conn:
                conn.execute(text("SET LOCAL lock_timeout = '300ms'"))
                with pytest.raises(psycopg.errors.LockNotAvailable, match="lock timeout"):
                    duplicates.add_if_unique(conn, cid, "b", b, 7)
        with engine.begin() as conn:
            assert not duplicates.add_if_unique(conn, cid, "b", b, 7).inserted
        with engine.begin() as conn:
            assert duplicates.add_if_unique(conn, cid, "b3", b, 3).inserted  # k=3: a is 5 away, not a match
    finally:
        engine.dispose()


def test_lock_keys_shared_within_k():
    rng = random.Random(5)
    for _ in range(300):
        k = rng.randint(0, 11)
        a = rng.getrandbits(64)
        b = a
        for bit in rng.sample(range(64), rng.randint(0, k)):
            b ^= 1 << bit
        ka = rng.randint(0, 11)
        # writer b uses radius k (>= distance); writer a any radius: they must share a key
        assert set(lock_keys(1, a, ka)) & set(lock_keys(1, b, k))
        assert not set(lock_keys(1, a, ka)) & set(lock_keys(2, b, k)), "collections apart"


def test_featureless_always_inserted(database_url):
    engine = create_engine(database_url)
    cid = _collection(engine)
    try:
        for i in range(3):
            with engine.begin() as conn:
                assert duplicates.add_if_unique(conn, cid, f"empty{i}", None, 3).inserted
    finally:
        engine.dispose()
