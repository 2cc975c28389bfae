"""AsyncSimhashIndex under concurrency: 100 concurrent ``near`` tasks vs one ``near_many`` of the
same queries, and how long the event loop is ever blocked.

Two collections in one run: the default for a new collection (verified: texts are answered by
Jaccard of sketches among the band-key candidates, on the sync index in a worker thread) and a plain
one (``verify=False``, answered on the async connections).
Targets (issue 16): throughput of the concurrent ``near`` tasks >= 0.8x ``near_many``'s; no
event-loop stall above 5 ms. Both figures come from the same run (the machine is shared):
each round runs both ways, the one first in even rounds, the other in odd ones, and the
medians are compared. The stall is measured by a
watchdog task that sleeps 1 ms at a time and records how late it wakes, while the rounds run
(text queries included, so fingerprinting is part of it).

    .venv/bin/python benchmarks/bench_async.py --rows 100000 [--url postgresql://...]

Without --url an embedded PostgreSQL starts in a temporary directory. Appends one JSON line
per collection to benchmarks/results/async.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simdb.aio import AsyncSimhashIndex  # noqa: E402

#: stored texts (besides the random fingerprints) that half the text queries are edited copies of
TEXT_ROWS = 2_000
def _vocabulary(size: int) -> tuple[list[str], list[float]]:
    """``size`` made-up words (3-9 letters) with Zipf weights (1/rank), as words in text are.
    Why not a handful of words: SimHash puts texts drawn from a tiny vocabulary close together,
    so every query would have ~100 candidates within K = 11 (use --vocabulary 32 to see that case)."""
    rng = random.Random(7)
    words = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                    for _ in range(size * 2)})[:size]
    rng.shuffle(words)
    return words, [1.0 / (rank + 1) for rank in range(len(words))]


WORDS, WEIGHTS = _vocabulary(5_000)


def _texts(rng: random.Random, n: int, words: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, WEIGHTS, k=words)) for _ in range(n)]


class Watchdog:
    """Largest lateness of a 1 ms sleep on the loop: the longest the loop was blocked."""

    def __init__(self):
        self.lates: list[float] = []
        self._stop = False

    async def run(self):
        loop = asyncio.get_running_loop()
        while not self._stop:
            t = loop.time()
            await asyncio.sleep(0.001)
            self.lates.append(loop.time() - t - 0.001)

    def summary(self, prefix: str) -> dict:
        lates = sorted(self.lates) or [0.0]
        return {
            f"{prefix}_max_ms": lates[-1] * 1000,
            f"{prefix}_p99_ms": lates[int(0.99 * (len(lates) - 1))] * 1000,
            f"{prefix}_over_5ms": sum(x > 0.005 for x in lates),
            f"{prefix}_samples": len(lates),
        }

    def stop(self):
        self._stop = True


def _edited(rng: random.Random, text: str) -> str:
    words = text.split()
    words[rng.randrange(len(words))] = rng.choices(WORDS, WEIGHTS)[0]
    return " ".join(words)


async def bench(url: str, rows: int, queries: int, rounds: int, k: int, verify: bool | None) -> dict:
    """One collection: ``verify=None`` is the default for a new collection (verified), False a plain one.
    The collection holds ``rows`` random fingerprints and TEXT_ROWS texts; half the text queries are
    edited copies of stored texts (so the verification stage has candidates to compare)."""
    rng = random.Random(1)
    name = f"bench-async-{'plain-' if verify is False else ''}{rows}"
    stored_texts = _texts(rng, TEXT_ROWS, 40)
    async with AsyncSimhashIndex(url, name, pool_size=4, verify=verify) as ix:
        kind = "verified" if ix.sync.verifier is not None else "plain"
        if await ix.count() != rows + TEXT_ROWS:
            await ix.add_many(({"key": f"r{i}", "fp": rng.getrandbits(64)} for i in range(rows)), rebuild_indexes=None)
            await ix.add_many([(f"t{i}", text) for i, text in enumerate(stored_texts)])
        stored = [(await ix.near_many([rng.getrandbits(64)], k=0))]  # warm the pool and the plans
        del stored
        fps = [rng.getrandbits(64) for _ in range(queries)]
        n_text = queries - 5
        texts = ([_edited(rng, t) for t in rng.sample(stored_texts, n_text // 2)] + _texts(rng, n_text - n_text // 2, 40)
                 + _texts(rng, 5, 2000))  # 5 long texts: executor path
        if GC_FREEZE:  # what a long-running app does after start-up (Python's gc docs): the heap
            gc.collect()  # built so far is never scanned again by the collector's full passes
            gc.freeze()
        dog = Watchdog()
        dog_task = asyncio.create_task(dog.run())
        t_start = time.perf_counter()
        t_near, t_many, t_near_text, t_many_text = [], [], [], []
        answers = []
        for r in range(rounds):
            # Which way goes first alternates: the first statement after a long one (a verified
            # round's text statements take ~0.5 s) is measurably slower, whichever way it is.
            got = {}
            for what, qs in (("fp", fps), ("text", texts)):
                for way in ("near", "many") if r % 2 == 0 else ("many", "near"):
                    t0 = time.perf_counter()
                    if way == "near":
                        got[what, way] = await asyncio.gather(*(ix.near(q, k=k) for q in qs))
                    else:
                        got[what, way] = await ix.near_many(qs, k=k)
                    got[what, way, "s"] = time.perf_counter() - t0
            # compared after the watchdog stops (harness work)
            answers.append((got["fp", "near"], got["fp", "many"], got["text", "near"], got["text", "many"]))
            t_near.append(got["fp", "near", "s"])
            t_many.append(got["fp", "many", "s"])
            t_near_text.append(got["text", "near", "s"])
            t_many_text.append(got["text", "many", "s"])
        dog.stop()
        await dog_task
        busy = time.perf_counter() - t_start
        # the noise floor of this machine: the same watchdog on an idle loop for as long
        idle = Watchdog()
        idle_task = asyncio.create_task(idle.run())
        await asyncio.sleep(busy)
        idle.stop()
        await idle_task
        assert all(a == b and c == d for a, b, c, d in answers), "near and near_many disagree"
        found = sum(bool(m) for m in answers[0][2])
    med = statistics.median
    return {
        "bench": "async",
        "collection": kind,
        "gc_freeze": GC_FREEZE,
        "rows": rows,
        "text_rows": TEXT_ROWS,
        "vocabulary": len(WORDS),
        "queries": queries,
        "text_queries_answered": found,
        "k": k,
        "rounds": rounds,
        "near_concurrent_qps": queries / med(t_near),
        "near_many_qps": queries / med(t_many),
        "ratio_fp": med(t_many) / med(t_near),
        "near_concurrent_text_qps": queries / med(t_near_text),
        "near_many_text_qps": queries / med(t_many_text),
        "ratio_text": med(t_many_text) / med(t_near_text),
        **dog.summary("loop_late_busy"),
        **idle.summary("loop_late_idle"),
    }


GC_FREEZE = False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--vocabulary", type=int, default=5_000, help="distinct words of the texts (Zipf)")
    ap.add_argument("--url", help="PostgreSQL URL (default: an embedded server in a temporary directory)")
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after loading, before the rounds")
    args = ap.parse_args()
    global GC_FREEZE
    GC_FREEZE = args.gc_freeze
    global WORDS, WEIGHTS
    WORDS, WEIGHTS = _vocabulary(args.vocabulary)
    server = None
    url = args.url
    if url is None:
        from simdb.embedded import start_server

        server = start_server(Path(tempfile.mkdtemp(prefix="simdb-bench-async-")) / "pgdata", cleanup_mode="delete")
        url = server.get_uri()
    try:
        results = [asyncio.run(bench(url, args.rows, args.queries, args.rounds, args.k, verify))
                   for verify in (None, False)]  # the default (verified) collection, then a plain one
    finally:
        if server is not None:
            server.cleanup()
    out = ROOT / "benchmarks" / "results" / "async.jsonl"
    with out.open("a") as f:
        for result in results:
            print(json.dumps(result, indent=2))
            f.write(json.dumps(result) + "\n")
    for r in results:
        print(f"{r['collection']:>8}: near x{r['queries']} concurrent / near_many: fingerprints {r['ratio_fp']:.2f}x "
              f"({r['near_concurrent_qps']:,.0f} / {r['near_many_qps']:,.0f} q/s), texts {r['ratio_text']:.2f}x "
              f"({r['near_concurrent_text_qps']:,.0f} / {r['near_many_text_qps']:,.0f} q/s); loop late busy "
              f"p99 {r['loop_late_busy_p99_ms']:.1f} / max {r['loop_late_busy_max_ms']:.1f} ms "
              f"({r['loop_late_busy_over_5ms']} of {r['loop_late_busy_samples']} > 5 ms), idle p99 "
              f"{r['loop_late_idle_p99_ms']:.1f} / max {r['loop_late_idle_max_ms']:.1f} ms")


if __name__ == "__main__":
    main()
