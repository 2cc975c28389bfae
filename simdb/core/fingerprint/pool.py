"""``Fingerprinter.many(workers=N)``: fingerprints of many texts in a process pool.

The pool itself (:mod:`simdb.util.parallel`: one per worker count, started once,
reused, shut down at exit) is generic; this module only decides how texts travel:
in chunks of at least 64k characters (transfer and task overhead stay small), at
least 4 per worker (load balance), at most 4M characters (memory), with
fingerprints coming back as arrays (cheap to send). It takes the fingerprinter as
any object with ``many(texts, None, empty)`` so that it need not import
:mod:`simdb.core.fingerprint`, which imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np

from simdb.util import parallel as _parallel

__all__ = ["many_pool"]


def _many_chunk(fp: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """In a worker: (uint64 fingerprints, bool "no features") of a chunk, as arrays (cheap to send)."""
    out = np.zeros(len(texts), dtype=np.uint64)
    none = np.zeros(len(texts), dtype=bool)
    for i, v in enumerate(fp.many(texts, None, None)):
        if v is None:
            none[i] = True
        else:
            out[i] = v
    return out, none


def _text_chunks(texts: list[str], target: int) -> Iterable[list[str]]:
    cur: list[str] = []
    size = 0
    for t in texts:
        cur.append(t)
        size += len(t)
        if size >= target:
            yield cur
            cur, size = [], 0
    if cur:
        yield cur


def many_pool(fp: Any, texts: list[str], workers: int, empty: Any) -> list:
    """``fp``'s fingerprints of ``texts`` in order, computed by ``workers`` processes."""
    total = sum(map(len, texts))
    target = max(1 << 16, min(1 << 22, total // (workers * 4) + 1))
    out: list = []
    for fps, none in _parallel.imap(partial(_many_chunk, fp), _text_chunks(texts, target), workers):
        vals = fps.tolist()
        if none.any():
            for i in np.flatnonzero(none).tolist():
                vals[i] = empty
        out.extend(vals)
    return out
