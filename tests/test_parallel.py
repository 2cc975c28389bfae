"""simdb.util.parallel: an ordered, bounded map over a reused process pool; many(workers=N) equals one process."""

from __future__ import annotations

import os
import random

import pytest

from simdb import Fingerprinter
from simdb.core import segment
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.util import parallel


def pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"chunk {x} is bad")
    return x


def test_imap_is_ordered_and_uses_other_processes():
    got = list(parallel.imap(pid_and_square, range(40), 2))
    assert [sq for _, sq in got] == [x * x for x in range(40)]
    assert {pid for pid, _ in got} - {os.getpid()}, "no chunk ran in a worker"
    assert parallel.pool(2) is parallel.pool(2)  # started once, reused


def test_imap_single_chunk_or_one_worker_stays_in_process():
    assert list(parallel.imap(pid_and_square, [5], 2)) == [(os.getpid(), 25)]
    assert list(parallel.imap(pid_and_square, range(3), 1)) == [(os.getpid(), x * x) for x in range(3)]
    assert list(parallel.imap(pid_and_square, [], 2)) == []


def test_imap_raises_the_workers_error_in_order():
    it = parallel.imap(fail_on_three, range(10), 2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="chunk 3 is bad"):
        next(it)


def test_imap_keeps_a_bounded_number_of_chunks_in_flight():
    taken = []

    def chunks():
        for i in range(100):
            taken.append(i)
            yield i

    it = parallel.imap(pid_and_square, chunks(), 2, ahead=3)
    next(it)
    assert len(taken) <= 4  # ahead + the one being read
    assert [sq for _, sq in it] == [x * x for x in range(1, 100)]


def test_check_workers():
    assert parallel.check_workers(None) is None and parallel.check_workers(3) == 3
    with pytest.raises(InvalidArgumentError, match="workers"):
        parallel.check_workers(0)
    with pytest.raises(InvalidTypeError, match="workers"):
        parallel.check_workers(True)
    assert 1 <= parallel.default_workers() <= parallel.MAX_DEFAULT_WORKERS


def test_many_with_workers_equals_one_process_on_large_input():
    """Enough text for many chunks (>= 64k characters each), with featureless and Chinese texts."""
    rnd = random.Random(5)
    words = "the cat sat on a mat while 中文 分词 测试 我们 今天 去 公园 散步 dogs ran far away".split()
    texts = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 120))) for _ in range(6000)]
    texts[::97] = ["!!!"] * len(texts[::97])  # no features
    assert sum(map(len, texts)) > 4 * (1 << 16)
    for fp in (Fingerprinter(), Fingerprinter(ngram=3), Fingerprinter(tokenizer="chars"), Fingerprinter(weighting="logtf")):
        assert fp.many(texts, workers=2, empty=None) == fp.many(texts, empty=None)
        assert fp.many(texts, workers=2) == fp.many(texts)


_SET_UP: list[int] = []


def note_set_up() -> None:
    _SET_UP.append(os.getpid())


def was_set_up(x: int) -> bool:
    return _SET_UP == [os.getpid()]


def segmenter_loaded(x: int) -> bool:
    return segment._NATIVE is not None or segment._JIEBA is not None


def test_a_worker_runs_what_on_worker_start_registered_once_before_its_tasks():
    """The pool is plumbing (simdb.util): the algorithm says what a worker loads (the segmenter), not the pool."""
    parallel.shutdown()  # the next pools are new: they get the setup registered now
    parallel.on_worker_start(note_set_up)
    parallel.on_worker_start(note_set_up)  # twice: run once
    try:
        assert all(parallel.imap(was_set_up, range(12), 2))
        assert all(parallel.imap(segmenter_loaded, range(12), 2))  # simdb.core.segment registered its loading
    finally:
        parallel._WORKER_SETUP.remove(note_set_up)
        parallel.shutdown()
    assert _SET_UP == []  # not in this process
